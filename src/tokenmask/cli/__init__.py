"""The ``tokenmask`` command line: argv in, one library call per command, results out.

Its place in the one-way import order: masking → text → blocks → collate/labelled → train → use → recipes → experiments → cli.
"""

from tokenmask.cli.main import main

__all__ = ["main"]
