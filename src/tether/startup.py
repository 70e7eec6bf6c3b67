"""Starting the server's services: open the store, build, load, recover.

Each step is its own function so that building never has side effects and recovery
reads as the ordered list it is (:func:`recover_from_last_run`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from tether import __version__, heap, node_loss, recovery
from tether.agent.ports import Gate
from tether.agent.turn import Agent
from tether.api import toolcalls as toolcalls_api
from tether.cluster.answers import answer_other_nodes
from tether.cluster.bus import ClusterBus
from tether.cluster.calls import ClusterCalls
from tether.cluster.lease import Load, NodeLease
from tether.config import Settings
from tether.governance.analyzer import Analyzer
from tether.governance.approvals import RESTARTED as LEFT_AT_RESTART
from tether.governance.approvals import ApprovalService
from tether.governance.context import AnalysisContext
from tether.governance.gate import GovernanceGate
from tether.governance.memory import DecisionMemory
from tether.governance.rulebook import RuleBook
from tether.keeper import inventory, retention
from tether.keeper.adoption import Adoption, adopt_calls
from tether.keeper.launcher import KeeperLauncher
from tether.keeper.startup import start_keeper
from tether.llm.client import OpenAIChatModel
from tether.llm.provider_service import ModelFactory, ProviderService
from tether.mcp.seams import Timing
from tether.mcp.service import McpService
from tether.sandbox.enforcers import home_tag
from tether.sandbox.launcher import SandboxLauncher
from tether.sandbox.service import Sandbox
from tether.sandbox.setup import sandbox_for
from tether.scheduler.clock import Clock, utc_now
from tether.scheduler.jobs import CronJobs
from tether.scheduler.runner import RunExecutor
from tether.scheduler.service import CronScheduler
from tether.security.environment import secret_variable_policy
from tether.security.keybox import KeyBox, shared_mode
from tether.services import Services
from tether.store.database import Database, shown_url
from tether.store.store import Store
from tether.tasks.service import RESTARTED, TaskService
from tether.tasks.session_turns import ClusterClaims, SessionTurns
from tether.toolcalls.coordinator import CoordinatorConfig, ToolCallCoordinator
from tether.toolcalls.launcher import Launcher
from tether.tools.current_time import TIME_TOOL
from tether.tools.files import FILE_TOOLS
from tether.tools.registry import ToolRegistry
from tether.tools.shell import make_shell_tool, shell_environment
from tether.webhooks.backoff import RetryPolicy
from tether.webhooks.egress import Egress, parse_networks
from tether.webhooks.events import Notify
from tether.webhooks.service import WebhookService

log = logging.getLogger(__name__)


async def start_services(
    settings: Settings,
    factory: ModelFactory | None = None,
    gate: Gate | None = None,
    clock: Clock | None = None,
    settle_heap: bool = False,
    join: bool = False,
) -> Services:
    """Open the store, build every service, load what is configured, recover.

    ``settle_heap``: once built and loaded, and before recovery (whose adopted calls
    and resumed turns end in time), what exists is exempted from later collections.
    ``join``: take this node's lease before recovering (see :func:`join_cluster`)."""
    services = await _build_and_load(settings, factory, gate, clock)
    if settle_heap:
        heap.settle()
    if join:
        await join_cluster(services)
    await recover_from_last_run(services)
    return services


async def _build_and_load(
    settings: Settings, factory: ModelFactory | None, gate: Gate | None, clock: Clock | None
) -> Services:
    store = await open_store(settings)
    # The app holds the home's lock: the groups found are a gone server's.
    tag = home_tag(settings.home)
    sandbox = await sandbox_for(settings, store.chats.sandbox_settings, tag, reap=True)
    # The keeper's runner is found or started before anything can launch a call.
    keeper = await start_keeper(settings, sandbox) if settings.keeper else None
    assert store.owner is not None
    bus = await ClusterBus.connect(settings, store.owner.id, store.tool_calls)
    services = build_services(settings, store, sandbox, factory, gate, clock, keeper, bus)
    await services.webhooks.load()
    await services.rules.load()
    await services.providers.bootstrap_from_env(os.environ)
    return services


