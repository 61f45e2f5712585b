"""Fine-tuning data: labelled examples read and split, labels aligned to sub-tokens, length-grouped batches."""
