"""Log lines: CR/LF neutralised, credentials masked, chatty HTTP loggers kept quiet."""

from __future__ import annotations

import io
import logging
import socket
from collections.abc import Iterator
from pathlib import Path

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


def test_model_chosen_text_is_bounded_and_inert(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    """A tool name is the model's to choose: 100 kB of it, a NUL or a terminal escape
    must not reach the log as such."""
    logger, stream = captured
    logger.info("governance decision tool=%s level=%s", "\x00\x1b[2J" + "n" * 100_000, "auto")
    (line,) = stream.getvalue().splitlines()
    assert "\x00" not in line and "\x1b" not in line
    assert line.startswith("INFO tether.test.logs: governance decision tool=\\x00\\x1b[2Jnnn")
    assert len(line) < 9000 and "characters cut) ... nnn" in line
    assert line.endswith("level=auto")  # the tail stays: a traceback ends with its error


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


@pytest.fixture
def logging_restored() -> Iterator[None]:
    """Every logger's level, handlers and propagation put back after the test."""
    manager = logging.Logger.manager
    loggers = [
        logging.getLogger(),
        *(v for v in manager.loggerDict.values() if isinstance(v, logging.Logger)),
    ]
    saved = [(lg, lg.level, lg.handlers[:], lg.propagate) for lg in loggers]
    try:
        yield
    finally:
        for lg, level, handlers, propagate in saved:
            lg.setLevel(level)
            lg.handlers[:] = handlers
            lg.propagate = propagate
        known = {id(lg) for lg, *_ in saved}
        for lg in list(manager.loggerDict.values()):
            if isinstance(lg, logging.Logger) and id(lg) not in known:
                lg.setLevel(logging.NOTSET)  # created during the test: back to inheriting


async def _use_what_the_server_uses(home: Path) -> None:
    """Import and run what a server runs (the app, the store through aiosqlite, the openai
    SDK and its HTTP stack making a request), so their loggers exist."""
    from tether.config import Settings
    from tether.llm.client import ModelError, OpenAIChatModel
    from tether.startup import start_services

    # Without the keeper: its runner is a process of its own (its logs are the
    # runner's), and this services object is never shut down to retire it.
    services = await start_services(Settings(home=home, keeper=False))
    await services.store.chats.ensure_session("s", "u", "console", "hello")
    await services.sandbox.close()
    await services.store.db.close()
    assert services.store.owner is not None
    services.store.owner.release()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAIChatModel(f"http://127.0.0.1:{port}/v1", "sk-unit-0123456789", "m", 0, 5)
    with pytest.raises(ModelError):
        await model.complete([{"role": "user", "content": "hi"}], [], lambda _t: None)


async def test_no_library_logger_writes_below_warning_at_debug_level(
    tmp_path: Path, logging_restored: None, capsys: pytest.CaptureFixture[str]
) -> None:
    await _use_what_the_server_uses(tmp_path)
    logs.configure("debug")
    present = {
        name: lg
        for name, lg in logging.Logger.manager.loggerDict.items()
        if isinstance(lg, logging.Logger)
    }
    # The loggers that leaked before are really here: the check below is not vacuous.
    assert "aiosqlite" in present
    assert any(name.startswith("httpcore") for name in present)
    libraries = {
        name: lg
        for name, lg in present.items()
        if name != "tether" and not name.startswith(("tether.", "uvicorn"))
    }
    for name, lg in libraries.items():
        assert not lg.isEnabledFor(logging.INFO), name
        assert not lg.handlers, f"{name} writes around the formatter"
    for name, lg in libraries.items():
        # Even a library that lowers its own level later (the openai SDK does with
        # OPENAI_LOG=debug) gets nothing below WARNING through.
        lg.setLevel(logging.DEBUG)
        lg.debug("library debug from %s", name)
        lg.info("library info from %s", name)
    logging.getLogger("tether.unit").debug("tether's own debug line")
    err = capsys.readouterr().err
    assert "library" not in err
    assert "tether's own debug line" in err


def test_an_unknown_level_is_refused(logging_restored: None) -> None:
    with pytest.raises(ValueError, match="unknown log level"):
        logs.configure("chatty")


def test_a_cut_never_leaves_half_a_credential(captured: tuple[logging.Logger, io.StringIO]) -> None:
    logger, stream = captured
    secret = "sk-" + "SECRETTAIL" * 1000  # the cut falls inside it
    logger.info("request %s failed: Bearer %s", "x" * 2000, secret)
    line = stream.getvalue()
    assert "SECRETTAIL" not in line and "[redacted]" in line


def test_an_exception_message_cannot_pass_for_a_record(
    captured: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = captured
    try:
        raise RuntimeError("boom\nERROR tether.x: forged record")
    except RuntimeError:
        logger.exception("call failed")
    lines = stream.getvalue().splitlines()
    assert lines[0] == "ERROR tether.test.logs: call failed"
    assert all(line.startswith("| ") for line in lines[1:])
    assert "| ERROR tether.x: forged record" in lines
