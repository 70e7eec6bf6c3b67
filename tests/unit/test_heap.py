"""What settling the heap changes in the garbage collector (process-wide, so it runs in a
fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys

_SETTLE = """
import gc
from tether import heap
default = gc.get_threshold()
heap.settle()
print(gc.get_freeze_count() > 0, gc.get_threshold() == (10_000, *default[1:]))
"""


def test_a_settled_process_freezes_start_up_and_collects_young_objects_less_often() -> None:
    done = subprocess.run([sys.executable, "-c", _SETTLE], capture_output=True, text=True)
    assert done.stdout.split() == ["True", "True"], done.stderr
