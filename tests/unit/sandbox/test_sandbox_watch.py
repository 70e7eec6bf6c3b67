"""The watcher: it records peaks, ends a call that passed a limit, and keeps trying to
release a group that is still held."""

from __future__ import annotations

import asyncio

from tether.sandbox.limits import Limits, Usage
from tether.sandbox.watch import CallWatch, Watcher


class FakeGroup:
    """A group whose readings a test feeds, and that is held for a few close attempts."""

    def __init__(self, readings: list[Usage], held_for: int = 0) -> None:
        self.readings = readings
        self.held_for = held_for
        self.read_count = 0
        self.closed = asyncio.Event()
        self._loop = asyncio.get_running_loop()

    def join(self) -> None:
        return None

    def attach(self, pid: int) -> None:
        return None

    def read(self) -> Usage:
        self.read_count += 1
        return self.readings[min(self.read_count, len(self.readings)) - 1]

    def members(self) -> list[int]:
        return []

    def close(self) -> bool:
        if self.held_for > 0:
            self.held_for -= 1
            return False
        self._loop.call_soon_threadsafe(self.closed.set)
        return True


async def _killed(watch: CallWatch) -> None:
    while watch.killed_by is None:
        await asyncio.sleep(0.001)


async def test_a_cpu_limit_passed_between_readings_ends_the_call() -> None:
    group = FakeGroup([Usage(cpu_seconds=0.5, processes=3), Usage(cpu_seconds=2.5, processes=5)])
    watcher = Watcher(interval=0.001)
    watch = CallWatch(group, Limits(256, 64, 2.0))
    watcher.add(watch)
    await asyncio.wait_for(_killed(watch), 5)
    resources = await watcher.finish(watch, ran=True)
    assert resources.killed_by == "cpu"
    assert resources.processes_peak == 5 and resources.cpu_seconds == 2.5
    assert resources.limit_note() == "stopped: CPU time limit 2 s reached"
    assert resources.as_dict().keys() == {
        "peak_memory_bytes",
        "cpu_seconds",
        "processes_peak",
        "killed_by",
    }
    await watcher.close()


async def test_a_held_group_is_released_later() -> None:
    group = FakeGroup([Usage(processes=1)], held_for=2)
    watcher = Watcher(interval=0.001)
    watch = CallWatch(group, Limits())
    watcher.add(watch)
    resources = await watcher.finish(watch, ran=True)
    assert resources.killed_by is None and resources.limit_note() is None
    await asyncio.wait_for(group.closed.wait(), 5)
    await watcher.close()


async def test_an_idle_call_is_read_less_and_less_often_up_to_a_cap() -> None:
    watch = CallWatch(FakeGroup([]), Limits())
    gaps = []
    for step in range(8):
        watch.schedule(Usage(processes=1), now=100.0 * step)
        gaps.append(round(watch.due - 100.0 * step, 3))
    assert gaps == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0]


async def test_a_call_whose_processes_change_is_read_soon_again() -> None:
    watch = CallWatch(FakeGroup([]), Limits())
    for step in range(6):
        watch.schedule(Usage(processes=1), now=float(step))
    watch.schedule(Usage(processes=4), now=10.0)
    assert watch.due == 10.1


async def test_a_call_near_its_cpu_limit_is_read_before_it_could_pass_it() -> None:
    watch = CallWatch(FakeGroup([]), Limits(cpu_seconds=60.0))
    for step in range(10):
        watch.schedule(Usage(processes=1, cpu_seconds=1.0), now=float(step))
    assert watch.due - 9.0 == 2.0  # far from the limit: the cap
    watch.schedule(Usage(processes=1, cpu_seconds=59.5), now=20.0)
    # Half a CPU second left: at most that long on one core, less on several.
    assert 20.1 <= watch.due <= 20.5


async def test_with_many_calls_even_a_moving_one_waits_longer_but_not_past_its_cpu() -> None:
    watch = CallWatch(FakeGroup([]), Limits(cpu_seconds=60.0))
    # A thousand calls in flight: the loop reads a moving call once a second.
    watch.schedule(Usage(processes=2, cpu_seconds=1.0), now=0.0, tick=0.1, shortest=1.0)
    assert watch.due == 1.0
    watch.schedule(Usage(processes=2, cpu_seconds=59.9), now=5.0, tick=0.1, shortest=1.0)
    assert watch.due == 5.1


async def test_a_call_using_cpu_is_read_at_the_shortest_gap() -> None:
    # cgroup v2 may report the peak process count, which stops changing: CPU use moves too.
    watch = CallWatch(FakeGroup([]), Limits())
    for step in range(6):
        watch.schedule(Usage(processes=3, cpu_seconds=0.5 * step), now=float(step))
    assert watch.due == 5.1
