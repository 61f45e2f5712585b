"""The training loop and what only it uses: models and heads, schedule, processes, interrupts, checkpoints, run folders, logs.

Its place in the one-way import order: masking → text → blocks → collate/labelled → train → use → recipes → experiments → cli.
"""
