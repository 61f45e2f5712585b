"""Masked-LM evaluation: loss, perplexity and accuracy at fixed masks, and pseudo-perplexity.

:func:`evaluate_mlm` scores a model on given blocks (the training loop's evaluation), and
:func:`evaluate_detector` a replaced-token discriminator at fixed replacements;
:func:`evaluate_checkpoint` is ``tokenmask evaluate``: a checkpoint on a corpus's blocks.

The evaluation collator uses its own seed and never changes epoch, so every evaluation of a
run (and of any checkpoint on the same data) sees exactly the same masks. Pseudo-perplexity
needs no masks to choose: it masks every scorable token in turn.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase

from tokenmask.blocks.pack import batched
from tokenmask.collate.collator import MaskingCollator
from tokenmask.collate.pad import Feature
from tokenmask.masking.config import IGNORE_INDEX
from tokenmask.masking.replaced import REPLACED, detector_inputs
from tokenmask.text.token_tables import cached_tables, require_mask_token
from tokenmask.train.heads import masked_lm_loss
from tokenmask.use.config import EvaluateConfig

EVAL_SEED_OFFSET = 1_000_003  # eval masks differ from any training epoch's


@contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """``model`` in evaluation mode (no dropout) inside the block; its mode is restored after."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def inference_device() -> torch.device:
    """Where evaluation and fill-mask run: the GPU when there is one, else the CPU."""
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def tensors_on(batch: Mapping[str, Any], device: torch.device | str) -> dict[str, torch.Tensor]:
    """The tensors of a collated batch, moved to ``device`` (lists and strings are left out)."""
    return {key: value.to(device) for key, value in batch.items() if isinstance(value, torch.Tensor)}


@dataclass(frozen=True)
class MlmMetrics:
    """Loss (mean cross-entropy per target), perplexity, accuracy, number of targets."""

    loss: float
    perplexity: float
    accuracy: float
    targets: int

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def scored_batches(
    model: torch.nn.Module, blocks: Sequence[Feature], collator: MaskingCollator, *, batch_size: int, device: torch.device | str
) -> Iterator[dict[str, torch.Tensor]]:
    """The batches ``collator`` makes of ``blocks`` with epoch 0's masks, on ``device``, while ``model``
    is in evaluation mode (restored after the last one): what every fixed-mask score iterates over.

    Raises:
        ValueError: no blocks.
    """
    if not blocks:
        raise ValueError("no validation blocks to evaluate on")
    with evaluating(model):
        for chunk in batched(blocks, batch_size):
            yield tensors_on(collator.collate(chunk, epoch=0), device)


@torch.no_grad()
def evaluate_mlm(
    model: torch.nn.Module,
    blocks: Sequence[Feature],
    collator: MaskingCollator,
    *,
    batch_size: int = 32,
    device: torch.device | str = "cpu",
) -> MlmMetrics:
    """Evaluate ``model`` on ``blocks`` masked by ``collator`` (epoch 0 masks).

    Raises:
        ValueError: no blocks, or no target in them.
    """
    loss_sum, targets, correct = 0.0, 0, 0
    for batch in scored_batches(model, blocks, collator, batch_size=batch_size, device=device):
        out = masked_lm_loss(model, batch)
        loss_sum += float(out.loss_sum)
        targets += out.targets
        assert out.correct is not None  # counted: count_correct defaults to True
        correct += out.correct
    if targets == 0:
        raise ValueError("the validation blocks hold no maskable token")
    loss = loss_sum / targets
    return MlmMetrics(loss=loss, perplexity=math.exp(min(loss, 50.0)), accuracy=correct / targets, targets=targets)


@dataclass(frozen=True)
class DetectorMetrics:
    """A replaced-token discriminator at fixed replacements: accuracy over every real token,
    precision and recall on the replaced ones (0 when it flags none / there are none), and the
    number of each."""

    accuracy: float
    precision: float
    recall: float
    tokens: int
    replaced: int

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