async def open_store(settings: Settings) -> Store:
    """Create TETHER_HOME and the workspace if needed; open and migrate the database."""
    settings.home.mkdir(parents=True, exist_ok=True, mode=0o700)
    mode = shared_mode(settings.home)
    if mode is not None:
        # Not changed for the operator (the directory may be shared on purpose), but
        # the database in it holds chat history and tool output.
        log.warning(
            "TETHER_HOME %s is open to other users (mode %o); chmod 700 it", settings.home, mode
        )
    settings.resolved_workspace.mkdir(parents=True, exist_ok=True)
    db = Database(settings.resolved_database_url)
    await db.open_checked()
    return Store(db, await recovery.claim_owner(settings))


def build_services(
    settings: Settings,
    store: Store,
    sandbox: Sandbox,
    factory: ModelFactory | None = None,
    gate: Gate | None = None,
    clock: Clock | None = None,
    keeper: KeeperLauncher | None = None,
    bus: ClusterBus | None = None,
) -> Services:
    """Wire every service (no I/O: nothing is read, written or started here).
    With ``keeper`` (TETHER_KEEPER on), tool calls run under the detached runner; with
    ``bus`` (TETHER_REDIS_URL set), other nodes can follow and act on this node's calls."""
    shared_key = settings.secret_key.get_secret_value() if settings.secret_key else None
    keybox = KeyBox(settings.home / "secret.key", shared_key)
    egress = Egress(parse_networks(settings.webhook_deny_networks))
    hooks = WebhookService(store.webhooks, keybox, _retry_policy(settings), egress)
    mcp = McpService(
        store.mcp_clients,
        keybox,
        workspace=settings.resolved_workspace,
        state_dir=settings.home / "mcp",
        default_timeout=settings.mcp_call_timeout,
        timing=Timing(ping_interval=settings.mcp_ping_interval),
        wrap_server=sandbox.wrap_server,
    )
    analyzer = Analyzer(annotations_of=mcp.annotations_of)
    context = AnalysisContext(
        settings.resolved_workspace.resolve(), Path.home(), settings.home.resolve()
    )
    memory = DecisionMemory(store.remembered, context)
    elsewhere = bus.requests if bus is not None else None
    owner = store.owner.id if store.owner is not None else None
    approvals = ApprovalService(
        store.governance, settings.approval_timeout_seconds, memory, elsewhere, owner
    )
    rulebook = RuleBook(analyzer, store.governance)
    governance_gate = GovernanceGate(
        analyzer,
        context,
        approvals,
        store.governance,
        memory=memory,
        notify=hooks.notify,
        containment=sandbox.containment_of,
        rules_fresh=rulebook.fresh,
    )
    providers = ProviderService(store.providers, keybox, factory or _default_factory(settings))
    coordinator = ToolCallCoordinator(
        store.tool_calls,
        _coordinator_config(settings, recovery.marker_prefix(owner)),
        workspace=settings.resolved_workspace,
        protected=sandbox.state_paths,
        # Shell calls run in the sandbox either way: under the keeper's runner, or as
        # this server's children.
        launcher=_launcher(keeper, sandbox),
        mirror=bus.streams if bus is not None else None,
    )
    calls = ClusterCalls(coordinator, store.tool_calls, owner, bus)
    tools = _tools(settings, mcp, sandbox.available)
    active_gate = gate or governance_gate
    agent = Agent(
        store.chats,
        store.deliveries,
        providers,
        tools,
        coordinator,
        active_gate,
        settings.max_steps,
    )
    tasks = TaskService(
        store,
        agent,
        coordinator,
        settings.default_approval_level,
        settings.max_concurrent_tasks,
        when_unattended=settings.when_unattended,
        notify=hooks.notify,
        turns=_session_turns(settings, store, bus),
        elsewhere=elsewhere,
    )

    async def deliver(session_id: str, call_id: str, text: str) -> None:
        hooks.notify("tool_call.ended", await _ended_event(store, session_id, call_id))
        await tasks.on_background_result(session_id, call_id, text)

    # The one cycle (a background result wakes a turn, which runs calls), closed here.
    coordinator.deliver_background_results_to(deliver)
    if bus is not None:
        answer_other_nodes(bus.requests, coordinator, tasks, approvals)
    executor = RunExecutor(
        store.cron, store.chats, store.tool_calls, tasks, clock or utc_now, hooks.notify
    )
    cron = CronJobs(
        store.cron,
        CronScheduler(store.cron, executor, clock or utc_now, owner),
        settings.default_approval_level,
    )
    return Services(
        settings,
        store,
        providers,
        coordinator,
        agent,
        tasks,
        approvals,
        rulebook,
        cron,
        mcp,
        tools,
        active_gate,
        memory,
        hooks,
        governance_gate,
        _build_lease(settings, store, governance_gate, coordinator, tasks, hooks.notify),
        sandbox,
        calls,
        keeper,
        bus,
    )


