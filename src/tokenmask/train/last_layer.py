"""The encoder's last layer at the target positions only: the same loss for a fraction of its cost.

Only the final hidden states at the targets reach the MLM loss, and in the last layer a
position's output depends on the other positions only through their keys and values. So that
layer computes keys and values for every token, and queries, attention, output projection
and feed-forward for the targets alone (at 15% masking, about 30% of the layer's work); the
loss and its gradients are the full layer's. The sparse head (:mod:`.heads`) takes the rest.
The attention runs through ``F.scaled_dot_product_attention`` for SDPA, eager and document-aware
(:mod:`.documents`) models:
with SDPA the numbers are the same, with eager equal up to rounding (about 1e-7 in fp32).
The last layer's attention weights (``output_attentions``) are not computed.

Written against the layers of transformers 5: BERT, RoBERTa (and XLM-R, CamemBERT), ELECTRA,
DistilBERT and ModernBERT, with SDPA or eager attention. Any other model (ALBERT, whose layers
share weights; DeBERTa and MPNet, with relative positions in every attention), transformers
version, attention implementation, or a compiled encoder or last layer runs its full last layer:
:func:`last_layer_at_targets` then does nothing (``--compile`` compiles the other layers).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F
import transformers
from torch import nn

from tokenmask.train.documents import ATTENTION, document_mask

_ATTENTION = frozenset({"sdpa", "eager", ATTENTION})  # the mask is a dense (B, 1, T, T) tensor or None
_TRANSFORMERS_5 = int(transformers.__version__.split(".")[0]) == 5


@functools.cache
def _known_layers() -> dict[type, str]:
    """The layer classes of the installed transformers 5, each with its kind: ``"bert"``,
    ``"distilbert"`` or ``"modernbert"`` (ELECTRA's layer is BERT's, copied)."""
    from transformers.models.bert.modeling_bert import BertLayer
    from transformers.models.camembert.modeling_camembert import CamembertLayer
    from transformers.models.distilbert.modeling_distilbert import TransformerBlock
    from transformers.models.electra.modeling_electra import ElectraLayer
    from transformers.models.modernbert.modeling_modernbert import ModernBertEncoderLayer
    from transformers.models.roberta.modeling_roberta import RobertaLayer
    from transformers.models.xlm_roberta.modeling_xlm_roberta import XLMRobertaLayer

    bert_like = (BertLayer, RobertaLayer, XLMRobertaLayer, CamembertLayer, ElectraLayer)
    return {**dict.fromkeys(bert_like, "bert"), TransformerBlock: "distilbert", ModernBertEncoderLayer: "modernbert"}


def encoder_layers(encoder: nn.Module) -> nn.ModuleList | None:
    """The list of layers of a BERT-like (``encoder.layer``), DistilBERT (``transformer.layer``)
    or ModernBERT (``layers``) encoder."""
    body = getattr(encoder, "encoder", None) or getattr(encoder, "transformer", None)
    layers = getattr(body, "layer", None) or getattr(encoder, "layers", None)
    return layers if isinstance(layers, nn.ModuleList) and len(layers) > 0 else None


def knows_layer(encoder: nn.Module) -> bool:
    """Whether the encoder's last layer is of a class this module knows; :func:`last_layer` may
    still leave it whole (its attention implementation, an adapter, a compiled layer…)."""
    layers = encoder_layers(encoder)
    return layers is not None and type(layers[-1]) in _known_layers()


def last_layer(encoder: nn.Module) -> nn.Module | None:
    """The last layer of a known encoder that can run at the targets only, or None.

    Known: exactly transformers 5's own layer classes (not subclasses, nor remote code with the
    same names), called as this module expects, with plain ``nn.Linear`` projections (an
    adapter such as LoRA, or a quantized layer, keeps the full layer)."""
    if not _TRANSFORMERS_5 or getattr(encoder, "_compiled_call_impl", None) is not None:
        return None
    config = getattr(encoder, "config", None)
    if getattr(config, "_attn_implementation", None) not in _ATTENTION or getattr(config, "is_decoder", False):
        return None
    layers = encoder_layers(encoder)
    if layers is None or getattr(layers[-1], "_compiled_call_impl", None) is not None:
        return None
    layer: Any = layers[-1]  # a transformers layer, its parts read by name
    kind = _known_layers().get(type(layer))
    projections: tuple[Any, ...]
    if kind == "bert":
        attention = layer.attention.self
        projections = (attention.query, attention.key, attention.value)
        plain = not layer.add_cross_attention and not layer.chunk_size_feed_forward
    elif kind == "distilbert":
        attention = layer.attention
        projections = (attention.q_lin, attention.k_lin, attention.v_lin)
        plain = not layer.ffn.chunk_size_feed_forward
    elif kind == "modernbert":
        projections, plain = (layer.attn.Wqkv,), True  # its weight is sliced, not called
    else:
        return None
    if not plain or any(type(p) is not nn.Linear for p in projections) or not _returns_a_tensor(type(layer)):
        return None
    return layer


def _returns_a_tensor(layer_type: type[nn.Module]) -> bool:
    """Whether the layer's forward is declared to return the hidden states alone, as in the
    transformers 5 code this module follows (older layers returned tuples). Read once per forward."""
    forward = layer_type.forward
    if forward not in _RETURNS_A_TENSOR:
        returned = inspect.signature(forward).return_annotation
        _RETURNS_A_TENSOR[forward] = returned is torch.Tensor or returned in ("torch.Tensor", "Tensor")
    return _RETURNS_A_TENSOR[forward]


_RETURNS_A_TENSOR: dict[Any, bool] = {}


@contextmanager
def last_layer_at_targets(encoder: nn.Module, targets: torch.Tensor) -> Iterator[bool]:
    """Within the block, ``encoder``'s last layer computes the ``targets`` positions only.

    The encoder's ``last_hidden_state`` is then right at the targets and zero elsewhere (or the
    final norm of zero, for ModernBERT): read it at the targets only. Yields whether the layer
    was replaced (False for a model it does not know; that model runs its full layer).

    Args:
        encoder: the base model of a masked LM (``model.bert``, ``model.model``…).
        targets: ``(B, T)`` bool, the positions whose final hidden state is needed.
    """
    layer = last_layer(encoder)
    if layer is None:
        yield False
        return
    on_targets = _ON_TARGETS[_known_layers()[type(layer)]]
    positions, valid = query_positions(targets)

    def forward(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, *args: Any, **kwargs: Any):
        if kwargs.get("cu_seq_lens_q") is not None:  # documents kept apart (:mod:`.documents`)
            batch, length = hidden_states.shape[:2]
            attention_mask = document_mask(kwargs["cu_seq_lens_q"], batch, length, attention_mask)
        queries = _query_mask(attention_mask, positions, valid)
        out = on_targets(layer, hidden_states, positions, queries, kwargs.get("position_embeddings"))  # (B, Q, H)
        return scatter_rows(out, positions, valid, hidden_states.shape[1])

    layer.forward = forward  # an instance attribute: shadows the class's forward until deleted
    try:
        yield True
    finally:
        del layer.forward


def query_positions(targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's target positions, in order, padded to the longest row.

    Returns:
        ``(positions, valid)``, both ``(B, Q)`` with Q the most targets in a row (at least 1):
        positions are int64 (padding slots repeat position 0), ``valid`` is False on padding slots.

    ``[[F, T, F, T], [T, F, F, F]]  ->  positions [[1, 3], [0, 0]], valid [[T, T], [T, F]]``
    """
    counts = targets.sum(dim=1)  # (B,)
    width = max(int(counts.max()), 1) if targets.numel() else 0  # a slot at least: no empty kernels
    order = torch.argsort((~targets).to(torch.int8), dim=1, stable=True)[:, :width]  # targets first
    valid = torch.arange(width, device=targets.device)[None, :] < counts[:, None]
    return torch.where(valid, order, 0), valid


