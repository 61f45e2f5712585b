"""Pre-training by replaced-token detection (``--objective rtd``): what differs from masked-LM pre-training.

The masks, blocks and loop are :mod:`.pretrain`'s; this module builds the pair
(:class:`~tokenmask.train.detector.ReplacedTokenDetector`) new, from a resumed run's checkpoint,
or from a discriminator to continue (``--init``, with a new generator), scores it
(the generator at the run's fixed masks, the discriminator at fixed random replacements), and
moves the generator out of OUTPUT/model into OUTPUT/generator once the run is done.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from tokenmask.collate.collator import MaskingCollator
from tokenmask.files import fsync_folder
from tokenmask.hub import read_json
from tokenmask.masking.config import CorruptionConfig, MaskingConfig
from tokenmask.masking.vocab import VocabTables
from tokenmask.recipes.config import changed_detection_setting
from tokenmask.train.checkpoint import CARD_FILE
from tokenmask.train.detector import GENERATOR_FOLDER, LinearDiscriminator, ReplacedTokenDetector
from tokenmask.train.models import check_fits, open_checkpoint, quiet_load_report, require_encoder_weights
from tokenmask.train.names import Checkpoint
from tokenmask.train.presets import build_detector_parts, generator_config
from tokenmask.use.evaluate import evaluate_detector

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tokenmask.collate.pad import Feature
    from tokenmask.recipes.config import PretrainConfig


def check_objective_settings(config: PretrainConfig) -> None:
    """``ValueError`` for a replaced-token-detection setting changed in a masked-LM run (it would be ignored)."""
    if config.objective == "rtd":
        return
    changed = changed_detection_setting(config)
    if changed is not None:
        raise ValueError(f"{changed} is a setting of replaced-token detection: add --objective rtd, or leave it out")


def check_resumed_objective(checkpoint: Path, objective: str) -> None:
    """``ValueError`` when a resumed run's checkpoint was written under the other objective
    (a replaced-token detection checkpoint holds a ``generator`` subfolder)."""
    detector = (checkpoint / GENERATOR_FOLDER / "config.json").is_file()
    if detector and objective != "rtd":
        raise ValueError(f"--resume: {checkpoint} was written by a replaced-token detection run: resume it with --objective rtd")
    if not detector and objective == "rtd":
        raise ValueError(f"--resume: {checkpoint} was written by a masked-LM run: resume it without --objective rtd")


def check_detector_start(start: Checkpoint) -> None:
    """``ValueError`` unless ``start`` is an ELECTRA discriminator that replaced-token detection can
    continue (not another family, not an ELECTRA generator); reads its config only."""
    kind = start.config.get("model_type")
    if kind != "electra":
        raise ValueError(
            f"--objective rtd continues ELECTRA discriminators (an electra run's OUTPUT/model, "
            f"google/electra-small-discriminator…), not yet other families; {start.name} is a {kind}: pre-train it with "
            "the masked-LM objective"
        )
    if "ElectraForMaskedLM" in (start.config.get("architectures") or []):
        raise ValueError(
            f"{start.name} is an ELECTRA generator (a masked LM): --objective rtd continues a discriminator, "
            "e.g. the run's OUTPUT/model"
        )


def allowed_samples(vocab: VocabTables) -> torch.Tensor:
    """``(V,)`` bool: the ids a generator may sample, the replaceable ones (no specials, no [MASK], no ``[unused*]``)."""
    allowed = torch.zeros(vocab.size, dtype=torch.bool)
    allowed[torch.from_numpy(vocab.replaceable)] = True
    return allowed


def detector_model(
    config: PretrainConfig, vocab: VocabTables, *, pad_token_id: int | None, start: Checkpoint | None, checkpoint: Path | None
) -> tuple[ReplacedTokenDetector, tuple[str, ...]]:
    """The pair a run trains, and lines for the user.

    A resumed run's ``checkpoint`` holds both (the discriminator in the folder, the generator in
    its ``generator`` subfolder; safetensors). Else, from ``start`` (``--init``): its
    discriminator, an ELECTRA checkpoint (a new detection head where it has none), with a new
    generator ``generator_share`` as wide; else both new at the preset's size.

    Raises:
        ValueError: ``start`` is not an ELECTRA checkpoint, its encoder weights are missing, or
            it does not fit the tokenizer or the length.
    """
    from transformers import AutoModelForMaskedLM, ElectraForMaskedLM, ElectraForPreTraining

    allowed = allowed_samples(vocab)
    discriminator: Any
    generator: Any
    if checkpoint is not None:
        with quiet_load_report():
            if read_json(checkpoint / "config.json").get("model_type") == "modernbert":
                discriminator = LinearDiscriminator.from_pretrained(checkpoint)
            else:
                discriminator = ElectraForPreTraining.from_pretrained(checkpoint, use_safetensors=True)
            generator = AutoModelForMaskedLM.from_pretrained(checkpoint / GENERATOR_FOLDER, use_safetensors=True)
        return ReplacedTokenDetector(discriminator, generator, allowed), ()
    if start is None:
        discriminator, generator = build_detector_parts(
            config.preset, vocab_size=vocab.size, max_length=config.blocks.max_length, pad_token_id=pad_token_id,
            generator_share=config.generator_share,
        )  # fmt: skip
        return ReplacedTokenDetector(discriminator, generator, allowed), ()
    check_detector_start(start)
    discriminator, info = open_checkpoint(ElectraForPreTraining, start)
    require_encoder_weights(start.name, discriminator, info.get("missing_keys", ()))
    check_fits(discriminator, vocab_size=vocab.size, max_length=config.blocks.max_length, name=start.name)
    torch.manual_seed(config.loop.seed)  # the new generator (and a new head) start alike in every process
    generator = ElectraForMaskedLM(generator_config(discriminator.config, config.generator_share))
    head = "a new detection head and " if info.get("missing_keys") else ""
    note = f"continuing {start.name}'s discriminator with {head}a new generator {config.generator_share:g} as wide"
    return ReplacedTokenDetector(discriminator, generator, allowed), (*start.notes, note)


def replaced_collator(tokenizer: Any, masking: MaskingConfig, *, seed: int) -> MaskingCollator:
    """The fixed replacements the discriminator is scored on: the evaluation masks' targets
    (``masking`` at ``seed``), each replaced by a random token, the same at every evaluation."""
    corruption = CorruptionConfig(mask_replace_prob=0.0, random_replace_prob=1.0, per_unit=masking.corruption.per_unit)
    return MaskingCollator.from_config(tokenizer, replace(masking, corruption=corruption), seed=seed)


def detector_metrics(
    model: ReplacedTokenDetector, blocks: Sequence[Feature], collator: MaskingCollator, *, batch_size: int
) -> dict[str, float]:
    """``detector_accuracy``, ``detector_precision``, ``detector_recall`` (and counts) of the pair's discriminator."""
    device = next(model.parameters()).device
    scores = evaluate_detector(model.discriminator, blocks, collator, batch_size=batch_size, device=device)
    return {f"detector_{name}": value for name, value in scores.as_dict().items()}


def place_generator(output: Path, card: str) -> Path | None:
    """Move the generator a finished run saved in OUTPUT/model/generator to OUTPUT/generator, with its card.

    An OUTPUT/generator already there (a run resumed after it finished) is replaced by renames, as
    checkpoints are (a kill between them leaves ``.generator.previous-PID``, which a resumed run
    restores). The main process alone calls it. Returns the folder, or None when OUTPUT/model
    holds no generator.
    """
    output = Path(output)
    inside = output / "model" / GENERATOR_FOLDER
    if not inside.is_dir():
        return None
    (inside / CARD_FILE).write_text(card, encoding="utf-8")
    target = output / GENERATOR_FOLDER
    previous = output / f".{GENERATOR_FOLDER}.previous-{os.getpid()}"  # remove_leftovers restores it after a kill
    if target.exists():
        target.rename(previous)
    inside.rename(target)
    fsync_folder(output)
    shutil.rmtree(previous, ignore_errors=True)
    return target
