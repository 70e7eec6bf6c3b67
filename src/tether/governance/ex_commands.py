"""Vim's and ex's command language, read for the shell command lines it runs.

Ex commands reach vim in ``-c CMD``, ``+CMD`` and ``--cmd CMD``, on stdin in ex mode
(``vim -es``, ``ex``), in ``VIMINIT`` / ``EXINIT``, and typed as keys on stdin
(``vim`` reading a pipe). ``:!cmd``, ``:r !cmd``, ``:w !cmd``, ``:{range}!filter`` and a
file name in backticks run a shell command line: it is returned to be parsed as the
script it is. Commands that cannot run anything (writing, quitting, moving around,
substituting, setting plain options...) are passed over; any other one is DYNAMIC,
as what it runs is only known at run time: expressions (``:call``, ``:execute``,
``:let``, ``s/x/\\=expr/``, expression options), sourcing, the interpreters
(``:python``, ``:lua``), ``:make``, ``:grep``, ``:terminal``, mappings, autocommands,
user commands. The language is too large to list what is dangerous, so what is safe
is listed instead. Like carried_scripts, this is parsing knowledge.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tether.governance.paths import DYNAMIC
from tether.governance.shell_words import UNKNOWN_VARIABLE

# A command's name as written (a prefix of its full name, at least as long as vim
# requires) -> what it does with its arguments.
_FILE_ARGS = "file"  # file names, which may hold `cmd` and +cmd
_REST = "rest"  # a command line of its own, '|' included (:g/pat/cmd, :bufdo cmd)
_MODIFIER = "modifier"  # :silent cmd
_PLAIN = "plain"  # nothing that runs: the arguments end at '|'
_SUBSTITUTE = "substitute"
_GLOBAL = "global"
_NORMAL = "normal"
_SET = "set"
_READ = "read"
_WRITE = "write"
_TEXT = "text"  # :append, :insert, :change: the lines up to "." are text

_COMMANDS: dict[str, tuple[int, str]] = {
    # quitting and writing
    "quit": (1, _PLAIN),
    "qall": (2, _PLAIN),
    "quitall": (5, _PLAIN),
    "cquit": (2, _PLAIN),
    "wq": (2, _FILE_ARGS),
    "wqall": (3, _PLAIN),
    "xit": (1, _FILE_ARGS),
    "xall": (2, _PLAIN),
    "exit": (3, _FILE_ARGS),
    "write": (1, _WRITE),
    "wall": (2, _PLAIN),
    "update": (2, _FILE_ARGS),
    "saveas": (3, _FILE_ARGS),
    "read": (1, _READ),
    # files, buffers and windows
    "edit": (1, _FILE_ARGS),
    "enew": (3, _PLAIN),
    "visual": (2, _FILE_ARGS),
    "view": (3, _FILE_ARGS),
    "next": (1, _FILE_ARGS),
    "previous": (4, _PLAIN),
    "Next": (1, _PLAIN),
    "rewind": (3, _PLAIN),
    "first": (3, _PLAIN),
    "last": (2, _PLAIN),
    "args": (2, _FILE_ARGS),
    "argadd": (4, _FILE_ARGS),
    "badd": (3, _FILE_ARGS),
    "buffer": (1, _PLAIN),
    "bnext": (2, _PLAIN),
    "bprevious": (2, _PLAIN),
    "bNext": (2, _PLAIN),
    "bfirst": (2, _PLAIN),
    "blast": (2, _PLAIN),
    "bdelete": (2, _PLAIN),
    "bwipeout": (2, _PLAIN),
    "split": (2, _FILE_ARGS),
    "vsplit": (2, _FILE_ARGS),
    "new": (3, _FILE_ARGS),
    "vnew": (3, _FILE_ARGS),
    "tabedit": (4, _FILE_ARGS),
    "tabnew": (6, _FILE_ARGS),
    "tabnext": (4, _PLAIN),
    "tabclose": (4, _PLAIN),
    "only": (2, _PLAIN),
    "close": (3, _PLAIN),
    "file": (1, _FILE_ARGS),
    "cd": (2, _FILE_ARGS),
    "chdir": (3, _FILE_ARGS),
    "lcd": (3, _FILE_ARGS),
    "lchdir": (3, _FILE_ARGS),
    "pwd": (2, _PLAIN),
    "diffupdate": (3, _PLAIN),
    "diffget": (5, _PLAIN),
    "diffput": (6, _PLAIN),
    "diffthis": (8, _PLAIN),
    "diffoff": (5, _PLAIN),
    # editing
    "substitute": (1, _SUBSTITUTE),
    "smagic": (2, _SUBSTITUTE),
    "snomagic": (3, _SUBSTITUTE),
    "&": (1, _SUBSTITUTE),
    "&&": (2, _SUBSTITUTE),
    "~": (1, _SUBSTITUTE),
    "global": (1, _GLOBAL),
    "vglobal": (1, _GLOBAL),
    "delete": (1, _PLAIN),
    "yank": (1, _PLAIN),
    "put": (2, _PLAIN),
    "move": (1, _PLAIN),
    "copy": (2, _PLAIN),
    "t": (1, _PLAIN),
    "join": (1, _PLAIN),
    ">": (1, _PLAIN),
    "<": (1, _PLAIN),
    "left": (2, _PLAIN),
    "right": (2, _PLAIN),
    "center": (2, _PLAIN),
    "retab": (3, _PLAIN),
    "sort": (3, _PLAIN),
    "undo": (1, _PLAIN),
    "redo": (3, _PLAIN),
    "mark": (2, _PLAIN),
    "k": (1, _PLAIN),
    "normal": (4, _NORMAL),
    "append": (1, _TEXT),
    "insert": (1, _TEXT),
    "change": (1, _TEXT),
    "startinsert": (4, _PLAIN),
    "stopinsert": (5, _PLAIN),
    # showing things
    "print": (1, _PLAIN),
    "number": (2, _PLAIN),
    "#": (1, _PLAIN),
    "=": (1, _PLAIN),
    "list": (1, _PLAIN),
    "z": (1, _PLAIN),
    "nohlsearch": (3, _PLAIN),
    "version": (2, _PLAIN),
    "messages": (3, _PLAIN),
    "ls": (2, _PLAIN),
    "files": (5, _PLAIN),
    "buffers": (7, _PLAIN),
    "registers": (3, _PLAIN),
    "display": (2, _PLAIN),
    "marks": (5, _PLAIN),
    "jumps": (2, _PLAIN),
    "changes": (7, _PLAIN),
    "history": (3, _PLAIN),
    "redraw": (4, _PLAIN),
    "sleep": (2, _PLAIN),
    # settings (the option names are checked too)
    "set": (2, _SET),
    "setlocal": (4, _SET),
    "setglobal": (4, _SET),
    "syntax": (2, _PLAIN),
    "filetype": (5, _PLAIN),
    # a command line of their own
    "argdo": (5, _REST),
    "bufdo": (5, _REST),
    "windo": (5, _REST),
    "tabdo": (5, _REST),
    "cdo": (3, _REST),
    "cfdo": (4, _REST),
    "ldo": (3, _REST),
    "lfdo": (4, _REST),
    "silent": (3, _MODIFIER),
    "unsilent": (3, _MODIFIER),
    "keepjumps": (5, _MODIFIER),
    "keeppatterns": (5, _MODIFIER),
    "keepmarks": (3, _MODIFIER),
    "keepalt": (5, _MODIFIER),
    "lockmarks": (3, _MODIFIER),
    "noautocmd": (3, _MODIFIER),
    "noswapfile": (3, _MODIFIER),
    "sandbox": (3, _MODIFIER),
    "belowright": (3, _MODIFIER),
    "aboveleft": (3, _MODIFIER),
    "topleft": (2, _MODIFIER),
    "botright": (2, _MODIFIER),
    "vertical": (4, _MODIFIER),
    "horizontal": (3, _MODIFIER),
    "leftabove": (5, _MODIFIER),
    "rightbelow": (6, _MODIFIER),
    "tab": (3, _MODIFIER),
    "confirm": (4, _MODIFIER),
    "verbose": (4, _MODIFIER),
}

# Options that hold no expression and name no program; any other one is judged as
# running something (foldexpr, statusline=%!, makeprg, shell, runtimepath...).
_SAFE_OPTIONS = frozenset(
    {
        "all",
        "autoindent",
        "ai",
        "autoread",
        "ar",
        "autowrite",
        "aw",
        "backspace",
        "bs",
        "backup",
        "bk",
        "belloff",
        "bo",
        "binary",
        "bin",
        "bomb",
        "breakindent",
        "bri",
        "cindent",
        "cin",
        "colorcolumn",
        "cc",
        "comments",
        "com",
        "commentstring",
        "cms",
        "compatible",
        "cp",
        "conceallevel",
        "cole",
        "copyindent",
        "ci",
        "cursorline",
        "cul",
        "encoding",
        "enc",
        "endofline",
        "eol",
        "errorbells",
        "eb",
        "expandtab",
        "et",
        "fileencoding",
        "fenc",
        "fileencodings",
        "fencs",
        "fileformat",
        "ff",
        "fileformats",
        "ffs",
        "fixendofline",
        "fixeol",
        "foldenable",
        "fen",
        "foldlevel",
        "fdl",
        "foldmethod",
        "fdm",
        "formatoptions",
        "fo",
        "filetype",
        "ft",
        "hidden",
        "hid",
        "hlsearch",
        "hls",
        "ignorecase",
        "ic",
        "incsearch",
        "is",
        "iskeyword",
        "isk",
        "joinspaces",
        "js",
        "laststatus",
        "ls",
        "lazyredraw",
        "lz",
        "linebreak",
        "lbr",
        "list",
        "listchars",
        "lcs",
        "magic",
        "matchpairs",
        "mps",
        "modifiable",
        "ma",
        "modified",
        "mod",
        "more",
        "nrformats",
        "nf",
        "number",
        "nu",
        "numberwidth",
        "nuw",
        "paste",
        "readonly",
        "ro",
        "relativenumber",
        "rnu",
        "report",
        "ruler",
        "ru",
        "scrolloff",
        "so",
        "shiftround",
        "sr",
        "shiftwidth",
        "sw",
        "shortmess",
        "shm",
        "showcmd",
        "sc",
        "showmatch",
        "sm",
        "showmode",
        "smd",
        "sidescroll",
        "ss",
        "smartcase",
        "scs",
        "smartindent",
        "si",
        "smarttab",
        "sta",
        "softtabstop",
        "sts",
        "spell",
        "spelllang",
        "spl",
        "startofline",
        "sol",
        "swapfile",
        "swf",
        "synmaxcol",
        "smc",
        "syntax",
        "syn",
        "tabstop",
        "ts",
        "textwidth",
        "tw",
        "timeoutlen",
        "tm",
        "ttimeout",
        "ttyfast",
        "tf",
        "undofile",
        "udf",
        "undolevels",
        "ul",
        "updatetime",
        "ut",
        "virtualedit",
        "ve",
        "visualbell",
        "vb",
        "whichwrap",
        "ww",
        "wildignorecase",
        "wic",
        "wildmenu",
        "wmnu",
        "wrap",
        "wrapmargin",
        "wm",
        "wrapscan",
        "ws",
        "writeany",
        "wa",
        "writebackup",
        "wb",
    }
)

# Leading colons and blanks, then a range: line numbers, . $ %, marks, patterns,
# offsets, joined by , or ;.
_RANGE = re.compile(
    r"[\s:]*(?:(?:\d+|[.$%]|'.|/(?:[^/\\\n]|\\.)*/?|\?(?:[^?\\\n]|\\.)*\??|\\[/?&]"
    r"|[+-]\d*)\s*[,;]?\s*)*"
)
_NAME = re.compile(r"[A-Za-z]+|&&|[&~<>=#@*]")
# Normal-mode keys that run something: ! (filter), : (a command line), Q and gQ (ex
# mode), @ (a register as keys), K (keywordprg), gx (opens with a program), CTRL-R
# (a register, = for an expression) and CTRL-] (a tag's command).
_RISKY_KEYS = re.compile(r"[!:Q@K\x12\x1d]|g[xX]")
# ` ` `cmd` ` ` in a file name runs cmd; ` `=expr` ` evaluates an expression.
_BACKTICK = re.compile(r"`([^`]*)`")
# In :!cmd vim puts the file names for % and #, and the previous command for !.
_CMD_SPECIALS = re.compile(r"(?<!\\)[%#!]")
_MAX_DEPTH = 8


def ex_scripts(text: str) -> list[str]:
    """Command lines the ex commands in ``text`` run, one command line a line (an ex
    script on stdin, a sourced file, VIMINIT); DYNAMIC for any that may run what only
    run time knows. The lines after :append, :insert or :change up to "." are text."""
    found: list[str] = []
    in_text = False
    for line in text.split("\n"):
        if in_text:
            in_text = line.strip() != "."
            continue
        in_text = _command_line(line.rstrip("\r"), found, 0)
    return found


def ex_command_scripts(command: str) -> list[str]:
    """Command lines one ex command line (``vim -c CMD``, ``+CMD``) runs."""
    found: list[str] = []
    _command_line(command, found, 0)
    return found


def key_scripts(keys: str) -> list[str]:
    """Command lines keys typed to vim in normal mode run (``vim`` reading a pipe,
    ``:normal``): the command lines after each ":" and DYNAMIC for any other key that
    runs something."""
    found: list[str] = []
    parts = keys.split(":")
    if _RISKY_KEYS.search(parts[0]):
        found.append(DYNAMIC)
    for part in parts[1:]:
        command, sep, after = _split_at_enter(part)
        _command_line(command, found, 1)
        if sep and _RISKY_KEYS.search(after):
            found.append(DYNAMIC)
    return found


def _split_at_enter(text: str) -> tuple[str, str, str]:
    match = re.search(r"[\r\n]", text)
    if match is None:
        return text, "", ""
    return text[: match.start()], match.group(), text[match.end() :]


def _command_line(line: str, found: list[str], depth: int) -> bool:
    """Read one command line (commands joined by '|') into ``found``; True if its last
    command starts text input (a bare :append)."""
    while True:
        if depth > _MAX_DEPTH:
            found.append(DYNAMIC)
            return False
        rest, starts_text = _command(line, found, depth)
        if rest is None:
            return starts_text
        line = rest


def _command(line: str, found: list[str], depth: int) -> tuple[str | None, bool]:
    """Read the first command of ``line``; return what follows its '|' (None when the
    command took the rest of the line) and whether it starts text input."""
    text = line[_RANGE.match(line).end() :]  # type: ignore[union-attr]
    if not text or text.startswith('"'):
        return None, False
    if text.startswith("|"):
        return text[1:], False
    if text.startswith("!"):  # :!cmd, :{range}!filter: the rest is the command
        ranged = bool(line[: len(line) - len(text)].strip(" \t:"))
        found.append(BufferCommand(_shell(text[1:])) if ranged else _shell(text[1:]))
        return None, False
    match = _NAME.match(text)
    kind = _kind(match.group()) if match else None
    if match is None or kind is None:
        found.append(DYNAMIC)
        return None, False
    after = text[match.end() :]
    bang = after.startswith("!")
    args = after[1:] if bang else after
    if kind == _SUBSTITUTE:
        return _substitute(args, found)
    if kind == _GLOBAL:
        body = _after_pattern(args.lstrip())
        if body is None:
            found.append(DYNAMIC)
        elif body.strip():
            _command_line(body, found, depth + 1)
        return None, False
    if kind in (_REST, _MODIFIER):
        _command_line(args, found, depth + 1)
        return None, False
    if kind == _NORMAL:
        found.extend(key_scripts(args))
        return None, False
    if kind == _TEXT:
        return None, not args.strip()
    return _arguments(kind, bang, args, found, depth), False


def _arguments(kind: str, bang: bool, args: str, found: list[str], depth: int) -> str | None:
    """Read the arguments of a command that ends at '|': a file's, an option's, or the
    command line of ``:r !cmd`` / ``:w !cmd`` (which takes the rest). Returns the
    command line after the '|'."""
    if kind == _READ and (bang or args.lstrip().startswith("!")):
        found.append(_shell(args if bang else args.lstrip()[1:]))  # :r !cmd
        return None
    if kind == _WRITE and not bang and args.lstrip().startswith("!"):
        found.append(BufferCommand(_shell(args.lstrip()[1:])))  # :w !cmd
        return None
    own, rest = _until_bar(args)
    if kind in (_FILE_ARGS, _READ, _WRITE):
        _file_args(own, found, depth)
    elif kind == _SET:
        _options(own, found)
    return rest


class BufferCommand(str):
    """A command line vim feeds the text being edited to, on its stdin (``:w !cmd``,
    ``:%!filter``): a shell there runs that text."""

    __slots__ = ()


def _kind(name: str) -> str | None:
    """What the command ``name`` (as abbreviated) does, None for one not known safe."""
    for full, (shortest, kind) in _COMMANDS.items():
        if len(name) >= shortest and full.startswith(name):
            return kind
    return None


def _shell(command: str) -> str:
    """The shell command line of ``:!command``: %, # and ! are replaced by vim (file
    names, the previous command), so they are values only run time knows."""
    return _CMD_SPECIALS.sub(lambda _m: UNKNOWN_VARIABLE, command)


def _until_bar(args: str) -> tuple[str, str | None]:
    """The arguments up to an unescaped '|', and the command line after it."""
    match = re.search(r"(?<!\\)\|", args)
    if match is None:
        return args, None
    return args[: match.start()], args[match.end() :]


def _after_pattern(text: str) -> str | None:
    """What follows ``/pattern/`` (any delimiter but a letter, digit, '"' or '|');
    None when there is no pattern."""
    if not text or text[0].isalnum() or text[0] in '"|\\ ':
        return None
    delimiter = text[0]
    i = 1
    while i < len(text) and text[i] != delimiter:
        i += 2 if text[i] == "\\" else 1
    return text[i + 1 :]


def _substitute(args: str, found: list[str]) -> tuple[str | None, bool]:
    """``s/pattern/replacement/flags``: a replacement starting with ``\\=`` is an
    expression. Returns the command line after a '|' that follows the flags."""
    text = args.lstrip()
    after_pattern = _after_pattern(text)
    if after_pattern is None:  # :s, :& with flags only: the last substitution again
        return _until_bar(text)[1], False
    delimiter = text[0]
    i = 0
    while i < len(after_pattern) and after_pattern[i] != delimiter:
        i += 2 if after_pattern[i] == "\\" else 1
    if after_pattern.startswith("\\="):
        found.append(DYNAMIC)
    flags = after_pattern[i + 1 :]
    return _until_bar(flags)[1], False


def _file_args(args: str, found: list[str], depth: int) -> None:
    """File names: ` `cmd` ` runs cmd (` `=expr` ` evaluates), ``+cmd`` runs an ex
    command once the file is read."""
    for match in _BACKTICK.finditer(args):
        inner = match.group(1)
        found.append(DYNAMIC if inner.startswith("=") else inner)
    if "`" in _BACKTICK.sub("", args):
        found.append(DYNAMIC)  # an unpaired backtick: read as the shell would, unknown
    for word in re.split(r"(?<!\\)\s+", args.strip()):
        if word.startswith("+") and not word.startswith("++"):
            body = word[1:].replace("\\ ", " ")
            if body and not body.isdigit() and not body.startswith(("/", "?")):
                _command_line(body, found, depth + 1)


def _options(args: str, found: list[str]) -> None:
    """``:set`` items: an option not known to hold plain values may run something."""
    for item in re.split(r"(?<!\\)\s+", args.strip()):
        if not item:
            continue
        name = re.match(r"[A-Za-z_]*", item).group()  # type: ignore[union-attr]
        for prefix in ("no", "inv"):
            if name.startswith(prefix) and name[len(prefix) :] in _SAFE_OPTIONS:
                name = name[len(prefix) :]
        if name not in _SAFE_OPTIONS:
            found.append(DYNAMIC)
            return


# ---------------------------------------------------------------- vim's command line

#: The commands that are vim (or vi, ex, nvim), reading the ex language.
VIMS = frozenset(
    {"vim", "vi", "nvim", "ex", "view", "vimdiff", "nvimdiff", "gvim", "gview", "gvimdiff"}
    | {"evim", "eview", "vimx", "rvim", "rview", "exim", "nex", "nvi", "elvis", "vim.basic"}
    | {"vim.tiny", "vim.nox", "vim.gtk3", "editor"}
)
_EX_NAMES = frozenset({"ex", "exim", "nex"})
# Options taking a value that is no command.
_VIM_VALUES = frozenset(
    {"-T", "-i", "-w", "-W", "-t", "-q", "-r", "--servername", "--startuptime", "--listen"}
    | {"--server", "--remote-wait", "-V", "--log"}
)
# Options taking a value that is a command, keys or a file of them.
_VIM_PROGRAM_VALUES = frozenset(
    {"-c", "--cmd", "--remote-send", "--remote-expr", "-u", "-U", "-S", "-s", "-l"}
)
# Values of -u / -U that read no file.
_NO_VIMRC = frozenset({"NONE", "NORC", "DEFAULTS", "NOPLUGIN"})


def vim_scripts(name: str, args: Sequence[str]) -> list[str]:
    """Command lines vim runs from its command line: ``-c CMD``, ``--cmd CMD``,
    ``+CMD``; DYNAMIC for ``--remote-send`` / ``--remote-expr`` (keys or an expression
    sent to another vim)."""
    if name not in VIMS:
        return []
    found: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        value = args[i + 1] if i + 1 < len(args) else None
        if arg == "--":
            break
        if arg.startswith("+"):
            body = arg[1:]
            if body and not body.isdigit() and not body.startswith(("/", "?")):
                found.extend(ex_command_scripts(body))
        elif arg in ("-c", "--cmd") and value is not None:
            found.extend(ex_command_scripts(value))
            i += 1
        elif arg in ("--remote-send", "--remote-expr"):
            found.append(DYNAMIC)
            i += 1
        elif arg in _VIM_VALUES or arg in ("-u", "-U", "-S", "-s", "-l"):
            i += 1
        i += 1
    return found


def vim_program_files(name: str, args: Sequence[str]) -> list[tuple[int, str]]:
    """Arguments naming files vim reads as programs, with their language: ``-S file``
    and ``-u vimrc`` hold ex commands, ``-s file`` keys (in ex mode ``-s`` is silent),
    ``nvim -l script`` Lua."""
    if name not in VIMS:
        return []
    ex_mode = vim_ex_mode(name, args)
    files: list[tuple[int, str]] = []
    for i, arg in enumerate(args[:-1]):
        if arg == "--":
            break
        if arg in ("-S", "-u", "-U") and not (arg != "-S" and args[i + 1] in _NO_VIMRC):
            files.append((i + 1, "ex"))
        elif arg == "-s" and not ex_mode and name != "nvim":
            files.append((i + 1, "keys"))
        elif arg == "-l" and name == "nvim":
            files.append((i + 1, "lua"))
    return files


def vim_file_indices(name: str, args: Sequence[str]) -> list[int]:
    """Indices of the files vim edits (its arguments that are no option, option value
    or +command)."""
    if name not in VIMS:
        return []
    found: list[int] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            found += [k for k in range(i + 1, len(args)) if args[k] != "-"]
            break
        if arg in _VIM_VALUES or arg in _VIM_PROGRAM_VALUES:
            i += 1
        elif not arg.startswith(("-", "+")):
            found.append(i)
        i += 1
    return found


def vim_ex_mode(name: str, args: Sequence[str]) -> bool:
    """Whether vim runs in ex mode (``ex``, ``vim -e``, ``-E``, ``-es``): what it reads
    from stdin is then ex commands, not keys."""
    if name in _EX_NAMES:
        return True
    for arg in args:
        if arg == "--":
            break
        cluster = re.fullmatch(r"-[A-Za-z]+", arg) and arg not in _VIM_VALUES
        if cluster and ("e" in arg or "E" in arg):
            return True
    return False


def vim_reads_text(args: Sequence[str]) -> bool:
    """Whether vim's stdin is the text to edit (``vim -``), not keys or commands."""
    words = list(args)
    return "-" in (words[: words.index("--")] if "--" in words else words) or (
        "--" in words and "-" in words[words.index("--") + 1 :]
    )


