"""How soon ``ember mcp`` answers ``tools/list``, beside a minimal server of the official SDK.

A client such as Claude Code (``claude -p``) starts its MCP servers and sends its first model
request once they answered, or once it stops waiting: a server that lists its tools late is
a session whose first turn has no memory tools. Each run starts one server over stdio with
the official ``mcp`` client, as a client starts it (a fresh process, in a project directory),
and measures the time from spawning it to the answer of ``tools/list`` (``initialize``
included). The servers take turns, run after run, so a busy machine slows them alike:

- ``ember mcp``: this checkout's console script, in a project directory, ``EMBER_HOME`` a
  new temporary directory (nothing stored: the start-up, not a search);
- ``sdk MCPServer``: the SDK's high-level ``MCPServer`` with one tool (what its README
  starts with);
- ``sdk Server``: the SDK's low-level ``Server`` with one tool (what ember is built on: the
  least any server of this SDK can cost).

``--baseline CHECKOUT`` adds ``ember mcp`` as another checkout ships it (its ``src`` first on
``PYTHONPATH``), for a before / after. The table gives min / median / max per server and the
ratio of each ember's median (and min) to each minimal server's. ember's tool listing is
checked on every run (its five tools).

    python bench/mcp_startup.py [--runs 9] [--baseline CHECKOUT] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

from common import EMBER

HIGH_LEVEL = '''
from mcp.server import MCPServer

server = MCPServer("minimal")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


server.run()
'''

LOW_LEVEL = """
import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

TOOL = types.Tool(
    name="echo",
    description="Echo the text back.",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
)


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx, params):
    text = str((params.arguments or {}).get("text", ""))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server = Server("minimal", on_list_tools=list_tools, on_call_tool=call_tool)


async def main():
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
"""

BASELINE = "ember (baseline)"
EMBER_TOOLS = ["memory_search", "memory_save", "memory_update", "memory_forget", "memory_list"]


@dataclass(frozen=True)
class Server:
    name: str
    command: str
    args: tuple[str, ...]
    tools: tuple[str, ...] | None = None  # the listing every run must give (None: unchecked)
    env: tuple[tuple[str, str], ...] = ()  # on top of the run's own


@dataclass
class Row:
    server: str
    seconds: list[float]

    @property
    def min(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def max(self) -> float:
        return max(self.seconds)


async def time_to_tools(server: Server, env: dict[str, str], cwd: Path, log: Path) -> float:
    """Seconds from spawning ``server`` to the answer of its ``tools/list``."""
    params = StdioServerParameters(
        command=server.command, args=list(server.args), env=env | dict(server.env), cwd=cwd
    )
    with log.open("a", encoding="utf-8") as err:
        start = time.perf_counter()
        async with (
            stdio_client(params, errlog=err) as (read, write),
            ClientSession(read, write, read_timeout_seconds=60) as session,
        ):
            await session.initialize()
            listed = await session.list_tools()
            took = time.perf_counter() - start
    names = tuple(t.name for t in listed.tools)
    if server.tools is not None and names != server.tools:
        raise SystemExit(f"{server.name} listed {names}, expected {server.tools} (log: {log})")
    return took


def servers(baseline: Path | None = None) -> list[Server]:
    every = [
        Server("ember mcp", EMBER, ("mcp",), tuple(EMBER_TOOLS)),
        Server("sdk MCPServer", sys.executable, ("-c", HIGH_LEVEL), ("echo",)),
        Server("sdk Server", sys.executable, ("-c", LOW_LEVEL), ("echo",)),
    ]
    if baseline is not None:
        src = (("PYTHONPATH", str(baseline.resolve() / "src")),)
        every.append(
            Server(BASELINE, sys.executable, ("-m", "ember", "mcp"), tuple(EMBER_TOOLS), src)
        )
    return every


async def measure(runs: int, work: Path, baseline: Path | None = None) -> list[Row]:
    project = work / "acme-api"
    project.mkdir()
    env = {"EMBER_HOME": str(work / "home")}
    if "XDG_CACHE_HOME" in os.environ:
        env["XDG_CACHE_HOME"] = os.environ["XDG_CACHE_HOME"]
    every = servers(baseline)
    rows = {s.name: Row(s.name, []) for s in every}
    for s in every:  # one unmeasured start each: the bytecode caches are written
        await time_to_tools(s, env, project, work / "servers.log")
    for _ in range(runs):
        for s in every:
            rows[s.name].seconds.append(await time_to_tools(s, env, project, work / "servers.log"))
    return list(rows.values())


def table(rows: list[Row]) -> str:
    embers = [r for r in rows if r.server.startswith("ember")]
    minimal = [r for r in rows if not r.server.startswith("ember")]
    lines = [
        f"{'server':<16} {'runs':>4} {'min s':>7} {'median s':>9} {'max s':>7}",
        *(
            f"{r.server:<16} {len(r.seconds):>4} {r.min:>7.3f} {r.median:>9.3f} {r.max:>7.3f}"
            for r in rows
        ),
        "",
        *(
            f"{e.server} / {m.server}: median {e.median / m.median:.2f}x, min {e.min / m.min:.2f}x"
            for e in embers
            for m in minimal
        ),
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=9, help="measured starts per server")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument(
        "--baseline", type=Path, default=None, metavar="CHECKOUT", help="another checkout's ember"
    )
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    with tempfile.TemporaryDirectory(prefix="ember-mcp-startup-") as tmp:
        rows = asyncio.run(measure(args.runs, Path(tmp), args.baseline))
    print(table(rows))
    if args.json is not None:
        doc = [asdict(r) | {"min": r.min, "median": r.median, "max": r.max} for r in rows]
        args.json.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
