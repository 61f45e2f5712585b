"""Replaced-token detection (ELECTRA): a generator and a discriminator trained as one model.

The generator, a smaller masked LM, predicts the masked targets (its loss is the sparse MLM
loss) and fills each with a sample (:func:`~tokenmask.masking.replaced.sample_replacements`,
keyed like the masks); the discriminator reads the original text with those samples in place
and learns, at every token, whether it was replaced. The two share their embeddings. The
loss of a step is ``generator MLM loss per target + weight x discriminator loss per token``
(ELECTRA's, weight 50), each normalised over the whole step.
"""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace
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

DETECTION_LAYER = "detection"
"""The name of a :class:`LinearDiscriminator`'s last layer in its weights: no transformers class
has a module of that name, so every ``AutoModelFor…`` class leaves it out when it opens the folder."""

_INPUTS = ("attention_mask", "token_type_ids")
_WEIGHTS = "model.safetensors"  # a LinearDiscriminator's weights, under transformers' own file name


class LinearDiscriminator(nn.Module):
    """A discriminator for a family without ELECTRA's classes (ModernBERT): the encoder body, the
    family's prediction head (dense, activation, norm: the masked LM's ``head``), and one linear
    layer over every token whose logit says "replaced".

    ``save_pretrained(folder)`` writes a plain Hugging Face folder of the body's config, whose
    weights hold ``model.*``, ``head.*`` and ``detection.*``: ``AutoModel`` opens the body, and
    ``AutoModelForSequenceClassification`` / ``…TokenClassification`` open the body and the
    prediction head with a new classifier, as they open a masked LM's folder, so fine-tuning
    starts from the same parts after either objective. :meth:`from_pretrained` reads it all back.
    """

    base_model_prefix = "model"

    def __init__(self, body: Any) -> None:
        from transformers.models.modernbert.modeling_modernbert import ModernBertPredictionHead

        super().__init__()
        self.model = body
        self.head = ModernBertPredictionHead(body.config)
        self.detection = nn.Linear(body.config.hidden_size, 1)
        std = body.config.initializer_range
        for layer in (self.head.dense, self.detection):  # ModernBERT's own init: normal, cut at 3 sd
            nn.init.trunc_normal_(layer.weight, std=std, a=-3 * std, b=3 * std)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)

    @property
    def config(self) -> Any:
        return self.model.config

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None, **_: Any) -> Any:
        """``.logits``: ``(B, T)``, one "replaced" logit per token (token type ids, which ModernBERT has none of, are ignored)."""
        hidden = self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return SimpleNamespace(logits=self.detection(self.head(hidden)).squeeze(-1))

    def save_pretrained(self, folder: str | Path, **_: Any) -> None:
        """``config.json`` (the body's, architecture ``ModernBertModel``) and ``model.safetensors``."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        config = copy.deepcopy(self.config)
        config.architectures = [type(self.model).__name__]
        config.save_pretrained(folder)
        weights = {name: tensor.detach().contiguous().cpu() for name, tensor in self.state_dict().items()}
        save_file(weights, str(folder / _WEIGHTS), metadata={"format": "pt"})

    @classmethod
    def from_pretrained(cls, folder: str | Path) -> LinearDiscriminator:
        """The discriminator :meth:`save_pretrained` wrote to ``folder`` (safetensors), every weight checked present."""
        from safetensors.torch import load_file
        from transformers import AutoConfig, AutoModel

        discriminator = cls(AutoModel.from_config(AutoConfig.from_pretrained(folder)))
        discriminator.load_state_dict(load_file(str(Path(folder) / _WEIGHTS)))
        return discriminator


def has_detection_layer(folder: Path) -> bool:
    """Whether ``folder``'s weights hold a :class:`LinearDiscriminator`'s detection layer (reads the safetensors header only)."""
    from safetensors import SafetensorError, safe_open

    weights = Path(folder) / _WEIGHTS
    if not weights.is_file():
        return False
    try:
        with safe_open(str(weights), framework="pt") as opened:
            return f"{DETECTION_LAYER}.weight" in opened.keys()  # noqa: SIM118 (safe_open has no __contains__)
    except (OSError, SafetensorError):  # unreadable: not judged here; loading it reports the problem
        return False


class ReplacedTokenDetector(nn.Module):
    """A discriminator and a generator (a masked LM) with shared embeddings: ELECTRA's
    ``ElectraForPreTraining`` and ``ElectraForMaskedLM``, or a :class:`LinearDiscriminator` on a
    ModernBERT body and a ``ModernBertForMaskedLM``.

    The generator's embeddings module *is* the discriminator's (the token embeddings and their
    norm; ELECTRA's position and token-type embeddings too), and its output layer stays tied to
    the token embeddings, so the pair has one embedding table. ``save_pretrained(folder)``
    writes the discriminator there and the generator in ``folder/generator``: two folders that
    transformers opens.

    Args:
        discriminator: an ``ElectraForPreTraining`` or a :class:`LinearDiscriminator`.
        generator: a masked LM of the same family whose embeddings are as wide as the discriminator's.
        allowed: ``(V,)`` bool, the ids a sample may be (no specials, no [MASK], no padding).
    """

    part_folders = (GENERATOR_FOLDER,)
    base_model_prefix: str
    """The pre-trained body (``discriminator.electra``), for :mod:`~tokenmask.train.groups`: layer-wise
    rates and the head-only warm-up of continued pre-training treat the generator and the
    detection head as the head."""
    allowed: torch.Tensor

    def __init__(self, discriminator: Any, generator: Any, allowed: torch.Tensor) -> None:
        super().__init__()
        body, generator_body = (
            getattr(discriminator, discriminator.base_model_prefix),
            getattr(generator, generator.base_model_prefix),
        )
        width, generator_width = (
            body.get_input_embeddings().weight.shape[1],
            generator_body.get_input_embeddings().weight.shape[1],
        )
        if width != generator_width:
            raise ValueError(
                f"the generator's embeddings are {generator_width} wide, the discriminator's {width}: they cannot be shared"
            )
        generator_body.embeddings = body.embeddings
        generator.tie_weights()  # the output layer follows the shared token embeddings
        self.base_model_prefix = f"discriminator.{discriminator.base_model_prefix}"
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
