"""What the walk knows of a variable besides its value: whether it was assigned more
than once (then its value is unknown), the records whose output it may hold (its
taint), and what bash evaluates as arithmetic, which runs the substitutions that
output may hold (``x=$(curl ...); echo $((x))``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tree_sitter import Node

from tether.governance.paths import DYNAMIC
from tether.governance.shell_walk_core import SUBSTITUTIONS, WalkerCore, node_text

# A variable's name: after a "$", or bare in an arithmetic expression.
VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: The name under which a record's output is marked evaluated as bash arithmetic (in
#: ``executed_by``): ``let`` is the builtin that does it.
_ARITHMETIC = "let"


def _names_in(node: Node, *, bare_words: bool) -> set[str]:
    """Variable names a node reads: ``$x``, ``${x}``, and with ``bare_words`` the bare
    names arithmetic reads (``x`` in ``((x+1))``); not those of nested commands."""
    names: set[str] = set()
    pending = [node]
    while pending:
        current = pending.pop()
        if current.type in SUBSTITUTIONS:
            continue
        bare = bare_words and current.type == "word" and VARIABLE_NAME.fullmatch(node_text(current))
        if current.type == "variable_name" or bare:
            names.add(node_text(current))
        pending.extend(current.named_children)
    return names


class VariableState(WalkerCore):
    """Assigning variables, and marking the output they may hold as evaluated."""

    def _set_variable(self, name: str, value: str, taint: Iterable[int] = ()) -> None:
        """Record an assignment. Without following control flow a variable assigned twice
        (if/else branches, loops, +=) could hold either value: it is unknown then. The
        records its value may come from are kept (for arithmetic, see ``_evaluated``);
        assigning a variable declared an integer evaluates the value."""
        reassigned = name in self.variables and self.variables[name] != value
        self.variables[name] = DYNAMIC if reassigned else value
        if value == DYNAMIC:
            self.arrays.pop(name, None)
        self.cdpath = self.cdpath or name == "CDPATH"
        taint = tuple(taint)
        if taint:
            self.taints[name] = tuple(dict.fromkeys((*self.taints.get(name, ()), *taint)))
        if name in self.integers:
            self._evaluate_records(taint)
        target = self.namerefs.get(name)
        if target is not None:  # declare -n r=x; r=/: x is assigned
            self.namerefs.pop(name)
            self._set_variable(target, DYNAMIC, taint)
            self.namerefs[name] = target

    def _tainting(self, node: Node | None) -> tuple[int, ...]:
        """The records whose output the variables a word reads may hold."""
        names = _names_in(node, bare_words=False) if node is not None else set()
        return tuple(k for name in sorted(names) for k in self.taints.get(name, ()))

    def _evaluated(self, nodes: Iterable[Node]) -> None:
        """Bash evaluates ``nodes`` as arithmetic (``((x))``, ``$((x))``, ``[[ x -eq 1
        ]]``, ``${a[x]}``, ``let x``): a variable's value is then an expression, and
        ``a[$(cmd)]`` in it runs cmd. Literal values were judged when assigned (see
        ``_latent_substitutions``); output a variable may hold is marked evaluated."""
        names: set[str] = set()
        for node in nodes:
            names |= _names_in(node, bare_words=True)
        self._evaluate_names(names)

    def _evaluate_names(self, names: Iterable[str]) -> None:
        for name in sorted(names):
            self._evaluate_records(self.taints.get(name, ()))

    def _evaluate_records(self, records: Iterable[int]) -> None:
        for k in records:
            self._tag(k, k + 1, (), (_ARITHMETIC,))
