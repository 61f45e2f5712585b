"""Tiny real checkpoints of every encoder family, laid out as a ``huggingface_hub`` cache.

The Hub cannot be reached from the test machines, so tests load models by id the way users do
(``FacebookAI/roberta-base``) from a cache built here: :func:`build_checkpoint` saves a tiny,
seeded ``…ForMaskedLM`` of a family with a real tokenizer of the family's own kind and class,
trained on Shakespeare; :func:`lay_out_cache` copies a folder into ``HF_HOME/hub`` exactly as
``huggingface_hub`` writes a download; :func:`build_hub_cache` builds everything the tests
use (the families, remote code, a pickle-only repo, GPT-2, MiniLM, a tagged second revision).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from tokenmask.text.resources import minilm_dir, shakespeare_lines

TokenizerKind = Literal["wordpiece", "bpe", "unigram"]

ORGANISATION = "tokenmask-test"
VOCAB_SIZE = 1200
"""Entries each tokenizer is trained to (special tokens included)."""
MAX_POSITIONS = 256
"""Positions every model takes (RoBERTa-likes get ``pad_id + 1`` more rows, numbered after the pad id)."""
TRAINING_LINES = 3000
REMOTE_CODE_CANARY = "TOKENMASK_TEST_REMOTE_CODE_RAN"
"""Environment variable the remote-code repository's module sets when it is imported (code ran)."""

_TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64}
_BERT_SPECIALS = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"}
_ROBERTA_SPECIALS = {
    "bos_token": "<s>", "eos_token": "</s>", "cls_token": "<s>", "sep_token": "</s>",
    "pad_token": "<pad>", "unk_token": "<unk>", "mask_token": "<mask>",
}  # fmt: skip
_BERT_FIRST = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_ROBERTA_FIRST = ("<s>", "<pad>", "</s>", "<unk>")  # and <mask> last, as in roberta-base's 50,265 ids


@dataclass(frozen=True)
class Family:
    """How one architecture family's tiny checkpoint is built.

    Attributes:
        model: the ``transformers`` masked-LM class, e.g. ``"AlbertForMaskedLM"``.
        tokenizer: the tokenizer class saved beside it (and that ``AutoTokenizer`` gives back).
        kind: the tokenizer's model: WordPiece, byte-level BPE or SentencePiece-style Unigram.
        specials: the special tokens, as keyword arguments of the tokenizer class.
        first: special tokens at the start of the vocabulary, in id order (the family's own).
        last: special tokens after the learned pieces (RoBERTa's ``<mask>``, ModernBERT's all).
        config: settings of the model's config beyond the tiny shared ones.
        positions_after_pad: positions are numbered after the padding id (RoBERTa, MPNet).
        embeddings_multiple: the embedding table is rounded up to a multiple of this: rows no
            token uses, as DeBERTa-v3's 128,100 rows for 128,001 ids.
    """

    model: str
    tokenizer: str
    kind: TokenizerKind
    specials: dict[str, str]
    first: tuple[str, ...]
    last: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)
    positions_after_pad: bool = False
    embeddings_multiple: int = 1


