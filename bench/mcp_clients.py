"""Memory over MCP with the real clients: what one agent saves, the other finds and is given.

Claude Code and Codex (installed from npm, or ``--npm DIR``) share one project and one user's
HOME, each configured the way ``ember setup claude|codex --mcp`` tells a user to (Claude Code:
the ``claude mcp add`` command it prints; Codex: ``--write`` into ``~/.codex/config.toml``), and
each sends its model calls through one ``ember proxy`` with shipped defaults. Nothing sets
EMBER_HOME: the proxy and each client's ``ember mcp`` find the store as a user's would, from
HOME. The provider emulator plays the model (in this process, on loopback): asked to remember
something, it calls the client's ``memory_save`` tool; asked to look something up, its
``memory_search`` tool; given a tool's result, it answers with it. ember's shadow questions get
the emulator's usual answers.

Two rounds, one per direction:

1. agent A saves a fact over MCP (a print-mode session in the project);
2. the fact is a current memory of the project (``ember memory list --cwd --json``) whose
   metadata says it came over MCP: the client started ``ember mcp`` in the project;
3. agent B, in a new session, asks about it: the proxy injected it into B's first request (the
   emulator saw its text, which B's prompt does not hold);
4. B's model calls ``memory_search``, and the tool's result B sends back holds the fact.

A row per round; every check is a yes/no read from what the clients sent and what ember
stored. Every client command has a timeout; nothing leaves loopback. Not part of ``make test``.

    python bench/mcp_clients.py [--npm DIR] [--work DIR] [--keep] [--json FILE] [--timeout 180]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from capture_clients import (
    Clients,
    Ran,
    client_env,
    codex_config,
    install_clients,
    run_bounded,
    stop_process,
    wait_healthy,
)
from common import EMBER
from ember.server import BackgroundServer, free_port
from ember.testing import Emulator, Reply, ToolCall
from ember.testing.shadow import shadow_replies

#: The prompt lead-ins the emulated model acts on (the rest of the prompt is the fact / query).
SAVE = "Please remember this for the project: "
ASK = "Look it up in memory: "
CLAUDE_PREFIX = "mcp__ember__"  # Claude Code: one flat tool per MCP tool
CODEX_NAMESPACE = "mcp__ember"  # Codex: a Responses "namespace" tool holding the MCP tools


@dataclass(frozen=True)
class Fact:
    """A fact one agent saves: its sentence, the key that marks it, the other agent's question."""

    content: str
    key: str
    question: str
    query: str


ROUNDS = (
    ("claude", "codex", Fact(
        "The staging database is called heron-7.", "heron-7",
        "What is the staging database called?", "staging database name",
    )),
    ("codex", "claude", Fact(
        "Release branches are cut every Thursday at noon UTC.", "thursday at noon",
        "When are release branches cut?", "release branch cut schedule",
    )),
)  # fmt: skip


# -- the emulated model --------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text(c.get("text", "")) for c in content if isinstance(c, dict))
    return ""


def last_turn(body: dict[str, Any]) -> tuple[str, str]:
    """(kind, text) of the request's last turn: ``"tool"`` with a tool result's text, or
    ``"user"`` with the user's words (Anthropic Messages and OpenAI Responses)."""
    # Claude Code 2.1 ends its messages with a "system" one (the skills it offers): the turn
    # is the last message that is not.
    turns = [m for m in body.get("messages") or [] if m.get("role") != "system"]
    if turns:
        last = turns[-1]
        content = last.get("content")
        if isinstance(content, list):
            results = [c for c in content if isinstance(c, dict) and c.get("type") == "tool_result"]
            if results:
                return "tool", "\n".join(_text(r.get("content")) for r in results)
        return str(last.get("role")), _text(content)
    items = body.get("input")
    if isinstance(items, list) and items:
        last = items[-1]
        if last.get("type") == "function_call_output":
            return "tool", _text(last.get("output"))
        return str(last.get("role", last.get("type"))), _text(last.get("content"))
    return "", ""


