"""Fine-tuning data: labelled examples read and split, labels aligned to sub-tokens, length-grouped batches.

Its place in the one-way import order: masking → text → blocks → collate/labelled → train → use → recipes → experiments → cli.
"""
