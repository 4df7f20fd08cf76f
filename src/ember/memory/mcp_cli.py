"""``ember mcp``: serve the project's memory to any agent over MCP (stdio, or HTTP on loopback).

The project is settled before anything is served (``mcp_target.served``): a server that cannot
name its project exits at once with the reason and the fix, rather than answering a client
with another project's memories. Start-up stays short — the SDK and the store's modules are
imported, nothing is opened — because a client waits for it before its first turn: the
project's file is opened by the first call that needs it and the embedder by the first search
or save. Logs go to stderr; stdout is the protocol's.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ember.cli.options import config_option, project_options

if TYPE_CHECKING:
    from mcp.server import Server

    from ember.config import Settings
    from ember.models.base import Embedder


@click.command("mcp")
@click.option("--http", "over_http", is_flag=True, help="Serve streamable HTTP, not stdio.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="With --http: a loopback address."
)
@click.option("--port", type=click.IntRange(1, 65535), default=None, help="With --http (8789).")
@project_options
@config_option
def mcp(
    over_http: bool,
    host: str,
    port: int | None,
    project_id: str | None,
    cwd: Path | None,
    config_file: Path | None,
) -> None:
    """Serve this project's memory over the Model Context Protocol (stdio by default).

    Tools: memory_search, memory_save, memory_update, memory_forget, memory_list; resources
    ember://memories and ember://spend. The project is the working directory, or --cwd DIR /
    --project-id ID as for `ember memory`.

    \b
      claude mcp add --scope user ember -- ember mcp
      ember setup codex --mcp --write      # [mcp_servers.ember] in ~/.codex/config.toml
      ember mcp --http --port 8789         # http://127.0.0.1:8789/mcp
    """
    from ember import logs
    from ember.config import load_settings
    from ember.memory import mcp_server
    from ember.memory.mcp_memory import ProjectMemory
    from ember.memory.mcp_target import NoProjectHere, served
    from ember.store.registry import storage_for

    if not over_http and port is not None:
        raise click.UsageError("--port is for --http (stdio needs none)")
    if over_http and not mcp_server.is_loopback(host):
        raise click.UsageError(
            f"--host {host} is not a loopback address: ember mcp has no authentication, so it "
            "serves 127.0.0.1, ::1 or localhost only"
        )
    settings = load_settings(config_file)
    logs.configure(settings.log_level)
    if settings.log_level != "debug":
        logging.getLogger("mcp").setLevel(logging.WARNING)
    try:
        target = served(settings, project_id, cwd)
    except NoProjectHere as exc:
        click.echo(f"ember mcp: {exc}", err=True)
        _serve(mcp_server.build_unserved(str(exc)), over_http, host, port, "no project")
        return
    storage = storage_for(settings)
    memory = ProjectMemory(settings, target, _embedder(settings), storage)
    try:
        _serve(mcp_server.build_server(memory), over_http, host, port, target.label)
    finally:
        memory.close()
        storage.close()


def _serve(server: Server[Any], over_http: bool, host: str, port: int | None, label: str) -> None:
    import anyio

    from ember.memory import mcp_server

    try:
        if over_http:
            port = port or mcp_server.DEFAULT_HTTP_PORT
            where = f"http://{host}:{port}{mcp_server.HTTP_PATH}"
            click.echo(f"ember mcp: serving {label} at {where}", err=True)
            anyio.run(mcp_server.serve_http, server, host, port)
        else:
            anyio.run(mcp_server.serve_stdio, server)
    except KeyboardInterrupt:
        pass
    finally:
        sys.stderr.flush()


def _embedder(settings: Settings) -> Callable[[], Embedder]:
    """The configured model, loaded by the first search or save (blocking then), never at
    start: a client waits for the server before its first turn."""

    def load() -> Embedder:
        from ember.models import embedder_from

        return embedder_from(settings)

    return load
