"""The languages other programs run command lines from: vim's ex commands, makefiles,
Tcl, and the words of interpreter code (pure functions, no parsing of shell)."""

from __future__ import annotations

import pytest

from tether.governance.carried_scripts import (
    Program,
    code_scripts,
    option_scripts,
    program_file_names,
    programs_read,
    shell_strings_in_code,
    tcl_scripts,
    variable_scripts,
)
from tether.governance.ex_commands import ex_command_scripts, ex_scripts, key_scripts
from tether.governance.makefiles import make_scripts, makefile_scripts
from tether.governance.paths import DYNAMIC
from tether.governance.shell_words import UNKNOWN_VARIABLE


@pytest.mark.parametrize(
    ("command", "scripts"),
    [
        ("!rm -rf ~", ["rm -rf ~"]),
        (":!ls | wc -l", ["ls | wc -l"]),  # the '|' is the shell's
        ("r !date", ["date"]),
        ("read!date", ["date"]),
        ("w !sh", ["sh"]),
        ("%!sort", ["sort"]),
        ("g/^/!echo hi", ["echo hi"]),
        ("wq | !touch x", ["touch x"]),
        ("bufdo !touch x", ["touch x"]),
        ("silent! !touch x", ["touch x"]),
        ("e `touch x`", ["touch x"]),
        ("e +!touch\\ x file", ["touch x"]),
        ("%s/a/b/g|wq", []),
        ("s/a|b/c/|w", []),  # :s reads its own '|' in the pattern
        ("set ff=unix nonumber", []),
        ("normal! gg=G", []),
        ("g/^$/d", []),
        ("x", []),
        ("1,$d", []),
    ],
)
def test_ex_commands_run_what_they_name(command: str, scripts: list[str]) -> None:
    assert ex_command_scripts(command) == scripts


@pytest.mark.parametrize(
    "command",
    [
        "call system('x')",
        "exe '!x'",
        "let x = system('x')",
        "s/a/\\=system('x')/",
        "py3 import os",
        "lua os.execute('x')",
        "so x.vim",
        "ter x",
        "mak",
        "grep x",
        "sh",
        "au BufRead * !x",
        "nmap x :!y<CR>",
        "set shell=/tmp/x",
        "set foldexpr=system('x')",
        "e `=system('x')`",
        "normal Q",
        "PlugInstall",
    ],
)
def test_ex_commands_that_may_run_anything_are_unknown(command: str) -> None:
    assert DYNAMIC in ex_command_scripts(command)


def test_vim_puts_file_names_and_the_last_command_in_a_shell_command() -> None:
    assert ex_command_scripts("!rm -rf %") == [f"rm -rf {UNKNOWN_VARIABLE}"]


def test_an_ex_script_skips_the_text_append_and_insert_take() -> None:
    assert ex_scripts("1i\n!not a command\n.\n!touch x\nwq\n") == ["touch x"]


def test_keys_run_the_command_lines_after_a_colon() -> None:
    assert key_scripts(":!touch x\r:q\r") == ["touch x"]
    assert key_scripts("ihello!") == [DYNAMIC]  # ! may be the filter operator


@pytest.mark.parametrize(
    ("args", "scripts"),
    [
        (["-c", "!x", "-c", "q"], ["x"]),
        (["+!x"], ["x"]),
        (["+42", "+/pattern", "f"], []),
        (["--cmd", "silent !x"], ["x"]),
        (["--remote-send", ":!x<CR>"], [DYNAMIC]),
        (["--version"], []),
    ],
)
def test_vim_runs_its_command_line(args: list[str], scripts: list[str]) -> None:
    assert option_scripts("vim", args) == scripts


def test_vim_reads_keys_commands_or_text_on_stdin() -> None:
    assert programs_read("vim", ["file"]) == [Program("keys")]
    assert programs_read("vim", ["-es"]) == [Program("ex")]
    assert programs_read("ex", []) == [Program("ex")]
    assert programs_read("vim", ["-R", "-"]) == []  # the text to edit
    assert programs_read("vim", ["-S", "s.vim", "-"]) == [Program("ex", 1)]
    assert Program("sh") in programs_read("vim", ["-es", "-c", "%!sh", "-"])


@pytest.mark.parametrize(
    ("text", "scripts"),
    [
        ("all:; rm -rf x", ["rm -rf x"]),
        ("all:\n\t@-rm -rf x\n", ["rm -rf x"]),
        ("R = rm -rf x\nall:\n\t$(R) y", ["rm -rf x y"]),
        ("all:\n\t$(RM) y", ["rm -f y"]),  # make's default
        ("X := $(shell touch x)", ["touch x"]),
        ("X != touch x", ["touch x"]),
        ("all:\n\techo $$HOME $@", [f"echo $HOME {UNKNOWN_VARIABLE}"]),
        ("SHELL := /bin/bash\n.SHELLFLAGS := -eu -o pipefail -c\nall:; true", ["true"]),
        ("CC = gcc\napp: main.o\n\t$(CC) -o app main.o", ["gcc -o app main.o"]),
    ],
)
def test_a_makefile_runs_its_recipes_and_shell_calls(text: str, scripts: list[str]) -> None:
    assert makefile_scripts(text) == scripts


