"""Statements that set or evaluate variables: ``x=v``, ``a=(x y)``, ``declare``,
``export``, ``unset``, ``((...))``, ``[[ ... ]]``, the builtins that assign (``read``,
``mapfile``, ``printf -v``, ``getopts``, ``let``) or set other shell state (``set --``,
``shift``, ``alias``, ``hash -p``); and the scripts a value carries
(``GIT_SSH_COMMAND='cmd'``, ``x='a[$(cmd)]'``).
"""

from __future__ import annotations

import shlex
from typing import cast

from tree_sitter import Node

from tether.governance.carried_scripts import variable_scripts
from tether.governance.paths import DYNAMIC
from tether.governance.shell_chain import Link
from tether.governance.shell_expansion import WordExpansion
from tether.governance.shell_records import stdout_literal
from tether.governance.shell_variables import VARIABLE_NAME
from tether.governance.shell_walk_core import SOURCE_CHARS, Env, find_substitutions, node_text
from tether.governance.shell_words import is_option, short_option_value

_ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_READERS = frozenset({"read", "mapfile", "readarray"})
# Options of read, mapfile and printf that take a value (read -a takes an array name).
_ASSIGNER_VALUES = {
    "read": frozenset({"-d", "-i", "-n", "-N", "-p", "-t", "-u"}),
    "mapfile": frozenset({"-d", "-n", "-O", "-s", "-u", "-C", "-c"}),
    "readarray": frozenset({"-d", "-n", "-O", "-s", "-u", "-C", "-c"}),
}


