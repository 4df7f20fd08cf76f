"""Record request fixtures from the real Claude Code and Codex CLIs, offline.

Runs each CLI straight against ember's provider emulator, so the recorded bytes are what the
client sent before any proxy touched them. Scripted model answers drive the flow (a Read /
exec_command tool call, an Explore sub-agent, a title, a compaction summary), and every turn
after the first is a ``--continue`` / ``resume --last`` or a second prompt in the same TUI.
Each request is scrubbed (keys, ids, machine paths) and written to ``tests/fixtures/clients/``
together with the request table in its README. The session logs the CLIs wrote under their
home (Claude Code's ``~/.claude/projects``, Codex's ``~/.codex/sessions``) are scrubbed the same
way, with the same ids, and copied to ``tests/fixtures/agent-logs/`` for the scenarios that keep
them (``--logs-only`` writes only those). ``compare_client_cache.py`` runs the same
scenarios direct and through ``ember proxy`` and compares their cache reads (docs/clients.md).

    D="$HOME/ember-clients"   # any directory outside /tmp
    npm install --prefix "$D/npm" @anthropic-ai/claude-code@2.1.197 @openai/codex@0.171.0
    PYTHONPATH=src python scripts/record_client_fixtures.py --npm "$D/npm" --work "$D/rec"

``--work`` must not be under /tmp: Codex will not set up its helpers under the temp dir.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ember.server import BackgroundServer
from ember.testing import Emulator, Reply

PROJECT_PLACEHOLDER = "/work/proj"
HOME_PLACEHOLDER = "/home/user"
HOST_PLACEHOLDER = "127.0.0.1:8787"
NOTES = "# Notes\n\n- buy milk\n- fix the flaky test in test_session.py\n"
CLAUDE_MD = "# Project rules\n\nUse pytest for tests. Keep functions short.\n"
AGENTS_MD = "# Agent rules\n\nUse pytest for tests. Keep functions short.\n"
TABLE_START, TABLE_END = "<!-- requests:start -->", "<!-- requests:end -->"

# -- recording ------------------------------------------------------------------------------


@dataclass
class Exchange:
    """One request as it arrived (exact body bytes) and the response bytes sent back."""

    start: float
    method: str
    path: str
    query: str
    headers: list[tuple[str, str]]
    body: bytearray = field(default_factory=bytearray)
    response: bytearray = field(default_factory=bytearray)
    status: int = 0


class Recorder:
    """ASGI wrapper around the emulator that keeps every exchange in arrival order."""

    def __init__(self, app: Emulator) -> None:
        self.app = app
        self.exchanges: list[Exchange] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        ex = Exchange(
            time.monotonic(),
            scope["method"],
            scope["path"],
            scope.get("query_string", b"").decode("latin-1"),
            [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope["headers"]],
        )
        self.exchanges.append(ex)

        async def rec_receive() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                ex.body += message.get("body", b"")
            return message

        async def rec_send(message: Any) -> None:
            if message["type"] == "http.response.start":
                ex.status = message["status"]
            elif message["type"] == "http.response.body":
                ex.response += message.get("body", b"")
            await send(message)

        await self.app(scope, rec_receive, rec_send)


# -- the scripted model -------------------------------------------------------------------

ASK_READ = "Please read notes.txt and tell me what it says."
ASK_EXPLORE = "Use the Explore agent to find which file in this project holds the notes."
SUBAGENT_TASK = "List the files in the project directory and say which one holds notes."
ASK_FOLLOWUP = "Thanks. In one word: is it a todo list?"
COMPACT_MARKER = "<summary> block"  # Claude Code's compaction prompt asks for one
ANSWER = "notes.txt holds the notes: a short todo list (buy milk, fix a test)."


def _anthropic_latest(body: dict[str, Any]) -> tuple[bool, str]:
    """(latest user turn carries a tool result, its own text without system reminders)."""
    # Claude Code 2.1.197 on its default model sends a session's first ask as [user, system]
    messages = [m for m in body.get("messages") or [] if m.get("role") != "system"]
    last = messages[-1] if messages else {}
    content = last.get("content", "")
    if isinstance(content, str):
        return False, content
    has_result = any(b.get("type") == "tool_result" for b in content)
    texts = [
        b.get("text", "")
        for b in content
        if b.get("type") == "text" and not b.get("text", "").startswith("<system-reminder>")
    ]
    return has_result, "\n".join(texts)


def _responses_latest(body: dict[str, Any]) -> tuple[bool, str]:
    items = body.get("input") or []
    if isinstance(items, str):
        return False, items
    last = items[-1] if items else {}
    if last.get("type") == "function_call_output":
        return True, ""
    parts = last.get("content") or []
    return False, "\n".join(p.get("text", "") for p in parts if isinstance(p, dict))


def _side_reply(body: dict[str, Any]) -> Reply | None:
    """Claude Code's tool-less side requests: a title when a JSON title is asked for."""
    schema = ((body.get("output_config") or {}).get("format") or {}).get("schema") or {}
    if "title" in (schema.get("properties") or {}):
        return Reply('{"title": "Read the notes file"}')
    return None


