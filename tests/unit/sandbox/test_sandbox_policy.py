"""Which sandbox and limits a call gets, what it escalates, and how a level judges it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tether.config import Settings
from tether.governance.containment import escalation_findings, findings_to_judge
from tether.governance.findings import Finding, Severity
from tether.governance.levels import decide
from tether.sandbox.limits import Limits, Usage, exceeded, limit_message
from tether.sandbox.policy import SessionSandbox, containment, effective_limits
from tether.sandbox.setup import sandbox_for

DEFAULTS = Limits(memory_mb=2048, max_processes=512, cpu_seconds=None)
HIGH = Finding("x.high", Severity.HIGH, "looks risky")
CRITICAL = Finding("x.critical", Severity.CRITICAL, "never")


def test_session_values_override_defaults_and_zero_lifts_a_limit() -> None:
    session = SessionSandbox.from_stored({"memory_mb": 256, "max_processes": 0, "cpu_seconds": 2})
    assert effective_limits(DEFAULTS, session) == Limits(256, None, 2)
    assert effective_limits(DEFAULTS, SessionSandbox.from_stored(None)) == DEFAULTS


def test_the_servers_limits_are_lifted_by_zero_as_a_sessions_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("MEMORY_MB", "MAX_PROCESSES", "CPU_SECONDS"):
        monkeypatch.setenv(f"TETHER_CALL_{name}", "0")
    lifted = Settings(home=tmp_path)
    assert (lifted.call_memory_mb, lifted.call_max_processes, lifted.call_cpu_seconds) == (
        None,
        None,
        None,
    )
    monkeypatch.setenv("TETHER_CALL_MEMORY_MB", "8")  # would fail every call
    with pytest.raises(ValidationError, match="call_memory_mb"):
        Settings(home=tmp_path)


def test_a_plain_call_is_sandboxed_with_the_session_network() -> None:
    plain = containment(True, "none", DEFAULTS, {"command": "ls"})
    assert (plain.sandboxed, plain.network, plain.escalations) == (True, "none", ())
    assert containment(True, "full", DEFAULTS, {"command": "ls"}).network == "full"


def test_leaving_the_sandbox_and_asking_for_the_network_are_escalations() -> None:
    out = containment(True, "none", DEFAULTS, {"command": "ls", "sandbox": False})
    assert not out.sandboxed and [r for r, _ in out.escalations] == ["sandbox.escape"]
    net = containment(True, "none", DEFAULTS, {"command": "curl x", "network": True})
    assert net.sandboxed and net.network == "full"
    assert [r for r, _ in net.escalations] == ["sandbox.network"]
    # Asking for what the session already gives asks nothing.
    assert containment(True, "full", DEFAULTS, {"command": "x", "network": True}).escalations == ()


def test_without_a_working_sandbox_nothing_is_an_escalation() -> None:
    out = containment(False, "none", DEFAULTS, {"command": "ls", "sandbox": False})
    assert (out.sandboxed, out.escalations) == (False, ())


@pytest.mark.parametrize(
    ("level", "expected"),
    [("off", "allow"), ("auto", "ask"), ("smart", "ask"), ("strict", "ask")],
)
def test_an_escalation_asks_everywhere_but_off(level: str, expected: str) -> None:
    out = containment(True, "none", DEFAULTS, {"command": "ls", "sandbox": False})
    escalations = escalation_findings(out)
    judged = findings_to_judge(level, [], escalations, out)  # type: ignore[arg-type]
    assert decide(level, judged) == expected  # type: ignore[arg-type]


def test_auto_lets_a_sandboxed_high_finding_run_but_not_a_critical_one() -> None:
    inside = containment(True, "none", DEFAULTS, {"command": "x"})
    assert decide("auto", findings_to_judge("auto", [HIGH], [], inside)) == "allow"
    assert decide("auto", findings_to_judge("auto", [CRITICAL], [], inside)) == "deny"
    # smart and unsandboxed calls are judged as before.
    assert decide("smart", findings_to_judge("smart", [HIGH], [], inside)) == "ask"
    outside = containment(False, "none", DEFAULTS, {"command": "x"})
    assert decide("auto", findings_to_judge("auto", [HIGH], [], outside)) == "ask"
    assert decide("auto", findings_to_judge("auto", [HIGH], [], None)) == "ask"


def test_auto_still_asks_when_the_command_is_disguised_from_its_reader() -> None:
    inside = containment(True, "none", DEFAULTS, {"command": "x"})
    bidi = Finding("text-bidi-control", Severity.HIGH, "bidirectional controls")
    assert decide("auto", findings_to_judge("auto", [bidi, HIGH], [], inside)) == "ask"


def test_readings_map_to_the_limit_that_ended_the_call() -> None:
    limits = Limits(256, 64, 2.0)
    assert exceeded(Usage(memory_killed=True), limits) == "memory"
    assert exceeded(Usage(processes_refused=True), limits) == "processes"
    assert exceeded(Usage(cpu_seconds=2.0), limits) == "cpu"
    assert exceeded(Usage(cpu_seconds=1.9, processes=63), limits) is None
    assert exceeded(Usage(cpu_seconds=99.0), Limits(256, 64, None)) is None


def test_limit_messages_are_plain_words() -> None:
    limits = Limits(2048, 512, 2.5)
    assert limit_message("memory", limits) == "stopped: memory limit 2048 MB reached"
    assert limit_message("processes", limits) == "stopped: process limit 512 reached"
    assert limit_message("cpu", limits) == "stopped: CPU time limit 2.5 s reached"


async def test_the_calls_of_one_reply_read_their_session_settings_once(tmp_path: Path) -> None:
    reads: list[str] = []

    async def settings_of(session_id: str) -> dict[str, Any]:
        reads.append(session_id)
        await asyncio.sleep(0.01)  # a store trip: the other plans arrive meanwhile
        return {"network": "full", "memory_mb": 64}

    sandbox = await sandbox_for(Settings(home=tmp_path, sandbox="off"), settings_of, "test")
    planned = await asyncio.gather(
        *[sandbox.containment("s", {"command": "ls"}) for _ in range(10)]
    )
    assert reads == ["s"]
    assert {(c.network, c.limits.memory_mb) for c in planned} == {("full", 64)}
    # A plan asked once those are done reads again.
    await sandbox.containment("s", {"command": "ls"})
    assert reads == ["s", "s"]
