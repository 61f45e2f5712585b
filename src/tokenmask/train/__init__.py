"""Models, the training loop, evaluation and checkpoints: the only place with models and optimizers."""
