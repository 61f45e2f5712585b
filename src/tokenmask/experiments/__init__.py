"""Experiments over many runs, on one sweep runner: the study (which masking pays) and the augmentation comparison.

Between the recipes (one run each) and the command line. :mod:`.sweep` runs a typed plan of
cells, each a recipe run in its own folder: one resume rule, one finished-cell marker, ``jobs``
processes, one record. :mod:`.study` and :mod:`.compare` declare their plans on it;
:mod:`.report` is the self-contained HTML page both write.
"""
