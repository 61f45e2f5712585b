"""Retrieval for fine-tuning: query-text pairs tokenised, batched without repeated positives, and saved as a sentence-transformers model.

The sibling of :mod:`tokenmask.recipes.answering` for ``--task retrieval``. What is ours and
what is sentence-transformers': the model format is theirs (:func:`save_sentence_transformer`:
``SentenceTransformer(path)`` opens OUTPUT/model, mean pooling declared); the loss is
``MultipleNegativesRankingLoss``'s, written as a sum over queries
(:func:`~tokenmask.train.classifier.contrastive_loss_sum`) because the loop divides a step's loss
once, across micro-batches and processes; the scores are computed here over the whole held-out
corpus (:mod:`tokenmask.use.retrieval`), and a test checks them against their
``InformationRetrievalEvaluator``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from tokenmask.blocks.shard import is_validation
from tokenmask.labelled.pairs import Pair, RetrievalSet, read_pairs, retrieval_set, squad_pairs, squad_retrieval
from tokenmask.labelled.questions import SQUAD
from tokenmask.labelled.sampler import DistinctBatches
from tokenmask.recipes.config import FinetuneConfig

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from tokenmask.collate.augment import MaskingAugmenter


@dataclass(frozen=True)
class RetrievalData:
    """The pairs of a retrieval run, tokenised, and the set it is scored on.

    Attributes:
        train: one feature per pair: the query's ``input_ids``, ``positive_ids`` (and
            ``negative_ids``), each text's key (``positive_key``, ``negative_key``: equal texts,
            equal keys) and ``id``.
        validation: the held-out queries, corpus and relevant rows.
    """

    train: list[dict[str, Any]]
    validation: RetrievalSet
    source: str
    negatives: int
    max_length: int
    task: str = "retrieval"

    def describe(self) -> str:
        """A few lines for the console: pairs, hard negatives, the held-out set."""
        held = self.validation
        return "\n".join([
            f"task retrieval: {self.source}",
            f"  train:      {len(self.train):,} pairs ({self.negatives:,} with a hard negative)",
            f"  validation: {len(held.queries):,} queries over {len(held.corpus):,} texts",
            f"  texts cut at {self.max_length} tokens",
        ])  # fmt: skip


def _key(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=7).digest(), "little")


def split_pairs(config: FinetuneConfig) -> tuple[list[Pair], RetrievalSet, str]:
    """``(training pairs, held-out set, source)``. Without ``data`` (or with ``squad``): SQuAD's train
    questions and paragraphs, scored on its dev set (10,570 questions over 2,067 paragraphs). Given
    files without ``--eval`` are split by a hash of each positive, so no text is on both sides.

    Raises:
        ValueError: unreadable files (:func:`~tokenmask.labelled.pairs.read_pairs`), an empty side.
    """
    builtin = config.data in ((), (SQUAD,))
    pairs = squad_pairs() if builtin else read_pairs(config.data)
    source = "SQuAD v1.1 (the built-in squad): questions and their paragraphs" if builtin else ", ".join(config.data)
    if config.eval_data:
        held_out = retrieval_set(read_pairs(config.eval_data))
    elif builtin:
        held_out = squad_retrieval()
    else:
        held = [is_validation(p.positive, config.validation_share) for p in pairs]
        held_out = retrieval_set([p for p, h in zip(pairs, held) if h])
        pairs = [p for p, h in zip(pairs, held) if not h]
    if not pairs:
        raise ValueError("no training pair left after the split; lower validation_share")
    if not held_out.queries:
        raise ValueError("no validation pair: give --eval DATA or more pairs (positives) to hold out")
    return pairs, held_out, source


def load_retrieval_data(config: FinetuneConfig, tokenizer: PreTrainedTokenizerBase) -> RetrievalData:
    """Read and split the run's pairs (:func:`split_pairs`) and tokenise each distinct text once, cut at ``config.max_length``."""
    pairs, held_out, source = split_pairs(config)
    texts = list(dict.fromkeys(t for p in pairs for t in (p.query, p.positive, p.negative) if t is not None))
    encoded = tokenizer(texts, truncation=True, max_length=config.max_length)["input_ids"]
    ids = {text: np.asarray(row, dtype=np.int32) for text, row in zip(texts, encoded)}
    train = []
    for number, pair in enumerate(pairs):
        feature = {"input_ids": ids[pair.query], "positive_ids": ids[pair.positive], "positive_key": _key(pair.positive)}
        if pair.negative is not None:
            feature.update(negative_ids=ids[pair.negative], negative_key=_key(pair.negative))
        train.append({**feature, "id": number})
    negatives = sum(p.negative is not None for p in pairs)
    return RetrievalData(train, held_out, source, negatives, config.max_length)


def distinct_positives(train: list[dict[str, Any]], batch_size: int, seed: int) -> DistinctBatches:
    """The batch order of retrieval: no positive twice in a batch where the epoch allows it."""
    return DistinctBatches([f["positive_key"] for f in train], batch_size, seed=seed)


def collate_pairs(augmenter: MaskingAugmenter, features: list[dict[str, Any]]) -> dict[str, Any]:
    """A batch of pairs: queries padded apart from the texts (positives, then hard negatives), each side
    augmented as the augmenter says (masks keyed by the pair's id and side); ``labels`` ``(B,)``: each
    query's positive column."""
    size = len(features)
    negatives = [f for f in features if "negative_ids" in f]
    queries = augmenter([{"input_ids": f["input_ids"], "id": 3 * f["id"]} for f in features])
    texts = augmenter(
        [{"input_ids": f["positive_ids"], "id": 3 * f["id"] + 1} for f in features]
        + [{"input_ids": f["negative_ids"], "id": 3 * f["id"] + 2} for f in negatives]
    )
    keys = [f["positive_key"] for f in features] + [f["negative_key"] for f in negatives]
    return {
        "query_input_ids": queries["input_ids"], "query_attention_mask": queries["attention_mask"],
        "input_ids": texts["input_ids"], "attention_mask": texts["attention_mask"],
        "labels": torch.arange(size), "text_keys": torch.tensor(keys, dtype=torch.int64),
    }  # fmt: skip


def save_sentence_transformer(folder: str | Path, *, max_length: int) -> None:
    """Make a trained encoder's folder a sentence-transformers model: the same weights and tokenizer,
    mean pooling, ``max_seq_length`` as trained. Our model card (README.md) is kept."""
    import warnings

    with warnings.catch_warnings():  # sentence-transformers 6 moved `models`; the old path still works back to 3.0
        warnings.simplefilter("ignore", DeprecationWarning)
        from sentence_transformers import SentenceTransformer, models  # type: ignore[attr-defined]

    from transformers import AutoConfig

    encoder = models.Transformer(str(folder), max_seq_length=max_length)
    pooling = models.Pooling(AutoConfig.from_pretrained(folder).hidden_size, pooling_mode="mean")
    card = Path(folder) / "README.md"
    kept = card.read_text(encoding="utf-8") if card.is_file() else None
    SentenceTransformer(modules=[encoder, pooling], device="cpu").save(str(folder), create_model_card=False)
    if kept is not None:
        card.write_text(kept, encoding="utf-8")