def memory_tool(body: dict[str, Any], tool: str) -> ToolCall | None:
    """A call of the MCP server's ``tool`` as this client lists it (None: not listed)."""
    for t in body.get("tools") or []:
        if t.get("name") == CLAUDE_PREFIX + tool:
            return ToolCall(CLAUDE_PREFIX + tool)
        listed = [sub.get("name") for sub in t.get("tools") or []]
        if t.get("type") == "namespace" and t.get("name") == CODEX_NAMESPACE and tool in listed:
            return ToolCall(tool, namespace=CODEX_NAMESPACE)
    return None


def model_reply(body: dict[str, Any], path: str) -> Reply | None:
    """What the model says: a tool's result is answered with its text; "remember this" calls
    ``memory_save`` (user-stated: the user said it), "look it up" calls ``memory_search``; None
    (the emulator's usual answer) for anything else, side requests included."""
    kind, text = last_turn(body)
    if kind == "tool":
        return Reply("From memory: " + " ".join(text.split())[:400])
    for lead, tool in ((SAVE, "memory_save"), (ASK, "memory_search")):
        at = text.rfind(lead)
        call = memory_tool(body, tool) if at >= 0 else None
        if call is None:
            continue
        said = text[at + len(lead) :].split("\n")[0].strip()
        args: dict[str, Any] = (
            {"facts": [{"content": said, "category": "convention"}], "user_stated": True}
            if tool == "memory_save"
            else {"query": said}
        )
        return Reply("", [ToolCall(call.name, args, namespace=call.namespace)])
    return None


def emulator() -> Emulator:
    """The provider emulator playing both the agents' model and the shadow's."""
    shadow = shadow_replies()
    emu = Emulator()
    emu.reply_fn = lambda body, path: shadow(body, path) or model_reply(body, path)
    return emu


# -- one run ---------------------------------------------------------------------------------------


@dataclass
class RoundResult:
    saver: str
    finder: str
    key: str
    saved: Ran | None = None
    asked: Ran | None = None
    stored: bool = False  # a current memory holds the key
    via_mcp: bool = False  # ... and says it came over MCP
    user_stated: bool = False  # ... with the user-stated evidence the client claimed
    injected: bool = False  # the proxy put it in the finder's first request
    found: bool = False  # the finder's memory_search result held it
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        if self.finder == "-":  # the home-directory start: it ran, and offered no tools
            return self.stored
        return self.stored and self.via_mcp and self.injected and self.found


@dataclass
class Setup:
    root: Path
    clients: Clients
    emu: Emulator
    up_url: str
    ember_home: bool = False  # EMBER_HOME set in the user's environment (else from HOME)
    port: int = field(default_factory=free_port)

    @property
    def proj(self) -> Path:
        return self.root / "proj"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def env(self) -> dict[str, str]:
        env = client_env(self.home, self.root / "ember-home", self.port, self.up_url, self.clients)
        if not self.ember_home:
            del env["EMBER_HOME"]  # found from HOME, as most users' is
        env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{self.port}"
        return env


def configure(s: Setup, timeout: float) -> list[str]:
    """Each client set up as ``ember setup`` says (Codex's model calls through the proxy as
    ``ember setup codex --write`` configures them); returns what was run."""
    s.proj.mkdir(parents=True)
    (s.proj / "README.md").write_text("# shop\n\nA small web shop.\n")
    (s.home / ".codex").mkdir(parents=True)
    (s.home / ".codex" / "config.toml").write_text(codex_config("gpt-5.1", None))
    done = []
    for argv in (
        [EMBER, "setup", "codex", "--write"],  # the proxy (EMBER_PORT), as shipped
        [EMBER, "setup", "codex", "--mcp", "--write"],
        claude_advice(s)[0],
    ):
        ran = run_bounded(argv, s.proj, s.env, timeout)
        if ran.code != 0:
            raise SystemExit(f"{' '.join(argv)} failed:\n{ran.tail}")
        done.append(" ".join(argv))
    return done


