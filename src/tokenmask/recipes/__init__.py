"""The jobs for the training loop: pre-training and fine-tuning (with its classifier and divergence watch), and the augmentation comparison."""
