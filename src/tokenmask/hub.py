"""Models and tokenizers named by Hub id: found in, or downloaded to, the Hugging Face cache.

A name resolves as a local folder first, then a built-in name (``minilm``, ``roberta-gpt2``…),
then a Hub id (``FacebookAI/roberta-base``); this module does the last step, through
``huggingface_hub`` and its cache, so ``HF_HOME``, ``HF_HUB_CACHE``, ``HF_HUB_OFFLINE`` and
``HF_TOKEN`` mean what they mean everywhere else. What comes back is the snapshot folder of one
commit, and every loader opens it as the local folder it is. Only the files an encoder needs
are fetched (config, tokenizer, safetensors weights; a ``.bin`` only where a repository has no
safetensors; its ``*.py`` only with ``trust_remote_code``). A failure is one
:class:`HubError` line that says what to do.

Hand-written only where ``huggingface_hub`` stops: which files to fetch, and the wording of its
errors for a command line.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tokenmask.settings import check, setting

Files = Literal["model", "tokenizer"]

# Top-level files only (``*/*`` is ignored): sentence-transformers and ONNX exports keep more in subfolders.
_TOKENIZER_PATTERNS = ["*.json", "*.txt", "*.model"]  # tokenizer.json, vocab.txt, merges.txt, spm.model, sentencepiece.bpe.model…
_WEIGHT_PATTERNS = ["*.safetensors", "*.safetensors.index.json"]
_PICKLED_PATTERNS = ["pytorch_model*.bin", "pytorch_model.bin.index.json"]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json")
"""One of these in a folder marks a saved tokenizer."""


NEVER_REPLAYED = ("trust_remote_code",)
"""Settings a run's ``config.yaml`` leaves out: a replay must be given them again, on the command line."""


@dataclass(frozen=True)
class HubConfig:
    """Where a model or tokenizer named by Hub id comes from, and whether its own code may run."""

    revision: str | None = setting(
        None,
        metavar="REV",
        help="branch, tag or commit of the model named by Hub id, or with no model named, of the tokenizer (none = "
        "main; a tokenizer of another repository is read at its main); a training run "
        "records the commit used in config.yaml and its model card. Hub files go through the Hugging Face cache "
        "(HF_HOME, HF_HUB_OFFLINE, HF_TOKEN apply)",
        advanced=True,
    )
    trust_remote_code: bool = setting(
        False,
        help="run the Python code a Hub repository ships (its config's auto_map); without it such a model is refused. "
        "Never written to config.yaml: a replay needs it typed again",
        advanced=True,
    )

    def __post_init__(self) -> None:
        check(self)


@dataclass(frozen=True)
class Snapshot:
    """One commit of a Hub repository, on disk.

    Attributes:
        repo_id: ``"FacebookAI/roberta-base"``.
        commit: the 40-hex commit the revision stood for.
        folder: ``HF_HUB_CACHE/models--FacebookAI--roberta-base/snapshots/<commit>``.
        notes: lines for the user, e.g. that the weights are a pickled ``.bin``.
    """

    repo_id: str
    commit: str
    folder: Path
    notes: tuple[str, ...] = ()


class HubError(ValueError):
    """A Hub id that cannot be used: one line, naming the repository and what to do."""


def is_hub_id(name: str) -> bool:
    """Whether ``name`` is spelled as a Hub model id: ``org/name`` or a legacy ``name``.

    ``"FacebookAI/roberta-base" -> True``; ``"runs/a/model" -> False`` (two slashes);
    ``"./model" -> False``.
    """
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return True


def download(repo_id: str, *, revision: str | None = None, files: Files = "model", trust_remote_code: bool = False) -> Snapshot:
    """The snapshot of ``repo_id`` at ``revision`` (None: ``main``), from the cache or the Hub.

    ``files="model"`` fetches the config, tokenizer files and weights (safetensors; a ``.bin``
    only where there is none, said in the notes); ``"tokenizer"`` only the config and tokenizer
    files. With ``HF_HUB_OFFLINE=1`` nothing is downloaded and a cached snapshot is required.

    Raises:
        HubError: the repository or revision does not exist, is gated or private without a
            token, is not cached while offline, or has no PyTorch weights.
    """
    from huggingface_hub import snapshot_download
    from huggingface_hub.utils import HfHubHTTPError, LocalEntryNotFoundError

    patterns = _TOKENIZER_PATTERNS + (_WEIGHT_PATTERNS if files == "model" else []) + (["*.py"] if trust_remote_code else [])
    try:
        folder = _cached_commit(repo_id, revision, files, trust_remote_code=trust_remote_code) or Path(
            snapshot_download(repo_id, revision=revision, allow_patterns=patterns, ignore_patterns=["*/*"])
        )
        notes: tuple[str, ...] = ()
        if files == "model" and not any(folder.glob("*.safetensors")):
            folder = _cached_commit(repo_id, folder.name, files, weights_glob="pytorch_model*.bin") or Path(
                snapshot_download(repo_id, revision=folder.name, allow_patterns=_PICKLED_PATTERNS, ignore_patterns=["*/*"])
            )
            notes = pickled_weights_notes(folder, repo_id)
            if not notes:
                raise HubError(f"{repo_id}: no PyTorch weights (neither model.safetensors nor pytorch_model.bin)")
    except (LocalEntryNotFoundError, HfHubHTTPError) as error:
        raise HubError(_explain(error, repo_id, revision)) from None
    return Snapshot(repo_id=repo_id, commit=folder.name, folder=folder, notes=notes)


