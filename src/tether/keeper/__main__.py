"""``python -m tether.keeper --home DIR [--ready-fd N] [--idle-exit SECONDS]``: run the
runner in the foreground (the server starts it detached, with its
TETHER_KEEPER_IDLE_EXIT_SECONDS; see :func:`client.ensure_runner`). Without
``--idle-exit`` it runs until it is stopped."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from tether.keeper.runner import serve


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run until the runner retires or is stopped."""
    parser = argparse.ArgumentParser(prog="tether-runner")
    parser.add_argument("--home", required=True, type=Path)
    parser.add_argument("--ready-fd", type=int, default=None)
    parser.add_argument("--idle-exit", type=float, default=None, metavar="SECONDS")
    args = parser.parse_args(argv)
    if args.idle_exit is not None and args.idle_exit <= 0:
        parser.error("--idle-exit must be more than 0 seconds")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    return serve(args.home.resolve(), args.ready_fd, args.idle_exit)


if __name__ == "__main__":
    sys.exit(main())
