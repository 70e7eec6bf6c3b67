"""/api/cluster: the nodes sharing this database and their leases."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, Field

from tether.api.deps import ServicesDep
from tether.scheduler.clock import from_epoch
from tether.store.records import NodeRecord

router = APIRouter(prefix="/api/cluster", tags=["cluster"])


class NodeOut(BaseModel):
    id: str
    version: str
    started: datetime
    last_renewal: datetime
    alive: bool = Field(description="Renewed its lease within `lease_seconds`.")
    live_calls: int = Field(description="Tool calls in flight, as of its last renewal.")
    running_tasks: int = Field(description="Chat tasks running, as of its last renewal.")


class ClusterOut(BaseModel):
    node_id: str = Field(description="The node that answered.")
    lease_seconds: float
    nodes: list[NodeOut]


def _out(node: NodeRecord, alive: bool) -> NodeOut:
    started, renewed = from_epoch(node.started_at), from_epoch(node.renewed_at)
    assert started is not None and renewed is not None
    return NodeOut(
        id=node.id,
        version=node.version,
        started=started,
        last_renewal=renewed,
        alive=alive,
        live_calls=node.live_calls,
        running_tasks=node.running_tasks,
    )


@router.get("", response_model=ClusterOut)
async def get_cluster(services: ServicesDep) -> ClusterOut:
    """Every node with a lease row: alive ones, and dead ones not yet cleared."""
    lease = services.lease
    nodes = await services.store.nodes.all()
    return ClusterOut(
        node_id=lease.node_id,
        lease_seconds=lease.lease_seconds,
        nodes=[_out(n, lease.is_alive(n)) for n in nodes],
    )