class Assignments(WordExpansion):
    """The statements and builtins that change variables and the shell's names."""

    def _assignment(self, node: Node, env: Env) -> None:
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        value, subs = self.word(value_node) if value_node is not None else ("", [])
        first = len(self.out)
        for sub in subs:
            self.walk_substitution(sub, (), ())
        if name_node is None:
            return
        # x=$(echo 'a[$(cmd)]'): what a substitution prints is the value.
        printed = stdout_literal(self.out[first:]) if subs else None
        self._latent_substitutions(printed or "")
        taint = (*range(first, len(self.out)), *self._tainting(value_node))
        # arr[$(cmd)]=1: bash expands the subscript, running cmd; arr[x]=1 evaluates x.
        for sub in find_substitutions(name_node):
            self.walk_substitution(sub, (), ())
        if name_node.type == "subscript":
            self._evaluated(name_node.named_children[1:])
        self._latent_substitutions(value)
        self._command_variable(f"{node_text(name_node)}={value}", node_text(node)[:SOURCE_CHARS])
        name = node_text(name_node)
        appends = any(c.type == "+=" for c in node.children)
        if value_node is not None and value_node.type == "array" and not appends:
            value = self._array(name, value_node)
        elif name_node.type == "subscript" or appends:
            self.arrays.pop(name.split("[", 1)[0], None)  # a[1]=x, a+=(x): not followed
        self._set_variable(name, DYNAMIC if appends else value, taint)

    def _array(self, name: str, node: Node) -> str:
        """``a=(x y)``: remember the elements (for ``"${a[@]}"``); ``$a`` is the first.
        Assigned twice with other elements, the array is unknown."""
        elements = tuple(self.word(child)[0] for child in node.named_children)
        if name in self.arrays and self.arrays[name] != elements:
            self.arrays.pop(name)
            return DYNAMIC
        self.arrays[name] = elements
        return elements[0] if elements else ""

    def _command_variable(self, assignment: str, source: str) -> None:
        """``GIT_SSH_COMMAND='cmd' git fetch``: a variable programs run as a command
        line is judged as the script it is."""
        for script in variable_scripts(assignment):
            self.nested_script(script, Env(), source)

    def _latent_substitutions(self, value: str) -> None:
        """The substitutions a variable's literal value holds (``x='a[$(cmd)]'``): bash
        runs them when the value is read as an arithmetic expression (``$((x))``,
        ``((x))``, ``${a[x]}``) or as a prompt (``${x@P}``), which the walk does not
        follow, so they are judged as if they ran. Only the substitutions count: the
        value need not be a script."""
        if DYNAMIC in value or ("$(" not in value and "`" not in value):
            return
        with self._deeper(value) as root:
            for sub in find_substitutions(root) if root is not None else ():
                self.walk_substitution(sub, (), ())

    def _declaration(self, node: Node, env: Env) -> None:
        keyword = node.children[0].type if node.children else ""
        flags = "".join(
            node_text(c)[1:] for c in node.named_children if node_text(c).startswith("-")
        )
        exports = keyword == "export" or "x" in flags
        for child in node.named_children:
            name_node = (
                child.child_by_field_name("name") if child.type != "variable_name" else child
            )
            name = node_text(name_node) if name_node is not None and child.type != "word" else None
            if name is not None and "i" in flags:
                self.integers.add(name)  # declare -i n=$x: the value is evaluated
            if child.type == "variable_assignment":
                self._assignment(child, env)
            else:
                for sub in self.word(child)[1]:
                    self.walk_substitution(sub, (), ())
            if name is not None and exports:
                self.exported.add(name)
            if name is not None and "n" in flags:
                # declare -n r=x: $r reads x and r=v assigns x, as only run time knows
                target = self.variables.get(name, DYNAMIC)
                self.variables[name] = DYNAMIC
                if DYNAMIC not in target:
                    self.namerefs[name] = target

    def _unset(self, node: Node, env: Env) -> None:
        """``unset x``: x is empty from here on (or, assigned before, either value)."""
        for child in node.named_children:
            if child.type == "variable_name":
                self._set_variable(node_text(child), "")
        self.walk_children(node, env)

    def _arithmetic(self, node: Node, env: Env) -> None:
        """``((expr))`` and ``for ((...))`` evaluate their expressions."""
        if node.type == "c_style_for_statement" or (
            node.children and node.children[0].type == "(("
        ):
            self._evaluated(c for c in node.named_children if c.type != "do_group")
        self.walk_children(node, env)

    def _test(self, node: Node, env: Env) -> None:
        """``[[ a -eq b ]]`` evaluates both sides as arithmetic; ``[[ -v a[x] ]]`` the
        subscript."""
        pending = list(node.named_children)
        while pending:
            child = pending.pop()
            operators = [node_text(c) for c in child.children if c.type == "test_operator"]
            arithmetic = child.type == "binary_expression" and set(operators) & _ARITHMETIC_TESTS
            if arithmetic or (child.type == "unary_expression" and "-v" in operators):
                self._evaluated(c for c in child.named_children if c.type != "test_operator")
            elif child.type in (
                "binary_expression",
                "unary_expression",
                "parenthesized_expression",
            ):
                pending.extend(child.named_children)
        self.walk_children(node, env)

    def _builtin_assignments(self, link: Link, env: Env) -> None:
        """Variables builtins assign: ``read`` and ``mapfile`` take their input (from a
        literal, whose substitutions are judged as an assigned value's are, or from the
        records feeding them), ``printf -v`` its output, ``getopts`` an option; their
        values are only known at run time. ``let`` evaluates its arguments."""
        name = cast(str, link.name)
        if name == "let":
            self._evaluate_names(n for a in link.args for n in VARIABLE_NAME.findall(a))
            return
        names = _assigned_names(name, link.args)
        if not names:
            return
        taint: tuple[int, ...] = ()
        if name in _READERS:
            number = short_option_value(link.args, "-u")
            opened = self.descriptors.get(number) if number is not None else None
            taint = opened.records if opened is not None else env.stdin_records
            literal = opened.literal if opened is not None else env.stdin_literal
            self._latent_substitutions(literal or "")
        else:
            self._latent_substitutions(" ".join(link.args))
        for variable in names:
            self._set_variable(variable, DYNAMIC, taint)

    def _track_names(self, link: Link) -> None:
        """Shell state a builtin sets: the positional parameters (``set -- a b``,
        ``shift``), what a name runs (``alias ls=rm``, ``hash -p /bin/rm ls``)."""
        name, args = link.name, link.args
        if name == "set" and args and (args[0] == "--" or not args[0].startswith(("-", "+"))):
            self.positional = args[1:] if args[0] == "--" else args
        elif name == "shift" and self.positional is not None:
            count = args[0] if args else "1"
            self.positional = self.positional[int(count) :] if count.isdigit() else None
        elif name == "alias":
            for arg in args:
                alias, equals, body = arg.partition("=")
                if equals and DYNAMIC not in alias:
                    self.aliases[alias] = body
        elif name == "hash" and "-p" in args:
            i = args.index("-p")
            if i + 2 < len(args):
                self.aliases[args[i + 2]] = shlex.quote(args[i + 1])


def _assigned_names(name: str, args: tuple[str, ...]) -> list[str]:
    """The variables a builtin assigns: ``read [-a array] names``, ``mapfile array``,
    ``printf -v name``, ``getopts optstring name``."""
    if name == "printf":
        value = short_option_value(args, "-v")
        return [value] if value is not None else []
    if name == "getopts":
        return [args[1]] if len(args) > 1 else []
    values = _ASSIGNER_VALUES.get(name)
    if values is None:
        return []
    names: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-a" and i + 1 < len(args):
            names.append(args[i + 1])
            i += 2
            continue
        if arg in values:
            i += 2
            continue
        if not is_option(arg) and arg != "--":
            names.append(arg)
        i += 1
    if name != "read":
        names = names[-1:]
    default = "REPLY" if name == "read" else "MAPFILE"
    return [n.split("[", 1)[0] for n in names if DYNAMIC not in n] or [default]
