"""Match declarative rules against parsed simple commands."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from fnmatch import fnmatchcase

from tether.governance.context import AnalysisContext
from tether.governance.paths import DYNAMIC, classify_path
from tether.governance.rules import Rule, name_matches
from tether.governance.shell_parse import SimpleCommand
from tether.governance.shell_words import flag_set, positional_args, subcommand, target_args

_Check = Callable[[Rule, SimpleCommand, AnalysisContext], bool]


def rule_matches(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    """True if every constraint of shell ``rule`` holds for ``cmd``.

    A command whose name is dynamic is judged as the worst command it could be:
    the ``command`` constraint is assumed to hold, but only for rules that also
    constrain something the command line does show (arguments, redirections,
    pipes); name-only rules cannot be decided from the arguments and are covered
    by the analyser's HIGH floor for dynamic commands instead.
    """
    if rule.kind != "shell" or not _name_ok(rule, cmd):
        return False
    if all(check(rule, cmd, ctx) for check in _CHECKS):
        return True
    return _with_unknown_options(rule, cmd, ctx)


def _with_unknown_options(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    """A word only known at run time may be any option, or several (``rm $opts ~``,
    ``rm $(echo -rf) ~``): a rule asking for options and a target holds if the
    command's known words meet its other constraints, the target among them."""
    if rule.flags_any is None or rule.args_any_target is None:
        return False
    words = cmd.args[: cmd.args.index("--")] if "--" in cmd.args else cmd.args
    if not any(word.startswith(DYNAMIC) for word in words):
        return False
    known = dataclasses.replace(cmd, args=tuple(a for a in cmd.args if DYNAMIC not in a))
    return all(check(rule, known, ctx) for check in _CHECKS if check is not _flags)


def _name_ok(rule: Rule, cmd: SimpleCommand) -> bool:
    if rule.command is None:
        return True
    if cmd.name is None:
        return rule.has_argument_constraints()
    return name_matches(cmd.name, rule.command)


def _any_name_matches(names: tuple[str | None, ...], patterns: tuple[str, ...]) -> bool:
    # A dynamic consumer (None) could be anything, including the patterns.
    return any(name is None or name_matches(name, patterns) for name in names)


def _classes_hit(words: list[str], cls: str, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    return any(cls in classify_path(word, cmd.cwd, ctx) for word in words)


def _subcommand(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    if rule.subcommand is None:
        return True
    return subcommand(cmd.args, rule.option_values) in rule.subcommand


def _flags(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    if rule.flags_any is None:
        return True
    flags = flag_set(cmd.args)
    if not flags.isdisjoint(rule.flags_any):
        return True
    # getopt_long takes any unambiguous start of a long option: rm --rec is --recursive.
    shortened = [f for f in flags if f.startswith("--") and len(f) > 2]
    return any(
        wanted.startswith(given)
        for wanted in rule.flags_any
        if wanted.startswith("--")
        for given in shortened
    )


def _args_any(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    if rule.args_any is None:
        return True
    return any(
        fnmatchcase(arg, pattern) for arg in positional_args(cmd.args) for pattern in rule.args_any
    )


def _arg_regex(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    if rule.arg_regex is None:
        return True
    return any(re.search(rule.arg_regex, arg) for arg in cmd.args)


def _argv_regex(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    if rule.argv_regex is None:
        return True
    return re.search(rule.argv_regex, " ".join(cmd.args)) is not None


def _args_target(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    if rule.args_any_target is None:
        return True
    return _classes_hit(target_args(cmd.args), rule.args_any_target, cmd, ctx)


def _dest_target(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    if rule.dest_target is None:
        return True
    positionals = positional_args(cmd.args)
    return bool(positionals) and _classes_hit(positionals[-1:], rule.dest_target, cmd, ctx)


def _kv_target(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    if rule.kv_target is None:
        return True
    for key, cls in rule.kv_target.items():
        values = [a.split("=", 1)[1] for a in cmd.args if a.startswith(key + "=")]
        if not _classes_hit(values, cls, cmd, ctx):
            return False
    return True


def _redirect_to(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    if rule.redirect_to is None:
        return True
    targets = [r.target for r in cmd.redirects if r.writes]
    return _classes_hit(targets, rule.redirect_to, cmd, ctx)


def _redirect_from(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    if rule.redirect_from is None:
        return True
    targets = [r.target for r in cmd.redirects if r.reads]
    return _classes_hit(targets, rule.redirect_from, cmd, ctx)


def _piped_into(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    if rule.piped_into is None:
        return True
    return _any_name_matches(cmd.pipe_into, rule.piped_into)


def _executed_by(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    if rule.executed_by is None:
        return True
    return _any_name_matches(cmd.executed_by, rule.executed_by)


def _self_spawning(rule: Rule, cmd: SimpleCommand, ctx: AnalysisContext) -> bool:
    return rule.self_spawning is None or rule.self_spawning == cmd.self_spawning


# Cheap checks first: most rules fail on flags or subcommand before any path work.
_CHECKS: tuple[_Check, ...] = (
    _subcommand,
    _flags,
    _self_spawning,
    _args_any,
    _executed_by,
    _piped_into,
    _arg_regex,
    _argv_regex,
    _kv_target,
    _redirect_to,
    _redirect_from,
    _dest_target,
    _args_target,
)
