"""Where deliveries may not go: the deny list's parsing and matching (IPv4 in its other
spellings and carried in IPv6, zones), and the guarded transport against a real HTTP
server on loopback: a denied address, whether named or reached through a host name,
gets no connection at all; an allowed one is delivered to as before, after an address
that does not answer if need be; a proxy carries what its settings send it, and the
rest is checked."""

from __future__ import annotations

import asyncio
import re
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError
from webhook_doubles import WatchedRepository, notify_until

from tether.config import Settings
from tether.security.keybox import KeyBox
from tether.webhooks.address import InvalidWebhook
from tether.webhooks.backoff import RetryPolicy
from tether.webhooks.egress import DEFAULT_DENIED, Egress, parse_networks
from tether.webhooks.guarded_transport import DeniedAddress
from tether.webhooks.service import WebhookService


class LoopbackReceiver:
    """An HTTP/1.1 server on 127.0.0.1 that answers 204 and counts its connections."""

    def __init__(self) -> None:
        self.connections = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> LoopbackReceiver:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ),
            0,
        )
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 204 No Content\r\nconnection: close\r\n\r\n")
        await writer.drain()
        writer.close()


@pytest.fixture(autouse=True)
def no_proxy_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture
async def receiver() -> AsyncIterator[LoopbackReceiver]:
    async with LoopbackReceiver() as running:
        yield running


def _egress(networks: str) -> Egress:
    return Egress(parse_networks(networks))


def test_the_deny_list_is_parsed_and_a_bad_entry_named() -> None:
    assert [str(n) for n in parse_networks(" 10.0.0.0/8 , ,fe80::/10,192.0.2.7")] == [
        "10.0.0.0/8",
        "fe80::/10",
        "192.0.2.7/32",
    ]
    assert parse_networks("") == ()
    with pytest.raises(ValueError, match=re.escape("'10.0.0.0/33' is not a network")):
        parse_networks("127.0.0.0/8,10.0.0.0/33")


@pytest.mark.parametrize(
    ("address", "denied"),
    [
        ("169.254.169.254", True),
        ("::ffff:169.254.169.254", True),  # IPv4 written as IPv6
        ("fe80::1%eth0", True),
        ("fd00:ec2::254", True),
        ("100.100.100.200", True),
        # IPv6 forms that lead to an IPv4 address where the network translates them.
        ("::a9fe:a9fe", True),  # IPv4-compatible
        ("::ffff:0:a9fe:a9fe", True),  # IPv4-translated
        ("64:ff9b::a9fe:a9fe", True),  # NAT64
        ("64:ff9b:1:a9fe:a9:fe00::", True),  # NAT64, local-use prefix as a /48
        ("64:ff9b:1::a9fe:a9fe", True),  # the same as a /96
        ("64:ff9b:1:0:a9:fea9:fe00:0", True),  # and as a /64
        ("2002:a9fe:a9fe::1", True),  # 6to4
        ("2001:0:4136:e378:8000:63bf:5601:5601", True),  # Teredo, client 169.254.169.254
        ("127.0.0.1", False),  # a relay on the same machine
        ("10.1.2.3", False),
        ("::1", False),
        ("93.184.215.14", False),
    ],
)
def test_by_default_link_local_and_metadata_addresses_are_denied(
    address: str, denied: bool
) -> None:
    assert _egress(DEFAULT_DENIED).denies(address) is denied


@pytest.mark.parametrize(
    "host",
    [
        "169.254.169.254",
        "169.254.169.254.",
        "2852039166",
        "0xA9FEA9FE",
        "169.254.43518",
        "0251.0376.0251.0376",
        "fe80::1%eth0",
        "fe80::1%25eth0",
    ],
)
def test_an_address_is_denied_in_any_spelling_the_resolver_reads(host: str) -> None:
    assert _egress(DEFAULT_DENIED).denies_host(host)


def test_a_host_name_is_left_to_the_connection() -> None:
    egress = _egress("127.0.0.0/8")
    assert egress.denies_host("127.0.0.1")
    assert not egress.denies_host("localhost")  # judged once resolved
    assert not egress.denies_host("hooks.example")


async def test_a_denied_address_gets_no_connection_named_or_resolved(
    receiver: LoopbackReceiver,
) -> None:
    transport = _egress("127.0.0.0/8,::1/128").transport()
    assert transport is not None
    async with httpx.AsyncClient(transport=transport) as client:
        for host in ("127.0.0.1", "localhost"):
            with pytest.raises(httpx.ConnectError) as caught:
                await client.post(f"http://{host}:{receiver.port}/hook", content=b"{}")
            assert isinstance(caught.value.__cause__, DeniedAddress)
    assert receiver.connections == 0


