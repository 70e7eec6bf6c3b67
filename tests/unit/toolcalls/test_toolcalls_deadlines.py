"""Deadline arithmetic: initial deadlines, extension, removal and the tool's maximum."""

from __future__ import annotations

import pytest

from tether.toolcalls import deadlines as dl


def test_initial_uses_timeout_and_offload() -> None:
    d = dl.initial(100.0, timeout=10, max_timeout=60, offload_after=5)
    assert (d.kill_at, d.offload_at, d.max_timeout) == (110.0, 105.0, 60)
    assert d.next_due() == 105.0


def test_initial_caps_timeout_at_tool_maximum() -> None:
    assert dl.initial(0.0, timeout=500, max_timeout=60, offload_after=None).kill_at == 60.0


def test_initial_without_timeout_takes_the_maximum() -> None:
    assert dl.initial(0.0, timeout=None, max_timeout=30, offload_after=None).kill_at == 30.0


def test_initial_without_any_limit_never_fires() -> None:
    d = dl.initial(0.0, timeout=None, max_timeout=None, offload_after=None)
    assert d.next_due() is None
    assert d.remaining(5.0) == (None, None)


def test_remaining_is_never_negative() -> None:
    d = dl.initial(0.0, timeout=10, max_timeout=None, offload_after=2)
    assert d.remaining(1.0) == (1.0, 9.0)
    assert d.remaining(50.0) == (0.0, 0.0)


def test_extend_kill_moves_it_later() -> None:
    d = dl.initial(0.0, timeout=10, max_timeout=60, offload_after=None)
    assert dl.extend(d, "kill", 20, now=3.0).kill_at == 30.0


def test_extend_a_passed_deadline_counts_from_now() -> None:
    d = dl.initial(0.0, timeout=10, max_timeout=60, offload_after=None)
    assert dl.extend(d, "kill", 5, now=12.0).kill_at == 17.0


def test_extend_up_to_the_maximum_exactly_is_allowed() -> None:
    d = dl.initial(0.0, timeout=10, max_timeout=60, offload_after=None)
    assert dl.extend(d, "kill", 50, now=1.0).kill_at == 60.0


def test_extend_beyond_the_maximum_is_refused_with_what_is_left() -> None:
    d = dl.initial(0.0, timeout=10, max_timeout=60, offload_after=None)
    with pytest.raises(dl.DeadlineError, match="maximum of 60 s") as err:
        dl.extend(d, "kill", 51, now=1.0)
    assert "50 s can still be added" in str(err.value)


def test_removing_the_kill_deadline_needs_an_uncapped_tool() -> None:
    capped = dl.initial(0.0, timeout=10, max_timeout=60, offload_after=None)
    with pytest.raises(dl.DeadlineError, match="cannot run without a deadline"):
        dl.extend(capped, "kill", None, now=1.0)
    uncapped = dl.initial(0.0, timeout=10, max_timeout=None, offload_after=None)
    assert dl.extend(uncapped, "kill", None, now=1.0).kill_at is None


def test_extend_offload_sets_moves_and_removes() -> None:
    d = dl.initial(0.0, timeout=10, max_timeout=None, offload_after=None)
    d = dl.extend(d, "offload", 4, now=1.0)
    assert d.offload_at == 5.0
    assert dl.extend(d, "offload", 4, now=2.0).offload_at == 9.0
    assert dl.extend(d, "offload", None, now=2.0).offload_at is None


def test_extend_does_not_mutate_the_original() -> None:
    d = dl.initial(0.0, timeout=10, max_timeout=None, offload_after=None)
    dl.extend(d, "kill", 5, now=0.0)
    assert d.kill_at == 10.0
