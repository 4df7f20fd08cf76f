"""The real CLIs' scripted sessions, direct to the emulator and through ember: cache reads and
what ember did to each request.

Every scenario of ``record_client_fixtures.py`` (same scripted model, same prompts, same project
directory) runs twice, each time against a fresh provider emulator: once with the client pointed
straight at it, once through ``ember proxy`` with a fresh ``EMBER_HOME`` whose project memory is
seeded with facts the first ask retrieves (memory on, ``auto_tail``). Printed:

- per request of the ember run, as it reached the emulator: method and path, the thread ember
  accounted it to (``exchanges.thread_kind``), where ember's verbosity block sits and where a
  memory block sits (``+`` when it was added to this request's last message, ``=`` when it is an
  earlier turn's block carried again);
- a markdown table per scenario: model calls, input tokens (fresh + cache read + cache write)
  and the cache-read share, from the usage the emulator put in its own answers (HTTP streams and
  WebSocket events alike), direct and through ember; and ember's own view of the same session
  (``ember stats --json``), with the number of rows that resolved to no project.

Nothing is written outside ``--work``; the output names no machine path (the project directory
prints as ``/work/proj``) and no key (the clients are given ``sk-test``).

    D="$HOME/ember-clients"   # any directory outside /tmp
    npm install --prefix "$D/npm" @anthropic-ai/claude-code@2.1.197 @openai/codex@0.171.0
    PYTHONPATH=src python scripts/compare_client_cache.py --npm "$D/npm" --work "$D/cmp"
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from record_client_fixtures import (
    _EXEC,
    _RESUME,
    ASK_READ,
    PROJECT_PLACEHOLDER,
    SCENARIOS,
    Exchange,
    Recorder,
    Scenario,
    run_scenario,
    scripted_reply,
)

from ember.server import BackgroundServer, free_port
from ember.testing import Emulator

EMBER = [sys.executable, "-c", "from ember.cli import main; main()"]
VERBOSITY_TAG = "<ember_output_shaping>"
MEMORY_TAG = "<ember-memory>"
#: Facts the scripted asks retrieve ("Please read notes.txt ...", "... is it a todo list?").
SEED_FACTS = (
    "notes.txt in this project is the todo list: buy milk, fix the flaky test.",
    "The tests of this project run with pytest; keep functions short.",
)


#: Beyond the recorded scenarios: Codex over WebSocket, as ``ember wrap codex`` runs it
#: (``supports_websockets = true``), with the fixtures' model and with Codex's own default.
EXTRA = (
    Scenario(
        "codex", "websockets-exec-then-resume", ((*_EXEC, ASK_READ), _RESUME), websockets=True
    ),
    Scenario(
        "codex",
        "default-model-websockets-exec-then-resume",
        ((*_EXEC, ASK_READ), _RESUME),
        websockets=True,
        model=None,
    ),
)


class WsRecorder(Recorder):
    """The recorder, also keeping each WebSocket ``response.create`` as an exchange whose
    response holds the events sent back (as ``data:`` lines, like an SSE stream)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "websocket":
            await super().__call__(scope, receive, send)
            return
        current: list[Exchange] = []

        async def rec_receive() -> Any:
            message = await receive()
            text = message.get("text") if message["type"] == "websocket.receive" else None
            if text:
                ex = Exchange(time.monotonic(), "WS", scope["path"], "", [])
                ex.body += text.encode()
                self.exchanges.append(ex)
                current.append(ex)
            return message

        async def rec_send(message: Any) -> None:
            if message["type"] == "websocket.send" and current and message.get("text"):
                current[-1].response += f"data: {message['text']}\n".encode()
            elif message["type"] == "websocket.accept" and not current:
                self.exchanges.append(Exchange(time.monotonic(), "WS-OPEN", scope["path"], "", []))
            await send(message)

        await self.app(scope, rec_receive, rec_send)


# -- what reached the provider ------------------------------------------------------------


