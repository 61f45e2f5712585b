"""Retrieval quality: Recall@1/5/10, MRR@10 and nDCG@10 of queries over a corpus, for an encoder and for BM25.

An encoder ranks the corpus by the cosine similarity of the texts' pooled vectors
(:func:`tokenmask.use.embed.embed_texts`); BM25 (``bm25s``, English stop words removed) by its
lexical score, the yardstick every encoder's numbers stand beside. Each query has one relevant
text (:class:`~tokenmask.labelled.pairs.RetrievalSet`), so Recall@k is the share of queries
that find it in their first k, MRR@10 the mean of 1/rank (0 past 10), and nDCG@10 the mean of
1/log2(rank + 1) (0 past 10). All as fractions in [0, 1], as every tokenmask metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tokenmask.labelled.pairs import RetrievalSet
from tokenmask.train.models import Pooling
from tokenmask.use.embed import embed_texts
from tokenmask.use.evaluate import evaluating

if TYPE_CHECKING:
    import torch

DEPTH = 10
"""How deep each ranking is read (MRR@10, nDCG@10, Recall@10)."""


def ranking_scores(top: np.ndarray, relevant: Sequence[int]) -> dict[str, float]:
    """The scores of rankings ``top`` ``(Q, k >= 10)`` (corpus rows, best first) against each query's relevant row.

    ``top = [[3, 1, ...], [0, 2, ...]]``, ``relevant = [1, 5]``: the first query finds its text at rank 2
    (recall@1 0, recall@5 1, reciprocal rank 1/2), the second not in its first 10: recall@1 0, recall@5 0.5,
    MRR@10 0.25.
    """
    hits = np.asarray(top)[:, :DEPTH] == np.asarray(relevant)[:, None]  # (Q, 10)
    found = hits.any(axis=1)
    rank = np.where(found, hits.argmax(axis=1) + 1, 0)  # 1-based; 0: not in the first 10
    reciprocal = np.where(found, 1.0 / np.maximum(rank, 1), 0.0)
    gain = np.where(found, 1.0 / np.log2(np.maximum(rank, 1) + 1), 0.0)
    scores = {f"recall@{k}": float((found & (rank <= k)).mean()) for k in (1, 5, 10)}
    scores.update({"mrr@10": float(reciprocal.mean()), "ndcg@10": float(gain.mean())})
    return scores


def top_rows(query_vectors: np.ndarray, corpus_vectors: np.ndarray, *, depth: int = DEPTH, chunk: int = 1024) -> np.ndarray:
    """``(Q, depth)`` corpus rows of highest dot product (cosine, for unit vectors) for each query, best first."""
    import torch

    corpus = torch.from_numpy(np.ascontiguousarray(corpus_vectors, dtype=np.float32))
    rows = []
    for first in range(0, len(query_vectors), chunk):
        block = torch.from_numpy(np.ascontiguousarray(query_vectors[first : first + chunk], dtype=np.float32))
        rows.append(torch.topk(block @ corpus.T, min(depth, len(corpus)), dim=1).indices.numpy())
    return np.concatenate(rows)


@dataclass(frozen=True)
class RetrievalEvaluation:
    """An encoder's retrieval scores on a :class:`~tokenmask.labelled.pairs.RetrievalSet`, and its contrastive loss there."""

    loss: float
    scores: dict[str, float]
    queries: int
    corpus: int

    def metrics(self) -> dict[str, float]:
        """Plain numbers, loss first: ``loss``, ``recall@1``, ``recall@5``, ``recall@10``, ``mrr@10``, ``ndcg@10``."""
        return {"loss": self.loss, **self.scores}

    def to_dict(self) -> dict[str, Any]:
        """The metrics and the set's size, JSON-ready."""
        return {**self.metrics(), "queries": self.queries, "corpus": self.corpus}


def evaluate_retrieval(
    model: torch.nn.Module, tokenizer: Any, held_out: RetrievalSet, *, pooling: Pooling = "mean", scale: float = 20.0,
    max_length: int = 256, batch_size: int = 64,
) -> RetrievalEvaluation:  # fmt: skip
    """Embed ``held_out``'s queries and corpus with ``model`` (in evaluation mode, restored after) and score the rankings.

    The loss is the mean cross-entropy of each query's relevant text among the whole corpus, at
    ``scale`` times the cosine: the training loss with every corpus text as a negative.
    """
    import torch

    with evaluating(model):
        queries, corpus = [embed_texts(model, tokenizer, texts, pooling=pooling, max_length=max_length, batch_size=batch_size)  # type: ignore[arg-type]  # any encoder module
                           for texts in (held_out.queries, held_out.corpus)]  # fmt: skip
    similarity = torch.from_numpy(queries) @ torch.from_numpy(corpus).T  # (Q, D)
    loss = torch.nn.functional.cross_entropy(scale * similarity, torch.tensor(held_out.relevant))
    scores = ranking_scores(top_rows(queries, corpus), held_out.relevant)
    return RetrievalEvaluation(float(loss), scores, len(queries), len(corpus))


def bm25_scores(held_out: RetrievalSet) -> dict[str, float]:
    """BM25's scores on ``held_out`` (``bm25s`` with its defaults, k1 1.5 and b 0.75; English stop words removed)."""
    import bm25s

    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(held_out.corpus, stopwords="en", show_progress=False), show_progress=False)
    queries = bm25s.tokenize(held_out.queries, stopwords="en", show_progress=False)
    top, _ = retriever.retrieve(queries, k=min(DEPTH, len(held_out.corpus)), show_progress=False)
    return ranking_scores(np.asarray(top), held_out.relevant)