FAMILIES: dict[str, Family] = {
    "bert": Family("BertForMaskedLM", "BertTokenizer", "wordpiece", _BERT_SPECIALS, _BERT_FIRST),
    "roberta": Family(
        "RobertaForMaskedLM", "RobertaTokenizer", "bpe", _ROBERTA_SPECIALS, _ROBERTA_FIRST, ("<mask>",),
        config={"type_vocab_size": 1}, positions_after_pad=True,
    ),
    "xlm-roberta": Family(
        "XLMRobertaForMaskedLM", "XLMRobertaTokenizer", "unigram", _ROBERTA_SPECIALS, _ROBERTA_FIRST, ("<mask>",),
        config={"type_vocab_size": 1}, positions_after_pad=True,
    ),
    "camembert": Family(
        # CamembertTokenizer adds the three NOTUSED tokens unless the vocabulary holds them: it does, as camembert-base's
        "CamembertForMaskedLM", "CamembertTokenizer", "unigram", _ROBERTA_SPECIALS,
        ("<s>NOTUSED", "<pad>", "</s>NOTUSED", "<unk>", "<unk>NOTUSED", "<s>", "</s>"), ("<mask>",),
        config={"type_vocab_size": 1}, positions_after_pad=True,
    ),
    "distilbert": Family("DistilBertForMaskedLM", "DistilBertTokenizer", "wordpiece", _BERT_SPECIALS, _BERT_FIRST),
    "albert": Family(
        "AlbertForMaskedLM", "AlbertTokenizer", "unigram",
        {"bos_token": "[CLS]", "eos_token": "[SEP]", "pad_token": "<pad>", "unk_token": "<unk>", "cls_token": "[CLS]",
         "sep_token": "[SEP]", "mask_token": "[MASK]"},
        ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"), config={"embedding_size": 16},
    ),
    "modernbert": Family(
        # its tokenizer is the generic PreTrainedTokenizerFast (TokenizersBackend in transformers 5), specials last
        "ModernBertForMaskedLM", "TokenizersBackend", "bpe", _BERT_SPECIALS, (), ("[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"),
        embeddings_multiple=64,
    ),
    "deberta-v2": Family(
        # DeBERTa-v3: relative attention only (no absolute positions), no token types
        "DebertaV2ForMaskedLM", "DebertaV2Tokenizer", "unigram", {**_BERT_SPECIALS, "bos_token": "[CLS]", "eos_token": "[SEP]"},
        ("[PAD]", "[CLS]", "[SEP]", "[UNK]"), ("[MASK]",),
        config={"relative_attention": True, "position_buckets": 256, "pos_att_type": ["p2c", "c2p"],
                "position_biased_input": False, "norm_rel_ebd": "layer_norm", "share_att_key": True,
                "max_relative_positions": -1, "type_vocab_size": 0},
        embeddings_multiple=64,
    ),
    "electra": Family(
        # ElectraForMaskedLM is ELECTRA's generator: embeddings narrower than its hidden states
        "ElectraForMaskedLM", "BertTokenizer", "wordpiece", _BERT_SPECIALS, _BERT_FIRST, config={"embedding_size": 16},
    ),
    "mpnet": Family(
        # microsoft/mpnet-base: a WordPiece vocabulary under RoBERTa's special tokens
        "MPNetForMaskedLM", "MPNetTokenizer", "wordpiece", _ROBERTA_SPECIALS, _ROBERTA_FIRST, ("<mask>",),
        positions_after_pad=True,
    ),
}  # fmt: skip
"""Family name -> how its checkpoint is built; the keys are the names :func:`build_checkpoint` takes."""


def repo_id(family: str) -> str:
    """The Hub id a family's checkpoint is cached under: ``repo_id("bert") -> "tokenmask-test/tiny-bert"``."""
    return f"{ORGANISATION}/tiny-{family}"


# ---------------------------------------------------------------------------------------- tokenizers


@dataclass(frozen=True)
class Vocabulary:
    """A trained vocabulary in id order: ``pieces[i]`` is token ``i``; Unigram scores and BPE merges where the kind has them."""

    pieces: list[str]
    scores: list[float] | None = None
    merges: list[tuple[str, str]] | None = None


def train_vocabulary(
    texts: Sequence[str],
    *,
    kind: TokenizerKind,
    first: Sequence[str],
    last: Sequence[str] = (),
    unk: str | None = None,
    normalizer: normalizers.Normalizer | None = None,
    pre_tokenizer: pre_tokenizers.PreTokenizer | None = None,
    size: int = VOCAB_SIZE,
) -> Vocabulary:
    """Train a WordPiece, byte-level BPE or Unigram vocabulary with ``tokenizers``, the special
    tokens at the family's ids: ``first`` at ``0, 1, …``, ``last`` after the learned pieces.

    ``normalizer`` and ``pre_tokenizer`` are those of the tokenizer class that will use the
    vocabulary, so the pieces are learned on the words that class will see.
    """
    specials = [*first, *last]
    trainer: trainers.Trainer
    if kind == "wordpiece":
        backend = Tokenizer(models.WordPiece(unk_token=unk or "[UNK]"))
        trainer = trainers.WordPieceTrainer(vocab_size=size, special_tokens=specials, show_progress=False)
    elif kind == "bpe":
        backend = Tokenizer(models.BPE())
        trainer = trainers.BpeTrainer(
            vocab_size=size, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
        )
    else:
        backend = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=size, special_tokens=specials, unk_token=unk, show_progress=False)
    backend.normalizer = normalizer
    backend.pre_tokenizer = pre_tokenizer
    backend.train_from_iterator(texts, trainer=trainer)
    model = json.loads(backend.to_str())["model"]
    if kind == "unigram":
        learned = [(piece, score) for piece, score in model["vocab"] if piece not in specials]
        return Vocabulary(
            pieces=[*first, *(p for p, _ in learned), *last],
            scores=[0.0] * len(first) + [s for _, s in learned] + [0.0] * len(last),
        )
    by_id = sorted(model["vocab"], key=model["vocab"].get)
    learned_pieces = [piece for piece in by_id if piece not in specials]
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model.get("merges", [])]
    return Vocabulary(pieces=[*first, *learned_pieces, *last], merges=merges if kind == "bpe" else None)