def usages(ex: Exchange) -> list[tuple[int, int, int]]:
    """(fresh input, cache read, cache write) of every model answer in the exchange."""
    out = []
    for line in ex.response.decode("utf-8", "replace").splitlines():
        if not line.startswith("data: "):
            continue
        if '"message_start"' in line:
            u = json.loads(line[6:])["message"]["usage"]
            read = u.get("cache_read_input_tokens") or 0
            out.append((u["input_tokens"], read, u.get("cache_creation_input_tokens") or 0))
        elif '"response.completed"' in line:
            u = json.loads(line[6:])["response"].get("usage") or {}
            if u:
                cached = u["input_tokens_details"]["cached_tokens"]
                out.append((u["input_tokens"] - cached, cached, 0))
    return out


@dataclass(frozen=True)
class Totals:
    calls: int
    fresh: int
    read: int
    write: int

    @property
    def total(self) -> int:
        return self.fresh + self.read + self.write

    @property
    def share(self) -> float:
        return self.read / max(self.total, 1)


def totals(exchanges: list[Exchange]) -> Totals:
    rows = [u for ex in exchanges for u in usages(ex)]
    return Totals(len(rows), *(sum(r[i] for r in rows) for i in range(3)))


def _where(items: Any, tag: str, label: str) -> list[str]:
    """``label[i]`` (or ``label[i].j`` for a content block) of every item whose text has ``tag``."""
    found = []
    for i, item in enumerate(items if isinstance(items, list) else []):
        content = item.get("content", item.get("text")) if isinstance(item, dict) else item
        if isinstance(content, list):
            found += [f"{label}[{i}].{j}" for j, b in enumerate(content) if tag in json.dumps(b)]
        elif tag in json.dumps(content):
            found.append(f"{label}[{i}]")
    return found


def edits(body: dict[str, Any]) -> tuple[str, str]:
    """Where the verbosity block and memory blocks sit in a request body."""
    if "input" in body or body.get("type") == "response.create":
        instr = body.get("instructions") or ""
        verbosity = ["instructions"] if VERBOSITY_TAG in instr else []
        verbosity += _where(body.get("input"), VERBOSITY_TAG, "input")
        memory = _where(body.get("input"), MEMORY_TAG, "input")
        last = len(body.get("input") or []) - 1
    else:
        system = body.get("system")
        blocks = system if isinstance(system, list) else [system] if system else []
        verbosity = [f"{p} of {len(blocks)}" for p in _where(blocks, VERBOSITY_TAG, "system")]
        memory = _where(body.get("messages"), MEMORY_TAG, "messages")
        last = len(body.get("messages") or []) - 1
    marked = [m + ("+" if m.split("[")[1].startswith(f"{last}]") else "=") for m in memory]
    return ", ".join(verbosity) or "-", ", ".join(marked) or "-"


# -- one run --------------------------------------------------------------------------------


def ember(home: Path, *args: str) -> str:
    env = dict(os.environ, EMBER_HOME=str(home))
    done = subprocess.run([*EMBER, *args], env=env, capture_output=True, text=True, check=True)
    return done.stdout


