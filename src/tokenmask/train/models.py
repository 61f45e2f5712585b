"""Masked-LM models: size presets built from scratch, or a local checkpoint to continue from."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoModelForMaskedLM, BertConfig, BertForMaskedLM, PreTrainedModel

# name: (layers, hidden size, attention heads); the feed-forward size is 4 x hidden
PRESETS: dict[str, tuple[int, int, int]] = {
    "bert-tiny": (2, 128, 2),
    "bert-mini": (4, 256, 4),
    "bert-small": (4, 512, 8),
    "bert-base": (12, 768, 12),
}


def build_model(preset: str, *, vocab_size: int, max_length: int, pad_token_id: int | None) -> PreTrainedModel:
    """A freshly initialised BERT masked-LM of a preset size.

    Raises:
        ValueError: unknown preset.
    """
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    layers, hidden, heads = PRESETS[preset]
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        max_position_embeddings=max(512, max_length),
        pad_token_id=pad_token_id if pad_token_id is not None else 0,
    )
    return BertForMaskedLM(config)


def load_model(path: str | Path, *, vocab_size: int, max_length: int) -> PreTrainedModel:
    """A masked-LM checkpoint from a local folder (safetensors; never remote code).

    Raises:
        ValueError: the model's vocabulary or position limit does not fit.
    """
    model = AutoModelForMaskedLM.from_pretrained(path, local_files_only=True, trust_remote_code=False)
    embeddings = model.get_input_embeddings().num_embeddings
    if embeddings < vocab_size:
        raise ValueError(f"the model has {embeddings} token embeddings but the tokenizer {vocab_size} ids")
    limit = getattr(model.config, "max_position_embeddings", None)
    if limit is not None and max_length > limit:
        raise ValueError(f"max_length {max_length} is over the model's position limit {limit}")
    return model