def build_tokenizer(family: str, texts: Sequence[str]) -> PreTrainedTokenizerFast:
    """A tokenizer of ``family``'s own class and kind, its vocabulary trained on ``texts``.

    The class is built twice: first empty, for its normalizer and pre-tokenizer (what the
    vocabulary is trained through), then on the trained vocabulary, which it takes directly
    in transformers 5 (``BertTokenizer(vocab=dict)``, ``AlbertTokenizer(vocab=[(piece, score)])``,
    ``RobertaTokenizer(vocab=dict, merges=list)``).
    """
    spec = FAMILIES[family]
    if spec.tokenizer == "TokenizersBackend":
        return _byte_level_bpe_with_template(texts, spec)
    cls = getattr(transformers, spec.tokenizer)
    blank = cls(**spec.specials).backend_tokenizer
    vocab = train_vocabulary(
        texts, kind=spec.kind, first=spec.first, last=spec.last, unk=spec.specials["unk_token"],
        normalizer=blank.normalizer, pre_tokenizer=blank.pre_tokenizer,
    )  # fmt: skip
    arguments: dict[str, Any]
    if spec.kind == "unigram":
        assert vocab.scores is not None
        arguments = {"vocab": list(zip(vocab.pieces, vocab.scores))}
    else:
        arguments = {"vocab": {piece: i for i, piece in enumerate(vocab.pieces)}}
        if spec.kind == "bpe":
            arguments["merges"] = vocab.merges
    return cls(**arguments, **spec.specials, model_max_length=MAX_POSITIONS)


def _byte_level_bpe_with_template(texts: Sequence[str], spec: Family) -> PreTrainedTokenizerFast:
    """ModernBERT's kind of tokenizer: byte-level BPE (no prefix space) framed ``[CLS] … [SEP]``,
    saved as the generic ``PreTrainedTokenizerFast`` as answerdotai/ModernBERT-base's is."""
    pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    vocab = train_vocabulary(texts, kind="bpe", first=spec.first, last=spec.last, pre_tokenizer=pre_tokenizer)
    ids = {piece: i for i, piece in enumerate(vocab.pieces)}
    backend = Tokenizer(models.BPE(vocab=ids, merges=vocab.merges))
    backend.pre_tokenizer = pre_tokenizer
    backend.decoder = decoders.ByteLevel()
    cls, sep = spec.specials["cls_token"], spec.specials["sep_token"]
    backend.post_processor = processors.TemplateProcessing(
        single=f"{cls}:0 $A:0 {sep}:0",
        pair=f"{cls}:0 $A:0 {sep}:0 $B:0 {sep}:0",
        special_tokens=[(cls, ids[cls]), (sep, ids[sep])],
    )
    return PreTrainedTokenizerFast(tokenizer_object=backend, **spec.specials, model_max_length=MAX_POSITIONS)


def check_tokenizer(tokenizer: PreTrainedTokenizerFast, *, family: str, embeddings: int) -> None:
    """``AssertionError`` unless ``tokenizer`` is a working tokenizer of ``family`` for a model
    with ``embeddings`` rows: the family's class, fast, a mask token, no more ids than rows,
    ``word_ids()`` on a sentence (whole-word masking groups tokens by them).

    A size check matters: transformers 5 builds a 5-token vocabulary when it misses the file.
    """
    spec = FAMILIES[family]
    assert type(tokenizer).__name__ == spec.tokenizer, (family, type(tokenizer).__name__)
    assert tokenizer.is_fast and tokenizer.mask_token is not None and tokenizer.mask_token_id is not None, family
    assert VOCAB_SIZE - 10 <= len(tokenizer) <= embeddings, (family, len(tokenizer), embeddings)
    for role in spec.specials:
        assert getattr(tokenizer, f"{role}_id") != tokenizer.unk_token_id or role == "unk_token", (family, role)
    encoding = tokenizer("To be, or not to be: that is the question.")
    words = encoding.word_ids()
    assert words[0] is None and words[-1] is None and max(w for w in words if w is not None) >= 8, (family, words)
    assert tokenizer.unk_token_id not in encoding["input_ids"], (family, tokenizer.convert_ids_to_tokens(encoding["input_ids"]))