def scripted_reply(project: Callable[[], str]) -> Callable[[dict[str, Any], str], Reply | None]:
    """The model's side of every scenario, chosen from the latest user turn only."""

    def reply(body: dict[str, Any], path: str) -> Reply | None:
        anthropic = path == "/v1/messages"
        if anthropic and not body.get("tools"):
            return _side_reply(body)
        has_result, text = (_anthropic_latest if anthropic else _responses_latest)(body)
        if has_result:
            return Reply(ANSWER)
        if COMPACT_MARKER in text:
            return Reply(
                "<analysis>The user had notes.txt read.</analysis>\n"
                f"<summary>1. The user asked to read notes.txt. 2. {ANSWER}</summary>"
            )
        if ASK_READ in text:
            if anthropic:
                return Reply.tool_use("Read", {"file_path": f"{project()}/notes.txt"})
            return Reply.tool_use("exec_command", {"cmd": "cat notes.txt"})
        if ASK_EXPLORE in text:
            task = {"description": "Find the notes file", "prompt": SUBAGENT_TASK}
            return Reply.tool_use("Agent", {**task, "subagent_type": "Explore"})
        if SUBAGENT_TASK in text:
            return Reply.tool_use("Bash", {"command": "ls", "description": "List project files"})
        if ASK_FOLLOWUP in text:
            return Reply("Yes.")
        return None  # anything else: the emulator's deterministic default

    return reply


# -- scenarios -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    """One session: CLI argument lists (print/exec) or prompts typed into one TUI."""

    client: str  # "claude-code" | "codex"
    name: str
    turns: tuple[tuple[str, ...], ...]
    files: tuple[tuple[str, str], ...] = (("notes.txt", NOTES),)
    quiet_traffic: bool = True  # Claude Code: CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
    interactive: bool = False  # Claude Code in its TUI, driven through a pty
    websockets: bool | None = False  # Codex: supports_websockets (None: not in the config)
    model: str | None = "gpt-5.1"  # Codex: the config's model (None: Codex's own default)
    keep_logs: bool = False  # copy the session logs it wrote to tests/fixtures/agent-logs


_CLAUDE = ("--model", "claude-sonnet-4-5", "--allowedTools", "Bash(ls:*)", "Read")
_EXEC = ("exec", "--skip-git-repo-check")
_RESUME = (*_EXEC, "resume", "--last", ASK_FOLLOWUP)

