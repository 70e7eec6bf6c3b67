"""The cluster's Redis side as one piece: live output streams, requests between nodes,
and the word that a session's calls changed.

Built only when ``TETHER_REDIS_URL`` is set; one node without it has no bus at all.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tether.cluster import signed
from tether.cluster.node_requests import NodeRequests
from tether.cluster.output_streams import OutputStreams
from tether.cluster.redis_link import RedisLink, shown_redis_url
from tether.cluster.unfinished_view import UnfinishedView
from tether.config import Settings
from tether.errors import Invalid
from tether.store.toolcalls import ToolCallRepository

log = logging.getLogger(__name__)

NEEDS_SECRET_KEY = (
    "TETHER_REDIS_URL needs TETHER_SECRET_KEY, the same on every node: it opens the "
    "secrets the nodes share and signs what they ask of each other"
)


@dataclass
class ClusterBus:
    link: RedisLink
    streams: OutputStreams
    requests: NodeRequests
    unfinished: UnfinishedView

    @classmethod
    async def connect(
        cls, settings: Settings, owner: str, calls: ToolCallRepository
    ) -> ClusterBus | None:
        """The bus, if the settings name a Redis (Unavailable if it cannot be reached)."""
        if settings.redis_url is None:
            return None
        if settings.secret_key is None:
            raise Invalid(NEEDS_SECRET_KEY, field="TETHER_SECRET_KEY")
        url = settings.redis_url.get_secret_value()
        link = await RedisLink.connect(url, settings.redis_prefix)
        log.info("cluster bus on %s (keys %s:*)", shown_redis_url(url), settings.redis_prefix)
        key = signed.request_key(settings.secret_key.get_secret_value())
        requests = NodeRequests(link, owner, settings.node_answer_seconds, key)
        unfinished = UnfinishedView(link, calls)
        calls.report_changes(unfinished.changed)
        return cls(link, OutputStreams(link), requests, unfinished)

    def start(self) -> None:
        self.streams.start()
        self.requests.start()
        self.unfinished.start()

    async def close(self) -> None:
        await self.unfinished.close()
        await self.requests.close()
        await self.streams.close()
        await self.link.close()