def claude_advice(s: Setup) -> tuple[list[str], list[str]]:
    """What ``ember setup claude --mcp`` prints: the ``claude mcp add ...`` line (run as
    printed) and the tools it says print mode must be allowed."""
    out = subprocess.run(
        [EMBER, "setup", "claude", "--mcp"], env=s.env, cwd=s.proj, capture_output=True, text=True
    ).stdout
    line = next(ln.strip() for ln in out.splitlines() if ln.strip().startswith("claude mcp add"))
    allowed = out.split("--allowedTools ")[1].split("\n")[0].split()
    return [str(s.clients.claude), *line.split()[1:]], allowed


def session(s: Setup, client: str, prompt: str, timeout: float) -> Ran:
    if client == "claude":
        argv = [str(s.clients.claude), "-p", prompt, "--allowedTools", *claude_advice(s)[1]]
    else:
        argv = [str(s.clients.codex), "exec", "--skip-git-repo-check", prompt]
    return run_bounded(argv, s.proj, s.env, timeout)


def memories(s: Setup) -> list[dict[str, Any]]:
    argv = [EMBER, "memory", "list", "--cwd", str(s.proj), "--json"]
    out = subprocess.run(argv, env=s.env, capture_output=True, text=True, timeout=60)
    return json.loads(out.stdout or "[]")


def shown(s: Setup, memory_id: str) -> dict[str, Any]:
    """``ember memory show ID --json``: the memory with its evidence."""
    argv = [EMBER, "memory", "show", memory_id, "--cwd", str(s.proj), "--json"]
    out = subprocess.run(argv, env=s.env, capture_output=True, text=True, timeout=60)
    return dict(json.loads(out.stdout or "{}"))


def play_round(s: Setup, saver: str, finder: str, fact: Fact, timeout: float) -> RoundResult:
    r = RoundResult(saver, finder, fact.key)
    s.emu.clear_requests()
    r.saved = session(s, saver, SAVE + fact.content, timeout)
    dump(s, f"{saver}-saves")
    key = fact.key.lower()
    hits = [m for m in memories(s) if key in str(m.get("content", "")).lower()]
    r.stored = bool(hits)
    r.via_mcp = any((m.get("metadata") or {}).get("source") == "mcp" for m in hits)
    r.user_stated = any(
        any(e.get("kind") == "user-stated" for e in shown(s, str(m["id"])).get("evidence") or [])
        for m in hits
    )
    if not r.via_mcp:
        r.notes.append(f"memories holding {fact.key!r}: {hits}")
    s.emu.clear_requests()
    r.asked = session(s, finder, f"{fact.question}\n{ASK}{fact.query}", timeout)
    dump(s, f"{finder}-finds")
    bodies = [_body(q) for q in s.emu.requests]
    # the first request that asks the user's question (Codex over WebSocket first sends a
    # warm-up holding no user turn), then the ones after it
    asks = [b for b in bodies if memory_tool(b, "memory_search") and last_turn(b)[0] == "user"]
    if asks:
        r.injected = key in _user_side(asks[0]).lower()
        after = bodies[bodies.index(asks[0]) + 1 :]
        r.found = any(last_turn(b)[0] == "tool" and key in last_turn(b)[1].lower() for b in after)
    else:
        r.notes.append(f"no request from {finder} listed memory_search")
    return r


def home_start(s: Setup, timeout: float) -> RoundResult:
    """Codex started in the home directory, which names no project: it must still run (its
    ember server is required), with no ember tool in its requests."""
    r = RoundResult("codex", "-", "(in ~)")
    s.emu.clear_requests()
    argv = [str(s.clients.codex), "exec", "--skip-git-repo-check", "Say hello."]
    r.asked = run_bounded(argv, s.home, s.env, timeout)
    listed = any(memory_tool(_body(q), "memory_search") for q in s.emu.requests)
    r.stored = r.asked.code == 0 and not listed
    if listed:
        r.notes.append("ember's tools were listed in the home directory")
    return r


def dump(s: Setup, name: str) -> None:
    """What the emulator saw in one session (path, last turn, tools), for reading afterwards."""
    with open(s.root / f"{name}.jsonl", "w") as out:
        for q in s.emu.requests:
            body = _body(q)
            tools = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
            kind, text = last_turn(body)
            roles = [m.get("role") for m in body.get("messages") or body.get("input") or []]
            row = {"path": q.path, "last": kind, "text": text[-300:], "roles": roles}
            row["tools"] = tools
            out.write(json.dumps(row) + "\n")