# ---------------------------------------------------------------- less

_LESSES = frozenset({"less", "more"})
_LESSKEY_OPTIONS = ("-k", "--lesskey-file", "--lesskey-src", "--lesskey-content")


def less_scripts(name: str, args: Sequence[str]) -> list[str]:
    """Command lines less runs from its initial commands (``+cmd``, ``++cmd``):
    ``!cmd`` and ``|Xcmd`` (the text piped to cmd); DYNAMIC for a lesskey file or
    text, which binds keys to commands."""
    if name not in _LESSES:
        return []
    found: list[str] = []
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("+"):
            found.extend(less_command_scripts(arg.lstrip("+")))
        elif arg.startswith(_LESSKEY_OPTIONS):
            found.append(DYNAMIC)
    return found


def less_command_scripts(commands: str) -> list[str]:
    """Command lines less commands typed as ``commands`` run: ``!cmd`` and ``|Xcmd``,
    each up to the end of its line (a search ``/pattern`` takes its line)."""
    found: list[str] = []
    for line in commands.replace("\r", "\n").split("\n"):
        if line.startswith(("/", "?")):
            continue
        for i, char in enumerate(line):
            if char == "!":
                found.append(_shell(line[i + 1 :]))
                break
            if char == "|":
                found.append(_shell(line[i + 2 :]))
                break
    return found
