"""A webhook receiver on loopback: verifies every Standard Webhooks signature with its
own HMAC code, answers with the statuses a test scripts, and lets tests wait for
deliveries without sleeping."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Received:
    """One request the receiver got, and what it answered."""

    message_id: str
    event: str
    body: dict[str, Any]
    answered: int
    signature_ok: bool


class Receiver:
    """Answers each request with the next scripted status (then ``default``)."""

    def __init__(self) -> None:
        self.secret: str | None = None
        self.script: list[int] = []
        self.default = 200
        self.received: list[Received] = []
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", "0")))
                receiver._receive(self, raw)

            def log_message(self, *_args: Any) -> None:
                pass

        self.srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.srv.daemon_threads = True
        # Its path carries a token, as Slack's and Discord's do: the URL is a credential.
        self.token = secrets.token_hex(12)
        self.url = f"http://127.0.0.1:{self.srv.server_address[1]}/hook/{self.token}"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def _receive(self, handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        with self._changed:
            status = self.script.pop(0) if self.script else self.default
        headers = handler.headers
        message_id = headers.get("webhook-id", "")
        ok = self._verify(message_id, headers.get("webhook-timestamp", ""), raw, headers)
        body = json.loads(raw)
        handler.send_response(status)
        handler.send_header("content-length", "0")
        handler.end_headers()
        with self._changed:
            self.received.append(Received(message_id, body.get("type", ""), body, status, ok))
            self._changed.notify_all()

    def _verify(self, message_id: str, timestamp: str, raw: bytes, headers: Any) -> bool:
        if self.secret is None:
            return False
        key = base64.b64decode(self.secret.removeprefix("whsec_"))
        signed = message_id.encode() + b"." + timestamp.encode() + b"." + raw
        expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        offered = [s.split(",", 1)[-1] for s in headers.get("webhook-signature", "").split()]
        return any(hmac.compare_digest(expected, s) for s in offered)

    def wait(self, done: Callable[[list[Received]], bool], timeout: float = 20.0) -> list[Received]:
        """The requests so far, once ``done`` holds for them."""
        with self._changed:
            if not self._changed.wait_for(lambda: done(self.received), timeout):
                raise AssertionError(f"receiver: condition not met; got {self.received}")
            return list(self.received)

    def close(self) -> None:
        self.srv.shutdown()
        self.srv.server_close()


def subscribe(stack_or_server: Any, receiver: Receiver, *events: str) -> dict[str, Any]:
    """Register the receiver for ``events``; it learns the secret from the answer."""
    api = getattr(stack_or_server, "api", None) or stack_or_server.api_request
    resp = api("POST", "/api/webhooks", json={"url": receiver.url, "events": list(events)})
    assert resp.status_code == 201, resp.text
    created = dict(resp.json())
    receiver.secret = created["secret"]
    return created


def delivered(message_id: str) -> Callable[[list[Received]], bool]:
    """Condition: the message was answered with a 2xx."""
    return lambda got: any(r.message_id == message_id and r.answered < 300 for r in got)


@contextmanager
def fresh_receiver(stack: Any) -> Iterator[Receiver]:
    """A receiver for one test; afterwards every webhook is deleted and it is stopped."""
    receiver = Receiver()
    try:
        yield receiver
    finally:
        for hook in stack.api("GET", "/api/webhooks").json()["items"]:
            stack.api("DELETE", f"/api/webhooks/{hook['id']}")
        receiver.close()


class Pushed:
    """What an endless receiver sent on its connection, known once the peer hung up."""

    def __init__(self) -> None:
        self.bytes = 0
        self.closed = threading.Event()

    def wait_closed(self, timeout: float = 20.0) -> int:
        if not self.closed.wait(timeout):
            raise AssertionError(f"the server kept reading: {self.bytes} bytes so far")
        return self.bytes


@contextmanager
def endless_receiver() -> Iterator[tuple[str, Pushed]]:
    """A receiver that answers its first request 200 with a 100 GB body, pushing 1 MiB
    at a time until the other side hangs up (or the block ends)."""
    pushed = Pushed()
    stop = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return  # closed before any delivery came
        chunk = b"A" * (1 << 20)
        with conn:
            try:
                conn.recv(1 << 16)
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 100000000000\r\n\r\n")
                while not stop.is_set():
                    conn.sendall(chunk)
                    pushed.bytes += len(chunk)
            except OSError:
                pass
            finally:
                pushed.closed.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/hook", pushed
    finally:
        stop.set()
        listener.close()
        thread.join(timeout=10)