# ---------------------------------------------------------------------------------------- models


def build_model(family: str, tokenizer: PreTrainedTokenizerFast, *, seed: int = 0) -> PreTrainedModel:
    """A tiny, randomly initialised (seeded) masked-LM of ``family`` for ``tokenizer``: 2 layers,
    32 wide, 2 heads, a 64-wide feed-forward, the config's special ids the tokenizer's."""
    spec = FAMILIES[family]
    model_class = getattr(transformers, spec.model)
    default = model_class.config_class()
    pad = tokenizer.pad_token_id
    multiple = spec.embeddings_multiple
    settings: dict[str, Any] = {
        **_TINY,
        "vocab_size": -(-len(tokenizer) // multiple) * multiple,
        "max_position_embeddings": MAX_POSITIONS + (pad + 1 if spec.positions_after_pad else 0),
        "pad_token_id": pad,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        **{name: getattr(tokenizer, name) for name in ("cls_token_id", "sep_token_id") if hasattr(default, name)},
        **spec.config,
    }
    if family == "distilbert":  # DistilBertConfig names its sizes its own way
        sizes = {
            "dim": "hidden_size",
            "n_layers": "num_hidden_layers",
            "n_heads": "num_attention_heads",
            "hidden_dim": "intermediate_size",
        }
        settings.update({own: settings.pop(shared) for own, shared in sizes.items()})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return model_class(model_class.config_class(**settings)).eval()


def build_checkpoint(family: str, folder: Path, *, seed: int = 0, tokenizer: PreTrainedTokenizerFast | None = None) -> Path:
    """Save a tiny ``…ForMaskedLM`` of ``family`` (safetensors) and its tokenizer in ``folder``.

    Args:
        family: a key of :data:`FAMILIES`, e.g. ``"albert"``.
        folder: where to save (created).
        seed: the weights' seed (another seed, other weights: a second revision).
        tokenizer: the family's tokenizer (:func:`build_tokenizer`); default: one trained on the
            first 3,000 lines of Shakespeare. The ``tokenizers`` trainers break ties between
            equally good pieces in a run-dependent order, so two trainings may differ by a piece:
            give the same tokenizer to revisions of one repository.

    Returns:
        ``folder``, holding ``config.json``, ``model.safetensors``, ``tokenizer.json`` and
        ``tokenizer_config.json`` (which names the family's tokenizer class).
    """
    tokenizer = tokenizer if tokenizer is not None else build_tokenizer(family, shakespeare_lines(TRAINING_LINES))
    model = build_model(family, tokenizer, seed=seed)
    check_tokenizer(tokenizer, family=family, embeddings=model.get_input_embeddings().num_embeddings)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_gpt2(folder: Path, texts: Sequence[str] | None = None) -> Path:
    """A tiny ``GPT2LMHeadModel`` (a decoder, not a masked-LM) with a byte-level BPE ``GPT2Tokenizer``."""
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2Tokenizer

    eos = "<|endoftext|>"
    pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    texts = texts if texts is not None else shakespeare_lines(TRAINING_LINES)
    vocab = train_vocabulary(texts, kind="bpe", first=(), last=(eos,), pre_tokenizer=pre_tokenizer)
    tokenizer = GPT2Tokenizer(
        vocab={p: i for i, p in enumerate(vocab.pieces)}, merges=vocab.merges, model_max_length=MAX_POSITIONS
    )
    config = GPT2Config(
        vocab_size=len(tokenizer), n_positions=MAX_POSITIONS, n_embd=32, n_layer=2, n_head=2,
        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


_REMOTE_MODULE = f'''"""A BERT masked-LM under another name: importing this module is running remote code."""

import os

from transformers import BertConfig, BertForMaskedLM

os.environ["{REMOTE_CODE_CANARY}"] = "1"


class CustomConfig(BertConfig):
    model_type = "tokenmask-custom"


class CustomForMaskedLM(BertForMaskedLM):
    config_class = CustomConfig
'''


def build_remote_code(folder: Path, bert: Path) -> Path:
    """A checkpoint that needs remote code: ``bert``'s weights and tokenizer under a config of
    model type ``tokenmask-custom`` whose ``auto_map`` names ``modeling_custom.py`` (saved beside).

    Importing that module sets the environment variable :data:`REMOTE_CODE_CANARY`, so a test
    can tell whether the code ran.
    """
    shutil.copytree(bert, folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config.update(
        model_type="tokenmask-custom",
        architectures=["CustomForMaskedLM"],
        auto_map={"AutoConfig": "modeling_custom.CustomConfig", "AutoModelForMaskedLM": "modeling_custom.CustomForMaskedLM"},
    )
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    (folder / "modeling_custom.py").write_text(_REMOTE_MODULE, encoding="utf-8")
    return folder


def build_pickle_only(folder: Path, bert: Path) -> Path:
    """``bert``'s checkpoint with its weights as ``pytorch_model.bin`` (``torch.save`` of the
    state dict, a pickle) instead of ``model.safetensors``: an older Hub repository."""
    from safetensors.torch import load_file

    shutil.copytree(bert, folder)
    weights = folder / "model.safetensors"
    torch.save(load_file(weights), folder / "pytorch_model.bin")
    weights.unlink()
    return folder


# ---------------------------------------------------------------------------------------- the cache

_LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".model", ".onnx")
"""Files the Hub keeps in LFS (its default ``.gitattributes``): their ETag is the content's sha256."""


def _git_blob_sha1(content: bytes) -> str:
    """The id git gives a file's content (``git hash-object``): the Hub's ETag of a non-LFS file."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


def lay_out_cache(
    hf_home: Path,
    repo_id: str,
    folder: Path,
    *,
    revision: str = "main",
    commit: str | None = None,
    listing: bool = True,
    leave_out: Collection[str] = (),
) -> str:
    """Copy the model ``folder`` into ``hf_home/hub`` as ``huggingface_hub`` caches a download.

    The layout (``huggingface_hub/file_download.py``, ``_snapshot_download.py``)::

        hf_home/hub/models--ORG--NAME/
            blobs/<etag>                         file contents, named by their ETag: the sha256
                                                 of an LFS file, else its git blob sha1
            snapshots/<commit>/<path>            relative symlinks: ../../blobs/<etag>
            refs/<revision>                      the commit hash (a branch or tag name)
            trees/<commit>.json                  the file listing snapshot_download writes
                                                 online (huggingface_hub 2) and checks offline

    Args:
        hf_home: the ``HF_HOME`` folder (``huggingface_hub.constants.HF_HUB_CACHE`` must be ``hf_home/hub``).
        repo_id: ``"ORG/NAME"``.
        folder: the files of the repository (subfolders kept).
        revision: branch or tag that ``refs/`` points at the commit.
        commit: the 40-hex commit hash; default: a sha1 of the paths and contents (the same
            files, the same commit).
        listing: write ``trees/<commit>.json``; False: a cache as older huggingface_hub versions
            (or ``hf_hub_download`` alone) leave it.
        leave_out: paths in the listing but not in the snapshot: an interrupted or partial
            download, which offline ``snapshot_download`` calls incomplete.

    Returns:
        The commit hash.
    """
    storage = hf_home / "hub" / ("models--" + repo_id.replace("/", "--"))
    files = {path.relative_to(folder).as_posix(): path for path in sorted(folder.rglob("*")) if path.is_file()}
    tree: dict[str, dict[str, Any]] = {}
    for relative, path in files.items():
        content = path.read_bytes()
        tree[relative] = {"size": len(content), "blob_id": _git_blob_sha1(content)}
        if path.name.endswith(_LFS_SUFFIXES):
            tree[relative].update(lfs_sha256=hashlib.sha256(content).hexdigest(), lfs_size=len(content))
    if commit is None:
        commit = hashlib.sha1("".join(f"{path}\0{entry['blob_id']}\n" for path, entry in tree.items()).encode()).hexdigest()
    for relative, entry in tree.items():
        if relative in leave_out:
            continue
        blob = storage / "blobs" / entry.get("lfs_sha256", entry["blob_id"])
        if not blob.exists():
            blob.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(files[relative], blob)
        pointer = storage / "snapshots" / commit / relative
        pointer.parent.mkdir(parents=True, exist_ok=True)
        if pointer.is_symlink():
            pointer.unlink()
        pointer.symlink_to(os.path.relpath(blob, pointer.parent))
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / revision).write_text(commit)  # no newline, as huggingface_hub writes it
    if listing:
        (storage / "trees").mkdir(exist_ok=True)
        text = json.dumps({"format_version": 1, "files": tree}, indent=1)
        (storage / "trees" / f"{commit}.json").write_text(text, encoding="utf-8")
    return commit


@dataclass(frozen=True)
class HubCache:
    """What :func:`build_hub_cache` laid out, by Hub id.

    Attributes:
        home: the ``HF_HOME`` folder; the cache is ``home / "hub"``.
        families: family name -> its repository, ``{"bert": "tokenmask-test/tiny-bert", …}``.
        commits: repository -> ``{revision: commit}``; every repository has ``"main"``, and
            ``families["bert"]`` also ``"v1"``, a tag on other weights (seed 1).
        remote_code: a repository whose config needs ``modeling_custom.py`` (``auto_map``).
        pickle_only: a BERT repository with ``pytorch_model.bin`` and no safetensors.
        gpt2: a tiny GPT-2, a decoder with no masked-LM head.
        minilm: the real all-MiniLM-L6-v2 folder (a ``BertModel``, no MLM head), as
            ``sentence-transformers/all-MiniLM-L6-v2``.
        missing: an id that is not in the cache.
    """

    home: Path
    families: dict[str, str]
    commits: dict[str, dict[str, str]]
    remote_code: str = f"{ORGANISATION}/tiny-remote-code"
    pickle_only: str = f"{ORGANISATION}/tiny-bert-pickle-only"
    gpt2: str = f"{ORGANISATION}/tiny-gpt2"
    minilm: str = "sentence-transformers/all-MiniLM-L6-v2"
    missing: str = f"{ORGANISATION}/not-in-the-cache"

    def snapshot(self, repo: str, revision: str = "main") -> Path:
        """The snapshot folder of ``repo`` at ``revision`` (a name in :attr:`commits` or a commit)."""
        commit = self.commits[repo].get(revision, revision)
        return self.home / "hub" / ("models--" + repo.replace("/", "--")) / "snapshots" / commit


def build_hub_cache(hf_home: Path, scratch: Path) -> HubCache:
    """Build every checkpoint the tests load by id into ``hf_home``'s cache (``scratch`` holds
    the folders they are built in first)."""
    with _quiet():
        return _build_hub_cache(hf_home, scratch)


@contextmanager
def _quiet() -> Iterator[None]:
    """transformers' progress bars off ("Writing model shards") while the checkpoints are saved."""
    bar = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()
    try:
        yield
    finally:
        if bar:
            transformers.utils.logging.enable_progress_bar()


def _build_hub_cache(hf_home: Path, scratch: Path) -> HubCache:
    texts = shakespeare_lines(TRAINING_LINES)
    families = {family: repo_id(family) for family in FAMILIES}
    commits: dict[str, dict[str, str]] = {}
    for family, repo in families.items():
        tokenizer = build_tokenizer(family, texts)
        commits[repo] = {"main": lay_out_cache(hf_home, repo, build_checkpoint(family, scratch / repo, tokenizer=tokenizer))}
        if family == "bert":  # a tag on other weights (the same tokenizer: a model's revisions share it)
            revised = build_checkpoint(family, scratch / f"{repo}-v1", seed=1, tokenizer=tokenizer)
            commits[repo]["v1"] = lay_out_cache(hf_home, repo, revised, revision="v1")
    cache = HubCache(home=hf_home, families=families, commits=commits)
    bert = scratch / families["bert"]
    special = {
        cache.remote_code: build_remote_code(scratch / cache.remote_code, bert),
        cache.pickle_only: build_pickle_only(scratch / cache.pickle_only, bert),
        cache.gpt2: build_gpt2(scratch / cache.gpt2, texts),
        cache.minilm: minilm_dir(),
    }
    for repo, folder in special.items():
        commits[repo] = {"main": lay_out_cache(hf_home, repo, folder)}
    return cache
