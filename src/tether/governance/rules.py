"""Declarative governance rules: the pydantic schema, the built-in rule file, validation.

A rule is data. Shell rules match a parsed simple command (its name, arguments,
redirections and what consumes its output); file rules match a file-tool access
(operation and path class); tool rules match a tool's name; text rules match
characters in the strings of any tool call's arguments. Every constraint present must
hold (AND); inside a list any entry may match (OR).
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from fnmatch import fnmatchcase
from functools import cache, lru_cache
from importlib import resources
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    TypeAdapter,
    model_validator,
)

from tether.governance.findings import Severity
from tether.governance.paths import PathClass

FileOp = Literal["read", "write", "edit"]

SeverityField = Annotated[
    Severity,
    BeforeValidator(Severity.parse),
    PlainSerializer(lambda s: s.name, return_type=str),
]
Patterns = tuple[Annotated[str, Field(min_length=1, max_length=200)], ...]

# Fields that only make sense for one kind of rule.
_SHELL_MATCHERS = (
    "command",
    "subcommand",
    "flags_any",
    "args_any",
    "arg_regex",
    "argv_regex",
    "args_any_target",
    "dest_target",
    "kv_target",
    "redirect_to",
    "redirect_from",
    "piped_into",
    "executed_by",
    "self_spawning",
)
_FILE_MATCHERS = ("ops", "path_target", "path_glob")
_TOOL_MATCHERS = ("tool",)
_TEXT_MATCHERS = ("text_regex",)
_MATCHERS = {
    "shell": _SHELL_MATCHERS,
    "file": _FILE_MATCHERS,
    "tool": _TOOL_MATCHERS,
    "text": _TEXT_MATCHERS,
}
# Matchers that hold a regex (checked when the rule is loaded).
_REGEX_FIELDS = ("arg_regex", "argv_regex", "text_regex")
# Matchers that look at patterns of command names (and so may use @sets).
_NAME_PATTERN_FIELDS = ("command", "piped_into", "executed_by")

_BUILTIN_RESOURCE = "builtin_rules.toml"


class Rule(BaseModel):
    """One governance rule.

    Shell matchers (``kind = "shell"``):

    - ``command``: command names (basename, fnmatch patterns, ``@set`` references).
      Absent means any command.
    - ``subcommand``: the first positional argument (``git push``); options listed
      in ``option_values`` consume the next word and are skipped while locating it.
    - ``flags_any``: options; combined short flags are split (``-rf`` has ``-r``).
    - ``args_any``: fnmatch patterns, any positional argument matches.
    - ``arg_regex``: regex searched in each argument; ``argv_regex``: in all
      arguments joined by single spaces.
    - ``args_any_target`` / ``dest_target``: path class of any target argument /
      of the last positional argument (the destination of cp, mv, ...).
    - ``kv_target``: path class of the value of ``key=value`` arguments (dd ``of=``).
    - ``redirect_to`` / ``redirect_from``: path class of an output / input redirection.
    - ``piped_into``: command patterns anywhere downstream of the command's output.
    - ``executed_by``: command patterns that execute the output as code
      (``curl ... | sh``, ``bash <(curl ...)``, ``eval "$(...)"``).
    - ``self_spawning``: the command re-invokes its enclosing function in a pipe or
      in the background (fork bomb).

    File matchers (``kind = "file"``): ``ops``, ``path_target`` (path class of the
    resolved path), ``path_glob`` (fnmatch on the resolved path or its basename).

    Tool matchers (``kind = "tool"``): ``tool``, fnmatch patterns on the tool's name as
    the model sees it (``github__create_issue``, ``github__*``), for MCP tools above all.

    Text matchers (``kind = "text"``, any tool): ``text_regex``, searched in every
    string of the call's arguments, or only in those under the argument names listed
    in ``in_arguments`` (fnmatch patterns).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,99}$")
    severity: SeverityField
    description: str = Field(min_length=1, max_length=500)
    kind: Literal["shell", "file", "tool", "text"] = "shell"

    command: Patterns | None = None
    subcommand: Patterns | None = None
    option_values: Patterns = ()
    flags_any: Patterns | None = None
    args_any: Patterns | None = None
    arg_regex: str | None = None
    argv_regex: str | None = None
    args_any_target: PathClass | None = None
    dest_target: PathClass | None = None
    kv_target: dict[Annotated[str, Field(min_length=1)], PathClass] | None = None
    redirect_to: PathClass | None = None
    redirect_from: PathClass | None = None
    piped_into: Patterns | None = None
    executed_by: Patterns | None = None
    self_spawning: bool | None = None

    ops: tuple[FileOp, ...] | None = None
    path_target: PathClass | None = None
    path_glob: Patterns | None = None

    tool: Patterns | None = None

    text_regex: str | None = None
    in_arguments: Patterns | None = None

    @model_validator(mode="after")
    def _check_consistency(self) -> Rule:
        own = _MATCHERS[self.kind]
        misplaced = [
            name
            for kind, names in _MATCHERS.items()
            if kind != self.kind
            for name in names
            if getattr(self, name) is not None
        ]
        if self.in_arguments is not None and self.kind != "text":
            misplaced.append("in_arguments")
        if misplaced:
            raise ValueError(f"{self.kind} rule cannot use {', '.join(misplaced)}")
        if all(getattr(self, name) is None for name in own):
            raise ValueError(f"{self.kind} rule needs at least one of: {', '.join(own)}")
        for name in _REGEX_FIELDS:
            pattern = getattr(self, name)
            if pattern is not None:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(f"{name} is not a valid regex: {exc}") from exc
        for name in _NAME_PATTERN_FIELDS:
            for pattern in getattr(self, name) or ():
                if pattern.startswith("@") and pattern[1:] not in command_sets():
                    known = ", ".join("@" + s for s in sorted(command_sets()))
                    raise ValueError(f"{name}: unknown command set {pattern!r} (known: {known})")
        return self

    def has_argument_constraints(self) -> bool:
        """True if the rule says something beyond the command name.

        Used for commands whose name is dynamic: only the other constraints can
        be checked against what the command line actually contains.
        """
        return any(getattr(self, name) is not None for name in _SHELL_MATCHERS if name != "command")


