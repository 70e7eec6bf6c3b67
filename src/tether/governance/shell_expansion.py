"""Words as bash reads them: quotes removed, escapes decoded, variables and ``~``
expanded where their value is known, and brace expansion (``{rm,-rf,/}`` is three
words). What only run time knows is marked ``DYNAMIC``; the substitutions a word holds
(``$(...)``, ``<(...)``) are collected for the walk to read.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tree_sitter import Node

from tether.governance.paths import DYNAMIC, brace_words, expand_tilde
from tether.governance.shell_variables import VARIABLE_NAME, VariableState
from tether.governance.shell_walk_core import SUBSTITUTIONS, find_substitutions, node_text
from tether.governance.shell_words import decode_ansi_c, unescape_double_quoted, unescape_unquoted

#: Variables whose value is known (the context's) and names a home that rules protect.
_HOMES = frozenset({"HOME", "TETHER_HOME"})
# A variable left as text in a word a brace expansion made: $NAME or ${NAME}.
_ASSEMBLED = re.compile(rf"\$(?:\{{({VARIABLE_NAME.pattern})\}}|({VARIABLE_NAME.pattern}))")


@dataclass
class Word:
    """One word of a command as bash reads it, before brace expansion."""

    value: str
    raw: str  # as written
    subs: list[Node]  # the substitutions in it ($(...), <(...))
    expands: bool  # a brace outside quotes: brace expansion applies
    dollar: bool  # a bare "$" in it, which brace expansion may join to a name


class WordExpansion(VariableState):
    """Reading word nodes into the words and values bash makes of them."""

    def word(self, node: Node) -> tuple[str, list[Node]]:
        """Flatten a word node to its value, collecting substitutions to walk."""
        subs: list[Node] = []
        value = self._flat(node, subs)
        if value.startswith("~") and self._starts_unquoted(node):
            value = expand_tilde(value, str(self.ctx.home), self.cwd)
        return value, subs

    @staticmethod
    def _starts_unquoted(node: Node) -> bool:
        while node.type in ("command_name", "concatenation") and node.named_children:
            node = node.named_children[0]
        return node.type == "word"

    def _flat(self, node: Node, subs: list[Node]) -> str:
        kind = node.type
        if kind == "word":
            return unescape_unquoted(node_text(node))
        if kind == "raw_string":
            return node_text(node)[1:-1]
        if kind == "ansi_c_string":
            return decode_ansi_c(node_text(node)[2:-1])
        if kind in ("string", "translated_string"):
            return self._flat_string(node, subs)
        if kind in ("concatenation", "command_name"):
            return self._flat_parts(node, subs, unescape_unquoted)
        if kind == "simple_expansion":
            return self._lookup(node.named_children)
        if kind == "expansion":
            return self._flat_expansion(node, subs)
        if kind in SUBSTITUTIONS:
            subs.append(node)
            return DYNAMIC
        if kind == "number":
            return node_text(node)
        if kind == "arithmetic_expansion":
            self._evaluated([node])
        found = find_substitutions(node)
        subs.extend(found)
        return DYNAMIC if found or kind == "arithmetic_expansion" else node_text(node)

    def _flat_parts(self, node: Node, subs: list[Node], gap: Callable[[str], str]) -> str:
        """Join children, keeping any source text between them (decoded with ``gap``)."""
        raw = node.text or b""
        base = node.start_byte
        pos = base
        parts: list[str] = []
        for child in node.children:
            if child.start_byte > pos:
                parts.append(gap(raw[pos - base : child.start_byte - base].decode("utf-8")))
            if child.type == '"':
                pass
            elif child.type == "string_content":
                parts.append(unescape_double_quoted(node_text(child)))
            else:
                parts.append(self._flat(child, subs))
            pos = child.end_byte
        if node.end_byte > pos:
            parts.append(gap(raw[pos - base :].decode("utf-8")))
        return "".join(parts)

    def _flat_string(self, node: Node, subs: list[Node]) -> str:
        text = self._flat_parts(node, subs, unescape_double_quoted)
        return text[1:] if node.type == "translated_string" and text.startswith("$") else text

    def _flat_expansion(self, node: Node, subs: list[Node]) -> str:
        named = node.named_children
        plain = len(named) == 1 and named[0].type == "variable_name" and node.child_count == 3
        if plain:
            return self._lookup(named)
        self._expansion_effects(node)
        subs.extend(find_substitutions(node))
        if named and named[0].type == "variable_name" and node_text(named[0]) in _HOMES:
            # ${HOME%/}, ${TETHER_HOME:-x}: an operator on a home is judged as the home
            # itself (whatever it trims or replaces, the path most likely stays there).
            return self._lookup(named[:1])
        return DYNAMIC

    def _expansion_effects(self, node: Node) -> None:
        """What bash does to variables in ``${...}``: a subscript or an offset is
        evaluated as arithmetic (``${a[x]}``, ``${s:x}``), so is the value ``${!x}`` or
        ``${x@P}`` reads through; ``${x:=v}`` assigns x."""
        tokens = [c.type for c in node.children]
        named = node.named_children
        variable = node_text(named[0]) if named and named[0].type == "variable_name" else None
        for child in named:
            if child.type == "subscript":
                self._evaluated(child.named_children[1:])
        if ":" in tokens:
            self._evaluated(named[1:])
        if variable is not None and ("!" in tokens or "@" in tokens):
            self._evaluate_names([variable])
        if variable is not None and (":=" in tokens or "=" in tokens):
            self._set_variable(variable, DYNAMIC)

    def _lookup(self, named: list[Node]) -> str:
        if named and named[0].type == "special_variable_name" and node_text(named[0]) in "@*":
            words = self.positional
            return DYNAMIC if words is None else " ".join(words)
        if not named or named[0].type != "variable_name":
            return DYNAMIC  # $$, $#, $? ...
        return self._variable(node_text(named[0]))

    def _variable(self, name: str) -> str:
        if name.isdigit() and name != "0":
            if self.positional is None:
                return DYNAMIC
            return self.positional[int(name) - 1] if int(name) <= len(self.positional) else ""
        if name in self.variables:
            return self.variables[name]
        if name == "HOME":
            return str(self.ctx.home)
        if name == "TETHER_HOME":
            return str(self.ctx.tether_home)
        if name == "PWD" and self.cwd is not None:
            return self.cwd
        return DYNAMIC

    def _words(self, nodes: list[Node]) -> list[Word]:
        """Each word bash reads from a command's word nodes. Nodes with nothing between
        them are one word to bash, however the grammar cut it: ``{/a,$HOME/x}`` comes as
        ``{/a,$`` and ``HOME/x}``, the ``$`` cut off from its name."""
        words: list[Word] = []
        previous: Node | None = None
        for i, node in enumerate(nodes):
            glued_next = i + 1 < len(nodes) and nodes[i + 1].start_byte == node.end_byte
            alone = (previous is None or node.start_byte != previous.end_byte) and not glued_next
            several = self._several_words(node) if alone else None
            if several is not None:  # "$@", "${a[@]}", $x holding blanks
                words.extend(Word(w, node_text(node), [], False, False) for w in several)
            elif previous is None or node.start_byte != previous.end_byte:
                value, found = self.word(node)
                words.append(
                    Word(value, node_text(node), found, _unquoted_brace(node), _bare_dollar(node))
                )
            else:
                last = words[-1]
                found = []
                value = self._flat(node, found)
                name = VARIABLE_NAME.match(value)
                # Only a bare word names a variable after "$" ($"HOME" is a string).
                if name and _ends_with_dollar(previous) and self._starts_unquoted(node):
                    last.value = last.value[:-1] + self._variable(name.group())
                    value = value[name.end() :]
                last.value += value
                last.raw += node_text(node)
                last.subs.extend(found)
                last.expands = last.expands or _unquoted_brace(node)
                last.dollar = last.dollar or _bare_dollar(node)
            previous = node
        return words

    def _several_words(self, node: Node) -> list[str] | None:
        """The words one word node makes when its value is known and is several words:
        ``"$@"`` and ``"${a[@]}"`` (each argument or element), and an unquoted ``$x`` or
        ``$@`` split where the value holds IFS characters (``x='-rf ~'; rm $x``). None
        when the node is one word (or its value is unknown)."""
        quoted = node.type == "string" and len(node.named_children) == 1
        inner = node.named_children[0] if quoted else node
        if inner.type not in ("simple_expansion", "expansion"):
            return None
        elements = self._elements(inner)
        if elements is not None:
            words = list(elements)
        elif quoted:
            return None
        else:
            words = [self._flat(inner, [])]
        if quoted:
            return words
        ifs = self._variable("IFS") if "IFS" in self.variables else " \t\n"
        if DYNAMIC in ifs or any(DYNAMIC in w for w in words):
            return None if len(words) == 1 else [DYNAMIC if DYNAMIC in w else w for w in words]
        split = [part for w in words for part in re.split(f"[{re.escape(ifs)}]+", w) if part]
        return split if split != words or elements is not None else None

    def _elements(self, node: Node) -> tuple[str, ...] | None:
        """The words of ``$@`` / ``${@}`` (the positional parameters) or ``${a[@]}``
        (array a's elements) when known; None for any other expansion."""
        named = node.named_children
        if len(named) == 1 and named[0].type == "special_variable_name":
            return self.positional if node_text(named[0]) in "@*" else None
        if len(named) == 1 and named[0].type == "subscript" and node.child_count == 3:
            parts = named[0].named_children
            if len(parts) == 2 and node_text(parts[1]) in "@*":
                return self.arrays.get(node_text(parts[0]))
        return None

    def _dropped_words(self, node: Node) -> list[Word]:
        """Words the grammar drops between a command and the redirection after it: a
        lone ``-`` before a here-doc (``make -f - <<EOF`` comes as ``make -f``)."""
        after = node.next_sibling
        if after is None or not after.type.endswith("_redirect") or not self.sources:
            return []
        gap = self.sources[-1][node.end_byte : after.start_byte].decode("utf-8", "replace")
        return [Word(unescape_unquoted(w), w, [], False, False) for w in gap.split()]

    def _after_glued_brace(self, node: Node) -> bool:
        """Whether the script has a ``{`` right before ``node`` (no space between)."""
        start = node.start_byte
        return start > 0 and bool(self.sources) and self.sources[-1][start - 1 : start] == b"{"


def brace_expanded(
    words: list[Word], variable: Callable[[str], str]
) -> tuple[list[str], list[list[Node]]] | None:
    """The command's words (their values and substitutions) as the shell's brace
    expansion makes them: ``{rm,-rf,/}`` is three words, the first of them the command.
    Only words with a brace outside quotes are expanded; a word's substitutions stay with
    the first word it makes. Bash expands braces before parameters, so in a word with a
    bare ``$`` a ``$`` and a name the expansion puts together (``{a,$}HOME``) are a
    variable, read with ``variable``.
    None if a word makes more than can be checked."""
    out_words: list[str] = []
    out_subs: list[list[Node]] = []
    for word in words:
        made = nonempty(brace_words(word.value)) if word.expands else [word.value]
        if made is None:
            return None
        if not made:
            continue  # nothing but empty words: no word at all
        if word.dollar and len(made) > 1:
            made = [_ASSEMBLED.sub(lambda m: variable(m[1] or m[2]), w) for w in made]
        out_words.extend(made)
        out_subs.extend([word.subs] + [[] for _ in made[1:]])
    return out_words, out_subs


def nonempty(made: list[str] | None) -> list[str] | None:
    """The words brace expansion made, without the empty ones, which bash removes
    (``{,rm} -rf /`` runs ``rm``)."""
    return None if made is None else [w for w in made if w]


def name_expands(raw: str) -> bool:
    """Whether the first word brace expansion makes of ``raw`` (a word as written, with
    an expansion in it) still holds an expansion: ``{cat,$HOME/x}`` runs ``cat``,
    ``{$X,a}`` does not. Any quote counts as one (a quoted comma does not split, which
    the raw text here cannot tell)."""
    made = nonempty(brace_words(raw))
    return not made or any(c in made[0] for c in "$`\"'\\")


def _unquoted_brace(node: Node) -> bool:
    """Whether a word has a ``{`` outside quotes (only those are brace-expanded: a JSON
    body in quotes is one word)."""
    if node.type == "command_name":
        return any(_unquoted_brace(c) for c in node.named_children)
    if node.type == "word":
        return "{" in node_text(node)
    if node.type == "concatenation":
        return any(c.type == "word" and "{" in node_text(c) for c in node.named_children)
    return False


def _bare_dollar(node: Node) -> bool:
    """Whether a word node holds a ``$`` outside quotes that names nothing by itself
    (the grammar's lone ``$`` token, as in ``{a,$}HOME``)."""
    if node.type == "$":
        return True
    return any(_bare_dollar(c) for c in node.children if c.type in ("$", "concatenation"))


def _ends_with_dollar(node: Node) -> bool:
    """Whether a word node ends with a bare ``$`` token (not a quoted or escaped one)."""
    while node.children:
        node = node.children[-1]
    return node.type == "$"
