"""User rules: validated, persisted, and put in force in the analyser at once."""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from tether.errors import Invalid
from tether.governance.analyzer import Analyzer
from tether.governance.rules import Rule, load_builtin_rules, parse_rules
from tether.store.governance import GovernanceRepository

log = logging.getLogger(__name__)


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

    async def load(self) -> None:
        """Put the stored user rules in force (at start-up)."""
        stored = await self._repo.get_user_rules()
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
        await self._repo.set_user_rules([rule_data(r) for r in rules])
        self._analyzer.set_user_rules(rules)
        return rules
