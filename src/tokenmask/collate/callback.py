"""Hugging Face ``Trainer`` integration: new masks every epoch, no augmentation at evaluation.

The ``Trainer`` never tells its data collator the epoch, and uses the same collator for
training and evaluation batches; this callback does both for tokenmask's collators.
"""

from __future__ import annotations

import logging

from transformers import TrainerCallback

from tokenmask.collate.augment import MaskingAugmenter
from tokenmask.collate.collator import MaskingCollator

logger = logging.getLogger(__name__)

_OWN_KEYS = ("id", "idx", "word_ids", "merged_word_ids", "term_mask", "special_tokens_mask", "given_spans", "protected_spans")


class MaskingCallback(TrainerCallback):
    """Keep a :class:`MaskingCollator` or :class:`MaskingAugmenter` in step with a ``Trainer``.

    - at each epoch: ``set_epoch(epoch)``, so the masks are the epoch's (dynamic masking), on
      every rank, in DataLoader workers that are not persistent, and after a resume;
    - with an augmenter: ``train()`` while training, ``eval()`` while the Trainer evaluates
      (during and after ``train()``; before a stand-alone ``trainer.evaluate()``, call
      ``augmenter.eval()`` yourself);
    - warns when ``remove_unused_columns=True``, which makes the Trainer drop the ``id``,
      ``word_ids``, … keys before the collator sees them, and when
      ``dataloader_persistent_workers=True``, whose workers never see ``set_epoch``.

    Example::

        collator = MaskingCollator(tokenizer, strategy="whole_word")
        args = TrainingArguments(..., remove_unused_columns=False)
        trainer = Trainer(model, args, train_dataset=data, data_collator=collator,
                          callbacks=[MaskingCallback(collator)])
    """

    def __init__(self, collator: MaskingCollator | MaskingAugmenter) -> None:
        self.collator = collator

    def _augment(self, on: bool) -> None:
        if isinstance(self.collator, MaskingAugmenter):
            self.collator.train(on)

    def on_train_begin(self, args, state, control, **kwargs):
        if getattr(args, "dataloader_persistent_workers", False) and getattr(args, "dataloader_num_workers", 0) > 0:
            logger.warning(
                "dataloader_persistent_workers=True: the DataLoader workers keep the collator they started with, "
                "so set_epoch never reaches them and every epoch gets the first one's masks; set "
                "dataloader_persistent_workers=False for new masks each epoch"
            )
        if getattr(args, "remove_unused_columns", False):
            logger.warning(
                "remove_unused_columns=True: the Trainer drops example keys the model does not "
                "take (%s), so masks fall back to content ids and decoder word starts; set "
                "remove_unused_columns=False to keep them",
                ", ".join(_OWN_KEYS),
            )
        self._augment(not getattr(args, "eval_on_start", False))

    def on_epoch_begin(self, args, state, control, **kwargs):
        self.collator.set_epoch(int(state.epoch + 1e-6) if state.epoch else 0)
        self._augment(True)

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_evaluate:  # the Trainer evaluates right after this step
            self._augment(False)

    on_epoch_end = on_step_end

    def on_evaluate(self, args, state, control, **kwargs):
        self._augment(True)

    def on_train_end(self, args, state, control, **kwargs):
        self._augment(False)