def scatter_rows(rows: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor, length: int) -> torch.Tensor:
    """``(B, Q, H)`` rows placed at ``positions`` of a ``(B, length, H)`` zero tensor; padding
    slots go to an extra column that is cut off, so each real position is written once."""
    batch, width, hidden = rows.shape
    slots = torch.where(valid, positions, length)  # (B, Q)
    out = rows.new_zeros(batch, length + 1, hidden)
    return out.scatter(1, slots[:, :, None].expand(batch, width, hidden), rows)[:, :length]


def _query_mask(mask: torch.Tensor | None, positions: torch.Tensor, valid: torch.Tensor) -> torch.Tensor | None:
    """The mask's rows at the query positions, ``(B, 1, Q, T)``; padding slots attend to every key
    (a row of a sliding-window mask could otherwise mask every key: NaN in the backward pass)."""
    if mask is None or mask.dim() != 4 or mask.shape[-2] == 1:
        return mask  # no mask, or one row for every query: keys only
    batch, width = positions.shape
    rows = mask.expand(batch, -1, -1, -1)
    picked = rows.gather(2, positions[:, None, :, None].expand(batch, rows.shape[1], width, rows.shape[-1]))
    padding = ~valid[:, None, :, None]
    if picked.dtype == torch.bool:
        return picked | padding
    return picked.masked_fill(padding, 0.0)


