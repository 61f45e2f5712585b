"""Attention that keeps documents apart: packed blocks as if each document ran alone, and unpadded batches.

A pre-training block packs several documents (``[CLS] doc1 [SEP] doc2 [SEP] …``). With
``--packing documents`` each token attends only to its own document, and positions restart at
each document (after RoBERTa's offset), as ModernBERT's packer does. The boundaries travel as
flash-attention's keywords, ``cu_seq_lens_q`` / ``cu_seq_lens_k`` (each document's first token in
the flattened ``B × T`` tokens, then ``B × T``) and ``max_length_q`` / ``max_length_k``; the model
hands them to :func:`document_attention`, which is registered in transformers' attention
registry under :data:`ATTENTION`. It calls torch's ``varlen_attn`` on CUDA (bf16 or fp16, no
attention dropout) and SDPA elsewhere, with a block-diagonal mask or per document, whichever
computes fewer scores: the same numbers. With ``unpad``, a padded batch runs as its real tokens
alone (:func:`keep_documents_apart`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

ATTENTION = "tokenmask_documents"
"""The attention implementation's name in transformers' registry."""


@functools.cache
def register() -> None:
    """Register :func:`document_attention`, with SDPA's padding and sliding-window masks, once."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(ATTENTION, document_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION, sdpa_mask)


def document_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    *,
    scaling: float | None = None,
    dropout: float = 0.0,
    sliding_window: int | None = None,
    cu_seq_lens_q: torch.Tensor | None = None,
    max_length_q: int | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention within documents: ``query``, ``key``, ``value`` ``(B, h, T, d)`` -> ``((B, T, h, d), None)``.

    ``attention_mask`` is SDPA's (padding, a sliding window; bool, True = attend, or None);
    ``cu_seq_lens_q`` the documents' offsets in the flattened tokens. Without them this is
    transformers' SDPA attention.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if cu_seq_lens_q is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    varlen = _varlen()
    if varlen is not None and query.is_cuda and query.dtype in (torch.float16, torch.bfloat16) and dropout == 0.0:
        batch, heads, length, width = query.shape
        flat = [x.transpose(1, 2).reshape(batch * length, heads, width) for x in (query, key, value)]  # (B*T, h, d)
        longest = int(max_length_q) if max_length_q is not None else length
        window = (-1, -1) if sliding_window is None else (sliding_window - 1, sliding_window - 1)  # as transformers' flash path
        out = varlen(*flat, cu_seq_lens_q, cu_seq_lens_q, longest, longest, scale=scaling, window_size=window)
        return out.view(batch, length, heads, width), None
    batch, length = query.shape[0], query.shape[2]
    longest = int(max_length_q) if max_length_q is not None else length
    if (cu_seq_lens_q.numel() - 1) * longest**2 < batch * length**2:  # fewer scores padded per document
        return _per_document(query, key, value, cu_seq_lens_q, longest, scaling, dropout, sliding_window), None
    mask = document_mask(cu_seq_lens_q, batch, length, attention_mask)
    return sdpa_attention_forward(module, query, key, value, mask, scaling=scaling, dropout=dropout, **kwargs)


def _per_document(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu_seq_lens: torch.Tensor, longest: int,
    scaling: float | None, dropout: float, sliding_window: int | None,
) -> torch.Tensor:  # fmt: skip
    """SDPA over the documents padded to the longest, ``(B, h, T, d)`` -> ``(B, T, h, d)``: an unpadded
    batch's attention costs what the padded batch's did. Padding here is only a document's own: the
    given mask (the keys of padding, which are documents apart) is not needed; a sliding window is
    re-made within each document."""
    batch, heads, length, width = query.shape
    flat = [x.transpose(1, 2).reshape(batch * length, heads, width) for x in (query, key, value)]  # (N, h, d)
    starts, lengths = cu_seq_lens[:-1].long(), (cu_seq_lens[1:] - cu_seq_lens[:-1]).long()  # (D,)
    steps = torch.arange(longest, device=query.device)
    valid = steps[None, :] < lengths[:, None]  # (D, L)
    index = (starts[:, None] + steps[None, :]).clamp(max=batch * length - 1)  # (D, L)
    q, k, v = (x[index].transpose(1, 2) for x in flat)  # (D, h, L, d)
    keys = valid[:, None, None, :]  # (D, 1, 1, L)
    if sliding_window is not None:
        keys = keys & ((steps[:, None] - steps[None, :]).abs() < sliding_window)  # (D, 1, L, L)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=keys, dropout_p=dropout, scale=scaling)  # (D, h, L, d)
    return out.transpose(1, 2)[valid].view(batch, length, heads, width)


