"""The running server's services, built once by the app factory."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from tether.agent.ports import Gate
from tether.agent.turn import Agent
from tether.cluster.bus import ClusterBus
from tether.cluster.calls import ClusterCalls
from tether.cluster.lease import NodeLease
from tether.config import Settings
from tether.governance.approvals import ApprovalService
from tether.governance.gate import GovernanceGate
from tether.governance.memory import DecisionMemory
from tether.governance.rulebook import RuleBook
from tether.keeper.launcher import KeeperLauncher
from tether.llm.provider_service import ProviderService
from tether.mcp.service import McpService
from tether.sandbox.service import Sandbox
from tether.scheduler.jobs import CronJobs
from tether.store.store import Store
from tether.tasks.chats import ChatService
from tether.tasks.service import TaskService
from tether.toolcalls.coordinator import ToolCallCoordinator
from tether.tools.registry import ToolRegistry
from tether.webhooks.service import WebhookService


@dataclass
class Services:
    settings: Settings
    store: Store
    providers: ProviderService
    coordinator: ToolCallCoordinator
    agent: Agent
    tasks: TaskService
    approvals: ApprovalService
    rules: RuleBook
    cron: CronJobs
    mcp: McpService
    tools: ToolRegistry
    gate: Gate
    memory: DecisionMemory
    webhooks: WebhookService
    governance_gate: GovernanceGate
    lease: NodeLease
    sandbox: Sandbox
    # What a person asks of a call, wherever in the cluster it runs.
    calls: ClusterCalls
    # The keeper's launcher when TETHER_KEEPER is on (its hub is closed at shutdown).
    keeper: KeeperLauncher | None = None
    # Redis between nodes when TETHER_REDIS_URL is set.
    bus: ClusterBus | None = None
    chats: ChatService = field(init=False)
    #: Set when the server is asked to exit: open SSE streams end (a call's stream is
    #: resumed with Last-Event-ID), so they do not hold the exit for uvicorn's 5 s grace.
    exiting: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.chats = ChatService(self.store.chats, self.tasks)
