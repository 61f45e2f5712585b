"""Experiments over many runs, on one sweep runner: the study (which masking pays) and the augmentation comparison.

Between the recipes (one run each) and the command line. :mod:`.sweep` runs a typed plan of
cells (:mod:`.plan`), each a recipe run in its own folder (:mod:`.cells`): one resume rule, one
finished-cell marker, ``jobs`` processes, one record. :mod:`.study` and :mod:`.compare`
declare their plans on it; :mod:`.report` is the self-contained HTML page both write.

Its place in the one-way import order: masking → text → blocks → collate/labelled → train → use → recipes → experiments → cli.
"""
