"""The training loop and what only it uses: models and heads, schedule, processes, interrupts, checkpoints, run folders, logs."""