def _session_turns(settings: Settings, store: Store, bus: ClusterBus | None) -> SessionTurns:
    """One turn per session: on this node; with other nodes (a bus), across them too."""
    if bus is None or store.owner is None:
        return SessionTurns()
    claims = ClusterClaims(store.session_turns, settings.resolved_node_id, store.owner.id)
    return SessionTurns(claims)


def _build_lease(
    settings: Settings,
    store: Store,
    gate: GovernanceGate,
    coordinator: ToolCallCoordinator,
    tasks: TaskService,
    notify: Notify,
) -> NodeLease:
    def load() -> Load:
        return Load(coordinator.live_count(), tasks.running_count())

    return NodeLease(
        store.nodes,
        settings.resolved_node_id,
        __version__,
        settings.node_lease_seconds,
        load,
        functools.partial(node_loss.end_lost_node, store, gate, notify),
        owner=store.owner.id if store.owner is not None else None,
        on_return=functools.partial(node_loss.drop_what_was_ended, store, coordinator, tasks),
    )


async def join_cluster(services: Services) -> None:
    """Take this node's lease, keep renewing it, and log the nodes found alive.

    Before recovery: a survivor that found this node's last run silent either ended
    that run's rows first (then recovery finds them ended, and kills what the runner
    still runs of them rather than adopting it), or finds the lease renewed and
    declares nothing (see NodeLease.join). Taken after, the lease let a survivor end
    the rows, reap the processes and fail the tasks this start had just taken up."""
    lease = services.lease
    await lease.join()
    lease.start()
    alive = [n.id for n in await services.store.nodes.all() if lease.is_alive(n)]
    log.info(
        "node %s joined the cluster on %s (%d node(s) alive: %s)",
        lease.node_id,
        shown_url(services.store.db.url),
        len(alive),
        ", ".join(alive),
    )


async def recover_from_last_run(services: Services) -> None:
    """Make the store true again after the last run ended, in this order:

    1. with the keeper, the calls its runner kept are adopted (their tasks resume in
       step 4, and this server owns them from now on), and the files of calls ended
       past TETHER_CALL_RETENTION_DAYS removed;
    2. the other tool calls left running are recorded as interrupted and their
       processes reaped (before anything can start a new call);
    3. approval requests left pending are denied (fail closed) and audited;
    4. tasks whose calls were adopted are resumed, the others left running are failed,
       and results waiting for an idle session wake it (this can start turns, so it
       comes once everything above is settled);
    5. cron runs whose turn was resumed go on (within what is left of their timeout),
       the others left running are recorded as errors.

    Only what servers that are gone left behind: another live server may share the
    database, and its calls, tasks and runs are not this one's to end
    (:mod:`tether.recovery`).
    """
    store = services.store
    assert store.owner is not None, "the store was opened without an owner"
    dead = await recovery.dead_owners(store, store.owner, services.lease)
    adoption = await _adopt_kept_calls(services, dead.all)
    kept = adoption.adopted if adoption is not None else set()
    # Not reaped by marker with the keeper: its calls carry the marker too, and they
    # are meant to live on.
    await recovery.interrupt_calls(
        store,
        dead,
        RESTARTED,
        LEFT_AT_RESTART.audit,
        keep=kept,
        by_marker=services.keeper is None,
    )
    # Pending requests whose call still runs on a live server are left alone.
    denied = await services.governance_gate.deny_leftovers()
    if denied:
        log.info("denied %d approval request(s) left pending by the last run", denied)
    await services.tasks.recover(dead.all, adoption)
    await services.cron.scheduler.recover(dead.all, services.tasks.running_ids())
    await recovery.forget(store.owner, dead)


