"""The two jobs for the training loop: pre-training (with its data, plateau guard and model cards) and fine-tuning
(with its data and divergence watch), each built from one typed config (:mod:`.config`).

:class:`Interrupted` is what a job raises when SIGINT or SIGTERM stopped it (after saving a
checkpoint): a caller that runs jobs (the command line, the experiments) catches it here.

Its place in the one-way import order: masking → text → blocks → collate/labelled → train → use → recipes → experiments → cli.
"""

from tokenmask.train.interrupt import Interrupted

__all__ = ["Interrupted"]
