"""The application factory: builds the services, mounts the routers, runs the lifespan."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from tether import __version__
from tether.agent.ports import Gate
from tether.agent.turn import Agent
from tether.api import (
    approvals,
    chat,
    chats,
    cron,
    errors,
    governance,
    health,
    mcp_clients,
    providers,
    toolcalls,
    webhooks,
)
from tether.config import Settings
from tether.governance.analyzer import Analyzer
from tether.governance.approvals import ApprovalService
from tether.governance.context import AnalysisContext
from tether.governance.gate import GovernanceGate
from tether.governance.memory import DecisionMemory
from tether.governance.rulebook import RuleBook
from tether.keeper import home_lock, retention
from tether.keeper.adoption import Adoption, adopt_calls
from tether.keeper.launcher import KeeperLauncher
from tether.keeper.startup import start_keeper
from tether.llm.client import OpenAIChatModel
from tether.llm.providers import ModelFactory, ProviderService
from tether.mcp.connection import Timing
from tether.mcp.endpoint import build_endpoint, endpoint_routes, serving
from tether.mcp.service import McpService
from tether.scheduler.clock import Clock, utc_now
from tether.scheduler.jobs import CronJobs
from tether.scheduler.runner import RunExecutor
from tether.scheduler.service import CronScheduler
from tether.security.environment import secret_variable_policy
from tether.security.keybox import KeyBox, shared_mode
from tether.security.perimeter import Perimeter, PerimeterPolicy, allowed_host_names
from tether.security.token import resolve_token
from tether.services import Services
from tether.store.database import Database
from tether.store.store import Store
from tether.tasks.service import RESTARTED, TaskService
from tether.toolcalls import process_tree
from tether.toolcalls.coordinator import CoordinatorConfig, ToolCallCoordinator
from tether.tools.clock import TIME_TOOL
from tether.tools.files import FILE_TOOLS
from tether.tools.registry import ToolRegistry
from tether.tools.shell import make_shell_tool, shell_environment
from tether.web.routes import mount_console
from tether.webhooks.backoff import RetryPolicy
from tether.webhooks.events import Notify
from tether.webhooks.service import WebhookService

log = logging.getLogger(__name__)


def _default_factory(settings: Settings) -> ModelFactory:
    def make(base_url: str, api_key: str, model: str) -> OpenAIChatModel:
        return OpenAIChatModel(
            base_url, api_key, model, settings.llm_max_retries, settings.llm_timeout_seconds
        )

    return make


def _marker_prefix(settings: Settings) -> str:
    digest = hashlib.sha256(str(settings.home.resolve()).encode()).hexdigest()[:12]
    return f"tether-{digest}"


def _output_location() -> str:
    """The output route's path, as a template the coordinator fills in per call."""
    path = toolcalls.router.url_path_for(
        "get_output", session_id="{session_id}", tool_call_id="{call_id}"
    )
    return str(path)


async def build_services(
    settings: Settings,
    factory: ModelFactory | None = None,
    gate: Gate | None = None,
    clock: Clock | None = None,
) -> Services:
    """Open the store, recover from the last run, and wire every service."""
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
    await db.migrate()
    store = Store(db)
    prefix = _marker_prefix(settings)
    launcher = await start_keeper(settings) if settings.keeper else None
    keybox = KeyBox(settings.home / "secret.key")
    hooks = WebhookService(store.webhooks, keybox, _retry_policy(settings))
    await hooks.load()
    mcp = McpService(
        store.mcp_clients,
        keybox,
        workspace=settings.resolved_workspace,
        state_dir=settings.home / "mcp",
        default_timeout=settings.mcp_call_timeout,
        timing=Timing(ping_interval=settings.mcp_ping_interval),
    )
    analyzer = Analyzer(annotations_of=mcp.annotations_of)
    rules = RuleBook(analyzer, store.governance)
    await rules.load()
    context = AnalysisContext(
        settings.resolved_workspace.resolve(), Path.home(), settings.home.resolve()
    )
    memory = DecisionMemory(store.remembered, context)
    await memory.load()
    approval_service = ApprovalService(store.governance, settings.approval_timeout_seconds, memory)
    governance_gate = GovernanceGate(
        analyzer, context, approval_service, store.governance, memory=memory, notify=hooks.notify
    )
    denied = await governance_gate.deny_leftovers()
    if denied:
        log.info("denied %d approval request(s) left pending by the last run", denied)
    provider_service = ProviderService(
        store.providers, keybox, factory or _default_factory(settings)
    )
    await provider_service.bootstrap_from_env(os.environ)
    holder: dict[str, TaskService] = {}

    async def deliver(session_id: str, call_id: str, text: str) -> None:
        hooks.notify("tool_call.ended", await _ended_event(store, session_id, call_id))
        await holder["tasks"].on_background_result(session_id, call_id, text)

    coordinator = ToolCallCoordinator(
        store.tool_calls,
        CoordinatorConfig(
            offload_after=settings.offload_after_seconds,
            cancel_grace=settings.cancel_grace_seconds,
            model_output_chars=settings.model_output_chars,
            output_memory_bytes=settings.output_memory_bytes,
            max_per_session=settings.max_calls_per_session,
            max_total=settings.max_calls_total,
            marker_prefix=prefix,
            output_location=_output_location(),
            output_store_bytes=settings.output_store_bytes,
        ),
        workspace=settings.resolved_workspace,
        protected=(settings.home.resolve(),),
        on_background_result=deliver,
        launcher=launcher,
    )
    adoption = await _recover_calls(settings, store, coordinator, launcher, prefix)
    is_secret = secret_variable_policy(settings.secret_env_vars)
    shell = make_shell_tool(
        settings.shell_default_timeout,
        settings.shell_max_timeout,
        lambda: shell_environment(os.environ, is_secret),
    )
    tools = ToolRegistry([shell, TIME_TOOL, *FILE_TOOLS], sources=[mcp.tools])
    active_gate = gate or governance_gate
    agent = Agent(
        store.chats,
        store.deliveries,
        provider_service,
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
    )
    holder["tasks"] = tasks
    await tasks.recover(adoption)
    cron = await _build_cron(store, tasks, clock or utc_now, hooks.notify)
    return Services(
        settings,
        store,
        provider_service,
        coordinator,
        agent,
        tasks,
        approval_service,
        rules,
        cron,
        mcp,
        tools,
        active_gate,
        memory,
        hooks,
        launcher,
    )


