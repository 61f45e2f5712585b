"""Experiments over many runs: one ``study`` crosses a grid (:mod:`.grid`) into ordinary runs, one folder each
(:mod:`.runner`, :mod:`.study`, :mod:`.tuning`), compared with paired intervals (:mod:`.stats`) on one page
(:mod:`.report`). In the one-way import order: … → recipes → experiments → cli.
"""
