"""Log lines: CR/LF neutralised, credentials masked, chatty HTTP loggers kept quiet."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from tether import logs


@pytest.fixture
def captured() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logs.OneLineFormatter("%(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("tether.test.logs")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield logger, stream
    finally:
        logger.removeHandler(handler)


def test_crlf_in_a_value_cannot_forge_a_line(captured: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = captured
    logger.warning("task %s failed", "x\r\nINFO tether: forged admin login")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 1
    assert (
        lines[0] == "WARNING tether.test.logs: task x\\r\\nINFO tether: forged admin login failed"
    )


def test_tracebacks_stay_readable(captured: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = captured
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logger.exception("call %s failed", "a\nb")
    text = stream.getvalue()
    assert text.splitlines()[0] == "ERROR tether.test.logs: call a\\nb failed"
    assert "Traceback" in text


@pytest.mark.parametrize(
    ("raw", "hidden"),
    [
        ("Authorization: Bearer abc.def-123", "abc.def-123"),
        ("options {'api_key': 'sk-live-0123456789'}", "sk-live-0123456789"),
        ("api_key=plainkey42 sent", "plainkey42"),
        ("Incorrect API key provided: sk-proj-ABCDEFGH12345", "sk-proj-ABCDEFGH12345"),
    ],
)
def test_credentials_are_masked(
    captured: tuple[logging.Logger, io.StringIO], raw: str, hidden: str
) -> None:
    logger, stream = captured
    logger.info("%s", raw)
    assert hidden not in stream.getvalue()
    assert "[redacted]" in stream.getvalue()


def test_http_client_loggers_never_go_below_warning() -> None:
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    try:
        logs.configure("debug")
        for name in ("openai", "httpx", "httpcore"):
            assert logging.getLogger(name).getEffectiveLevel() == logging.WARNING
        assert not logging.getLogger("openai._base_client").isEnabledFor(logging.DEBUG)
    finally:
        root.handlers[:], root.level = saved[0], saved[1]
        for name in ("openai", "httpx", "httpcore"):
            logging.getLogger(name).setLevel(logging.NOTSET)