SCENARIOS = (
    Scenario(
        "claude-code",
        "print-then-continue",
        (("-p", ASK_READ, *_CLAUDE), ("-p", "--continue", ASK_FOLLOWUP, *_CLAUDE)),
        keep_logs=True,
    ),
    Scenario(
        "claude-code",
        "claude-md",
        (("-p", ASK_READ, *_CLAUDE),),
        (("notes.txt", NOTES), ("CLAUDE.md", CLAUDE_MD)),
    ),
    Scenario(
        "claude-code",
        "subagent-then-continue",
        (("-p", ASK_EXPLORE, *_CLAUDE), ("-p", "--continue", ASK_FOLLOWUP, *_CLAUDE)),
        keep_logs=True,
    ),
    Scenario(
        "claude-code",
        "compact-then-continue",
        (
            ("-p", ASK_READ, *_CLAUDE),
            ("-p", "--continue", "/compact", *_CLAUDE),
            ("-p", "--continue", ASK_FOLLOWUP, *_CLAUDE),
        ),
        keep_logs=True,
    ),
    Scenario(
        "claude-code",
        "print-default-traffic",
        (("-p", ASK_READ, *_CLAUDE), ("-p", "--continue", ASK_FOLLOWUP, *_CLAUDE)),
        quiet_traffic=False,
    ),
    Scenario(
        "claude-code",
        "interactive",
        ((ASK_READ,), (ASK_FOLLOWUP,)),
        quiet_traffic=False,
        interactive=True,
    ),
    Scenario("codex", "exec-then-resume", ((*_EXEC, ASK_READ), _RESUME), keep_logs=True),
    Scenario(
        "codex",
        "agents-md-exec-then-resume",
        ((*_EXEC, ASK_READ), _RESUME),
        (("notes.txt", NOTES), ("AGENTS.md", AGENTS_MD)),
    ),
    Scenario("codex", "websockets-on", ((*_EXEC, "hello"),), websockets=True),
    Scenario("codex", "websockets-unset", ((*_EXEC, "hello"),), websockets=None),
    # Codex's own default model (no `model` line): another request shape, see the README
    Scenario(
        "codex",
        "default-model-exec-then-resume",
        ((*_EXEC, ASK_READ), _RESUME),
        model=None,
        keep_logs=True,
    ),
    # Claude Code's own default model (no --model) and default traffic, as a new user runs it:
    # its first request of a session is [user ask, system note] (see the README)
    Scenario(
        "claude-code",
        "default-model-then-continue",
        (
            ("-p", ASK_READ, *_CLAUDE[2:]),
            ("-p", "--continue", ASK_FOLLOWUP, *_CLAUDE[2:]),
        ),
        quiet_traffic=False,
        keep_logs=True,
    ),
)


def _codex_config(base_url: str, websockets: bool | None, model: str | None = "gpt-5.1") -> str:
    ws = "" if websockets is None else f"supports_websockets = {str(websockets).lower()}\n"
    first = f'model = "{model}"\n' if model else ""
    return (
        f'{first}model_provider = "ember"\ncheck_for_update_on_startup = false\n\n'
        f'[model_providers.ember]\nname = "Ember"\nbase_url = "{base_url}/v1"\n'
        f'env_key = "OPENAI_API_KEY"\nwire_api = "responses"\n{ws}\n'
        "[analytics]\nenabled = false\n"
    )


def _prepare(sc: Scenario, proj: Path, home: Path, base_url: str) -> dict[str, str]:
    """The project files and the client's home, and the environment to run it with."""
    for name, text in sc.files:
        (proj / name).write_text(text)
    env = dict(os.environ, HOME=str(home), TERM="xterm-256color")
    if sc.client == "codex":
        (home / ".codex").mkdir()
        (home / ".codex/config.toml").write_text(_codex_config(base_url, sc.websockets, sc.model))
        env["OPENAI_API_KEY"] = "sk-test"
        return env
    env.update(
        ANTHROPIC_BASE_URL=base_url,
        ANTHROPIC_API_KEY="sk-test",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
    )
    if sc.quiet_traffic:
        env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
    if sc.interactive:  # skip onboarding (it dials api.anthropic.com) and the trust dialog
        state = {
            "hasCompletedOnboarding": True,
            "theme": "dark",
            "customApiKeyResponses": {"approved": ["sk-test"], "rejected": []},
            "projects": {str(proj): {"hasTrustDialogAccepted": True, "allowedTools": []}},
        }
        (home / ".claude.json").write_text(json.dumps(state))
    return env


