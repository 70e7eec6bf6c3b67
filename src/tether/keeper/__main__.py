"""``python -m tether.keeper --home DIR [--ready-fd N]``: run the runner in the
foreground (the server starts it detached; see :func:`client.ensure_runner`)."""

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
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    return serve(args.home.resolve(), args.ready_fd)


if __name__ == "__main__":
    sys.exit(main())
