"""Every text Tether itself puts in front of the model, in one place and one voice.

Notes about a tool call start with ``[tether]`` (the system prompt tells the model what
they mean); notes inside a call's output use ``[tether: ...]`` so they read as part of
the output. Pure text building: no I/O, no imports from the rest of Tether.
"""

from __future__ import annotations

SYSTEM_PROMPT = (
    "You are Tether, an agent that works in the user's workspace with real tools. "
    "Run shell commands with execute_shell_command. A person can watch, extend, move to "
    "the background or cancel any tool call; a message starting with [tether] tells you "
    "what happened to it. Never retry a call that was denied."
)

NO_RETRY = "Do not retry the same command or a variant of it; tell the user instead."

# A call that a crash or restart left without a result.
INTERRUPTED = "[tether] No result: the server stopped before this call finished."

# A call a resumed task had asked for that never started before the restart.
NOT_STARTED = "[tether] The call was not run: the server restarted before it started."

NO_OUTPUT = "[no output]"

OUTPUT_KEPT_OPEN = "\n[tether: background processes kept the output open]\n"

USER_CANCEL_REASON = "cancelled by the user"

#: Why a task (and the calls it started) ended when a person or a client stopped it.
TASK_STOPPED = "the task was stopped"


# ----------------------------------------------------------------- how a call ended


def offloaded(call_id: str) -> str:
    """The tool result of a call moved to the background."""
    return (
        f"[tether] This call was moved to the background (tool_call_id "
        f"{call_id!r}) and is still running. Its result will arrive in a later "
        f"message. Carry on without waiting for it; do not start it again."
    )


def denied(reason: str) -> str:
    return f"[tether] This call was denied and did not run. {reason}".strip()


def cancelled(reason: str) -> str:
    """The note after a stopped call's output (by a person, or ``reason``)."""
    note = "[tether] The user cancelled this call before it finished"
    if reason and reason != USER_CANCEL_REASON:
        note = f"[tether] This call was stopped before it finished ({reason})"
    return f"{note}. Output up to that point is above, if any."


TIMED_OUT = "[tether] The call ran past its deadline and was killed."


def exit_status(summary: str) -> str:
    """The note after a finished call's output (``exit code 0`` and the like)."""
    return f"[{summary}]" if summary else ""


def background_result(call_id: str, result: str) -> str:
    """The notification carrying a background call's result at a turn boundary."""
    return (
        f"[tether notification] The background tool call {call_id!r} "
        f"has finished. Its result:\n{result}"
    )


# ----------------------------------------------------------------- calls that never ran


def no_such_tool(name: str, available: list[str]) -> str:
    return f"[tether] There is no tool named {name!r}. Available: {available}"


def not_run(reason: str) -> str:
    return f"[tether] The call was not run: {reason}"


def cancelled_before_approval(reason: str) -> str:
    return f"The call was cancelled ({reason}) before approval."


def refused_by_rule(rule_id: str, description: str) -> str:
    return f"Refused by governance rule {rule_id!r}: {description}. {NO_RETRY}"


def refused_by_person(reason: str) -> str:
    why = f" (reason: {reason})" if reason else ""
    return f"A person denied this call{why}. {NO_RETRY}"


def approval_not_given(reason: str) -> str:
    return f"Approval was not given: {reason}. {NO_RETRY}"


def refused_unattended(command: str, why: str) -> str:
    """A call that needs a person, in a run no one attends (``when_unattended=deny``)."""
    return (
        f"Refused without asking: {command!r} needs a person's approval ({why}), and no "
        f"one attends this run (when_unattended=deny). {NO_RETRY}"
    )


def refused_by_remembered_rule(pattern: str, reason: str) -> str:
    why = f", reason: {reason}" if reason else ""
    return f"A person denied calls like this before (remembered rule {pattern!r}{why}). {NO_RETRY}"


# ----------------------------------------------------------------- notes inside output


def output_cut(cut_chars: int, where: str) -> str:
    """The marker between the head and the tail of an output too long for the model."""
    return f"\n\n[... {cut_chars} characters cut; the full output is at {where} ...]\n\n"


def output_limit_reached(limit_bytes: int) -> str:
    return (
        f"\n[tether: output limit of {limit_bytes} bytes reached; "
        "the rest of this call's output is not kept]\n"
    )
