"""What a late import leaves to the garbage collector.

Freezing is process-wide, so each case runs in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys

# Prints, after a late import of a module nobody imported yet: how many objects are
# frozen, whether the module's own class is still tracked by the collector's
# generations, and whether the import happened at all.
_LATE_IMPORT = """
import asyncio, gc, sys
from tether import heap, late_imports
if sys.argv[1] == "settled":
    heap.settle()
before = gc.get_freeze_count()
assert "xml.dom.minidom" not in sys.modules
asyncio.run(late_imports.load("xml.dom.minidom"))
document = sys.modules["xml.dom.minidom"].Document
tracked = any(o is document for o in gc.get_objects())
print(gc.get_freeze_count() > before, tracked)
"""


def _late_import(mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _LATE_IMPORT, mode], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_a_late_import_in_a_settled_server_is_kept_out_of_later_collections() -> None:
    assert _late_import("settled") == "True False"


def test_a_process_that_never_settled_freezes_nothing() -> None:
    # Tests build many apps in one process: nothing of theirs may be kept for good.
    assert _late_import("unsettled") == "False True"


_SETTLE = """
import gc
from tether import heap
default = gc.get_threshold()
heap.settle()
print(default[0], gc.get_threshold()[0], default[1:] == gc.get_threshold()[1:])
"""


def test_a_settled_process_collects_its_young_objects_less_often() -> None:
    done = subprocess.run([sys.executable, "-c", _SETTLE], capture_output=True, text=True)
    assert done.stdout.split() == ["700", "10000", "True"]
