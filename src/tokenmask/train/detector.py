"""Replaced-token detection (ELECTRA): a generator and a discriminator trained as one model.

The generator, a narrow masked LM, predicts the masked targets (its loss is the sparse MLM
loss) and fills each with a sample (:func:`~tokenmask.masking.replaced.sample_replacements`,
keyed like the masks); the discriminator reads the original text with those samples in place
and learns, at every token, whether it was replaced. The two share their embeddings. The
loss of a step is ``generator MLM loss per target + weight x discriminator loss per token``
(ELECTRA's, weight 50), each normalised over the whole step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from tokenmask.masking.config import IGNORE_INDEX
from tokenmask.masking.replaced import detector_inputs, sample_replacements
from tokenmask.train.heads import target_logits
from tokenmask.train.step import TARGETS_PER_TOKEN

GENERATOR_FOLDER = "generator"
"""Where a detector's generator is saved, inside the discriminator's folder (checkpoints) or beside it (OUTPUT/generator)."""

_INPUTS = ("attention_mask", "token_type_ids")


class ReplacedTokenDetector(nn.Module):
    """An ``ElectraForPreTraining`` discriminator and an ``ElectraForMaskedLM`` generator with shared embeddings.

    The generator's embeddings module *is* the discriminator's (word, position and token-type
    embeddings and their norm), and its output layer stays tied to the word embeddings, so the
    pair has one embedding table. ``save_pretrained(folder)`` writes the discriminator there and
    the generator in ``folder/generator``: two plain Hugging Face folders.

    Args:
        discriminator: an ``ElectraForPreTraining``.
        generator: an ``ElectraForMaskedLM`` whose ``embedding_size`` is the discriminator's.
        allowed: ``(V,)`` bool, the ids a sample may be (no specials, no [MASK], no padding).
    """

    part_folders = (GENERATOR_FOLDER,)
    base_model_prefix = "discriminator.electra"
    """The pre-trained body, for :mod:`~tokenmask.train.groups`: layer-wise rates and the head-only
    warm-up of continued pre-training treat the generator and the detection head as the head."""
    allowed: torch.Tensor

    def __init__(self, discriminator: Any, generator: Any, allowed: torch.Tensor) -> None:
        super().__init__()
        if generator.config.embedding_size != discriminator.config.embedding_size:
            raise ValueError(
                f"the generator's embeddings are {generator.config.embedding_size} wide, the discriminator's "
                f"{discriminator.config.embedding_size}: they cannot be shared"
            )
        generator.electra.embeddings = discriminator.electra.embeddings
        generator.tie_weights()  # the output layer follows the shared word embeddings
        self.discriminator, self.generator = discriminator, generator
        vocab = discriminator.config.vocab_size
        table = torch.zeros(vocab, dtype=torch.bool)
        table[: min(vocab, allowed.numel())] = allowed[:vocab]
        self.register_buffer("allowed", table, persistent=False)

    @property
    def config(self) -> Any:
        """The discriminator's config (its depth sets the layer-wise learning rates)."""
        return self.discriminator.config

    def save_pretrained(self, folder: str | Path, **kwargs: Any) -> None:
        """The discriminator in ``folder``, the generator in ``folder/generator`` (each with its config)."""
        self.discriminator.save_pretrained(folder, **kwargs)
        self.generator.save_pretrained(Path(folder) / GENERATOR_FOLDER, **kwargs)


def masked_lm(model: nn.Module) -> nn.Module:
    """The masked LM of a model being pre-trained: a detector's generator, else the model itself."""
    return model.generator if isinstance(model, ReplacedTokenDetector) else model


def detection_loss_sum(model: ReplacedTokenDetector, batch: dict[str, torch.Tensor], *, weight: float) -> torch.Tensor:
    """``generator loss sum + weight x discriminator loss sum x targets_per_token`` over a batch.

    Divided by the step's targets (as :func:`~tokenmask.train.step.backward_step` does), this
    is the generator's mean loss per target plus ``weight`` times the discriminator's mean loss
    per real token, both over the whole step: ``targets_per_token`` (the batch's
    :data:`TARGETS_PER_TOKEN`, set by the loop; else this batch's own ratio) turns the per-token
    sum into the target-normalised one.

    Args:
        model: the detector.
        batch: a masked batch (``input_ids``, ``attention_mask``, ``labels``) with the
            ``replacement_noise`` its collator adds, ``(B, T)``.
        weight: the discriminator's weight (ELECTRA's λ, 50).

    Returns:
        A 0-d tensor with grad: the generator's term is 0 for a batch without targets, the
        discriminator's still counts (its tokens are part of the step).
    """
    logits, gold = target_logits(model.generator, batch)  # (N, V), (N,)
    generator_sum = F.cross_entropy(logits.float(), gold, reduction="sum")
    targets = batch["labels"] != IGNORE_INDEX
    samples = sample_replacements(logits, batch["replacement_noise"][targets], model.allowed)
    inputs, replaced = detector_inputs(batch["input_ids"], batch["labels"], samples, batch["attention_mask"])
    extra = {k: batch[k] for k in _INPUTS if k in batch}
    scores = model.discriminator(input_ids=inputs, **extra).logits  # (B, T)
    real = replaced != IGNORE_INDEX
    detector_sum = F.binary_cross_entropy_with_logits(scores[real].float(), replaced[real].float(), reduction="sum")
    ratio = batch.get(TARGETS_PER_TOKEN)
    if ratio is None:
        ratio = torch.tensor(int(targets.sum()) / max(int(real.sum()), 1))
    return generator_sum + weight * detector_sum * ratio.to(detector_sum)