def _rows(hidden: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``(B, T, H)`` -> ``(B, Q, H)`` at ``positions``."""
    return hidden.gather(1, positions[:, :, None].expand(-1, -1, hidden.shape[-1]))


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """``(B, N, H)`` -> ``(B, heads, N, H / heads)``."""
    return x.view(x.shape[0], x.shape[1], heads, x.shape[-1] // heads).transpose(1, 2)


def _merge(x: torch.Tensor) -> torch.Tensor:
    """``(B, heads, N, d)`` -> ``(B, N, heads * d)``."""
    return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], x.shape[1] * x.shape[3])


def _attend(module: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask, *, p: float, scale: float):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p if module.training else 0.0, scale=scale)


def _self_attention(attention: Any, projections: tuple[Any, Any, Any], hidden, at, mask, *, heads: int, scale: float):
    """Multi-head attention of the rows ``at`` ``(B, Q, H)`` over every token of ``hidden``
    ``(B, T, H)``, with the query, key and value ``projections``; ``(B, Q, H)`` before the output one."""
    query, key, value = projections
    q = _heads(query(at), heads)  # (B, h, Q, d)
    k, v = _heads(key(hidden), heads), _heads(value(hidden), heads)  # (B, h, T, d)
    return _merge(_attend(attention, q, k, v, mask, p=attention.dropout.p, scale=scale))


def _bert_on_targets(layer: Any, hidden: torch.Tensor, positions: torch.Tensor, mask, _rotary) -> torch.Tensor:
    """A BERT layer (post-norm: attention, add & norm, feed-forward, add & norm) at the positions."""
    attention = layer.attention.self
    at = _rows(hidden, positions)  # (B, Q, H)
    scale = getattr(attention, "scaling", attention.attention_head_size**-0.5)
    projections = (attention.query, attention.key, attention.value)
    context = _self_attention(attention, projections, hidden, at, mask, heads=attention.num_attention_heads, scale=scale)
    attended = layer.attention.output(context, at)
    return layer.output(layer.intermediate(attended), attended)


def _distilbert_on_targets(layer: Any, hidden: torch.Tensor, positions: torch.Tensor, mask, _rotary) -> torch.Tensor:
    """A DistilBERT block (BERT's layer under other names, no dropout after the attention) at the positions."""
    attention = layer.attention
    at = _rows(hidden, positions)  # (B, Q, H)
    projections = (attention.q_lin, attention.k_lin, attention.v_lin)
    context = _self_attention(attention, projections, hidden, at, mask, heads=attention.n_heads, scale=attention.scaling)
    attended = layer.sa_layer_norm(attention.out_lin(context) + at)
    return layer.output_layer_norm(layer.ffn(attended) + attended)


def _modernbert_on_targets(layer: Any, hidden: torch.Tensor, positions: torch.Tensor, mask, rotary) -> torch.Tensor:
    """A ModernBERT layer (pre-norm, fused QKV, rotary positions, gated MLP) at the positions."""
    from transformers.models.modernbert.modeling_modernbert import apply_rotary_pos_emb

    attention = layer.attn
    width = hidden.shape[-1]
    heads = width // attention.head_dim
    normed = layer.attn_norm(hidden)  # (B, T, H)
    weight, bias = attention.Wqkv.weight, attention.Wqkv.bias  # rows: queries, keys, values
    kv = F.linear(normed, weight[width:], None if bias is None else bias[width:])  # (B, T, 2H)
    k, v = (_heads(part, heads) for part in kv.chunk(2, dim=-1))  # (B, h, T, d)
    q = _heads(F.linear(_rows(normed, positions), weight[:width], None if bias is None else bias[:width]), heads)
    cos, sin = rotary  # (1 or B, T, d)
    k = apply_rotary_pos_emb(k, k, cos, sin)[0]
    cos_q, sin_q = (_rows(t.expand(hidden.shape[0], -1, -1), positions) for t in (cos, sin))
    q = apply_rotary_pos_emb(q, q, cos_q, sin_q)[0]
    context = _merge(_attend(attention, q, k, v, mask, p=attention.attention_dropout, scale=attention.head_dim**-0.5))
    out = _rows(hidden, positions) + attention.out_drop(attention.Wo(context))  # (B, Q, H)
    return out + layer.mlp(layer.mlp_norm(out))


_ON_TARGETS = {"bert": _bert_on_targets, "distilbert": _distilbert_on_targets, "modernbert": _modernbert_on_targets}
