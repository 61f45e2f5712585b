"""Experiments over many runs: one ``study`` crosses a grid into ordinary runs, one folder each.

:mod:`.grid` (axes, cells, their names) → :mod:`.runner` (claim, run, mark, rebuild the record)
→ :mod:`.study` (the cells' runs) with :mod:`.tuning` (fine-tuning and scoring) → :mod:`.stats`
(paired intervals, verdicts) → :mod:`.report` (the page).

Its place in the one-way import order: masking → text → blocks → collate/labelled → train → use → recipes → experiments → cli.
"""
