"""Model size presets, built from scratch: four families (BERT, RoBERTa, ModernBERT, ELECTRA) on one size ladder.

A checkpoint to continue from is :mod:`.models`' business; this module only makes new,
randomly initialised masked-LMs whose configs hold ids of the tokenizer they are built for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # transformers' model classes load torch: imported where used, so --help stays quick
    from transformers import ElectraConfig, ModernBertConfig, PreTrainedModel, RobertaConfig

Family = Literal["bert", "roberta", "modernbert", "electra"]


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
    # BERT's body in ELECTRA's classes, for replaced-token detection (as ModernBERT's presets): a
    # narrower generator shares the embeddings through ELECTRA's embedding projection
    "electra-tiny": Preset("electra", 2, 128, 2),
    "electra-mini": Preset("electra", 4, 256, 4),
    "electra-small": Preset("electra", 12, 256, 4),  # ELECTRA-Small's discriminator, with 256-wide embeddings
}


def build_model(preset: str, *, vocab_size: int, max_length: int, pad_token_id: int | None) -> PreTrainedModel:
    """A freshly initialised masked-LM of a preset size and family.

    BERT, RoBERTa and ELECTRA use a feed-forward of 4 x hidden; ModernBERT its own gated (GLU)
    one of 1.5 x hidden, alternating global and local (sliding-window) attention, rotary
    positions. An ELECTRA preset gives an ``ElectraForMaskedLM`` here (the same body as BERT's);
    :func:`build_detector_parts` gives its discriminator and generator.

    Args:
        preset: a name in :data:`PRESETS`, e.g. ``"roberta-tiny"``.
        vocab_size: number of token ids (``len(tokenizer)``).
        max_length: longest sequence the model must take.
        pad_token_id: the tokenizer's padding id (RoBERTa numbers positions after it).

    Raises:
        ValueError: unknown preset, or a RoBERTa preset without a padding id.
    """
    from transformers import BertConfig, BertForMaskedLM, ElectraForMaskedLM, ModernBertForMaskedLM, RobertaForMaskedLM

    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    size = PRESETS[preset]
    if size.family == "electra":
        return ElectraForMaskedLM(electra_config(size, vocab_size, max_length, pad_token_id))
    if size.family == "roberta":
        return RobertaForMaskedLM(_roberta_config(size, vocab_size, max_length, pad_token_id))
    if size.family == "modernbert":
        return ModernBertForMaskedLM(_modernbert_config(size, vocab_size, max_length, pad_token_id))
    return BertForMaskedLM(BertConfig(**_bert_body(size, vocab_size, max_length, pad_token_id)))


def _bert_body(size: Preset, vocab_size: int, max_length: int, pad_token_id: int | None) -> dict[str, Any]:
    """The config settings BERT and ELECTRA share: a feed-forward of 4 x hidden, absolute positions."""
    return {
        "vocab_size": vocab_size,
        "hidden_size": size.hidden,
        "num_hidden_layers": size.layers,
        "num_attention_heads": size.heads,
        "intermediate_size": 4 * size.hidden,
        "max_position_embeddings": max(512, max_length),
        "pad_token_id": pad_token_id if pad_token_id is not None else 0,
    }


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


def electra_config(size: Preset, vocab_size: int, max_length: int, pad_token_id: int | None) -> ElectraConfig:
    """ELECTRA at ``size``, with embeddings as wide as the hidden states (``embedding_size``); a
    generator built on it (:func:`generator_config`) keeps that width and projects it to its own."""
    from transformers import ElectraConfig

    return ElectraConfig(embedding_size=size.hidden, **_bert_body(size, vocab_size, max_length, pad_token_id))


DETECTOR_FAMILIES: tuple[Family, ...] = ("modernbert", "electra")
"""The families replaced-token detection trains from scratch: ELECTRA's own classes, and ModernBERT's
body and prediction head with a linear detection layer (:class:`~tokenmask.train.detector.LinearDiscriminator`)."""


def build_detector_parts(
    preset: str, *, vocab_size: int, max_length: int, pad_token_id: int | None, generator_share: float
) -> tuple[Any, PreTrainedModel]:
    """A new ``(discriminator, generator)`` at the preset's size, for
    :class:`~tokenmask.train.detector.ReplacedTokenDetector`, which ties their embeddings.

    - ELECTRA: an ``ElectraForPreTraining`` and an ``ElectraForMaskedLM`` ``generator_share`` of
      its width at the same depth (ELECTRA's recipe; its embedding projection bridges the widths).
    - ModernBERT: a :class:`~tokenmask.train.detector.LinearDiscriminator` (the body, its
      prediction head and one linear layer over every token), and a
      ``ModernBertForMaskedLM`` as wide (the two read one embedding table, and ModernBERT has no
      projection) with ``generator_share`` of its layers (:func:`generator_config`).

    Raises:
        ValueError: a preset of another family, or a share the heads cannot divide.
    """
    from transformers import ElectraForMaskedLM, ElectraForPreTraining, ModernBertForMaskedLM, ModernBertModel

    from tokenmask.train.detector import LinearDiscriminator

    size = PRESETS.get(preset)
    if size is None or size.family not in DETECTOR_FAMILIES:
        raise ValueError(f"replaced-token detection trains {detector_presets()}, not {preset}")
    if size.family == "electra":
        discriminator: Any = ElectraForPreTraining(electra_config(size, vocab_size, max_length, pad_token_id))
        return discriminator, ElectraForMaskedLM(generator_config(discriminator.config, generator_share))
    discriminator = LinearDiscriminator(ModernBertModel(_modernbert_config(size, vocab_size, max_length, pad_token_id)))
    return discriminator, ModernBertForMaskedLM(generator_config(discriminator.config, generator_share))


def generator_words(preset: str, share: float) -> str:
    """How a new generator relates to the preset's discriminator: ``"a generator 0.25 as wide"``
    (ELECTRA), ``"a generator as wide with 1 of 2 layers"`` (ModernBERT, :func:`generator_config`)."""
    size = PRESETS[preset]
    if size.family == "modernbert":
        return f"a generator as wide with {_generator_layers(size.layers, share)} of {size.layers} layers"
    return f"a generator {share:g} as wide"


def _generator_layers(layers: int, share: float) -> int:
    """A ModernBERT generator's depth: ``share`` of the discriminator's ``layers``, at least 1."""
    return max(1, round(layers * share))


def detector_presets() -> str:
    """``"modernbert-tiny, modernbert-mini, electra-tiny, …"``: the presets replaced-token detection trains."""
    return ", ".join(name for family in DETECTOR_FAMILIES for name, p in PRESETS.items() if p.family == family)


def generator_config(discriminator: Any, share: float) -> Any:
    """The config of a new generator for a discriminator, ``share`` of its size, with the same
    vocabulary, positions and embedding width (so the two share embeddings):

    - ELECTRA: hidden size, feed-forward and heads at ``share`` (at least 1 head), the same depth.
      ``google/electra-small-discriminator`` (hidden 256, 4 heads, feed-forward 1024, embeddings
      128) at 0.25 -> hidden 64, 1 head, feed-forward 256, embeddings 128.
    - ModernBERT: the same width (its embeddings feed the layers without a projection) and
      ``share`` of the layers, at least 1: ``modernbert-mini`` (4 layers) at 0.25 -> 1 layer.

    Raises:
        ValueError: a width the scaled number of heads cannot divide.
    """
    from transformers import ElectraConfig, ModernBertConfig

    settings = discriminator.to_dict()
    for key in ("architectures", "model_type", "transformers_version", "id2label", "label2id", "_name_or_path"):
        settings.pop(key, None)
    settings.pop("_attn_implementation_autoset", None)  # older transformers: let the generator pick its attention anew
    if discriminator.model_type == "modernbert":
        settings.pop("layer_types", None)  # derived again from the new depth (every third layer global)
        settings.update(num_hidden_layers=_generator_layers(discriminator.num_hidden_layers, share))
        return ModernBertConfig(**settings)
    hidden = max(1, round(discriminator.hidden_size * share))
    heads = max(1, round(discriminator.num_attention_heads * share))
    if hidden % heads:
        raise ValueError(f"a generator {hidden} wide cannot have {heads} attention heads: choose another --generator-share")
    scale = discriminator.intermediate_size / discriminator.hidden_size
    settings.update(hidden_size=hidden, num_attention_heads=heads, intermediate_size=max(1, round(scale * hidden)))
    return ElectraConfig(**settings)
