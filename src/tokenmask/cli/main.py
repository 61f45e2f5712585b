"""``tokenmask``: parse argv, run one command, turn the user's errors into one line and exit code 2.

Heavy imports (torch, transformers) happen inside the commands (:mod:`tokenmask.cli.commands`),
so ``tokenmask --help`` is instant.
"""

from __future__ import annotations

import pickle
import shlex
import sys

from tokenmask.cli.parser import build_parser
from tokenmask.recipes import Interrupted  # signal and threading only: --help stays fast


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    args.command_line = shlex.join(["tokenmask", *argv])  # as typed, for the model cards
    try:
        return args.run(args)
    except (ValueError, OSError, UnicodeError) as error:
        # one line: a library's message may run on (transformers lists every model type it knows)
        print(
            f"tokenmask {args.command}: error: {str(error).splitlines()[0] if str(error) else type(error).__name__}",
            file=sys.stderr,
        )
        return 2
    except pickle.UnpicklingError as error:  # torch.load(weights_only=True) met more than tensors
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        print(f"tokenmask {args.command}: error: refused to unpickle a file holding more than tensors ({first})", file=sys.stderr)
        return 2
    except Interrupted as stop:
        print(f"tokenmask {args.command}: stopped: {stop}", file=sys.stderr)
        return stop.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
