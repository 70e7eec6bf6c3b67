"""What the walk remembers of files and directories from one command to the next.

The directory commands run in (``cd``, ``env -C``), the links made (``ln -s``), the
files a download wrote or that hold literal text written earlier, and the files
commands run as programs: ``curl -o a.sh URL; bash a.sh`` and ``echo 'rm -rf /' > x.sh;
bash x.sh`` run what they wrote, only in two steps.
"""

from __future__ import annotations

import dataclasses
import posixpath
from typing import cast

from tether.governance.carried_scripts import (
    git_config_scripts,
    package_scripts,
    program_file_names,
    program_scripts,
)
from tether.governance.paths import DYNAMIC, expand_tilde
from tether.governance.rules import in_command_set
from tether.governance.shell_chain import Link
from tether.governance.shell_records import stdout_literal
from tether.governance.shell_walk_core import Env, WalkerCore
from tether.governance.shell_words import flag_set, is_option, positional_args, short_option_value
from tether.governance.wrappers import download_outputs, inline_code, script_of


class FileTracking(WalkerCore):
    """Paths resolved against the walk's directory, and the files and links that
    commands leave for the ones after them."""

    def _resolve(self, path: str) -> str | None:
        """``path`` made absolute against the walk's directory (``~`` expanded); None
        when only run time knows it."""
        if DYNAMIC in path:
            return None
        if path.startswith("~"):
            path = expand_tilde(path, str(self.ctx.home), self.cwd)
        if path.startswith("/"):
            return posixpath.normpath(path)
        if self.cwd is None:
            return None
        return posixpath.normpath(posixpath.join(self.cwd, path))

    def _directory_of(self, link: Link) -> str | None:
        """Where a command runs: the walk's directory, or the one a wrapper moves it to
        (``env -C ~ rm -rf .ssh`` runs in the home)."""
        if link.chdir is None:
            return self.cwd
        if DYNAMIC in link.chdir:
            return None
        return self._resolve(link.chdir)

    def _track_cd(self, link: Link) -> None:
        """``cd``, ``pushd``, ``popd``: the directory the commands after it run in."""
        if link.name == "popd":
            self.cwd = None
        if link.name not in ("cd", "pushd"):
            return
        targets = positional_args(link.args)
        if not targets:
            self.cwd = str(self.ctx.home)
            return
        target = targets[0]
        searched = (
            self.cdpath and not target.startswith(("./", "../")) and target not in (".", "..")
        )
        if target == "-" or DYNAMIC in target or searched:
            self.cwd = None
        elif target.startswith("/"):
            self.cwd = posixpath.normpath(target)
        elif self.cwd is not None:
            self.cwd = posixpath.normpath(posixpath.join(self.cwd, target))
        if self.cwd is not None and self.links:  # cd into a link: where it leads
            reached = self._through_links((self.cwd,))[0]
            self.cwd = None if DYNAMIC in reached else reached

    def _track_link(self, link: Link) -> None:
        """``ln -s target name``: paths through name reach target from now on."""
        if link.name != "ln":
            return
        flags = flag_set(link.args)
        if "-s" not in flags and "--symbolic" not in flags:
            return
        words = [w for w in positional_args(link.args) if w not in _option_values(link.args)]
        directory = short_option_value(link.args, "-t")
        if not words:
            return
        target = words[0]
        name = words[-1] if len(words) > 1 and directory is None else posixpath.basename(target)
        if directory is not None:
            name = posixpath.join(directory, posixpath.basename(target))
        resolved = self._resolve(name)
        if resolved is None:
            return
        if DYNAMIC in target:
            self.links[resolved] = DYNAMIC
        elif target.startswith("/"):
            self.links[resolved] = posixpath.normpath(target)
        else:
            self.links[resolved] = posixpath.normpath(
                posixpath.join(posixpath.dirname(resolved), target)
            )

    def _through_links(self, words: tuple[str, ...]) -> tuple[str, ...]:
        """Each word that names a path through a link made earlier, as the path it
        reaches."""
        out = []
        for word in words:
            resolved = None if is_option(word) else self._resolve(word)
            for name, target in self.links.items() if resolved is not None else ():
                if resolved == name or cast(str, resolved).startswith(name.rstrip("/") + "/"):
                    word = target + cast(str, resolved)[len(name) :]
                    break
            out.append(word)
        return tuple(out)

    def _track_downloads(self, link: Link, index: int, env: Env) -> None:
        """Remember the files a download writes (curl -o, wget, ssh host cat x > f, scp
        host:x f), or that take a download's text (tee, cp, mv).

        ``curl -o a.sh URL && bash a.sh`` executes downloaded code just like
        ``curl URL | bash`` does, only in two steps.
        """
        name = link.name
        if name is not None and (
            in_command_set(name, "downloaders") or in_command_set(name, "network")
        ):
            written = [r.target for r in env.redirects if r.writes]
            for target in written + download_outputs(name, link.args):
                resolved = self._resolve(target)
                if resolved is not None:
                    self.downloads.setdefault(resolved, []).append(index)
        for target in _tee_files(link):  # curl x | tee f
            resolved = self._resolve(target)
            if resolved is not None and env.stdin_records:
                self.downloads.setdefault(resolved, []).extend(env.stdin_records)
        for source, target in self._copies(link):
            self.downloads[target] = list(self.downloads.get(source, []))

    def _track_written(self, link: Link, index: int, env: Env) -> None:
        """Remember literal text written to files (echo, printf, cat <<EOF; > or >>,
        tee, cp and mv of such a file); parse it where such a file is run.

        ``echo 'rm -rf /' > x.sh; bash x.sh`` runs the echoed text just like
        ``echo 'rm -rf /' | bash`` does, only in two steps.
        """
        rec = self.out[index]
        literal = stdout_literal([rec])
        for redirect in env.redirects if literal is not None else ():
            resolved = self._resolve(redirect.target) if redirect.writes else None
            if resolved is not None:
                before = self.written.get(resolved, "") if redirect.op == ">>" else ""
                self.written[resolved] = f"{before}{literal}\n"
        text = env.stdin_literal
        if text is None and env.stdin_records:
            text = stdout_literal([self.out[k] for k in env.stdin_records])
            text = text + "\n" if text is not None else None
        for target in _tee_files(link) if text is not None else ():
            resolved = self._resolve(target)
            if resolved is not None:
                self.written[resolved] = cast(str, text)
        for source, target in self._copies(link):
            if source in self.written:
                self.written[target] = self.written[source]
            else:
                self.written.pop(target, None)
        for path, runner, language in self._scripts_run_by(link):
            self.run_file(path, runner, language, rec.source)

    def run_file(self, path: str, runner: str | None, language: str, source: str) -> None:
        """``runner`` runs the file ``path`` as a program in ``language``: a download it
        holds is executed by the runner, literal text written to it is parsed."""
        resolved = self._resolve(path) or ""
        for k in self.downloads.get(resolved, []):
            rec = self.out[k]
            self.out[k] = dataclasses.replace(rec, executed_by=(*rec.executed_by, runner))
        text = self.written.get(resolved)
        for script in program_scripts(language, text) if text is not None else ():
            self.nested_script(script, Env(), source)

    def _copies(self, link: Link) -> list[tuple[str, str]]:
        """(source, destination), resolved, of each file cp, mv or install copies."""
        if link.name not in ("cp", "mv", "install", "rsync") or DYNAMIC in "".join(link.args):
            return []
        words = positional_args(link.args)
        if len(words) < 2:
            return []
        found = []
        for source in words[:-1]:
            target = words[-1]
            if len(words) > 2 or target.endswith("/") or target == ".":
                target = posixpath.join(target, posixpath.basename(source.rstrip("/")))
            resolved = (self._resolve(source), self._resolve(target))
            if resolved[0] is not None and resolved[1] is not None:
                found.append((resolved[0], resolved[1]))
        return found

    @staticmethod
    def _scripts_run_by(link: Link) -> list[tuple[str, str | None, str]]:
        """(file, the command running it, its language) for each file ``link`` runs as
        a program: a shell's or interpreter's script, make's makefiles, vim's -S file."""
        if "/" in link.word and DYNAMIC not in link.word:
            # ./install.sh runs through its #! line: assume a shell.
            return [(link.word, "sh", "sh")]
        if link.name is None:
            return []
        programs = program_file_names(link.name, link.args)
        if programs:
            return [(file, link.name, language) for file, language in programs]
        if inline_code(link.name, link.args) is not None:
            return []
        is_shell = in_command_set(link.name, "shells") or link.name in ("source", ".")
        is_runner = is_shell or in_command_set(link.name, "interpreters")
        if not is_runner or script_of(link.name, link.args) is not None:
            return []
        files = positional_args(link.args)
        return [(files[0], link.name, "sh" if is_shell else link.name)] if files else []

    def _project_files(self, link: Link, source: str) -> None:
        """Files written earlier that configure what a command runs: git's config (its
        aliases and command keys) and hooks, npm's package.json scripts."""
        name = link.name
        if name == "git":
            for path, text in list(self.written.items()):
                if path.endswith(("/.git/config", "/.gitconfig", "/git/config")):
                    scripts = git_config_scripts(text)
                elif "/.git/hooks/" in path:
                    scripts = [text]
                else:
                    continue
                for script in scripts:
                    self.nested_script(script, Env(), source)
        elif name in ("npm", "yarn", "pnpm", "bun"):
            for path, text in list(self.written.items()):
                for script in package_scripts(text) if path.endswith("/package.json") else ():
                    self.nested_script(script, Env(), source)


def _option_values(args: tuple[str, ...]) -> set[str]:
    """ln's option values (-t DIR, -S SUFFIX), not file names."""
    return {args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-t", "-S", "--suffix")}


def _tee_files(link: Link) -> list[str]:
    """The files tee (or dd of=) writes its stdin to."""
    if link.name == "tee":
        return positional_args(link.args)
    if link.name == "dd":
        return [a[3:] for a in link.args if a.startswith("of=")]
    return []
