"""Classify filesystem paths into the classes that rules refer to.

Pure string work on POSIX paths: shell analysis cannot know what a path will
point to when the command eventually runs, so it reasons about the text only.
File analysis resolves symlinks itself before calling in here.
"""

from __future__ import annotations

import itertools
import posixpath
import re
from fnmatch import fnmatchcase
from functools import lru_cache
from typing import Literal, get_args
from urllib.parse import unquote

from tether.governance.context import AnalysisContext

PathClass = Literal[
    "any",
    "inside_workspace",
    "workspace_root",
    "outside_workspace",
    "dynamic",
    "root_or_system",
    "system",
    "ssh_or_shell_profile",
    "secret",
    "tether_home",
    # A directory Tether's state lies below (the home, /): a recursive read or copy of
    # it takes that state along.
    "holds_tether_home",
    "block_device",
    "network_socket",
]
PATH_CLASSES: tuple[str, ...] = get_args(PathClass)

# Marks the part of a word whose value is only known at run time ($VAR, $(...)).
# NUL can never occur in a real argv entry, so it cannot collide with literal text.
DYNAMIC = "\x00"

# Characters after which the rest of a path is unknown: glob and brace patterns
# and dynamic parts. Everything from the first of them on is treated as "any
# entry of the directory before it".
_PATTERN_CHARS = ("*", "?", "[", "{", DYNAMIC, "!(", "@(", "+(")  # and extglob's

# Directories whose contents are the operating system: the directory itself and
# every direct child (/etc/ssh, /usr/lib, ...) are critical deletion targets.
_DEEP_SYSTEM_DIRS = frozenset(
    {
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/proc",
        "/sbin",
        "/sys",
        "/usr",
        "/var",
        "/System",
    }
)
# Top-level directories that matter as a whole but whose children are ordinary
# data (/opt/app, /srv/www): only the directory itself is critical.
_TOP_SYSTEM_DIRS = frozenset(
    {
        "/home",
        "/Users",
        "/root",
        "/opt",
        "/srv",
        "/mnt",
        "/media",
        "/run",
        "/snap",
        "/nix",
        "/Applications",
        "/Library",
        "/Volumes",
        "/private",
    }
)
# Scratch space: writing or deleting there is not "touching the system".
_TEMP_DIRS = ("/tmp", "/var/tmp", "/private/tmp", "/private/var/folders", "/dev/shm")

_PSEUDO_DEVICE = re.compile(
    r"^/dev/(null|zero|full|random|urandom|tty|stdin|stdout|stderr|ptmx|fd/\d+|pts/\d+)$"
    r"|^/proc/self/fd/\d+$"
)
_BLOCK_DEVICE = re.compile(
    r"^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|rdisk\d|loop\d|md\d"
    r"|dm-\d|mapper/|sr\d|nbd\d|zd\d|bcache|fd\d|mem$|kmem$|port$)"
)
_NETWORK_SOCKET = re.compile(r"^/dev/(tcp|udp)/")

_SHELL_PROFILES = frozenset(
    {
        ".bashrc",
        ".bash_profile",
        ".bash_login",
        ".bash_logout",
        ".profile",
        ".zshrc",
        ".zprofile",
        ".zshenv",
        ".zlogin",
        ".zlogout",
        ".kshrc",
        ".mkshrc",
        ".cshrc",
        ".tcshrc",
        ".login",
        "config.fish",
    }
)
_SECRET_DIRS = frozenset({".ssh", ".gnupg", ".aws", ".kube", ".password-store"})
_SECRET_NAMES = frozenset(
    {".env", ".netrc", ".pgpass", ".git-credentials", ".npmrc", ".pypirc", ".htpasswd"}
)
_SECRET_SYSTEM_FILES = frozenset({"/etc/shadow", "/etc/gshadow", "/etc/sudoers"})
_SECRET_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".jks", ".keystore", ".kdbx")
_SSH_KEY_PREFIXES = ("id_rsa", "id_dsa", "id_ecdsa", "id_ed25519")
_ENV_TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".dist")
# What /proc shows of another process that holds its secrets: environment, memory.
_PROCESS_SECRETS = frozenset({"environ", "mem", "cmdline"})

_UNKNOWN: frozenset[str] = frozenset({"any", "dynamic", "outside_workspace"})


