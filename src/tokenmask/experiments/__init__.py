"""Experiments over many runs: one ``study`` crosses a grid (:mod:`.grid`) into ordinary runs, one folder each
(:mod:`.runner`, :mod:`.study`, :mod:`.tuning`), compared with paired intervals (:mod:`.stats`) on one page (:mod:`.report`).

Its place in the one-way import order: masking → text → blocks → collate/labelled → train → use → recipes → experiments → cli.
"""