async def test_an_allowed_address_is_delivered_to(receiver: LoopbackReceiver) -> None:
    transport = _egress(DEFAULT_DENIED).transport()
    assert transport is not None
    async with httpx.AsyncClient(transport=transport) as client:
        resp = await client.post(f"http://localhost:{receiver.port}/hook", content=b"{}")
    assert resp.status_code == 204
    assert receiver.connections == 1


async def test_a_proxy_carries_what_it_is_set_for_and_the_rest_is_checked(
    receiver: LoopbackReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The receiver plays the proxy: a request for http://... arrives there whole. Set
    # as host:port, as httpx also reads it.
    monkeypatch.setenv("HTTP_PROXY", f"127.0.0.1:{receiver.port}")
    monkeypatch.setenv("NO_PROXY", "other.example,localhost:8443")
    transport = _egress("169.254.0.0/16,127.0.0.0/8").transport()
    assert transport is not None
    async with httpx.AsyncClient(transport=transport) as client:
        resp = await client.post("http://hooks.example/in", content=b"{}")
        assert (resp.status_code, receiver.connections) == (204, 1)
        # Through the proxy only a URL naming an address can be judged, in any spelling.
        for url in ("http://169.254.169.254/", "http://2852039166/"):
            with pytest.raises(httpx.ConnectError) as caught:
                await client.post(url, content=b"{}")
            assert isinstance(caught.value.__cause__, DeniedAddress)
        # NO_PROXY's hosts connect directly, through the check.
        with pytest.raises(httpx.ConnectError) as caught:
            await client.post(f"http://localhost:{receiver.port}/hook", content=b"{}")
        assert isinstance(caught.value.__cause__, DeniedAddress)
    assert receiver.connections == 1


async def test_an_address_that_does_not_answer_leaves_time_for_the_next(
    receiver: LoopbackReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # First an address where connections time out (a listener whose queue is full
    # drops new SYNs), then the receiver: the connect timeout is shared between them,
    # so the second still gets its turn.
    with socket.socket() as silent, socket.socket() as queued:
        silent.bind(("127.0.0.2", receiver.port))
        silent.listen(0)
        queued.setblocking(False)
        queued.connect_ex(("127.0.0.2", receiver.port))  # fills the queue

        async def resolve(host: str, port: int, **_kw: object) -> list[tuple[object, ...]]:
            assert host == "dual.example"
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.2", port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
            ]

        monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", resolve)
        transport = _egress(DEFAULT_DENIED).transport()
        assert transport is not None
        async with httpx.AsyncClient(transport=transport, timeout=2) as client:
            url = f"http://dual.example:{receiver.port}/hook"
            resp = await client.post(url, content=b"{}")
    assert resp.status_code == 204


def test_nothing_denied_leaves_httpx_its_own_transport() -> None:
    assert _egress("").transport() is None


async def test_the_service_refuses_a_denied_url_and_logs_a_denied_attempt(
    repo: WatchedRepository, tmp_path: Path, receiver: LoopbackReceiver
) -> None:
    policy = RetryPolicy(first_delay=0.01, max_delay=0.02, give_up_after=0.05, timeout=5)
    service = WebhookService(
        repo, KeyBox(tmp_path / "secret.key"), policy, _egress("127.0.0.0/8,::1/128")
    )
    with pytest.raises(InvalidWebhook, match="TETHER_WEBHOOK_DENY_NETWORKS"):
        await service.create(f"http://127.0.0.1:{receiver.port}/hook", ["task.finished"], "")
    # A name is accepted, and refused where it resolves to.
    hook, _secret = await service.create(
        f"http://localhost:{receiver.port}/hook", ["task.finished"], ""
    )
    await notify_until(service, repo.gave_up)
    ((delivery, attempts),) = await repo.deliveries(hook.id, 10)
    assert delivery.status == "failed"
    assert {a.error for a in attempts} == {"address denied by TETHER_WEBHOOK_DENY_NETWORKS"}
    assert receiver.connections == 0


def test_a_bad_deny_list_stops_the_settings_with_the_entry_named(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="'metadata' is not a network"):
        Settings(home=tmp_path, webhook_deny_networks="169.254.0.0/16,metadata")
    assert Settings(home=tmp_path, webhook_deny_networks="").webhook_deny_networks == ""
