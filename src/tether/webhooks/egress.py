"""Where webhook deliveries may not go (TETHER_WEBHOOK_DENY_NETWORKS).

A webhook's URL is chosen by whoever holds an API token, and its deliveries leave from
the server's own network position. By default they may not reach link-local addresses
(169.254.0.0/16, fe80::/10), where cloud machines are served their instance metadata
and credentials, nor the metadata addresses some clouds keep outside that range. Loopback
and private networks stay allowed: a relay on the same machine or network is the common
receiver of a self-hosted server. The list is a setting; an empty one allows everything.

The check is made on the address a delivery actually connects to, after the host name is
resolved, so a name that resolves to a denied address (or starts to, between two
attempts) is refused too. A URL whose host is a denied address is refused when the
webhook is made. Behind an HTTP proxy (HTTP_PROXY and the like) the proxy makes the
connection, so only URLs that name an address are checked: the proxy is the place to
police the rest.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

DEFAULT_DENIED = "169.254.0.0/16,fe80::/10,fd00:ec2::254/128,100.100.100.200/32"
SETTING = "TETHER_WEBHOOK_DENY_NETWORKS"
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")

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
        """Whether ``address`` (an IP address, IPv6 with or without a zone) is denied; an
        IPv4 address written as IPv6 (``::ffff:169.254.169.254``) counts as IPv4."""
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        return any(ip in network for network in self.denied)

    def denies_host(self, host: str) -> bool:
        """Whether ``host`` is an address that is denied (a name is judged when it is
        resolved, at each delivery)."""
        try:
            return self.denies(host)
        except ValueError:
            return False

    def transport(self) -> httpx.AsyncBaseTransport | None:
        """The transport deliveries go through: one that checks each connection's
        address, or None (httpx's own) when nothing is denied or a proxy connects."""
        if not self.denied or _proxied():
            return None
        from tether.webhooks.guarded_transport import GuardedTransport

        return GuardedTransport(self)


def _proxied() -> bool:
    return any(os.environ.get(name) or os.environ.get(name.upper()) for name in _PROXY_VARIABLES)