def _drive_tui(
    argv: list[str], cwd: Path, env: dict[str, str], prompts: list[str], rec: Recorder
) -> None:
    """Type each prompt into the TUI and wait until its requests have settled, then /exit."""
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.chdir(cwd)
        os.execve(argv[0], argv, env)
    screen = bytearray()

    def pump(seconds: float, until: Callable[[], bool] = lambda: False) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end and not until():
            ready, _, _ = select.select([fd], [], [], 0.1)
            if ready:
                try:
                    screen.extend(os.read(fd, 65536))
                except OSError:
                    return

    def settled(count: int) -> Callable[[], bool]:
        def done() -> bool:
            ex = rec.exchanges
            return len(ex) > count and time.monotonic() - ex[-1].start > 3.0

        return done

    pump(30, lambda: b"shortcuts" in screen)
    for prompt in prompts:
        count = len(rec.exchanges)
        os.write(fd, prompt.encode())
        pump(0.5)
        os.write(fd, b"\r")
        pump(60, settled(count))
    os.write(fd, b"/exit")
    pump(0.5)
    os.write(fd, b"\r")
    pump(5)
    os.kill(pid, signal.SIGTERM)
    os.waitpid(pid, 0)


def run_scenario(sc: Scenario, work: Path, npm: Path, base_url: str, rec: Recorder) -> Path:
    """Run every turn of one scenario; returns its root (``proj`` and ``home`` inside)."""
    root = work / sc.client / sc.name
    shutil.rmtree(root, ignore_errors=True)
    proj, home = root / "proj", root / "home"
    proj.mkdir(parents=True)
    home.mkdir()
    env = _prepare(sc, proj, home, base_url)
    binary = str(npm / "node_modules/.bin" / ("claude" if sc.client == "claude-code" else "codex"))
    if sc.interactive:
        _drive_tui([binary, *_CLAUDE], proj, env, [t[0] for t in sc.turns], rec)
        return root
    for args in sc.turns:
        done = subprocess.run(
            [binary, *args],
            cwd=proj,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
        )
        print(f"  {' '.join(args[:3])[:60]!r} rc={done.returncode} {done.stdout.strip()[-60:]!r}")
        if done.returncode != 0:
            print(done.stderr[-2000:])
    return root