def within(path: str, parent: str) -> bool:
    """True if ``path`` is ``parent`` or lies below it (both normalised, absolute)."""
    if parent == "/":
        return path.startswith("/")
    return path == parent or path.startswith(parent + "/")


def expand_tilde(word: str, home: str, cwd: str | None) -> str:
    """Expand a leading ``~``, ``~user``, ``~+`` or ``~-`` the way bash would."""
    head, sep, rest = word.partition("/")
    if head == "~":
        base = home
    elif head == "~+":
        base = cwd if cwd is not None else DYNAMIC
    elif head == "~-":
        base = DYNAMIC
    elif head == "~root":
        base = "/root"
    else:
        # ~user: assume the conventional layout next to our own home.
        base = posixpath.join(posixpath.dirname(home), head[1:])
    return base + sep + rest


def classify_path(raw: str, cwd: str | None, ctx: AnalysisContext) -> frozenset[str]:
    """Return the set of PathClass names ``raw`` belongs to.

    ``cwd`` is the directory relative paths are resolved against (None when it
    cannot be known). Paths with glob or dynamic parts are judged by the
    directory they would expand inside, e.g. ``/usr/*`` like ``/usr``.
    """
    return _classify(raw, cwd, ctx)


#: Past this many distinct words, or this much text, a brace expansion is not judged
#: word by word: see ``brace_words``.
MAX_BRACE_WORDS = 1024
MAX_BRACE_CHARS = 65_536
#: What a path that may be anything at all, the root included, is judged as.
_ANYTHING: frozenset[str] = frozenset({"any", "dynamic", "outside_workspace", "root_or_system"})


@lru_cache(maxsize=8192)
def _classify(raw: str, cwd: str | None, ctx: AnalysisContext) -> frozenset[str]:
    if not raw:
        return frozenset()
    if raw[:5].lower() == "file:":
        # curl, git clone, wget and browsers read a file: URL's path from the disk.
        return _classify(_file_url_path(raw), cwd, ctx)
    words = brace_words(raw)
    if words is None:
        return _ANYTHING
    if words != [raw]:
        # Each word the shell makes of ``{/etc,x}`` is a path of its own.
        return frozenset().union(*(_classify(w, cwd, ctx) for w in words))
    joined = _absolute(raw, cwd, ctx)
    if joined is None:
        return _UNKNOWN | _unknown_directory_reach(raw, ctx)
    cut = min((i for i in (joined.find(c) for c in _PATTERN_CHARS) if i >= 0), default=-1)
    if cut < 0:
        return _classify_concrete(_normpath(joined), ctx)
    prefix, rest = joined[:cut], joined[cut:]
    base = _normpath(prefix if prefix.endswith("/") else posixpath.dirname(prefix))
    # A pattern followed by ".." climbs out of its directory: follow it up.
    for _ in range(rest.split("/").count("..")):
        base = posixpath.dirname(base)
    classes = set(_classify_concrete(base, ctx))
    classes.discard("workspace_root")
    if base == str(ctx.workspace) and _matches_everything(rest):
        classes.add("workspace_root")
    if _is_secret(_normpath(joined)):
        classes.add("secret")
    if DYNAMIC in rest:
        classes.add("dynamic")
    if _pattern_reaches(joined, str(ctx.tether_home)) and not _in_own_workspace(base, ctx):
        classes.add("tether_home")  # ~/.teth*/token
    if _may_be_profile(joined, str(ctx.home)):
        classes.add("ssh_or_shell_profile")  # cp x ~/$name: the name may be .bashrc
    return frozenset(classes)


def _in_own_workspace(directory: str, ctx: AnalysisContext) -> bool:
    """Whether ``directory`` is in a workspace placed inside TETHER_HOME (the default
    layout): the agent's own area there, not Tether's state (``ls *`` in it)."""
    workspace, tether_home = str(ctx.workspace), str(ctx.tether_home)
    return within(directory, workspace) and within(workspace, tether_home)


def _may_be_profile(pattern: str, home: str) -> bool:
    """Whether a pattern or a name only known at run time, right in the home, may be a
    shell profile (a value may start with a dot, a glob only where it writes one)."""
    directory, _, name = pattern.rpartition("/")
    if _normpath(directory or "/") != home or any(c in directory for c in _PATTERN_CHARS):
        return False
    glob = name.replace(DYNAMIC, "*")
    return any(
        fnmatchcase(profile, glob) and (DYNAMIC in name or name.startswith("."))
        for profile in _SHELL_PROFILES
    )


