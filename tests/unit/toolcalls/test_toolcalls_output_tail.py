"""The end of a call's output (``?tail=``), cut from the pieces it came in."""

from __future__ import annotations

import pytest

from tether.toolcalls.call import CallOutput

PIECES = ["alpha\n", "", "beta\n", "gamma é\n"]
WHOLE = "".join(PIECES)


@pytest.mark.parametrize("chars", [1, 3, 8, 9, 13, 14, len(WHOLE), len(WHOLE) + 50])
def test_the_tail_is_the_end_of_the_whole_and_counts_the_rest(chars: int) -> None:
    sent, omitted = CallOutput(PIECES, False, None).tail(chars)
    assert sent == WHOLE[-chars:]
    assert omitted == len(WHOLE) - len(sent)


def test_no_output_has_an_empty_tail() -> None:
    assert CallOutput([], True, "success").tail(10) == ("", 0)