@torch.no_grad()
def evaluate_detector(
    discriminator: torch.nn.Module,
    blocks: Sequence[Feature],
    collator: MaskingCollator,
    *,
    batch_size: int = 32,
    device: torch.device | str = "cpu",
) -> DetectorMetrics:
    """Score a discriminator (``ElectraForPreTraining``) on ``blocks`` with the replacements of ``collator``.

    ``collator`` should replace its targets by random tokens only (``mask_replace_prob`` 0,
    ``random_replace_prob`` 1) with a fixed seed: every evaluation of a run then judges the
    same tokens, whatever its generator has become. A target whose random draw is its own
    token counts as original, as in training. A token is called replaced where the logit is > 0.

    Raises:
        ValueError: no blocks.
    """
    tokens = replaced = correct = flagged = caught = 0
    for batch in scored_batches(discriminator, blocks, collator, batch_size=batch_size, device=device):
        # the collator's random tokens stand where a generator's samples would: training's labels
        targets = batch["labels"] != IGNORE_INDEX
        _, labels = detector_inputs(batch["input_ids"], batch["labels"], batch["input_ids"][targets], batch["attention_mask"])
        real, truth = labels != IGNORE_INDEX, labels == REPLACED  # (B, T)
        inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids") if k in batch}
        called = discriminator(**inputs).logits > 0  # (B, T)
        tokens += int(real.sum())
        replaced += int(truth[real].sum())
        correct += int((called == truth)[real].sum())
        flagged += int(called[real].sum())
        caught += int((called & truth)[real].sum())
    return DetectorMetrics(
        accuracy=correct / max(tokens, 1),
        precision=caught / flagged if flagged else 0.0,
        recall=caught / replaced if replaced else 0.0,
        tokens=tokens,
        replaced=replaced,
    )