async def _adopt_kept_calls(services: Services, gone: Collection[str | None]) -> Adoption | None:
    """Adopt the calls the keeper's runner kept for the ``gone`` owners (this server owns
    them from now on); sweep call files past retention."""
    settings, keeper = services.settings, services.keeper
    if keeper is None:
        return None
    store = services.store
    directories = await asyncio.to_thread(inventory.call_directories, settings.home)
    adoption = await adopt_calls(
        settings.home, keeper, services.coordinator, store.tool_calls, directories, gone
    )
    await store.tool_calls.take_over(adoption.adopted)
    cutoff = time.time() - settings.call_retention_days * 86400
    await retention.sweep(settings.home, cutoff, directories, adoption.rowless)
    return adoption


def _retry_policy(settings: Settings) -> RetryPolicy:
    return RetryPolicy(
        first_delay=settings.webhook_retry_first_seconds,
        max_delay=settings.webhook_retry_max_seconds,
        give_up_after=settings.webhook_give_up_seconds,
        timeout=settings.webhook_timeout_seconds,
    )


async def _ended_event(store: Store, session_id: str, call_id: str) -> dict[str, Any]:
    """The tool_call.ended notification of a call that ended in the background."""
    record = await store.tool_calls.get(session_id, call_id)
    event: dict[str, Any] = {"session_id": session_id, "tool_call_id": call_id}
    if record is not None:
        event.update(
            tool_name=record.tool_name,
            task_id=record.task_id,
            end_state=record.end_state,
            end_reason=record.end_reason,
            finished_at=record.finished_at,
        )
    return event


def _default_factory(settings: Settings) -> ModelFactory:
    def make(base_url: str, api_key: str, model: str) -> OpenAIChatModel:
        return OpenAIChatModel(
            base_url,
            api_key,
            model,
            settings.llm_max_retries,
            settings.llm_timeout_seconds,
            settings.llm_reply_deadline_seconds or None,
        )

    return make


def _coordinator_config(settings: Settings, marker_prefix: str) -> CoordinatorConfig:
    # toolcalls/ knows no HTTP: the output route's path is passed in, as a template.
    output_path = toolcalls_api.router.url_path_for(
        "get_output", session_id="{session_id}", tool_call_id="{call_id}"
    )
    return CoordinatorConfig(
        offload_after=settings.offload_after_seconds,
        cancel_grace=settings.cancel_grace_seconds,
        model_output_chars=settings.model_output_chars,
        output_memory_bytes=settings.output_memory_bytes,
        max_per_session=settings.max_calls_per_session,
        max_total=settings.max_calls_total,
        marker_prefix=marker_prefix,
        output_location=str(output_path),
        output_store_bytes=settings.output_store_bytes,
    )


def _launcher(keeper: KeeperLauncher | None, sandbox: Sandbox) -> Launcher:
    return keeper if keeper is not None else SandboxLauncher(sandbox)


def _tools(settings: Settings, mcp: McpService, sandboxed: bool) -> ToolRegistry:
    is_secret = secret_variable_policy(settings.secret_env_vars)
    shell = make_shell_tool(
        settings.shell_default_timeout,
        settings.shell_max_timeout,
        lambda: shell_environment(os.environ, is_secret),
        sandboxed=sandboxed,
    )
    return ToolRegistry([shell, TIME_TOOL, *FILE_TOOLS], sources=[mcp.tools])
