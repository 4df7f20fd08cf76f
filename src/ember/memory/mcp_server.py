"""``ember mcp``: the served project's memory as a Model Context Protocol server.

Built on the official SDK's low-level ``Server`` (``mcp``), which takes the tools list as
written: the schemas in ``mcp_tools`` are what every prompt that lists them carries, with no
generated titles or wrappers added. Five tools (``memory_search``, ``memory_save``,
``memory_update``, ``memory_forget``, ``memory_list``) and two read-only resources
(``ember://memories``, ``ember://spend``), over stdio (the default: the client starts the
server) or streamable HTTP on loopback.

Invariants, and what each prevents:

- stdout carries the protocol and nothing else: the SDK's stdio transport points file
  descriptor 1 at stderr while it serves, and every log goes to stderr (a stray line on stdout
  is a frame the client cannot parse, and it drops the connection);
- a tool never raises into the transport: bad arguments, an unknown id or a store failure
  come back as a tool result with ``isError`` saying what was wrong and the fix, which the
  model reads and acts on; a tool or resource that does not exist is a protocol error
  (``INVALID_PARAMS``), the client's mistake rather than the model's;
- the tools are listed from their definitions alone (``build_server``'s ``listed`` readies
  the store and the model after that): a client waits for them before its first turn;
- blocking work (SQLite, the embedder) runs in worker threads, so a slow first search (one
  that waits for the model) does not stall the other requests of the connection;
- over HTTP, a non-loopback address is refused, and every request needs the server's bearer
  token (``mcp_token``, or one made at start) and passes ``ember.hosts``'s checks of ``Host``
  and ``Origin``: neither a web page (through DNS rebinding, or a cross-site POST) nor another
  local process can list or forget memories. The check runs before the SDK sees the request.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import anyio.to_thread
import mcp_types as types
from mcp.server import Server
from mcp.shared.exceptions import MCPError

from ember import __version__
from ember.errors import EmberError
from ember.hosts import HostPolicy, Refused, bearer, is_loopback_name, scope_headers
from ember.memory.errors import MemoryInputError, MemoryNotFound
from ember.memory.mcp_tools import FORGET, LIST, SAVE, SEARCH, TOOLS, UPDATE, ToolDef, parse

if TYPE_CHECKING:
    from ember.memory.mcp_tools import ForgetArgs, ListArgs, SaveArgs, SearchArgs, UpdateArgs

log = logging.getLogger(__name__)

MEMORIES_URI = "ember://memories"
SPEND_URI = "ember://spend"
DEFAULT_HTTP_PORT = 8789
HTTP_PATH = "/mcp"

_RESOURCES = (
    types.Resource(
        uri=MEMORIES_URI,
        name="memories",
        description="This project's current memories, newest first (at most 1000).",
        mime_type="application/json",
    ),
    types.Resource(
        uri=SPEND_URI,
        name="spend",
        description="Requests, tokens and cost accounted for this project, by origin.",
        mime_type="application/json",
    ),
)


class ServedMemory(Protocol):
    """What the tools and resources do (``mcp_memory.ProjectMemory``; blocking, run on worker
    threads)."""

    def search(self, args: SearchArgs) -> dict[str, Any]: ...
    def save(self, args: SaveArgs, client: str | None) -> dict[str, Any]: ...
    def update(self, args: UpdateArgs) -> dict[str, Any]: ...
    def forget(self, args: ForgetArgs) -> dict[str, Any]: ...
    def listing(self, args: ListArgs) -> dict[str, Any]: ...
    def memories(self) -> dict[str, Any]: ...
    def spend(self) -> dict[str, Any]: ...


def build_server(memory: ServedMemory, listed: Callable[[], None] | None = None) -> Server[Any]:
    """The MCP server over ``memory`` (which it does not close: the caller does).
    ``listed`` is called once, when the tools were first listed: the client is served, and
    what it will want next (the store, the model) can be readied in the background."""
    operations: dict[str, Callable[[Any, str | None], dict[str, Any]]] = {
        SEARCH: lambda a, _: memory.search(a),
        SAVE: memory.save,
        UPDATE: lambda a, _: memory.update(a),
        FORGET: lambda a, _: memory.forget(a),
        LIST: lambda a, _: memory.listing(a),
    }
    readers: dict[str, Callable[[], dict[str, Any]]] = {
        MEMORIES_URI: memory.memories,
        SPEND_URI: memory.spend,
    }
    tools = types.ListToolsResult(tools=[_tool(t) for t in TOOLS])
    first = [listed]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        if first[0] is not None:
            then, first[0] = first[0], None
            then()
        return tools

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        operation = operations.get(params.name)
        if operation is None:
            raise MCPError(
                types.INVALID_PARAMS,
                f"unknown tool {params.name!r}; ember's are {', '.join(operations)}",
            )
        return await _run(params.name, operation, params.arguments, _client_name(ctx))

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=list(_RESOURCES))

    async def read_resource(
        ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        reader = readers.get(uri)
        if reader is None:
            raise MCPError(
                types.INVALID_PARAMS, f"unknown resource {uri!r}; ember's are {', '.join(readers)}"
            )
        try:
            doc = await anyio.to_thread.run_sync(reader)
        except EmberError as exc:
            raise MCPError(types.INTERNAL_ERROR, f"{uri} cannot be read: {exc}") from exc
        text = json.dumps(doc, ensure_ascii=False)
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, text=text, mime_type="application/json")]
        )

    return Server(
        "ember",
        version=__version__,
        title="ember memory",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )


def build_unserved(reason: str) -> Server[Any]:
    """A server for a directory that names no project: it answers the handshake, lists no
    tools and no resources (nothing in the agent's prompt), and says ``reason`` in its
    instructions; a call of a tool anyway gets the reason as its error."""

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return _error(f"ember mcp serves no memory here: {reason}")

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[])

    return Server(
        "ember",
        version=__version__,
        title="ember memory",
        instructions=f"ember serves no memory in this session: {reason}",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
    )


async def _run(
    name: str,
    operation: Callable[[Any, str | None], dict[str, Any]],
    arguments: dict[str, Any] | None,
    client: str | None,
) -> types.CallToolResult:
    """One tool call: its arguments checked, its work on a worker thread, its answer as JSON
    text; every failure ember foresaw is an ``isError`` result saying what to do."""
    try:
        args = parse(name, arguments)
        doc = await anyio.to_thread.run_sync(operation, args, client)
    except (MemoryInputError, MemoryNotFound) as exc:
        return _error(str(exc))
    except EmberError as exc:
        log.warning("%s: %s", name, exc)
        return _error(f"{name} failed: {exc}")
    text = json.dumps(doc, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def _tool(t: ToolDef) -> types.Tool:
    """A tool as listed, with the hints clients approve calls by (``ToolDef``); none of them
    reaches past this project's memory (not open-world)."""
    hints = types.ToolAnnotations(
        read_only_hint=t.read_only,
        destructive_hint=t.destructive,
        idempotent_hint=t.idempotent,
        open_world_hint=False,
    )
    return types.Tool(
        name=t.name, description=t.description, input_schema=t.schema, annotations=hints
    )


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _client_name(ctx: Any) -> str | None:
    """The client's name from its ``initialize`` (``claude-code``, ``codex-mcp-client``...),
    kept with what it saves; None when it gave none."""
    params = getattr(getattr(ctx, "session", None), "client_params", None)
    info = getattr(params, "client_info", None)
    name = getattr(info, "name", None)
    return name if isinstance(name, str) and name else None


# -- transports ------------------------------------------------------------------------------


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client on stdin/stdout until it closes stdin."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def is_loopback(host: str) -> bool:
    return is_loopback_name(host)


def http_policy(host: str, token: str, names: tuple[str, ...] = ()) -> HostPolicy:
    """The HTTP server's doors: the token from every peer, served names only, no page of
    another origin, and this machine only."""
    return HostPolicy(
        service="ember mcp",
        bind=host,
        names=names,
        token=token,
        token_from="every",
        remote=False,
        token_how=(
            "send Authorization: Bearer <token>, with the token ember mcp printed when it "
            "started (or the mcp_token you set, EMBER_MCP_TOKEN)"
        ),
    )


def guarded(app: Any, policy: HostPolicy) -> Any:
    """``app`` behind ``policy``: a refused request gets its status and a JSON-RPC error
    saying why, and the SDK never sees it."""

    async def serve(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await app(scope, receive, send)
            return
        token = bearer(scope_headers(scope).get("authorization"))
        refused = policy.check_scope(scope, token)
        if refused is None:
            await app(scope, receive, send)
        elif scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})
        else:
            await _refuse(send, refused)

    return serve


async def _refuse(send: Any, refused: Refused) -> None:
    error = {"code": -32600, "message": f"ember mcp: {refused.message}"}
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if refused.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="ember mcp"'))
    await send({"type": "http.response.start", "status": refused.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def serve_http(
    server: Server[Any], host: str, port: int, token: str, names: tuple[str, ...] = ()
) -> None:
    """Serve streamable HTTP at ``http://host:port/mcp`` until interrupted; ``host`` must be
    loopback (checked by the caller too), and every request passes ``http_policy``."""
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    if not is_loopback(host):
        raise EmberError(
            f"--host {host} is not a loopback address; ember mcp serves 127.0.0.1, ::1 or "
            "localhost only"
        )
    # The SDK's own Host/Origin check is off: ``guarded`` makes it, with ember's names
    # (``allowed_hosts``), before the SDK sees a request.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = server.streamable_http_app(
        streamable_http_path=HTTP_PATH, transport_security=security, host=host
    )
    config = uvicorn.Config(
        guarded(app, http_policy(host, token, names)),
        host=host,
        port=port,
        log_config=None,
        access_log=False,
        lifespan="on",
    )
    await uvicorn.Server(config).serve()