@functools.cache
def _varlen() -> Callable[..., Any] | None:
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:  # torch before 2.10
        return None
    return varlen_attn if torch.cuda.is_available() else None


def document_mask(cu_seq_lens: torch.Tensor, batch: int, length: int, given: torch.Tensor | None = None) -> torch.Tensor:
    """``(B, 1, T, T)`` bool: True where query and key are in the same document (and ``given`` allows it).

    Every token may attend to itself, so that no row is empty (padding in a document of its
    own; its outputs are not read). ``cu_seq_lens`` ``[0, 2, 4]`` for ``B=1, T=4`` -> two 2×2 blocks.
    """
    document = document_index(cu_seq_lens, batch * length).view(batch, length)  # (B, T)
    same = document[:, None, :, None] == document[:, None, None, :]  # (B, 1, T, T)
    if given is not None:
        same = same & given.bool()
    return same | torch.eye(length, dtype=torch.bool, device=same.device)


def document_index(cu_seq_lens: torch.Tensor, tokens: int) -> torch.Tensor:
    """The document of each flattened token: ``[0, 2, 5]``, 5 tokens -> ``[0, 0, 1, 1, 1]``."""
    positions = torch.arange(tokens, device=cu_seq_lens.device)
    return torch.searchsorted(cu_seq_lens[1:].to(positions.dtype), positions, right=True)


def boundaries(input_ids: torch.Tensor, attention_mask: torch.Tensor | None, separator: int) -> dict[str, Any]:
    """The keywords of documents packed as ``… [SEP] next …``: each separator ends a document, and
    padding (``attention_mask`` 0) is a document of its own.

    ``[[CLS, a, SEP, b, SEP, PAD]]`` -> ``cu_seq_lens`` ``[0, 3, 5, 6]``, ``max_length`` 3.
    """
    starts = torch.zeros_like(input_ids, dtype=torch.bool)  # (B, T): a document starts here
    starts[:, 0] = True
    starts[:, 1:] = input_ids[:, :-1] == separator
    if attention_mask is not None:
        starts[:, 1:] |= attention_mask[:, 1:] != attention_mask[:, :-1]
    flat = starts.flatten()
    edges = torch.cat([flat.nonzero().flatten(), flat.new_tensor([flat.numel()], dtype=torch.long)]).to(torch.int32)
    return lengths_keywords(edges)


def lengths_keywords(cu_seq_lens: torch.Tensor) -> dict[str, Any]:
    """``cu_seq_lens_q`` / ``_k`` and ``max_length_q`` / ``_k`` of int32 document offsets."""
    longest = int((cu_seq_lens[1:] - cu_seq_lens[:-1]).max())
    return {"cu_seq_lens_q": cu_seq_lens, "cu_seq_lens_k": cu_seq_lens, "max_length_q": longest, "max_length_k": longest}


def document_positions(cu_seq_lens: torch.Tensor, batch: int, length: int, *, offset: int = 0) -> torch.Tensor:
    """``(B, T)`` position ids restarting at each document, from ``offset``: ``[0, 2, 5]`` -> ``[[0, 1, 0, 1, 2]]``."""
    index = torch.arange(batch * length, device=cu_seq_lens.device)
    starts = cu_seq_lens.to(index.dtype)[document_index(cu_seq_lens, batch * length)]
    return (index - starts + offset).view(batch, length)


