"""Examples to masked batches: padding, the MLM collator, [MASK] augmentation, the Trainer callback, worker streams.

Its place in the one-way import order: masking → text → blocks → collate/labelled → train → use → recipes → experiments → cli.
"""
