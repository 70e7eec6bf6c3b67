"""The cluster's Redis side as one piece: live output streams and requests between nodes.

Built only when ``TETHER_REDIS_URL`` is set; one node without it has no bus at all.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tether.cluster.node_requests import NodeRequests
from tether.cluster.output_streams import OutputStreams
from tether.cluster.redis_link import RedisLink, shown_redis_url
from tether.config import Settings

log = logging.getLogger(__name__)


@dataclass
class ClusterBus:
    link: RedisLink
    streams: OutputStreams
    requests: NodeRequests

    @classmethod
    async def connect(cls, settings: Settings, owner: str) -> ClusterBus | None:
        """The bus, if the settings name a Redis (Unavailable if it cannot be reached)."""
        if settings.redis_url is None:
            return None
        url = settings.redis_url.get_secret_value()
        link = await RedisLink.connect(url, settings.redis_prefix)
        log.info("cluster bus on %s (keys %s:*)", shown_redis_url(url), settings.redis_prefix)
        return cls(
            link, OutputStreams(link), NodeRequests(link, owner, settings.node_answer_seconds)
        )

    def start(self) -> None:
        self.streams.start()
        self.requests.start()

    async def close(self) -> None:
        await self.requests.close()
        await self.streams.close()
        await self.link.close()
