"""Valid Unicode where text enters.

JSON can carry an unpaired UTF-16 surrogate (the escape ``\\ud83d``, half an emoji), and
Python's ``json`` turns it into a str that cannot be encoded as UTF-8: stored or sent
on, it makes every later read of it fail. Text from models, clients and stored JSON is
passed through here, which replaces each unpaired surrogate with U+FFFD and joins
halves of a pair that arrived apart.
"""

from __future__ import annotations

from typing import Any

REPLACEMENT = "\ufffd"


def storable(text: str) -> str:
    """``text`` with U+FFFD for each NUL: PostgreSQL keeps no NUL in text (nor in JSON),
    so a value holding one could not be stored there; it reads the same everywhere."""
    return text.replace("\x00", REPLACEMENT) if "\x00" in text else text


def valid_text(text: str) -> str:
    """``text`` as valid, storable Unicode (unchanged, and not copied, when it already
    is): unpaired surrogates and NUL become U+FFFD."""
    if text.isascii():
        return storable(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # UTF-16 pairs up the surrogates that belong together; decoding replaces the rest.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return storable(text)


def valid_data(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, strings, scalars) with every string, keys
    included, made valid Unicode."""
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {valid_text(k) if isinstance(k, str) else k: valid_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [valid_data(v) for v in value]
    return value


def may_hold_surrogates(json_text: str | bytes) -> bool:
    """Whether JSON text could decode to an unpaired surrogate: a cheap test that lets
    the common case skip :func:`valid_data`. In text, only an escape can make one (a str
    read as strict UTF-8 holds none); ``json.loads`` decodes bytes with surrogatepass,
    so in bytes any non-ASCII byte might."""
    if isinstance(json_text, bytes):
        return not json_text.isascii() or b"\\ud" in json_text or b"\\uD" in json_text
    return "\\ud" in json_text or "\\uD" in json_text