def _pattern_reaches(pattern: str, directory: str) -> bool:
    """Whether a glob pattern (an absolute path) may name ``directory`` or a path below
    it: each of its parts matches the directory's part at the same depth (a leading
    dot only by a pattern that writes it, as bash globs)."""
    parts = _normpath(pattern.replace(DYNAMIC, "\x01")).strip("/").split("/")
    wanted = directory.strip("/").split("/")
    if len(parts) < len(wanted):
        return False
    if len(parts) == len(wanted) and not re.search(r"[^.*?\[\]]", parts[-1]):
        return False  # ls -d ~/.*: every dot file, the directory among them, not into it
    for part, name in zip(parts, wanted, strict=False):
        if "\x01" in part or (name.startswith(".") and not part.startswith(".")):
            return False
        if not fnmatchcase(name, part):
            return False
    return True


def _unknown_directory_reach(raw: str, ctx: AnalysisContext) -> frozenset[str]:
    """A relative path from a directory only known at run time: Tether's state when it
    ends with the state directory's own names (``.tether/token`` from the home)."""
    parts = [p for p in raw.split("/") if p not in ("", ".", "..")]
    wanted = str(ctx.tether_home).strip("/").split("/")
    if not parts or DYNAMIC in raw or raw.startswith("/"):
        return frozenset()
    for start in range(1, len(wanted)):
        tail = wanted[start:]
        if parts[: len(tail)] == tail:
            return frozenset({"tether_home"})
    return frozenset()


def brace_words(raw: str) -> list[str] | None:
    """The distinct words the shell's brace expansion makes of ``raw`` (``a{b,c}``
    gives ``ab`` and ``ac``, nested groups too); ``[raw]`` when it has no comma group;
    None past MAX_BRACE_WORDS words or MAX_BRACE_CHARS characters. Quoting is not known
    here, so a quoted group counts too: that can only make a literal name look like
    more paths, never hide one."""
    if "{" not in raw or "," not in raw:
        return [raw]
    words: dict[str, None] = {}
    pending, seen, size = [raw], {raw}, len(raw)
    while pending:
        if len(words) > MAX_BRACE_WORDS or size > MAX_BRACE_CHARS:
            return None
        word = pending.pop()
        group = _first_comma_group(word)
        if group is None:
            words[word] = None
            continue
        start, end, parts = group
        for part in reversed(parts):
            made = word[:start] + part + word[end + 1 :]
            if made not in seen:
                seen.add(made)
                size += len(made)
                pending.append(made)
    return list(words) if len(words) <= MAX_BRACE_WORDS else None


def _first_comma_group(word: str) -> tuple[int, int, list[str]] | None:
    """The ``{...}`` of ``word`` opening first among those with a comma at their own
    level: where it opens and closes, and its parts. One pass over the word."""
    opened: list[list[int]] = []  # per open brace: its position, then its commas
    best: tuple[int, int, list[int]] | None = None
    for i, char in enumerate(word):
        if char == "{":
            opened.append([i])
        elif char == "," and opened:
            opened[-1].append(i)
        elif char == "}" and opened:
            cuts = opened.pop()
            if len(cuts) > 1 and (best is None or cuts[0] < best[0]):
                best = (cuts[0], i, cuts)
    if best is None:
        return None
    start, end, cuts = best
    bounds = [*cuts, end]
    return start, end, [word[a + 1 : b] for a, b in itertools.pairwise(bounds)]


def _normpath(path: str) -> str:
    # POSIX normpath keeps a leading "//" (implementation-defined); Linux treats it as "/".
    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/") if normal.startswith("//") else normal


def _absolute(raw: str, cwd: str | None, ctx: AnalysisContext) -> str | None:
    if raw.startswith(DYNAMIC):
        return None  # "$X/foo" may well be absolute: nothing is known
    if raw.startswith("~"):
        raw = expand_tilde(raw, str(ctx.home), cwd)
        if raw.startswith(DYNAMIC):
            return None
    if raw.startswith("/"):
        return raw
    if cwd is None:
        return None
    return cwd.rstrip("/") + "/" + raw


