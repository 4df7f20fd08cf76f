"""``ember mcp``: serve the project's memory to any agent over MCP (stdio, or HTTP on loopback
with a bearer token: ``mcp_token``, else one made at start and printed on stderr).

The project is settled before anything is served (``mcp_target.served``): a server that cannot
name its project exits at once with the reason and the fix, rather than answering a client
with another project's memories. Start-up stays short, since a client waits for the tools
before its first turn (Claude Code's ``-p`` sends its first request without them when they
come late): only the SDK, the settings and the tools' definitions are imported before the
tools are listed. Once they are, a background thread opens the project's store (the store's
modules are imported then) and, when it holds memories, starts loading the embedder; a call
that comes first opens the store itself, and a search waits for the model's load. Logs go to
stderr; stdout is the protocol's.
"""

from __future__ import annotations

import logging
import secrets
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ember.cmdkit.options import config_option, project_options

if TYPE_CHECKING:
    from mcp.server import Server

    from ember.config import Settings
    from ember.embedder.base import Embedder
    from ember.memory.mcp_memory import ProjectMemory
    from ember.memory.mcp_target import Served
    from ember.memory.mcp_tools import ForgetArgs, ListArgs, SaveArgs, SearchArgs, UpdateArgs
    from ember.store.registry import Storage

log = logging.getLogger(__name__)


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

    Over HTTP every request needs Authorization: Bearer TOKEN: the mcp_token setting
    (EMBER_MCP_TOKEN), else a token made at start and printed on stderr.
    """
    from ember import logs
    from ember.config import load_settings
    from ember.memory import mcp_server
    from ember.memory.mcp_target import NoProjectHere, served

    if not over_http and port is not None:
        raise click.UsageError("--port is for --http (stdio needs none)")
    if over_http and not mcp_server.is_loopback(host):
        raise click.UsageError(
            f"--host {host} is not a loopback address: ember mcp serves this project's "
            "memories to this machine only (127.0.0.1, ::1 or localhost)"
        )
    settings = load_settings(config_file)
    logs.configure(settings.log_level)
    if settings.log_level != "debug":
        logging.getLogger("mcp").setLevel(logging.WARNING)
    try:
        target = served(settings, project_id, cwd)
    except NoProjectHere as exc:
        click.echo(f"ember mcp: {exc}", err=True)
        _serve(mcp_server.build_unserved(str(exc)), settings, over_http, host, port, "no project")
        return
    memory = OnFirstUse(settings, target)
    try:
        server = mcp_server.build_server(memory, memory.warm)
        _serve(server, settings, over_http, host, port, target.label)
    finally:
        memory.close()


def _serve(
    server: Server[Any],
    settings: Settings,
    over_http: bool,
    host: str,
    port: int | None,
    label: str,
) -> None:
    import anyio

    from ember.memory import mcp_server
    from ember.memory.settings import MemorySettings

    try:
        if over_http:
            port = port or mcp_server.DEFAULT_HTTP_PORT
            shown = f"[{host}]" if ":" in host else host
            where = f"http://{shown}:{port}{mcp_server.HTTP_PATH}"
            mine = settings.section(MemorySettings).mcp_token
            token = mine or secrets.token_urlsafe(32)
            click.echo(f"ember mcp: serving {label} at {where}", err=True)
            click.echo(http_client_lines(where, None if mine else token), err=True)
            names = settings.allowed_hosts
            anyio.run(mcp_server.serve_http, server, host, port, token, names)
        else:
            anyio.run(mcp_server.serve_stdio, server)
    except KeyboardInterrupt:
        pass
    finally:
        sys.stderr.flush()


def http_client_lines(url: str, token: str | None) -> str:
    """What a client needs to connect over HTTP: the header, and Claude Code's command.
    ``token``: the one made at start, shown once; None: the user's ``mcp_token``, which is
    not repeated (they have it)."""
    value = token if token is not None else "$EMBER_MCP_TOKEN"
    header = f"Authorization: Bearer {value}"
    lines = [
        f"ember mcp: every request needs the header  {header}",
        f'  claude mcp add --transport http ember {url} --header "{header}"',
    ]
    if token is not None:
        lines.append(
            "ember mcp: the token is new at each start; set mcp_token (EMBER_MCP_TOKEN) to keep one"
        )
    else:
        lines.append("ember mcp: the token is your mcp_token (EMBER_MCP_TOKEN)")
    return "\n".join(lines)


def _embedder(settings: Settings) -> Callable[[], Embedder]:
    """The configured model: the one ``OnFirstUse.warm`` started loading, or loaded by the
    first search or save (blocking then); never before the tools are listed."""

    def load() -> Embedder:
        from ember.embedder import embedder_from

        return embedder_from(settings)

    return load


class OnFirstUse:
    """The served project's memory (``ProjectMemory``), built by the first call that needs it
    or by ``warm``, whichever comes first; the calls themselves run on worker threads.

    Building it imports the store, numpy and the indexes (~0.2 s of CPU): done before the
    tools were listed, it kept every client waiting for tools it could already have had."""

    def __init__(self, settings: Settings, target: Served) -> None:
        self._settings, self._target = settings, target
        self._lock = threading.Lock()
        self._memory: ProjectMemory | None = None
        self._storage: Storage | None = None
        self._closed = False

    def _get(self) -> ProjectMemory:
        with self._lock:
            if self._closed:  # a warm-up that outlived the server opens nothing
                from ember.errors import EmberError

                raise EmberError("ember mcp is shutting down")
            if self._memory is None:
                from ember.memory.mcp_memory import ProjectMemory
                from ember.store.registry import storage_for

                self._storage = storage_for(self._settings)
                self._memory = ProjectMemory(
                    self._settings, self._target, _embedder(self._settings), self._storage
                )
            return self._memory

    def search(self, args: SearchArgs) -> dict[str, Any]:
        return self._get().search(args)

    def save(self, args: SaveArgs, client: str | None) -> dict[str, Any]:
        return self._get().save(args, client)

    def update(self, args: UpdateArgs) -> dict[str, Any]:
        return self._get().update(args)

    def forget(self, args: ForgetArgs) -> dict[str, Any]:
        return self._get().forget(args)

    def listing(self, args: ListArgs) -> dict[str, Any]:
        return self._get().listing(args)

    def memories(self) -> dict[str, Any]:
        return self._get().memories()

    def spend(self) -> dict[str, Any]:
        return self._get().spend()

    def warm(self) -> None:
        """Open the store in the background and, when it holds memories, start loading the
        model: the first search then waits less, or not at all. A project with no ember file
        (SQLite) has nothing to find: nothing is imported, opened or loaded for it."""
        if self._settings.store_url is None and not self._target.path.exists():
            return
        threading.Thread(target=self._warm, name="ember-mcp-warm", daemon=True).start()

    def _warm(self) -> None:
        from ember.embedder import preload_from
        from ember.errors import EmberError

        try:
            if self._get().has_memories():
                preload_from(self._settings)
        except EmberError as exc:  # the first call meets it again, and says so
            log.info("ember mcp: the project's memory is not ready: %s", exc)
        except Exception:
            log.warning("ember mcp: readying the project's memory failed", exc_info=True)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            if self._memory is not None:
                self._memory.close()
            if self._storage is not None:
                self._storage.close()
            self._memory = self._storage = None