def start_proxy(upstream: str, home: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [*EMBER, "proxy", "--port", str(port)]
    cmd += ["--anthropic-url", upstream, "--openai-url", upstream + "/v1"]
    log = (home / "proxy.log").open("wb")
    proc = subprocess.Popen(cmd, env=dict(os.environ, EMBER_HOME=str(home)), stderr=log, stdout=log)
    url = f"http://127.0.0.1:{port}"
    for _ in range(400):
        try:
            urllib.request.urlopen(url + "/healthz", timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("ember proxy did not start")


def run(sc: Scenario, args: argparse.Namespace, home: Path | None) -> list[Exchange]:
    """One scenario against a fresh emulator, direct (``home`` None) or through ember."""
    root = (args.work / sc.client / sc.name).absolute()
    emulator = Emulator()
    emulator.reply_fn = scripted_reply(lambda: str(root / "proj"))
    recorder = WsRecorder(emulator)
    with BackgroundServer(recorder) as upstream:
        proxy, base_url = None, upstream.url
        if home is not None:
            proxy, base_url = start_proxy(upstream.url, home)
        try:
            run_scenario(sc, args.work.absolute(), args.npm.absolute(), base_url, recorder)
        finally:
            if proxy is not None:
                proxy.terminate()
                proxy.wait()
        return list(recorder.exchanges)


def seed(home: Path, proj: Path) -> None:
    proj.mkdir(parents=True, exist_ok=True)
    for fact in SEED_FACTS:
        ember(home, "memory", "add", "--cwd", str(proj), fact, "--importance", "0.8")


def ember_view(home: Path, proj: Path) -> tuple[Totals, list[str], int]:
    """``ember stats --json`` totals for the project, its rows' thread kinds in order, and the
    number of rows in the global (no project) file."""
    from ember.store.accounting import exchanges as rows_of

    stats = json.loads(ember(home, "stats", "--cwd", str(proj), "--json"))
    s = stats["sessions"]
    keys = ("input_tokens", "cache_read_tokens", "cache_write_tokens")
    fresh, read, write = (sum(r[k] for r in s) for k in keys)
    db = Path(stats["db"])
    kinds = [_kind(r) for r in rows_of(db)] if db.exists() else []
    glob = home / "stats.db"
    unresolved = len(rows_of(glob)) if glob.exists() else 0
    return Totals(sum(r["requests"] for r in s), fresh, read, write), kinds, unresolved


def _kind(row: dict[str, Any]) -> str:
    origin = row.get("origin") or "client"
    return str(row["thread_kind"]) + ("" if origin == "client" else f" ({origin})")


def compare(sc: Scenario, args: argparse.Namespace) -> str:
    print(f"{sc.client}/{sc.name}")
    direct = totals(run(sc, args, None))
    root = (args.work / sc.client / sc.name).absolute()
    home = args.work.absolute() / "ember-home" / sc.name
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    seed(home, root / "proj")
    exchanges = run(sc, args, home)
    via = totals(exchanges)
    stats, kinds, unresolved = ember_view(home, root / "proj")
    print("  request as it reached the provider | ember thread | verbosity | memory")
    model_calls = iter(kinds)
    for ex in exchanges:
        body = json.loads(ex.body) if ex.body.strip().startswith(b"{") else None
        if body is None:
            print(f"  {ex.method} {ex.path} {ex.status or ''}")
            continue
        verbosity, memory = edits(body)
        kind = next(model_calls, "?") if usages(ex) or ex.method == "POST" else "?"
        print(f"  {ex.method} {ex.path} | {kind} | {verbosity} | {memory}")
    return (
        f"| {sc.client}/{sc.name} | {direct.calls} | {direct.total} | {direct.share:.3f} "
        f"| {via.calls} | {via.total} | {via.share:.3f} | {stats.calls} | {stats.share:.3f} "
        f"| {unresolved} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--npm", type=Path, required=True, help="npm prefix holding both CLIs")
    parser.add_argument("--work", type=Path, required=True, help="scratch dir (not under /tmp)")
    parser.add_argument("--only", default="", help="run only scenarios whose name contains this")
    args = parser.parse_args()
    chosen = [sc for sc in (*SCENARIOS, *EXTRA) if args.only in f"{sc.client}/{sc.name}"]
    rows = [compare(sc, args) for sc in chosen]
    print(
        "\n| scenario | direct calls | direct input | direct cache-read share "
        "| via ember calls | via ember input | via ember share | ember stats rows "
        "| ember stats share | rows with no project |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    print("\n".join(rows))
    print(f"\n(project directory shown as {PROJECT_PLACEHOLDER})")


if __name__ == "__main__":
    main()
