"""Analyse the text of any tool call's arguments: characters that make what a person
reads differ from what runs (bidi controls, invisible and look-alike characters)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from fnmatch import fnmatchcase
from functools import lru_cache
from itertools import islice

from tether.governance.findings import Finding
from tether.governance.rules import Rule

# Enough to say what was found and where; a description stays short.
_SHOWN_MATCHES = 4


def analyze_text(arguments: Mapping[str, object], rules: Sequence[Rule]) -> list[Finding]:
    """One finding per text rule that matches a string in ``arguments``."""
    findings = []
    for rule in rules:
        if rule.kind != "text" or rule.text_regex is None:
            continue
        pattern = _compiled(rule.text_regex)
        for name, text in _strings(arguments, rule.in_arguments):
            shown = list(islice(pattern.finditer(text), _SHOWN_MATCHES))
            if shown:
                where = ", ".join(f"{_describe(m.group())} at {m.start()}" for m in shown)
                findings.append(
                    Finding(rule.id, rule.severity, f"{rule.description}: {name}: {where}")
                )
                break
    return findings


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _strings(
    arguments: Mapping[str, object], names: tuple[str, ...] | None
) -> Iterator[tuple[str, str]]:
    """(argument name, string) for every string under the chosen arguments, nested
    lists and objects included."""
    for name, value in arguments.items():
        if names is None or any(fnmatchcase(name, n) for n in names):
            yield from ((name, text) for text in _nested_strings(value))


def _nested_strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str):
                yield key
            yield from _nested_strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _nested_strings(item)


def _describe(found: str) -> str:
    """Code points, named, so the description shows what is invisible in the text."""
    return " ".join(
        f"U+{ord(ch):04X}" + (f" {unicodedata.name(ch)}" if unicodedata.name(ch, "") else "")
        for ch in found
    )