async def _recover_calls(
    settings: Settings,
    store: Store,
    coordinator: ToolCallCoordinator,
    launcher: KeeperLauncher | None,
    prefix: str,
) -> Adoption | None:
    """Adopt the calls the keeper kept; record the others as interrupted and reap them."""
    adoption = None
    if launcher is not None:
        adoption = await adopt_calls(settings.home, launcher, coordinator, store.tool_calls)
        cutoff = time.time() - settings.call_retention_days * 86400
        await retention.sweep(settings.home, cutoff, store.tool_calls)
    kept = adoption.adopted if adoption is not None else set()
    leftovers = await store.tool_calls.interrupt_unfinished(RESTARTED, keep=kept)
    # Reap even when no group was recorded: a crash can come before the pgid is saved,
    # and the marker in the environment still finds those processes. Not with the
    # keeper: its calls carry the marker too, and they are meant to live on.
    marked = None if launcher is not None else prefix
    reaped = await asyncio.to_thread(process_tree.reap_groups, leftovers, marked)
    if leftovers or reaped:
        log.info(
            "recorded %d interrupted call group(s); reaped %d process(es)", len(leftovers), reaped
        )
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


async def _build_cron(store: Store, tasks: TaskService, clock: Clock, notify: Notify) -> CronJobs:
    executor = RunExecutor(store.cron, store.chats, store.tool_calls, tasks, clock, notify)
    scheduler = CronScheduler(store.cron, executor, clock)
    await scheduler.recover()
    return CronJobs(store.cron, scheduler)


def create_app(settings: Settings, factory: ModelFactory | None = None) -> Any:
    """The ASGI application: the FastAPI app behind the perimeter middleware."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        lock = home_lock.hold(settings.home)
        try:
            async with _serving(app, settings, factory):
                yield
        finally:
            home_lock.release(lock)

    @asynccontextmanager
    async def _serving(
        app: FastAPI, settings: Settings, factory: ModelFactory | None
    ) -> AsyncIterator[None]:
        services = await build_services(settings, factory)
        app.state.services = services
        services.webhooks.start()
        services.cron.scheduler.start()
        await services.mcp.start()
        try:
            async with serving(mcp_endpoint):
                yield
        finally:
            # No new cron runs; the runs in progress stop their turns.
            await services.cron.scheduler.shutdown()
            # Turns first (their calls are recorded as stopped by the shutdown), then
            # whatever still runs in the background.
            detach = settings.keeper and settings.on_shutdown == "detach"
            services.coordinator.begin_shutdown(detach)
            await services.tasks.shutdown(detach)
            await services.coordinator.shutdown()
            await services.mcp.close()
            if services.keeper is not None:
                await services.keeper.hub.close()
            # Last: what the shutdown itself notified is queued for the next start.
            await services.webhooks.shutdown()
            await services.store.db.close()

    app = FastAPI(title="Tether", version=__version__, lifespan=lifespan)
    mcp_endpoint = build_endpoint(lambda: app.state.services)
    app.router.routes.extend(endpoint_routes(mcp_endpoint))
    errors.install(app)
    for module in (
        health,
        providers,
        chat,
        chats,
        toolcalls,
        approvals,
        governance,
        cron,
        mcp_clients,
        webhooks,
    ):
        app.include_router(module.router)
    token = (
        None
        if settings.no_auth
        else resolve_token(
            settings.token.get_secret_value() if settings.token else None, settings.home
        )
    )
    mount_console(app, token)
    policy = PerimeterPolicy(
        token=token,
        allowed_hosts=allowed_host_names(settings.host, settings.allowed_hosts),
        max_body_bytes=settings.max_body_bytes,
    )
    return Perimeter(app, policy)