def keep_documents_apart(model: nn.Module, *, separator: int | None = None, unpad: bool = False) -> str | None:
    """Switch ``model`` to :func:`document_attention`, in place; None when it keeps documents apart,
    else why not (the model is left as it was).

    The model's base then takes the boundaries from the separator (``separator``: packed blocks)
    or from the batch's ``cu_seq_lens_q``, and the position ids from them. With ``unpad``, a padded
    batch ``(B, L)`` runs as its real tokens alone, concatenated with their boundaries, and the base
    model's output is padded back (its pooler re-run), so that any task head reads it as before.
    A two-document probe checks that the model gives each document what it gives it alone: a
    family whose attention does not go through transformers' registry (DeBERTa, MPNet), or whose
    embeddings take no position ids, fails it.
    """
    if not getattr(model, "_supports_attention_backend", False):
        return f"{type(model).__name__}'s attention does not go through transformers' attention registry"
    register()
    before = model.config._attn_implementation  # type: ignore[union-attr]
    model.set_attn_implementation(ATTENTION)  # type: ignore[operator]
    base: Any = model.base_model
    offset = getattr(getattr(base, "embeddings", None), "padding_idx", None)  # RoBERTa numbers positions after padding
    hook = functools.partial(_with_documents, separator=separator, offset=0 if offset is None else offset + 1, unpad=unpad)
    handles = [base.register_forward_pre_hook(hook, with_kwargs=True)]
    if unpad:
        handles.append(base.register_forward_hook(_padded_back, with_kwargs=True))
    if _documents_apart(model):
        return None
    for handle in handles:
        handle.remove()
    model.set_attn_implementation(before)  # type: ignore[operator]
    return f"{type(model).__name__}'s attention or positions do not follow document boundaries"


def _with_documents(
    module: Any, args: tuple, kwargs: dict[str, Any], *, separator: int | None, offset: int, unpad: bool
) -> tuple[tuple, dict[str, Any]] | None:
    """The base model's forward pre-hook: a padded batch unpadded (``unpad``), boundaries from the
    separator unless given, positions from them."""
    ids = kwargs.get("input_ids", args[0] if args else None)
    module._padding = None  # what _padded_back pads the output back to
    if ids is None or ids.dim() != 2:
        return None
    mask = kwargs.get("attention_mask")
    if unpad and mask is not None and mask.dim() == 2 and kwargs.get("cu_seq_lens_q") is None:
        keep = mask.bool()  # (B, L): the real tokens, on whichever side the padding is
        for name in ("token_type_ids", "position_ids"):
            if kwargs.get(name) is not None:
                kwargs[name] = kwargs[name][keep][None]
        ids, args = ids[keep][None], args if "input_ids" in kwargs else args[1:]  # (1, N)
        lengths = keep.sum(dim=1).cumsum(0)
        kwargs.update(input_ids=ids, attention_mask=None, **lengths_keywords(torch.cat([lengths.new_zeros(1), lengths]).int()))
        module._padding = keep
    if kwargs.get("cu_seq_lens_q") is None:
        if separator is None:
            return args, kwargs
        kwargs.update(boundaries(ids, kwargs.get("attention_mask"), separator))
    if kwargs.get("position_ids") is None:
        kwargs["position_ids"] = document_positions(kwargs["cu_seq_lens_q"], *ids.shape, offset=offset)
    return args, kwargs


def _padded_back(module: Any, args: tuple, kwargs: dict[str, Any], output: Any) -> Any:
    """The base model's forward hook after an unpadded batch: ``last_hidden_state`` ``(1, N, H)`` back to
    ``(B, L, H)``, zeros at the padding, and the pooler's output from it."""
    keep = getattr(module, "_padding", None)
    if keep is None:
        return output
    flat = output.last_hidden_state  # (1, N, H)
    padded = flat.new_zeros(*keep.shape, flat.shape[-1]).index_put((keep,), flat[0])  # (B, L, H)
    output.last_hidden_state = padded
    if getattr(output, "pooler_output", None) is not None:
        output.pooler_output = module.pooler(padded)
    return output


@torch.no_grad()
def _documents_apart(model: Any) -> bool:
    """Whether a block of two 3-token documents gives each one's hidden states as it alone does."""
    was_training = model.training
    model.eval()
    try:
        device = next(model.parameters()).device
        ids = torch.tensor([[5, 6, 7, 8, 9, 10]], device=device)
        cu = torch.tensor([0, 3, 6], dtype=torch.int32, device=device)
        packed = model.base_model(input_ids=ids, **lengths_keywords(cu)).last_hidden_state  # (1, 6, H)
        one = lengths_keywords(cu[:2])  # a 3-token document alone
        alone = [model.base_model(input_ids=ids[:, a : a + 3], **one).last_hidden_state for a in (0, 3)]
        return torch.allclose(packed, torch.cat(alone, dim=1), atol=1e-4, rtol=1e-3)
    finally:
        model.train(was_training)