@pytest.mark.parametrize(
    "text",
    [
        "all:\n\t$(eval $(X))",
        "SHELL = /tmp/x",
        ".SHELLFLAGS = -c 'touch x'",
        "load ./x.so",
        ".RECIPEPREFIX = >\nall:\n>touch x",
    ],
)
def test_a_makefile_that_decides_at_run_time_what_runs_is_unknown(text: str) -> None:
    assert DYNAMIC in makefile_scripts(text)


def test_make_runs_its_command_line() -> None:
    assert make_scripts("make", ["--eval=all:; touch x"]) == ["touch x"]
    assert make_scripts("make", ["-E", "all:; touch x"]) == ["touch x"]
    assert make_scripts("make", ["RM=rm -rf x", "clean"]) == ["rm -rf x"]
    assert make_scripts("make", ["X!=touch x"]) == ["touch x"]
    assert make_scripts("make", ["-j4", "test", "V=1"]) == ["1"]
    assert make_scripts("make", ["SHELL=/bin/bash"]) == []
    assert make_scripts("make", ["SHELL=/tmp/x"]) == [DYNAMIC]
    assert make_scripts("make", ["MAKEFLAGS=--eval=all:;touch\\ x"]) == ["touch x"]


def test_make_reads_makefiles_from_files_and_stdin() -> None:
    assert programs_read("make", ["-f", "-"]) == [Program("make")]
    assert programs_read("make", ["-f/dev/stdin"]) == [Program("make")]
    assert programs_read("make", ["--file=build.mk"]) == [Program("make", 0)]
    assert program_file_names("make", ["-C", "sub"])[-1] == ("sub/Makefile", "make")
    assert programs_read("gawk", ["-f", "-", "data"]) == [Program("awk")]
    assert programs_read("sed", ["-nf", "s.sed", "f"]) == [Program("sed", 1)]


@pytest.mark.parametrize(
    ("code", "scripts"),
    [
        ("exec rm -rf x", ["rm -rf x"]),
        ("set x [exec sh -c {touch x}]", ["sh -c 'touch x'"]),
        ('set f [open "|touch x" r]', ["touch x"]),
        ("spawn -noecho ssh $host", [f"ssh {UNKNOWN_VARIABLE}"]),
        ("exec ls [pwd]", [f"ls {UNKNOWN_VARIABLE}"]),
        ("puts [expr 1+2]", []),
    ],
)
def test_tcl_runs_the_words_of_exec_spawn_and_open(code: str, scripts: list[str]) -> None:
    assert tcl_scripts(code) == scripts


@pytest.mark.parametrize(
    ("code", "script"),
    [
        ('subprocess.run(["rm", "-rf", "/x"])', "rm -rf /x"),
        ("os.system('r' + 'm -rf /x')", "rm -rf /x"),
        ("system qw(rm -rf /x)", "rm -rf /x"),
        ("system %w(rm -rf /x)", "rm -rf /x"),
        ("spawnSync('rm', ['-rf', '/x'])", "rm -rf /x"),
        ("print qx{rm -rf /x}", "rm -rf /x"),
        ("subprocess.run(['echo', 'a b'])", "echo 'a b'"),
    ],
)
def test_interpreter_code_naming_a_command_by_its_words(code: str, script: str) -> None:
    assert script in shell_strings_in_code(code)


def test_tcl_code_is_read_for_tcl_interpreters_only() -> None:
    assert code_scripts("tclsh", "exec touch x") == ["touch x"]
    assert code_scripts("python3", "exec touch x") == []


@pytest.mark.parametrize(
    ("assignment", "scripts"),
    [
        ("VIMINIT=!touch x", ["touch x"]),
        ("LESS=-R +!touch x", ["touch x"]),
        ("MANOPT=-P 'touch x'", ["touch x"]),
        ("GIT_CONFIG_PARAMETERS='core.pager=touch x'", ["touch x"]),
        ("GIT_CONFIG_VALUE_0=touch x", ["touch x"]),
        ("MAKEFLAGS=-j4", []),
        ("LESS=-R", []),
    ],
)
def test_variables_carrying_options_or_programs(assignment: str, scripts: list[str]) -> None:
    assert variable_scripts(assignment) == scripts


@pytest.mark.parametrize(
    "text",
    [
        # each variable made of 30 references to the next: 30**8 characters if followed
        "".join(f"V{i} = " + f"$(V{i + 1})" * 30 + "\n" for i in range(8)) + "all:\n\t$(V0)",
    ],
)
def test_an_expansion_that_grows_without_bound_is_unknown(text: str) -> None:
    assert makefile_scripts(text)[-1].startswith(UNKNOWN_VARIABLE)


def test_literals_joined_into_one_word_are_read_once() -> None:
    code = "os.system(" + "'a' + " * 2000 + "'b')"
    found = shell_strings_in_code(code)
    assert "a" * 2000 + "b" in found
    assert len(found) == 2002  # each literal, and the word they make: not every prefix
