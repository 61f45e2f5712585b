"""Sentence embeddings from an encoder, and cosine-similarity search over them.

A text's vector is the mean of the encoder's last hidden states over its content tokens: the
attended positions that are not special tokens (``[CLS]``, ``[SEP]``, ``<s>``, padding…). A
sentence-transformers folder (``finetune --task retrieval`` writes one) is pooled as it says
(:func:`saved_pooling`): the mean over every attended token, or the ``[CLS]`` state. Unlike
the masked-LM code beside it, this runs the bare encoder (``AutoModel``): the prediction head of
a pre-trained checkpoint is left unloaded. An index is a float32 ``.npy`` matrix, one row per
text in input order, read back without ever unpickling.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tokenmask.blocks.pack import batched
from tokenmask.files import atomic_file
from tokenmask.hub import HubConfig
from tokenmask.train.models import (
    Pooling,
    open_checkpoint,
    position_limit,
    require_encoder_weights,
    saved_pooling,
    saved_tokenizer,
)
from tokenmask.train.names import Checkpoint, resolve_checkpoint

if TYPE_CHECKING:  # torch / transformers load where used, so `tokenmask --help` stays quick
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

Progress = Callable[[int, int], None]
"""Called after each batch with ``(texts embedded so far, total texts)``."""


def load_encoder(
    name_or_path: str | Path | Checkpoint, *, device: str | None = None, hub: HubConfig = HubConfig()
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """The base encoder of a checkpoint (a folder, ``minilm`` or a Hub id) and its tokenizer.

    Any Hugging Face encoder or masked-LM folder works, e.g. ``OUTPUT/model`` of ``tokenmask
    pretrain``: ``AutoModel`` takes the encoder and leaves the prediction head out. A folder
    wins over the name, the name over a Hub id (:func:`~tokenmask.train.names.resolve_checkpoint`);
    remote code runs only with ``hub.trust_remote_code``.

    Args:
        name_or_path: checkpoint folder (``config.json``, weights, tokenizer files), ``"minilm"`` or a Hub id.
        device: where to put the model; None picks ``"cuda"`` when available, else ``"cpu"``.
        hub: revision and remote-code permission for a Hub id.

    Returns:
        ``(model, tokenizer)``, the model in evaluation mode.

    Raises:
        ValueError: neither a folder nor ``minilm``; a folder without a model config or
            tokenizer; a checkpoint that lacks encoder weights (they would be random).
        FileNotFoundError: ``minilm`` without its package installed (the message names it).
    """
    import torch
    from transformers import AutoModel

    checkpoint = resolve_checkpoint(name_or_path, hub=hub)
    tokenizer = saved_tokenizer(checkpoint)
    model, info = open_checkpoint(AutoModel, checkpoint)
    # A masked-LM folder has no pooler (unused here), and its head is "unexpected": both fine.
    require_encoder_weights(checkpoint.name, model, info["missing_keys"])
    torch.nn.Module.to(model, device or ("cuda" if torch.cuda.is_available() else "cpu"))  # (transformers types .to oddly)
    return model.eval(), tokenizer


def embed_texts(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    texts: Sequence[str],
    *,
    batch_size: int = 32,
    max_length: int = 256,
    normalize: bool = True,
    progress: Progress | None = None,
    pooling: Pooling = "content",
) -> np.ndarray:
    """One vector per text: the mean of the last hidden states over its content tokens (or as ``pooling`` says).

    Texts are tokenized once, truncated to ``max_length`` tokens (specials included), sorted
    longest first and batched, so a batch pads to about its own length; the rows come back in
    input order. The result does not depend on ``batch_size`` (up to float rounding, ~1e-6).
    A text with no content token (e.g. ``""``) gets the mean over its special tokens instead.

    Args:
        model: an encoder whose output has ``last_hidden_state`` (B, T, H), e.g. from
            :func:`load_encoder`. Runs under ``torch.inference_mode`` on the model's device.
        tokenizer: its tokenizer; must have a padding token.
        texts: N strings.
        batch_size: texts per forward pass.
        max_length: tokens per text at most, special tokens included (256 is what
            all-MiniLM-L6-v2 was trained with).
        normalize: scale each vector to unit L2 norm, so a dot product is the cosine
            similarity (what retrieval and most vector stores expect). False keeps the plain
            means, whose length varies with the text.
        progress: called after each batch with ``(done, N)``.
        pooling: :data:`Pooling`.

    Returns:
        float32 array (N, H), H the model's hidden size; (0, H) for no texts.

    Raises:
        ValueError: ``batch_size`` < 1; ``max_length`` leaving no room for a content token or
            over the model's position limit; a tokenizer without a padding token.
    """
    import torch

    _check_settings(model, tokenizer, batch_size=batch_size, max_length=max_length)
    if not texts:
        return np.zeros((0, model.config.hidden_size), dtype=np.float32)
    rows = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
    order = sorted(range(len(rows)), key=lambda i: -len(rows[i]))  # longest first: a too-big batch fails at once
    vectors = np.zeros((len(rows), model.config.hidden_size), dtype=np.float32)
    special = torch.tensor(sorted(set(tokenizer.all_special_ids)))
    device = next(model.parameters()).device
    with torch.inference_mode():
        done = 0
        for chosen in batched(order, batch_size):
            ids, attention = _pad([rows[i] for i in chosen], tokenizer.pad_token_id)  # (B, T) each
            vectors[chosen] = _embed_batch(model, ids, attention, special, device=device, normalize=normalize, pooling=pooling)
            done += len(chosen)
            if progress is not None:
                progress(done, len(order))
    return vectors


def _embed_batch(
    model: PreTrainedModel,
    ids: torch.Tensor,
    attention: torch.Tensor,
    special: torch.Tensor,
    *,
    device: torch.device,
    normalize: bool,
    pooling: Pooling = "content",
) -> np.ndarray:
    """``(B, H)`` float32 vectors of a padded ``(B, T)`` batch: the mean of the last hidden
    states over each row's content tokens (not in ``special``), or over its special tokens when
    it has none (other ``pooling``: see :data:`Pooling`); unit length when ``normalize``."""
    import torch

    hidden = model(input_ids=ids.to(device), attention_mask=attention.to(device)).last_hidden_state.float().cpu()
    if pooling == "cls":
        pooled = hidden[:, 0]
    else:
        keep = attention.bool()  # (B, T)
        if pooling == "content":
            keep = keep & ~torch.isin(ids, special)
            keep |= attention.bool() & ~keep.any(dim=1, keepdim=True)  # no content token: use the specials
        pooled = mean_pool(hidden, keep)  # (B, H)
    if normalize:
        pooled = torch.nn.functional.normalize(pooled, dim=1)
    return pooled.numpy()


def _check_settings(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, batch_size: int, max_length: int) -> None:
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1; got {batch_size}")
    framing = tokenizer.num_special_tokens_to_add()
    if max_length <= framing:
        raise ValueError(f"max_length must be over the {framing} special tokens framing each text; got {max_length}")
    limit = position_limit(model)
    if limit is not None and max_length > limit:
        raise ValueError(f"max_length {max_length} is over the model's position limit {limit}")
    if tokenizer.pad_token_id is None:
        raise ValueError("the tokenizer has no padding token, so texts cannot be batched")


def _pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token id lists: ``[[5, 6, 7], [8]]`` -> ids ``[[5, 6, 7], [8, p, p]]``, mask ``[[1, 1, 1], [1, 0, 0]]``."""
    import torch

    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
        attention[i, : len(row)] = 1
    return ids, attention


