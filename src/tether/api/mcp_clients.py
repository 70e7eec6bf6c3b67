"""/api/mcp: MCP client configurations, their live status and their tools (QwenPaw's routes).

The fixed paths (``/tools/...``, ``/toggle/...``) are declared before ``/{client_key}`` so
that they are matched first. Errors are raised by the service and mapped in api/errors.py.
"""

from __future__ import annotations

from fastapi import APIRouter

from tether.api.deps import ServicesDep
from tether.api.valid_json import ValidTextRoute
from tether.mcp.spec import (
    McpClientInfo,
    McpClientUpdate,
    McpCreateRequest,
    McpToolInfo,
    McpToolList,
)

router = APIRouter(prefix="/api/mcp", tags=["mcp"], route_class=ValidTextRoute)


@router.get("")
async def list_clients(services: ServicesDep) -> list[McpClientInfo]:
    return await services.mcp.list_clients()


@router.post("", status_code=201)
async def create_client(body: McpCreateRequest, services: ServicesDep) -> McpClientInfo:
    return await services.mcp.create(body.client_key, body.client)


@router.get("/tools/{client_key}")
async def list_tools(client_key: str, services: ServicesDep) -> list[McpToolInfo]:
    return await services.mcp.list_tools(client_key)


@router.put("/tools/{client_key}")
async def set_tools(client_key: str, body: McpToolList, services: ServicesDep) -> list[McpToolInfo]:
    return await services.mcp.set_allow_list(client_key, body.tools)


@router.patch("/toggle/{client_key}")
async def toggle_client(client_key: str, services: ServicesDep) -> McpClientInfo:
    return await services.mcp.toggle(client_key)


@router.get("/{client_key}")
async def get_client(client_key: str, services: ServicesDep) -> McpClientInfo:
    return await services.mcp.get_client(client_key)


@router.put("/{client_key}")
async def update_client(
    client_key: str, body: McpClientUpdate, services: ServicesDep
) -> McpClientInfo:
    return await services.mcp.update(client_key, body)


@router.delete("/{client_key}")
async def delete_client(client_key: str, services: ServicesDep) -> dict[str, str]:
    return await services.mcp.delete(client_key)
