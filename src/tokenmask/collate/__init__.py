"""Examples to masked batches: padding, the MLM collator, [MASK] augmentation, the Trainer callback, worker streams."""