def pickled_weights_notes(folder: Path, name: str) -> tuple[str, ...]:
    """The line that says a model folder's weights are a pickled ``.bin`` (no safetensors beside
    it), and how it is opened; none when there are safetensors, or no ``.bin`` either."""
    if any(folder.glob("*.safetensors")) or not any(folder.glob("pytorch_model*.bin")):
        return ()
    return (
        f"{name}: no safetensors weights; pytorch_model.bin is loaded as transformers loads it safely "
        "(torch.load with weights_only=True: tensors only, no code)",
    )


def _cached_commit(
    repo_id: str, revision: str | None, files: Files, *, weights_glob: str = "*.safetensors", trust_remote_code: bool = False
) -> Path | None:
    """The cached snapshot of a commit (40 hex digits: it never changes) when it holds what ``files``
    needs (config, tokenizer files, weights matching ``weights_glob``), found without asking the Hub
    (and without its bar), else None: a replay, a resumed study and the second look for ``.bin``
    weights read the cache alone. Never with ``trust_remote_code``: the Hub lists the code files."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.utils import LocalEntryNotFoundError

    if revision is None or not re.fullmatch(r"[0-9a-f]{40}", revision) or trust_remote_code:  # code: ask for every *.py
        return None
    try:
        folder = Path(snapshot_download(repo_id, revision=revision, local_files_only=True))
    except LocalEntryNotFoundError:
        return None
    tokenizer = any((folder / name).is_file() for name in TOKENIZER_FILES)
    weights = any(folder.glob(weights_glob)) if files == "model" else True
    return folder if (folder / "config.json").is_file() and tokenizer and weights else None


def _explain(error: Exception, repo_id: str, revision: str | None) -> str:
    """One line for a ``huggingface_hub`` error: what went wrong with ``repo_id`` and what to do."""
    from huggingface_hub import constants
    from huggingface_hub.utils import GatedRepoError, LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    at = f" at revision {revision!r}" if revision else ""
    if isinstance(error, RevisionNotFoundError):
        return f"{repo_id} has no revision {revision!r} on the Hub: give one of its branches, tags or commits with --revision"
    if isinstance(error, GatedRepoError):
        return (
            f"{repo_id} is gated: accept its conditions at {constants.ENDPOINT}/{repo_id}, then give your token "
            "(HF_TOKEN=... or `hf auth login`)"
        )
    if isinstance(error, RepositoryNotFoundError):
        return (
            f"{repo_id} is neither a local folder nor a model repository on the Hub that this account may read: check "
            "the name, or, if it is private, give a token with access (HF_TOKEN=... or `hf auth login`)"
        )
    if type(error).__name__ == "IncompleteSnapshotError":  # huggingface_hub >= 1: files listed but not downloaded
        return (
            f"{repo_id}{at}: its snapshot in the Hugging Face cache ({constants.HF_HUB_CACHE}) is incomplete (an "
            "interrupted download?) and cannot be completed offline: run once online, or "
            f"`hf download {repo_id}{f' --revision {revision}' if revision else ''}`"
        )
    if isinstance(error, LocalEntryNotFoundError):
        place = f"the Hugging Face cache ({constants.HF_HUB_CACHE})"
        if revision and _cache_folder(repo_id).is_dir():
            missing = f"revision {revision!r} of {repo_id} is not in {place}"
        else:
            missing = f"{repo_id}{at} is neither a local folder nor in {place}"
        fetch = f"`hf download {repo_id}{f' --revision {revision}' if revision else ''}`"
        if constants.HF_HUB_OFFLINE:
            return (
                f"{missing}, and HF_HUB_OFFLINE=1 forbids downloading: download it first while online ({fetch}, or this "
                "command without HF_HUB_OFFLINE)"
            )
        return f"{missing}, and the Hub cannot be reached: check the connection"
    return f"{repo_id}{at}: the Hub refused the download ({str(error).splitlines()[0] if str(error) else type(error).__name__})"


def _cache_folder(repo_id: str) -> Path:
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    return Path(constants.HF_HUB_CACHE) / repo_folder_name(repo_id=repo_id, repo_type="model")


def refuse_remote_code(folder: Path, name: str, *, trust_remote_code: bool) -> None:
    """``HubError`` when ``folder``'s ``config.json`` or ``tokenizer_config.json`` maps classes to
    code in the repository (``auto_map``) and ``trust_remote_code`` is off.

    The message names the flag and the classes: ``org/model: its config.json maps
    AutoModelForMaskedLM to modeling_custom.CustomForMaskedLM, code shipped with the model;
    tokenmask runs none unless you give --trust-remote-code …``.
    """
    if trust_remote_code:
        return
    for file in ("config.json", "tokenizer_config.json"):
        auto_map = read_json(folder / file).get("auto_map")
        if auto_map:
            mapped = ", ".join(
                f"{auto} to {target if isinstance(target, str) else ' / '.join(map(str, target))}"
                for auto, target in auto_map.items()
            )
            raise HubError(
                f"{name}: its {file} maps {mapped} (auto_map), code shipped with the model; tokenmask runs none "
                "unless you give --trust-remote-code (read that code first)"
            )


def read_json(path: Path) -> dict:
    """A JSON object file of a model folder (``config.json``…); ``{}`` when there is none."""
    try:
        content = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        raise HubError(f"{path}: unreadable ({error})") from None
    return content if isinstance(content, dict) else {}
