"""The repositories, gathered behind one object the services receive."""

from __future__ import annotations

from tether.store.chats import ChatRepository
from tether.store.cron import CronRepository
from tether.store.database import Database
from tether.store.deliveries import DeliveryRepository
from tether.store.governance import GovernanceRepository
from tether.store.mcp import McpClientRepository
from tether.store.nodes import NodeRepository
from tether.store.providers import ProviderRepository
from tether.store.remembered import RememberedRepository
from tether.store.tasks import TaskRepository
from tether.store.toolcalls import ToolCallRepository
from tether.store.webhooks import WebhookRepository


class Store:
    """Every repository over one database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.providers = ProviderRepository(db)
        self.chats = ChatRepository(db)
        self.tasks = TaskRepository(db)
        self.tool_calls = ToolCallRepository(db)
        self.deliveries = DeliveryRepository(db)
        self.governance = GovernanceRepository(db)
        self.cron = CronRepository(db)
        self.nodes = NodeRepository(db)
        self.mcp_clients = McpClientRepository(db)
        self.remembered = RememberedRepository(db)
        self.webhooks = WebhookRepository(db)
