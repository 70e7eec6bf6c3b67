"""Where webhook deliveries may not go (TETHER_WEBHOOK_DENY_NETWORKS).

A webhook's URL is chosen by whoever holds an API token, and its deliveries leave from
the server's own network position. By default they may not reach link-local addresses
(169.254.0.0/16, fe80::/10), where cloud machines are served their instance metadata
and credentials, nor the metadata addresses some clouds keep outside that range. Loopback
and private networks stay allowed: a relay on the same machine or network is the common
receiver of a self-hosted server. The list is a setting; an empty one allows everything.

The check is made on the address a delivery actually connects to, after the host name is
resolved, so a name that resolves to a denied address (or starts to, between two
attempts) is refused too; an IPv6 address counts as every IPv4 address it leads to
through a translating network (mapped, NAT64, 6to4, Teredo). A URL whose host is a
denied address, in any spelling the resolver takes (``http://2852039166/``), is refused
when the webhook is made. What a proxy setting (HTTP_PROXY and the like, NO_PROXY
honoured) sends through a proxy is connected by the proxy, so there only URLs naming an
address are checked: the proxy is the place to police the rest.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

DEFAULT_DENIED = "169.254.0.0/16,fe80::/10,fd00:ec2::254/128,100.100.100.200/32"
SETTING = "TETHER_WEBHOOK_DENY_NETWORKS"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(text: str) -> tuple[Network, ...]:
    """Comma-separated networks (CIDR, or a single address); ValueError naming the
    entry that is neither."""
    networks = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            raise ValueError(f"{entry!r} is not a network (such as 169.254.0.0/16)") from None
    return tuple(networks)


@dataclass(frozen=True)
class Egress:
    """The networks deliveries may not reach."""

    denied: tuple[Network, ...]

    def denies(self, address: str) -> bool:
        """Whether ``address`` (an IP address, IPv6 with or without a zone) is denied,
        or any IPv4 address it carries (see :func:`_carried`)."""
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        return any(a in network for a in (ip, *_carried(ip)) for network in self.denied)

    def denies_host(self, host: str) -> bool:
        """Whether ``host`` is an address that is denied, in any spelling the resolver
        reads as one (``2852039166`` and ``0xA9FEA9FE`` are 169.254.169.254); a name is
        judged where it resolves, at each connection."""
        # A zone (fe80::1%eth0) is no part of the address; a trailing dot no part of it.
        bare = host.split("%", 1)[0].rstrip(".")
        return any(self.denies(address) for address in _numeric(bare))

    def transport(self) -> httpx.AsyncBaseTransport | None:
        """The transport deliveries go through: one that checks each connection's
        address (and sends what a proxy setting names through the proxy), or None
        (httpx's own) when nothing is denied."""
        if not self.denied:
            return None
        from tether.webhooks.guarded_transport import EgressTransport

        return EgressTransport(self)


#: NAT64's well-known prefix: the last 32 bits are the IPv4 address reached.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
#: NAT64's local-use prefix (RFC 8215), of any length from /48 to /96 within it: the
#: IPv4 address sits where RFC 6052 puts it for that length, around the u-octet (byte 8).
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_NAT64_PLACES = ((6, 7, 9, 10), (7, 9, 10, 11), (9, 10, 11, 12), (12, 13, 14, 15))
#: IPv4-translated addresses (SIIT), ::ffff:0:a.b.c.d.
_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
#: IPv4-compatible addresses (deprecated), ::a.b.c.d; :: and ::1 are not.
_COMPATIBLE = ipaddress.IPv6Network("::/96")


def _carried(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to where the network translates it:
    mapped (``::ffff:a.b.c.d``), translated, IPv4-compatible, NAT64 (well-known and
    local-use prefixes), 6to4 and Teredo."""
    if isinstance(ip, ipaddress.IPv4Address):
        return []
    carried = [a for a in (ip.ipv4_mapped, ip.sixtofour) if a is not None]
    if ip.teredo is not None:
        carried.append(ip.teredo[1])
    low = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _NAT64 or ip in _TRANSLATED or (ip in _COMPATIBLE and int(ip) > 1):
        carried.append(low)
    if ip in _NAT64_LOCAL:
        octets = ip.packed
        carried += [ipaddress.IPv4Address(bytes(octets[i] for i in at)) for at in _NAT64_PLACES]
    return carried


def _numeric(host: str) -> list[str]:
    """The addresses ``host`` spells, as the resolver reads it without a lookup; [] for
    a name."""
    try:
        found = socket.getaddrinfo(host, None, flags=socket.AI_NUMERICHOST)
    except (OSError, UnicodeError):
        return []
    return list(dict.fromkeys(str(info[4][0]) for info in found))
