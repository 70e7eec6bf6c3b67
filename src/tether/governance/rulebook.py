"""User rules: validated, persisted, and put in force in the analyser at once; rules
another node (or another version of this one) stored are brought in within a second."""

from __future__ import annotations

import logging
import time
from typing import Any

from pydantic import ValidationError

from tether.errors import Invalid
from tether.governance.analyzer import Analyzer
from tether.governance.rules import Rule, load_builtin_rules, parse_rules
from tether.store.governance import GovernanceRepository

log = logging.getLogger(__name__)

#: How long the rules in force are taken as the store's before it is read again: a
#: node on a shared database applies another's edit (a new deny rule, say) this late.
_FRESH_FOR = 1.0


class InvalidRules(Invalid):
    """The rules given do not validate; the message says which and why."""


def rule_data(rule: Rule) -> dict[str, Any]:
    """A rule as JSON-ready data, in the same shape a user submits."""
    data = rule.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    return {"id": rule.id, "kind": rule.kind, **data}


def _explain(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"])
        parts.append(f"rules.{where}: {error['msg']}")
    return "; ".join(parts)


class RuleBook:
    """The built-in rules (read-only) and the user rules (replaceable at run time)."""

    def __init__(self, analyzer: Analyzer, repo: GovernanceRepository) -> None:
        self._analyzer = analyzer
        self._repo = repo
        #: The stored rules last put in force, and when the store was last read.
        self._applied: list[dict[str, Any]] | None = None
        self._read_at = float("-inf")

    async def load(self) -> None:
        """Put the stored user rules in force (at start-up)."""
        self._read_at = time.monotonic()
        self._apply(await self._repo.get_user_rules())

    async def fresh(self) -> None:
        """Bring the rules in force up to date with the store, reading it at most once
        every _FRESH_FOR seconds (called before each call is judged)."""
        now = time.monotonic()
        if now - self._read_at < _FRESH_FOR:
            return
        self._read_at = now
        stored = await self._repo.get_user_rules()
        if stored != self._applied:
            self._apply(stored)

    def _apply(self, stored: list[dict[str, Any]]) -> None:
        self._applied = stored
        try:
            self._analyzer.set_user_rules(parse_rules(stored))
        except (ValidationError, ValueError) as exc:
            # A stored rule that no longer validates (e.g. a new built-in took its id)
            # is left out rather than blocking start-up; the built-in rules still apply.
            log.error("stored governance user rules ignored: %s", exc)

    def builtin(self) -> list[dict[str, Any]]:
        """The packaged rules, which cannot be changed at run time."""
        return [rule_data(r) for r in load_builtin_rules()]

    def user(self) -> list[dict[str, Any]]:
        """The user rules in force."""
        return [rule_data(r) for r in self._analyzer.user_rules]

    async def replace(self, data: list[dict[str, Any]]) -> list[Rule]:
        """Validate, store and apply new user rules. Raises InvalidRules."""
        try:
            rules = parse_rules(data)
        except ValidationError as exc:
            raise InvalidRules(f"invalid rules: {_explain(exc)}") from None
        except ValueError as exc:
            raise InvalidRules(f"invalid rules: {exc}") from None
        stored = [rule_data(r) for r in rules]
        await self._repo.set_user_rules(stored)
        self._applied = stored
        self._analyzer.set_user_rules(rules)
        return rules