def mean_pool(hidden: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """Mean of the hidden states at the kept positions of each row.

    ``hidden = [[[1, 2], [3, 4], [5, 6], [7, 8]]]``, ``keep = [[0, 1, 1, 0]]`` -> ``[[4, 5]]``.

    Args:
        hidden: (B, T, H) floats.
        keep: (B, T) booleans, at least one True per row (a row without any gives zeros).

    Returns:
        (B, H) means.
    """
    weights = keep.to(hidden.dtype).unsqueeze(-1)  # (B, T, 1)
    return (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1)


def search(index: np.ndarray, query: np.ndarray, *, top_k: int = 5) -> list[tuple[int, float]]:
    """The rows of ``index`` most similar to ``query`` by cosine similarity, best first.

    Rows need not be normalised. A zero row (or query) scores 0. Equal scores keep row order.
    ``index = [[1, 0], [0, 2], [3, 3]]``, ``query = [1, 0]``, ``top_k=2`` -> ``[(0, 1.0), (2, 0.7071)]``.

    Args:
        index: (N, H) vectors.
        query: (H,) vector.
        top_k: at most this many results (fewer when N is smaller).

    Returns:
        ``[(row, score), ...]``, scores in [-1, 1].

    Raises:
        ValueError: ``top_k`` < 1, or shapes that do not match.
    """
    if top_k < 1:
        raise ValueError(f"top_k must be >= 1; got {top_k}")
    if index.ndim != 2 or query.shape != (index.shape[1],):
        raise ValueError(f"expected an (N, H) index and an (H,) query; got {index.shape} and {query.shape}")
    index64, query64 = index.astype(np.float64), query.astype(np.float64)
    norms = np.linalg.norm(index64, axis=1) * np.linalg.norm(query64)  # (N,)
    scores = np.divide(index64 @ query64, norms, out=np.zeros(len(index64)), where=norms > 0)  # (N,)
    best = np.argsort(-scores, kind="stable")[:top_k]
    return [(int(row), float(scores[row])) for row in best]


def save_index(path: str | Path, vectors: np.ndarray) -> Path:
    """Write ``vectors`` as float32 ``.npy`` to exactly ``path`` (no suffix added), atomically.

    A crash never leaves a half-written index that looks whole: the file is written beside
    the target, fsynced and renamed into place (:func:`tokenmask.files.atomic_file`). Missing
    parent folders are created.
    """
    path = Path(path)
    with atomic_file(path, binary=True) as handle:
        np.save(handle, np.asarray(vectors, dtype=np.float32), allow_pickle=False)
    return path


def load_index(path: str | Path) -> np.ndarray:
    """A saved index as a float32 (N, H) array; never unpickles.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not a ``.npy`` file, an object (pickled) array, not 2-D floats, or
            values that are not finite.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"index {path}: no such file")
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as error:  # pickled object arrays and non-.npy files land here
        raise ValueError(f"index {path}: not a plain .npy array ({error})") from None
    if not isinstance(array, np.ndarray) or array.ndim != 2 or not np.issubdtype(array.dtype, np.floating):
        raise ValueError(f"index {path}: expected a 2-D float array (texts x dimensions)")
    if not np.isfinite(array).all():
        raise ValueError(f"index {path}: holds NaN or infinite values")
    return array.astype(np.float32, copy=False)


@dataclass(frozen=True)
class EmbeddingRun:
    """What :func:`embed_corpus` wrote: ``texts`` rows of ``dims`` floats to ``output``."""

    output: Path
    texts: int
    dims: int
    normalized: bool
    seconds: float


@dataclass(frozen=True)
class Hit:
    """One search result: 1-based ``rank``, index ``row``, cosine ``score``, the ``text``."""

    rank: int
    row: int
    score: float
    text: str


def read_corpus(paths: Iterable[str | Path], *, text_field: str = "text") -> list[str]:
    """The texts to embed or search, one per non-blank line (or record's ``text_field``).

    Blank lines are skipped in both commands, so index row i is the i-th text read here.

    Raises:
        FileNotFoundError / ValueError: from :func:`tokenmask.text.corpus.read_texts`; no text at all.
    """
    from tokenmask.text.corpus import read_texts

    names = [str(p) for p in paths]
    texts = list(read_texts(names, boundary="line", text_field=text_field))
    if not texts:
        raise ValueError(f"{', '.join(names)}: no text (empty, or blank lines only)")
    return texts


def embed_corpus(
    model: str | Path | Checkpoint,
    inputs: Iterable[str | Path],
    output: str | Path,
    *,
    text_field: str = "text",
    batch_size: int = 32,
    max_length: int = 256,
    normalize: bool = True,
    progress: Progress | None = None,
    hub: HubConfig = HubConfig(),
) -> EmbeddingRun:
    """Embed every text of ``inputs`` with ``model`` (see :func:`load_encoder`) into ``output``.

    Raises:
        FileNotFoundError / ValueError: missing or empty input, unknown model, bad settings.
    """
    texts = read_corpus(inputs, text_field=text_field)
    checkpoint = resolve_checkpoint(model, hub=hub)
    encoder, tokenizer = load_encoder(checkpoint, hub=hub)
    start = time.perf_counter()
    vectors = embed_texts(
        encoder, tokenizer, texts, batch_size=batch_size, max_length=max_length, normalize=normalize, progress=progress,
        pooling=saved_pooling(checkpoint.folder),
    )  # fmt: skip
    seconds = time.perf_counter() - start
    return EmbeddingRun(save_index(output, vectors), len(texts), vectors.shape[1], normalize, seconds)


def search_corpus(
    model: str | Path | Checkpoint,
    index: str | Path,
    texts: Iterable[str | Path],
    query: str,
    *,
    top_k: int = 5,
    text_field: str = "text",
    max_length: int = 256,
    hub: HubConfig = HubConfig(),
) -> list[Hit]:
    """The ``top_k`` texts most similar to ``query`` in an index built by :func:`embed_corpus`.

    Args:
        model: the model that built the index (its hidden size must match the index).
        index: the ``.npy`` file.
        texts: the files the index was built from, read the same way.
        query: the text to look for.

    Raises:
        FileNotFoundError / ValueError: missing files; an empty query; an index whose rows are
            not the number of texts, or whose width is not the model's hidden size.
    """
    if not query.strip():
        raise ValueError("the query is empty")
    vectors = load_index(index)
    corpus = read_corpus(texts, text_field=text_field)
    if len(vectors) != len(corpus):
        raise ValueError(
            f"index {index} has {len(vectors):,} rows but the texts hold {len(corpus):,}: "
            "search the texts the index was built from"
        )
    checkpoint = resolve_checkpoint(model, hub=hub)
    encoder, tokenizer = load_encoder(checkpoint, hub=hub)
    (query_vector,) = embed_texts(encoder, tokenizer, [query], max_length=max_length, pooling=saved_pooling(checkpoint.folder))
    if vectors.shape[1] != len(query_vector):
        raise ValueError(
            f"index {index} has {vectors.shape[1]} dimensions but the model's hidden size is "
            f"{len(query_vector)}: search with the model that built the index"
        )
    ranked = search(vectors, query_vector, top_k=top_k)
    return [Hit(rank, row, score, corpus[row]) for rank, (row, score) in enumerate(ranked, start=1)]
