"""The ``tokenmask`` command line: argv in, one library call per command, results out."""

from tokenmask.cli.main import main

__all__ = ["main"]