@dataclass(frozen=True)
class PseudoPerplexity:
    """Pseudo-log-likelihood (sum of log-probs, nats), pseudo-perplexity, tokens scored."""

    pseudo_log_likelihood: float
    pseudo_perplexity: float
    scored_tokens: int

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def _padded(blocks: Sequence[Feature], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(S, T)`` ids right-padded with ``pad_token_id`` and the ``(S, T)`` bool mask of real tokens."""
    rows = [torch.as_tensor(block["input_ids"], dtype=torch.long) for block in blocks]
    lengths = torch.tensor([len(row) for row in rows])
    ids = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=pad_token_id)
    return ids, torch.arange(ids.shape[1]) < lengths[:, None]


def _single_mask_copies(
    ids: torch.Tensor, real: torch.Tensor, row: torch.Tensor, position: torch.Tensor, mask_id: int
) -> dict[str, torch.Tensor]:
    """One copy of block ``row[i]`` per scored token, masked at ``position[i]`` only, labelled there only.

    ``ids``, ``real``: ``(S, T)``; ``row``, ``position``: ``(n,)``. Returns ``(n, W)`` tensors,
    ``W`` the longest of those blocks.
    """
    width = int(real[row].sum(dim=1).max())
    copies = ids[row, :width].clone()  # (n, W)
    pick = torch.arange(len(row))
    labels = torch.full_like(copies, IGNORE_INDEX)
    labels[pick, position] = copies[pick, position]
    copies[pick, position] = mask_id
    return {"input_ids": copies, "attention_mask": real[row, :width].long(), "labels": labels}


@torch.no_grad()
def pseudo_perplexity(
    model: torch.nn.Module,
    blocks: Sequence[Feature],
    tokenizer: PreTrainedTokenizerBase,
    *,
    batch_size: int = 64,
    max_tokens: int | None = None,
    device: torch.device | str = "cpu",
) -> PseudoPerplexity:
    """Pseudo-perplexity (Salazar et al. 2020, "Masked Language Model Scoring").

    Every scorable token (not special, not padding: what the collator could select) is masked
    alone, with the rest of its block as context; ``PLL = sum log P(token | rest)`` and
    ``PPPL = exp(-PLL / N)``. Example: two tokens scored with probabilities 0.5 and 0.125 give
    ``PLL = ln 0.5 + ln 0.125 = -2.77`` and ``PPPL = exp(2.77 / 2) = 4``.

    It costs one forward pass per token, so the single-mask copies are batched
    (``batch_size`` copies per pass, through the sparse head) and ``max_tokens`` caps the
    count: the first tokens of the first blocks, in order.

    Args:
        model: a Hugging Face masked-LM.
        blocks: examples with ``input_ids`` (lists or 1-d tensors, any lengths).
        tokenizer: gives the mask, padding and special (unscored) ids.
        batch_size: single-mask copies per forward pass.
        max_tokens: score at most this many tokens (None: all).

    Raises:
        ValueError: no blocks, no scorable token, or a batch size / cap below 1.
    """
    if batch_size < 1 or (max_tokens is not None and max_tokens < 1):
        raise ValueError(f"batch_size and max_tokens must be >= 1; got {batch_size}, {max_tokens}")
    mask_id = require_mask_token(tokenizer)
    protected = torch.from_numpy(cached_tables(tokenizer).protected)  # (V,)
    if not blocks:
        raise ValueError("no blocks to score")
    ids, real = _padded(blocks, tokenizer.pad_token_id or 0)  # (S, T)
    scored = real & ~protected[ids]  # (S, T)
    if not scored.any():
        raise ValueError("no scorable token: the blocks hold only special tokens or padding")
    rows, positions = scored.nonzero(as_tuple=True)  # (N,), block by block, left to right
    rows, positions = rows[:max_tokens], positions[:max_tokens]
    loss_sum = 0.0
    with evaluating(model):
        for row, position in zip(rows.split(batch_size), positions.split(batch_size)):
            batch = _single_mask_copies(ids, real, row, position, mask_id)
            loss_sum += float(masked_lm_loss(model, tensors_on(batch, device)).loss_sum)
    count = len(rows)
    return PseudoPerplexity(
        pseudo_log_likelihood=-loss_sum,
        pseudo_perplexity=math.exp(min(loss_sum / count, 50.0)),
        scored_tokens=count,
    )


@dataclass(frozen=True)
class CheckpointScores:
    """What ``tokenmask evaluate`` reports: the fixed-mask metrics on ``blocks`` blocks, and the
    pseudo-perplexity when it was asked for."""

    blocks: int
    metrics: MlmMetrics
    pseudo: PseudoPerplexity | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"blocks": self.blocks, **self.metrics.as_dict(), **(self.pseudo.as_dict() if self.pseudo else {})}


def evaluate_checkpoint(config: EvaluateConfig) -> CheckpointScores:
    """Score ``config.model`` at fixed masks on the blocks a pre-training run with the same corpus
    and settings uses: a corpus given is evaluated whole (its first blocks), the bundled plays on
    their held-out side. The masks are the seed's evaluation masks (``seed + EVAL_SEED_OFFSET``).

    Raises:
        ValueError: a bad checkpoint, tokenizer or corpus, settings the model does not fit, or a
            replaced-token discriminator (its generator is the masked LM).
    """
    import itertools

    from tokenmask.blocks.load import load_blocks, load_phrases
    from tokenmask.train.models import load_model, paired_tokenizer
    from tokenmask.train.names import refuse_discriminator, resolve_checkpoint

    checkpoint = resolve_checkpoint(config.model, hub=config.hub)
    refuse_discriminator(checkpoint, "be scored at masks")
    tokenizer = paired_tokenizer(checkpoint, config.tokenizer, hub=config.hub)
    model = load_model(checkpoint, vocab_size=len(tokenizer), max_length=config.blocks.max_length)
    units = config.masking.units
    phrases = load_phrases(config.corpus, tokenizer, units, reading=config.reading, blocks=config.blocks)
    blocks = load_blocks(config.corpus, tokenizer, reading=config.reading, blocks=config.blocks, phrases=phrases)
    collator = MaskingCollator.from_config(tokenizer, config.masking, seed=config.seed + EVAL_SEED_OFFSET)
    sides = (blocks.train, blocks.validation) if config.corpus else (blocks.validation,)
    data = list(itertools.islice(itertools.chain(*sides), config.max_blocks))
    device = inference_device()
    torch.nn.Module.to(model, device)  # (transformers' typing of .to wants a dtype or device kwarg)
    metrics = evaluate_mlm(model, data, collator, batch_size=32, device=device)
    pseudo = None
    if config.pseudo_perplexity:
        pseudo = pseudo_perplexity(model, data, tokenizer, max_tokens=config.max_tokens, device=device)
    return CheckpointScores(len(data), metrics, pseudo)