def _user_side(body: dict[str, Any]) -> str:
    """The request's text outside its tool list (where an injected block would be)."""
    return json.dumps({k: v for k, v in body.items() if k != "tools"})


def _body(q: Any) -> dict[str, Any]:
    """A request's JSON body; {} for what has none (a WebSocket handshake)."""
    try:
        body = q.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def run(args: argparse.Namespace) -> list[RoundResult]:
    root = Path(args.work or tempfile.mkdtemp(prefix="mcp-clients-", dir=_cache_dir()))
    clients = install_clients(args.npm, root / "npm", args.timeout * 3)
    if clients is None:
        raise SystemExit("npm is not installed: pass --npm DIR with both CLIs installed there")
    emu = emulator()
    with BackgroundServer(emu) as up:
        s = Setup(root, clients, emu, up.url, args.ember_home)
        for line in configure(s, args.timeout):
            print(f"  ran: {line}", flush=True)
        argv = [EMBER, "proxy", "--port", str(s.port), "--anthropic-url", up.url]
        argv += ["--openai-url", up.url + "/v1"]
        with open(root / "proxy.log", "wb") as log:
            proxy = subprocess.Popen(argv, env=s.env, stdout=log, stderr=log)
        try:
            wait_healthy(f"http://127.0.0.1:{s.port}")
            rows = [play_round(s, a, b, fact, args.timeout) for a, b, fact in ROUNDS]
            rows.append(home_start(s, args.timeout))
            return rows
        finally:
            stop_process(proxy)
            if not args.keep and not args.work:
                shutil.rmtree(root, ignore_errors=True)


def _cache_dir() -> Path:
    """Codex will not set up its helpers under /tmp: work under ~/.cache like a user's."""
    d = Path.home() / ".cache" / "ember-bench"
    d.mkdir(parents=True, exist_ok=True)
    return d


def table(rows: Sequence[RoundResult]) -> str:
    head = f"{'saved by':<9}{'found by':<9}{'fact':<18}{'stored':>7}{'via mcp':>8}"
    head += f"{'user-stated':>12}{'injected':>9}{'searched':>9}"
    out = [head]
    for r in rows:
        if r.finder == "-":
            ran = "ran, no ember tools" if r.stored else "FAILED"
            out.append(f"{r.saver:<9}{'-':<9}{r.key:<18}  {ran}")
            continue
        cells = [r.stored, r.via_mcp, r.user_stated, r.injected, r.found]
        marks = ["yes" if c else "NO" for c in cells]
        out.append(
            f"{r.saver:<9}{r.finder:<9}{r.key:<18}{marks[0]:>7}{marks[1]:>8}{marks[2]:>12}"
            f"{marks[3]:>9}{marks[4]:>9}"
        )
    return "\n".join(out)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--npm", type=Path, help="an npm prefix already holding both CLIs")
    p.add_argument("--work", help="work directory (kept); default a new one, removed")
    p.add_argument("--keep", action="store_true", help="keep the default work directory")
    p.add_argument("--json", type=Path, help="also write the rows as JSON here")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per client command")
    p.add_argument(
        "--ember-home",
        action="store_true",
        help="set EMBER_HOME in the user's environment (a store outside HOME) for everything",
    )
    return p.parse_args(argv)


def main() -> None:
    args = parse_args()
    rows = run(args)
    print(table(rows))
    for r in rows:
        for ran in (r.saved, r.asked):
            if ran is not None and ran.code != 0:
                print(
                    f"  {r.saver}->{r.finder}: {' '.join(ran.argv[:2])} rc={ran.code}\n{ran.tail}"
                )
        for note in r.notes:
            print(f"  {r.saver}->{r.finder}: {note}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) | {"ok": r.ok} for r in rows], indent=1))
    sys.exit(0 if all(r.ok for r in rows) else 1)


if __name__ == "__main__":
    main()