def _file_url_path(url: str) -> str:
    """The local path a ``file:`` URL names (``file:///p``, ``file://host/p`` or
    ``file:/p``; a host is not judged: taken as this machine), percent-escapes decoded;
    the root when it names none."""
    rest = url[5:]
    if rest.startswith("//"):
        slash = rest.find("/", 2)
        rest = rest[slash:] if slash >= 0 else "/"
    return unquote(rest.split("?", 1)[0].split("#", 1)[0]) or "/"


def _classify_concrete(path: str, ctx: AnalysisContext) -> frozenset[str]:
    workspace, home, tether_home = str(ctx.workspace), str(ctx.home), str(ctx.tether_home)
    classes = {"any"}
    inside = within(path, workspace)
    if inside:
        classes.add("inside_workspace")
        if path == workspace:
            classes.add("workspace_root")
    elif not _PSEUDO_DEVICE.match(path):
        classes.add("outside_workspace")
    if _is_root_or_system(path, home):
        classes.add("root_or_system")
    if not inside and _is_system(path, home):
        classes.add("system")
    # A workspace placed inside TETHER_HOME is the agent's own area, not Tether's state.
    if within(path, tether_home) and not (within(workspace, tether_home) and inside):
        classes.add("tether_home")
    elif within(tether_home, path) and not within(tether_home, workspace):
        classes.add("holds_tether_home")
    if not inside and _is_ssh_or_profile(path):
        classes.add("ssh_or_shell_profile")
    if _is_secret(path):
        classes.add("secret")
    if _BLOCK_DEVICE.match(path):
        classes.add("block_device")
    if _NETWORK_SOCKET.match(path):
        classes.add("network_socket")
    return frozenset(classes)


def _matches_everything(pattern: str) -> bool:
    """True for patterns like ``*``, ``.*`` or ``*.*`` that match a whole directory."""
    body = pattern.rstrip("/")
    return "*" in body and all(c in "*.?{},[]!" for c in body)


def _is_root_or_system(path: str, home: str) -> bool:
    if path in ("/", home) or path in _DEEP_SYSTEM_DIRS or path in _TOP_SYSTEM_DIRS:
        return True
    if _PSEUDO_DEVICE.match(path) or any(within(path, t) for t in _TEMP_DIRS):
        return False
    return posixpath.dirname(path) in _DEEP_SYSTEM_DIRS


def _is_system(path: str, home: str) -> bool:
    if within(path, home) or _PSEUDO_DEVICE.match(path):
        return False
    if any(within(path, t) for t in _TEMP_DIRS):
        return False
    return path == "/" or any(within(path, d) for d in _DEEP_SYSTEM_DIRS | _TOP_SYSTEM_DIRS)


# Where a file is run at login or start-up without anyone asking: autostart entries,
# systemd units (a user's own need no privilege), environment.d, rc and init scripts.
_STARTUP_DIRS = (
    ".config/autostart",
    ".config/systemd",
    ".config/environment.d",
    ".local/share/systemd",
    "/etc/xdg/autostart",
    "/etc/systemd",
    "/etc/init.d",
    "/etc/rc.local",
    "/etc/profile.d",
    "/etc/environment",
)


def _is_ssh_or_profile(path: str) -> bool:
    """Whether ``path`` is in ~/.ssh or run at login or start-up (a shell profile, an
    autostart entry, a systemd unit...)."""
    parts = path.split("/")
    if ".ssh" in parts or parts[-1] in _SHELL_PROFILES or path.startswith("/etc/profile"):
        return True
    return any(f"/{d.lstrip('/')}/" in f"{path}/" for d in _STARTUP_DIRS)


def _is_secret(path: str) -> bool:
    parts = path.split("/")
    name = parts[-1]
    if len(parts) == 4 and parts[1] == "proc" and parts[2] != "self" and name in _PROCESS_SECRETS:
        return True  # /proc/PID/environ: another process's environment (the server's keys)
    if path in _SECRET_SYSTEM_FILES or _SECRET_DIRS.intersection(parts[:-1]):
        return True
    if name in _SECRET_DIRS or name in _SECRET_NAMES:
        return True
    if name.startswith(".env.") and not name.endswith(_ENV_TEMPLATE_SUFFIXES):
        return True
    if name.endswith(_SECRET_SUFFIXES):
        return True
    return name.startswith(_SSH_KEY_PREFIXES) and not name.endswith(".pub")
