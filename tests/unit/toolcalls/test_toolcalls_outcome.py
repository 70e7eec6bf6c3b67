"""The text the model gets for each way a call can end."""

from __future__ import annotations

from tether.toolcalls import deadlines as dl
from tether.toolcalls.call import Invocation
from tether.toolcalls.live_call import LiveCall
from tether.toolcalls.outcome import describe_end, describe_offload
from tether.toolcalls.output import OutputBuffer

WHERE = "/api/tool-calls/s/c1/output"


def _call(output: str = "", end_state: str | None = None) -> LiveCall:
    inv = Invocation("c1", "s", "t", "default", "execute_shell_command", {"command": "x"})
    call = LiveCall(
        invocation=inv,
        status="completed",
        deadlines=dl.initial(0.0, 10, 60, None),
        buffer=OutputBuffer(10_000, 1000),
        marker="m:c1",
    )
    if output:
        call.buffer.append("stdout", output)
    call.end_state = end_state  # type: ignore[assignment]
    return call


def test_offload_names_the_call_and_says_not_to_retry() -> None:
    text = describe_offload(_call())
    assert "'c1'" in text and "background" in text and "do not start it again" in text


def test_success_has_output_then_summary() -> None:
    assert describe_end(_call("hi\n", "success"), "exit code 0", WHERE, 1000) == (
        "hi\n[exit code 0]"
    )


def test_success_without_newline_gets_one_before_the_note() -> None:
    assert describe_end(_call("hi", "error"), "exit code 2", WHERE, 1000) == "hi\n[exit code 2]"


def test_no_output_and_no_summary() -> None:
    assert describe_end(_call("", "success"), "", WHERE, 1000) == "[no output]"


def test_denied_gives_the_reason_and_no_output() -> None:
    text = describe_end(_call("", "denied"), "rm -rf is refused", WHERE, 1000)
    assert text == "[tether] This call was denied and did not run. rm -rf is refused"


def test_cancelled_by_the_user() -> None:
    text = describe_end(_call("partial\n", "cancelled"), "cancelled by the user", WHERE, 1000)
    assert text.startswith("partial\n[tether] The user cancelled this call")


def test_cancelled_for_another_reason_says_which() -> None:
    text = describe_end(_call("", "cancelled"), "server shutdown", WHERE, 1000)
    assert text.startswith("[tether] This call was stopped before it finished (server shutdown)")


def test_timeout() -> None:
    text = describe_end(_call("tick\n", "timeout"), "timed out", WHERE, 1000)
    assert text == "tick\n[tether] The call ran past its deadline and was killed."


def test_long_output_is_capped_and_points_at_the_full_output() -> None:
    text = describe_end(_call("x" * 5000, "success"), "exit code 0", WHERE, 1000)
    assert len(text) < 1200
    assert WHERE in text and text.endswith("[exit code 0]")