# -- scrubbing -----------------------------------------------------------------------------

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-([0-9a-f])[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")
_HEX64 = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
_REDACT = {"x-api-key": "<redacted>", "authorization": "Bearer <redacted>"}
#: Codex names its agents as paths: the main agent is the superuser's home directory, a
#: sub-agent a child of it (``task1``). Not a directory, but it reads as the recording user's
#: home: written as ``/agent-root`` so no fixture holds a path that looks machine-specific
#: (``<root>`` elements, which hold the workspace roots, are left alone).
_AGENT_ROOT = re.compile(r"(?<![<\w])/root(?=[/`\"\\\s]|$)")
AGENT_ROOT_PLACEHOLDER = "/agent-root"
_SESSION_HEADERS = ("x-claude-code-session-id", "session-id")


class Scrubber:
    """Exact string replacements on raw text; ids keep their length and stay consistent.

    Every UUID becomes ``SSSSSSSS-0000-V000-8000-NNNNNNNNNNNN`` (S: scenario number, V: the
    original version digit, N: order of first appearance, the session id being 1), so a session
    id is the same across all requests of its session and differs between scenarios. 64-hex
    device ids and Claude Code's sub-agent ids likewise; the project and home directories
    become fixed placeholders, including Claude Code's dash-munged project directory name, and
    Codex's agent paths (the superuser's home and below) become ``/agent-root/...``.
    """

    def __init__(self, number: int, root: Path, exchanges: list[Exchange]) -> None:
        self.number = number
        self.ids: dict[str, str] = {}
        self.literals = [
            (str(root / "proj"), PROJECT_PLACEHOLDER),
            (str(root / "home"), HOME_PLACEHOLDER),
            (_munge(str(root / "proj")), _munge(PROJECT_PLACEHOLDER)),
        ]
        for ex in exchanges:
            for name, value in ex.headers:
                if name in _SESSION_HEADERS:
                    self.text(value)  # the session id takes number 1
                if name == "x-claude-code-agent-id" and value not in self.ids:
                    self.ids[value] = f"a{len(self.ids) + 1:0{len(value) - 1}x}"
                    self.literals.append((value, self.ids[value]))

    def _uuid(self, m: re.Match[str]) -> str:
        fake = f"{self.number:08x}-0000-{m.group(1)}000-8000-{len(self.ids) + 1:012d}"
        return self.ids.setdefault(m.group(0), fake)

    def _hex(self, m: re.Match[str]) -> str:
        return self.ids.setdefault(m.group(0), f"{self.number:08x}{len(self.ids) + 1:056x}")

    def text(self, value: str) -> str:
        for real, placeholder in self.literals:
            value = value.replace(real, placeholder)
        value = _AGENT_ROOT.sub(AGENT_ROOT_PLACEHOLDER, value)
        return _HEX64.sub(self._hex, _UUID.sub(self._uuid, value))

    def headers(self, pairs: list[tuple[str, str]], body_len: int) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, value in pairs:
            if name in _REDACT:
                value = _REDACT[name]
            elif name == "host":
                value = HOST_PLACEHOLDER
            elif name == "content-length":
                value = str(body_len)
            else:
                value = self.text(value)
            out[name] = value
        return out


def _munge(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def kind_of(method: str, path: str, body: Any) -> str:
    """What a request is: main thread, sub-agent, a side request, or a probe."""
    if method != "POST":
        return "websocket-attempt" if path == "/v1/responses" else "probe"
    if path == "/v1/responses":
        return "main"
    system = json.dumps(body.get("system", ""))
    if not body.get("tools"):
        return "title" if "title" in json.dumps(body.get("output_config", "")) else "side"
    if COMPACT_MARKER in json.dumps(body["messages"][-1]):
        return "compaction"
    if "Primary working directory" in system:
        return "main"
    return "subagent" if "Working directory:" in system else "side"


def scrub_request(scrub: Scrubber, ex: Exchange) -> tuple[bytes, dict[str, str]]:
    """One request's body and headers, scrubbed (ids numbered in the order they are met)."""
    body = scrub.text(ex.body.decode("utf-8")).encode("utf-8")
    return body, scrub.headers(ex.headers, len(body))


def write_fixtures(
    scrub: Scrubber, sc: Scenario, exchanges: list[Exchange], root: Path, out: Path, base: float
) -> None:
    folder = out / sc.client / sc.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for index, ex in enumerate(exchanges):
        body, headers = scrub_request(scrub, ex)
        kind = kind_of(ex.method, ex.path, json.loads(body) if body else None)
        where = f"{sc.client}/{sc.name} #{index}"
        meta = save_request(
            folder,
            index,
            kind,
            ex,
            body,
            headers,
            base,
            (str(root.parent.parent), "sk-test"),
            where,
        )
        print(f"    {index:03d}-{kind} {ex.method} {ex.path} status={ex.status} t={meta['t_ms']}ms")


def save_request(
    folder: Path,
    index: int,
    kind: str,
    ex: Exchange,
    body: bytes,
    headers: dict[str, str],
    base: float,
    forbidden: tuple[str, ...],
    where: str,
) -> dict[str, Any]:
    """One scrubbed request as ``<index>-<kind>.json`` (method, path, query, headers, status,
    time since the first) and ``.body``; refuses (exits) when any of ``forbidden`` (the
    recording machine's paths, the key) is still in it. Returns what the ``.json`` holds."""
    seen = body.decode() + json.dumps(headers)
    leftover = [s for s in forbidden if s in seen]
    if leftover:
        raise SystemExit(f"{where}: unscrubbed {leftover}")
    meta = {
        "method": ex.method,
        "path": ex.path,
        "query": ex.query,
        "headers": headers,
        "status": ex.status,
        "t_ms": round((ex.start - base) * 1000),
    }
    stem = f"{index:03d}-{kind}"
    (folder / f"{stem}.json").write_text(json.dumps(meta, indent=2) + "\n")
    if body:
        (folder / f"{stem}.body").write_bytes(body)
    return meta


# -- session logs ------------------------------------------------------------------------------

#: Where each CLI writes its session logs under its home, and which files there are the logs
#: (Claude Code: ``<project>/<session>.jsonl`` and ``<session>/subagents/agent-<id>.jsonl`` with
#: an ``agent-<id>.meta.json`` beside it; Codex: ``YYYY/MM/DD/rollout-<time>-<session>.jsonl``).
LOG_DIRS = {
    "claude-code": (".claude/projects", ("*.jsonl", "*.meta.json")),
    "codex": (".codex/sessions", ("*.jsonl",)),
}
KEY = "sk-test"
#: A path no log may hold after scrubbing: the superuser's home (not ``<root>``/``</root>``,
#: Codex's workspace-roots element), the temp dir, and a path below ``/agent-root``: Codex
#: names its main agent ``/root`` and the others by paths below it (``task1``,
#: ``task1/task_3``; scrubbed to ``/agent-root/...``), so anything else below ``/agent-root``
#: is a path of the recording machine that the agent-path rule hid.
_LEAKED_PATH = re.compile(r"(?<![<\w-])/(?:root|tmp)(?![\w-])|/agent-root(?:/task\w*)*/(?!task)")


def _leaks(text: str, work: Path) -> list[str]:
    """What in a scrubbed log still points at the recording machine or holds the key."""
    found = [s for s in (str(work), KEY) if s in text]
    found += sorted({m.group(0) for m in _LEAKED_PATH.finditer(text)})
    user = getpass.getuser()
    # the superuser's name is also Codex's word for a permission kind ("root"): its home is
    # what would give it away, and that is checked above
    if user != "root" and re.search(rf"\b{re.escape(user)}\b", text):
        found.append(f"user name {user!r}")
    found += sorted(set(re.findall(r"/(?:home|Users)/(?!user\b)[\w.-]+", text)))
    return found


def write_logs(scrub: Scrubber, sc: Scenario, root: Path, out: Path) -> None:
    """Copy the session logs the scenario's CLI wrote under its home to ``out/<client>/<name>``,
    same layout below the home (so the folder reads as a user's home), every file name and
    line scrubbed like the requests and with their ids; the key is replaced too."""
    base, patterns = LOG_DIRS[sc.client]
    home = root / "home"
    logs = sorted({p for pattern in patterns for p in (home / base).rglob(pattern)})
    if not logs:
        raise SystemExit(f"{sc.client}/{sc.name}: no session log under {home / base}")
    folder = out / sc.client / sc.name
    shutil.rmtree(folder, ignore_errors=True)
    for path in logs:
        rel = scrub.text(path.relative_to(home).as_posix())
        text = scrub.text(path.read_text(encoding="utf-8")).replace(KEY, "<redacted>")
        leftover = _leaks(f"{rel}\n{text}", root.parent.parent)
        if leftover:
            raise SystemExit(f"{sc.client}/{sc.name} {rel}: unscrubbed {leftover}")
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"    log {rel} ({len(text.encode())} bytes)")


# -- the README table ----------------------------------------------------------------------


def _cwd_places(body: dict[str, Any]) -> str:
    """Top-level places whose text names the project directory, with how it is named."""
    marks = (
        ("Primary working directory: ", "Primary working directory"),
        ("<env>\nWorking directory: ", "<env> Working directory"),
        ("<env>\n  Working directory: ", "<env> Working directory"),
        ("I'm currently working in the directory: ", "I'm currently working in the directory"),
        ("Workspace Directories:", "Workspace Directories"),
        ("<cwd>", "<environment_context><cwd>"),
        ("Contents of /work/proj/CLAUDE.md", "CLAUDE.md path"),
        ("# AGENTS.md instructions for ", "AGENTS.md heading"),
        ("/.claude/projects/-work-proj/memory", "memory dir"),
        ("/work/proj/notes.txt", "tool call/result"),
    )
    places = []
    for key in ("system", "messages", "input", "systemInstruction", "contents"):
        items = body.get(key)
        if isinstance(items, dict):
            items = [items]
        if not isinstance(items, list):
            continue
        for i, item in enumerate(items):
            flat = "\n".join(_strings(item))
            found = [label for mark, label in marks if mark in flat]
            if found:
                places.append(f"{key}[{i}]: {', '.join(found)}")
    return "; ".join(places) or "—"


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _session(meta: dict[str, Any], body: dict[str, Any]) -> str:
    user_id = (body.get("metadata") or {}).get("user_id")
    sid = json.loads(user_id).get("session_id") if user_id else body.get("prompt_cache_key")
    headers = meta["headers"]
    return str(sid or headers.get("session-id") or headers.get("x-session-id") or "—")


_SYSTEM_LABELS = (
    ("Generate a concise, sentence-case title", "title generator"),
    ("You are a title generator", "title generator"),
    ("file search specialist", "Explore agent"),
    ("Primary working directory", "Claude Code main"),
    ("You are OpenCode", "OpenCode main"),
    ("You are Qwen Code", "Qwen Code main"),
    ("managed memory extraction subagent", "Qwen Code memory extraction"),
    ("Act as an expert software developer", "aider main"),
    ("running in the Codex CLI", "Codex main"),
    ("You are Gemini CLI", "Gemini CLI main"),
    ("You are an interactive CLI agent", "Gemini CLI main"),
)


def _system_kind(body: dict[str, Any]) -> str:
    """Who wrote the system prompt, and where it is."""
    system = body.get("system") or body.get("systemInstruction")
    where = ""
    if system is None:
        roles = ("system", "developer")
        items = [m for m in body.get("messages") or body.get("input") or [] if isinstance(m, dict)]
        system = [m for m in items if m.get("role") in roles]
        if not system:
            return "none"
        where = "developer items" if "input" in body else "system messages"
    text = json.dumps(system)
    count = f"{len(system)} {where or 'blocks'}" if isinstance(system, list) else "1 part"
    for needle, label in _SYSTEM_LABELS:
        if needle in text:
            return f"{label} ({count})"
    return f"other ({count})"


def table(out: Path) -> str:
    head = (
        "| scenario | request | path | stream | model | tools | max_tokens | system prompt "
        "| session id | cwd appears in | side request |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    rows = []
    for meta_file in sorted(out.glob("*/*/*.json")):
        meta = json.loads(meta_file.read_text())
        body_file = meta_file.with_suffix(".body")
        scenario = f"{meta_file.parent.parent.name}/{meta_file.parent.name}"
        kind = meta_file.stem.split("-", 1)[1]
        side = "yes: " + kind if kind not in ("main", "subagent") else "no"
        if kind == "subagent":
            side = "sub-agent"
        if not body_file.exists():
            cells = [meta["method"] + " " + meta["path"]] + ["—"] * 7
            rows.append(f"| {scenario} | {meta_file.stem} | " + " | ".join(cells) + f" | {side} |")
            continue
        body = json.loads(body_file.read_bytes())
        cells = [
            meta["path"] + (f"?{meta['query']}" if meta["query"] else ""),
            str(body.get("stream", False)).lower(),
            str(body.get("model")),
            str(len(body.get("tools") or [])),
            str(body.get("max_tokens", body.get("max_output_tokens", "—"))),
            _system_kind(body),
            f"`{_session(meta, body)}`",
            _cwd_places(body),
        ]
        rows.append(f"| {scenario} | {meta_file.stem} | " + " | ".join(cells) + f" | {side} |")
    return head + "\n".join(rows) + "\n"


def update_readme(out: Path) -> None:
    readme = out / "README.md"
    text = readme.read_text() if readme.exists() else f"{TABLE_START}\n{TABLE_END}\n"
    before, rest = text.split(TABLE_START, 1)
    after = rest.split(TABLE_END, 1)[1]
    readme.write_text(f"{before}{TABLE_START}\n{table(out)}{TABLE_END}{after}")


# -- usage --------------------------------------------------------------------------------------


def usage_of(ex: Exchange) -> tuple[int, int, int] | None:
    """(fresh input, cache read, cache write) from the emulator's answer to a model call."""
    for line in ex.response.decode("utf-8", "replace").splitlines():
        if not line.startswith("data: "):
            continue
        if ex.path == "/v1/messages" and '"message_start"' in line:
            u = json.loads(line[6:])["message"]["usage"]
            read = u.get("cache_read_input_tokens") or 0
            return u["input_tokens"], read, u.get("cache_creation_input_tokens") or 0
        if ex.path == "/v1/responses" and '"response.completed"' in line:
            u = json.loads(line[6:])["response"]["usage"]
            cached = u["input_tokens_details"]["cached_tokens"]
            return u["input_tokens"] - cached, cached, 0
    return None


def share(exchanges: list[Exchange]) -> str:
    rows = [u for u in map(usage_of, exchanges) if u is not None]
    fresh, read, write = (sum(r[i] for r in rows) for i in range(3))
    total = fresh + read + write
    return f"{len(rows)} calls, input {total}, cache read {read} ({read / max(total, 1):.1%})"


# -- main ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--npm", type=Path, help="npm prefix holding both CLIs")
    parser.add_argument("--work", type=Path, help="scratch dir (not under /tmp)")
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/clients"))
    parser.add_argument("--only", default="", help="run only scenarios whose name contains this")
    parser.add_argument("--table-only", action="store_true", help="only rewrite the README table")
    parser.add_argument(
        "--logs",
        type=Path,
        default=Path("tests/fixtures/agent-logs"),
        help="where the scenarios' session logs go",
    )
    parser.add_argument(
        "--logs-only",
        action="store_true",
        help="write only the session logs (of scenarios that keep them), not the requests",
    )
    args = parser.parse_args()
    if not args.table_only:
        if args.npm is None or args.work is None:
            parser.error("--npm and --work are required")
        for number, sc in enumerate(SCENARIOS, 1):
            if args.only in f"{sc.client}/{sc.name}" and (sc.keep_logs or not args.logs_only):
                record(number, sc, args)
    if not args.logs_only:
        update_readme(args.out)


def record(number: int, sc: Scenario, args: argparse.Namespace) -> None:
    print(f"{sc.client}/{sc.name}")
    emulator = Emulator()
    root = (args.work / sc.client / sc.name).absolute()
    emulator.reply_fn = scripted_reply(lambda: str(root / "proj"))
    recorder = Recorder(emulator)
    with BackgroundServer(recorder) as upstream:
        started = time.monotonic()
        run_scenario(sc, args.work.absolute(), args.npm.absolute(), upstream.url, recorder)
        exchanges = list(recorder.exchanges)
    print(f"  direct: {share(exchanges)}")
    scrub = Scrubber(number, root, exchanges)
    if args.logs_only:  # the requests' ids still come first, numbered as in their fixtures
        for ex in exchanges:
            scrub_request(scrub, ex)
    else:
        write_fixtures(scrub, sc, exchanges, root, args.out, started)
    if sc.keep_logs:
        write_logs(scrub, sc, root, args.logs)


if __name__ == "__main__":
    main()
