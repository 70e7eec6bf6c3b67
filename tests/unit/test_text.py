"""Making text valid Unicode (tether.text)."""

from __future__ import annotations

from tether.text import REPLACEMENT, may_hold_surrogates, valid_data, valid_text


def test_valid_text_is_returned_as_is() -> None:
    for text in ("", "plain", "ünïcødé 会话 😀"):
        assert valid_text(text) is text


def test_unpaired_surrogates_become_replacement_characters() -> None:
    assert valid_text("a\ud83db") == f"a{REPLACEMENT}b"
    assert valid_text("\ude00 and \ud83d") == f"{REPLACEMENT} and {REPLACEMENT}"


def test_halves_of_a_pair_that_arrived_apart_join_up() -> None:
    assert valid_text("\ud83d" + "\ude00") == "😀"


def test_valid_data_reaches_nested_strings_and_keys() -> None:
    data = {"k\ud83d": ["x\ud83d", {"n": 1, "s": "\ud83d"}], "b": None}
    assert valid_data(data) == {
        f"k{REPLACEMENT}": [f"x{REPLACEMENT}", {"n": 1, "s": REPLACEMENT}],
        "b": None,
    }


def test_the_cheap_test_catches_what_json_can_turn_into_a_surrogate() -> None:
    assert may_hold_surrogates('"\\ud83d"')
    assert may_hold_surrogates(b'"\\uD83D"')
    assert may_hold_surrogates('"😀"'.encode())  # non-ASCII bytes: decoded with surrogatepass
    assert not may_hold_surrogates('"plain \\u00e9"')
    assert not may_hold_surrogates(b'{"a": "plain"}')