_RULE_LIST = TypeAdapter(list[Rule])


@cache
def _builtin_document() -> Mapping[str, Any]:
    text = resources.files("tether.governance").joinpath(_BUILTIN_RESOURCE).read_text("utf-8")
    return tomllib.loads(text)


@cache
def command_sets() -> Mapping[str, tuple[str, ...]]:
    """Named command sets (``@shells``, ``@downloaders``...) from the built-in rule file."""
    raw = _builtin_document().get("command_sets", {})
    return {name: tuple(members) for name, members in raw.items()}


@cache
def _builtin_rules() -> tuple[Rule, ...]:
    rules = tuple(_RULE_LIST.validate_python(_builtin_document().get("rules", [])))
    _check_unique_ids(rules)
    return rules


def load_builtin_rules() -> list[Rule]:
    """The packaged built-in rules (parsed and validated once, then cached)."""
    return list(_builtin_rules())


def parse_rules(data: list[dict[str, Any]]) -> list[Rule]:
    """Validate user rules (same schema as the built-in file).

    Raises pydantic.ValidationError for a malformed rule, or ValueError for
    duplicate ids or ids that collide with a built-in rule.
    """
    rules = _RULE_LIST.validate_python(data)
    _check_unique_ids(rules)
    builtin_ids = {rule.id for rule in _builtin_rules()}
    clashes = sorted(rule.id for rule in rules if rule.id in builtin_ids)
    if clashes:
        raise ValueError(f"rule ids reserved by built-in rules: {', '.join(clashes)}")
    return rules


def _check_unique_ids(rules: tuple[Rule, ...] | list[Rule]) -> None:
    seen: set[str] = set()
    for rule in rules:
        if rule.id in seen:
            raise ValueError(f"duplicate rule id {rule.id!r}")
        seen.add(rule.id)


@lru_cache(maxsize=1024)
def _compile_patterns(patterns: tuple[str, ...]) -> tuple[frozenset[str], tuple[str, ...]]:
    """Split patterns (with @sets expanded) into exact names and glob patterns."""
    expanded: list[str] = []
    for pattern in patterns:
        if pattern.startswith("@"):
            expanded.extend(command_sets().get(pattern[1:], ()))
        else:
            expanded.append(pattern)
    exact = frozenset(p for p in expanded if not any(c in p for c in "*?["))
    globs = tuple(p for p in expanded if p not in exact)
    return exact, globs


@lru_cache(maxsize=16384)
def name_matches(name: str, patterns: tuple[str, ...]) -> bool:
    """True if command ``name`` matches one of ``patterns`` (fnmatch, ``@set`` aware)."""
    exact, globs = _compile_patterns(patterns)
    return name in exact or any(fnmatchcase(name, g) for g in globs)


@lru_cache(maxsize=4096)
def in_command_set(name: str, set_name: str) -> bool:
    """True if ``name`` belongs to the built-in command set ``set_name``."""
    return name_matches(name, ("@" + set_name,))
