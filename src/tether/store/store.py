"""The repositories, gathered behind one object the services receive."""

from __future__ import annotations

from tether.store.chats import ChatRepository
from tether.store.cron import CronRepository
from tether.store.database import Database
from tether.store.deliveries import DeliveryRepository
from tether.store.governance import GovernanceRepository
from tether.store.mcp import McpClientRepository
from tether.store.nodes import NodeRepository
from tether.store.owners import OwnerLock
from tether.store.providers import ProviderRepository
from tether.store.remembered import RememberedRepository
from tether.store.session_turns import SessionTurnRepository
from tether.store.tasks import TaskRepository
from tether.store.toolcalls import ToolCallRepository
from tether.store.webhooks import WebhookRepository


class Store:
    """Every repository over one database."""

    def __init__(self, db: Database, owner: OwnerLock | None = None) -> None:
        self.db = db
        #: The server writing through this store, recorded on the tasks and calls it
        #: starts (see store/owners.py); None in tests that need no recovery.
        self.owner = owner
        owner_id = owner.id if owner is not None else None
        self.providers = ProviderRepository(db)
        self.chats = ChatRepository(db)
        self.tasks = TaskRepository(db, owner_id)
        self.tool_calls = ToolCallRepository(db, owner_id)
        self.deliveries = DeliveryRepository(db)
        self.governance = GovernanceRepository(db)
        self.cron = CronRepository(db)
        self.nodes = NodeRepository(db)
        self.mcp_clients = McpClientRepository(db)
        self.remembered = RememberedRepository(db)
        self.webhooks = WebhookRepository(db)
        self.session_turns = SessionTurnRepository(db)
