"""Shadow memory with the real clients: do facts a user states become memories, hot and cheap?

Claude Code and Codex (installed from npm, or ``--npm DIR``) run offline through ember exactly
as a new user runs them — ``ember wrap``, or a client pointed at a running ``ember proxy`` —
with ember's SHIPPED DEFAULTS (no EMBER_* setting but EMBER_HOME, EMBER_PORT and the upstream
URLs), against the provider emulator in a process of its own. In each scenario the user states
durable facts ("Deploys go to fly.io.") inside prompts that also ask something; after the last
session the bench waits for the shadow to settle, then reads what a user can read:

* facts stored: a stated fact counts when a current memory (``ember memory list --json``)
  contains its distinctive key phrase, case-insensitive ("fly.io");
* shadow runs hot / cold / skipped, with the skip reasons (``ember shadow runs --json``);
  hot % = hot / (hot + cold + skipped): a skipped run is a backlog that was not read hot;
* the cache-read share of shadow input: cache read / (input + cache read + cache write),
  summed over the shadow's runs;
* shadow spend as a share of the client's own (``ember stats --json``, the client's
  sessions): in USD when every client session and every shadow call has a price ("$"), else
  in input-equivalent tokens at Anthropic's list-price ratios ("t": input 1, cache read 0.1,
  cache write 1.25, output 5);
* shadow questions the emulator saw (hot + cold) and the facts its answers proposed, from its
  request log (``ember dev upstream --log FILE``; "-" when its ``--help`` does not list it);
* the next session: one more session in the project asks about a stated fact; "yes" when ember
  injected a memory block into it, "fact" when that block holds the fact asked about. No CLI
  shows injections (and the emulator's log holds no bodies): read-only from the project
  database's ``memory_injections`` table.

The emulator is ``python -m ember dev upstream``: its model answers ember's shadow question by
proposing the declarative sentences the user stated (``ember.testing.stated``), anything else
with a deterministic sentence.

Each scenario has its own project directory, client HOME, EMBER_HOME and ports (a new user's
first project); the work directory is under ``~/.cache/ember-bench/`` (Codex will not set up its
helpers under /tmp) and is removed at the end unless ``--keep``. Every client command has a
timeout and every wait a deadline; nothing leaves loopback. Not part of ``make test``.

    python bench/shadow_capture.py [--npm DIR] [--scenarios claude-print-wrap,codex-ws-default]
        [--work DIR] [--keep] [--json FILE] [--timeout 180] [--pause 5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from capture_clients import (
    Clients,
    Ran,
    claude_state,
    client_env,
    client_requests,
    codex_config,
    dev_upstream_logs,
    drive_tui,
    install_clients,
    run_bounded,
    start_upstream,
    stop_process,
    stop_wrap_leftover,
    wait_healthy,
)
from common import EMBER
from ember.server import free_port

#: Shipped defaults the settle wait has to cover (CONTRACT.md: shadow_idle_seconds, tick).
IDLE_SECONDS = 60.0
TICK_SECONDS = 15.0
SETTLE_DEADLINE = 150.0
TARGET_STORED, TARGET_HOT, TARGET_SHARE = 0.90, 0.90, 0.15
#: Input-equivalent weights of token kinds (Anthropic list-price ratios), for the "t" share.
WEIGHTS = {
    "input_tokens": 1.0,
    "cache_read_tokens": 0.1,
    "cache_write_tokens": 1.25,
    "output_tokens": 5.0,
}
ALLOWED = ("--allowedTools", "Bash(ls:*)", "Read")
EXEC = ("exec", "--skip-git-repo-check")
PROJECT_FILES = {
    "README.md": "# shop\n\nA small web shop: `app.py` serves it, `tests/` checks it.\n",
    "app.py": "def main() -> None:\n    print('shop')\n",
}


@dataclass(frozen=True)
class Fact:
    sentence: str  # what the user says, one distinctive sentence
    key: str  # the phrase a memory must contain to count (case-insensitive)
    question: str  # the next session's question about it


FACTS = (
    Fact("Deploys go to fly.io.", "fly.io", "Where do deploys go?"),
    Fact("Tests run with pytest -x.", "pytest -x", "How do we run the tests?"),
    Fact("The database is PostgreSQL 16.", "postgresql 16", "Which database do we use?"),
)
ASKS = (
    "What files are here?",
    "Which file would you read first?",
    "What does app.py do?",
    "Anything in the README I should know?",
    "What would you check next?",
)


@dataclass(frozen=True)
class Scenario:
    name: str
    client: str  # "claude" | "codex"
    mode: str  # "wrap" | "proxy" | "tui"
    placed: tuple[tuple[int, Fact], ...]  # (turn index, fact said in it)
    turns: int
    model: str | None = None  # Codex's config model line (None: Codex's default)

    @property
    def facts(self) -> tuple[Fact, ...]:
        return tuple(f for _, f in self.placed)

    def prompts(self) -> list[str]:
        """Each turn's prompt: its facts' sentences, then a question."""
        out = []
        for turn in range(self.turns):
            said = [f.sentence for t, f in self.placed if t == turn]
            out.append(" ".join([*said, ASKS[turn % len(ASKS)]]))
        return out


def _codex(name: str, mode: str, model: str | None) -> Scenario:
    return Scenario(name, "codex", mode, ((0, FACTS[0]), (2, FACTS[1])), 3, model)


SCENARIOS = (
    Scenario("claude-print-wrap", "claude", "wrap", ((0, FACTS[0]), (0, FACTS[1])), 1),
    Scenario(
        "claude-continue-proxy", "claude", "proxy", ((0, FACTS[0]), (2, FACTS[1]), (4, FACTS[2])), 5
    ),
    Scenario("claude-tui-wrap", "claude", "tui", ((0, FACTS[0]), (2, FACTS[1])), 3),
    _codex("codex-ws-default", "wrap", None),
    _codex("codex-ws-gpt51", "wrap", "gpt-5.1"),
    _codex("codex-http-default", "proxy", None),
    _codex("codex-http-gpt51", "proxy", "gpt-5.1"),
)


# -- pure measurement ----------------------------------------------------------------------------


def fact_stored(fact: Fact, contents: Sequence[str]) -> bool:
    """A fact is stored when some memory's content holds its key phrase (case-insensitive)."""
    return any(fact.key.lower() in c.lower() for c in contents)


@dataclass
class Tokens:
    input_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0

    def add(self, row: dict[str, Any]) -> None:
        for name in WEIGHTS:
            setattr(self, name, getattr(self, name) + int(row.get(name) or 0))

    @property
    def prompt(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def weighted(self) -> float:
        return float(sum(getattr(self, name) * w for name, w in WEIGHTS.items()))


@dataclass
class Spend:
    """Tokens, and USD (None as soon as one part has no price)."""

    tokens: Tokens = field(default_factory=Tokens)
    usd: float | None = 0.0

    def add(self, row: dict[str, Any], usd: float | None) -> None:
        self.tokens.add(row)
        self.usd = None if self.usd is None or usd is None else self.usd + usd


@dataclass
class RunTally:
    hot: int = 0
    cold: int = 0
    skipped: int = 0
    failed: int = 0
    cancelled: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    spend: Spend = field(default_factory=Spend)


def tally_runs(runs: Sequence[dict[str, Any]]) -> RunTally:
    """Shadow runs by path and status; a skipped run counts only as skipped (with its reason),
    and only runs that made calls add to the spend."""
    t = RunTally()
    for r in runs:
        if r.get("status") == "skipped":
            t.skipped += 1
            why = str(r.get("reason") or r.get("error") or "?")
            t.reasons[why] = t.reasons.get(why, 0) + 1
            continue
        if r.get("path") == "hot":
            t.hot += 1
        else:
            t.cold += 1
        t.failed += r.get("status") == "failed"
        t.cancelled += r.get("status") == "cancelled"
        if int(r.get("calls") or 0) > 0 or Tokens(**_token_fields(r)).prompt > 0:
            t.spend.add(r, r.get("estimated_usd"))
    return t


def _token_fields(row: dict[str, Any]) -> dict[str, int]:
    return {name: int(row.get(name) or 0) for name in WEIGHTS}


def client_spend(sessions: Sequence[dict[str, Any]]) -> Spend:
    """The client's own spend over its sessions (``ember stats --json``: client calls only)."""
    s = Spend()
    for row in sessions:
        s.add(row, row.get("cost_usd"))
    return s


def cache_read_share(t: Tokens) -> float | None:
    """Cache read / (input + cache read + cache write); None without any input."""
    return t.cache_read_tokens / t.prompt if t.prompt else None


def spend_share(shadow: Spend, client: Spend) -> tuple[float | None, str]:
    """(shadow / client, "$" or "t"): USD when both sides are fully priced, else weighted
    tokens; None when the client spent nothing."""
    if shadow.usd is not None and client.usd is not None and client.usd > 0:
        return shadow.usd / client.usd, "$"
    if client.tokens.weighted > 0:
        return shadow.tokens.weighted / client.tokens.weighted, "t"
    return None, "t"


@dataclass(frozen=True)
class LogCounts:
    """What the emulator's request log says (``ember.testing.request_log``)."""

    requests: int = 0  # model requests: HTTP POSTs and WebSocket messages
    websocket: int = 0  # of which WebSocket messages
    hot: int = 0  # shadow questions asked on the hot path
    cold: int = 0
    facts: int = 0  # facts its answers to shadow questions proposed

    @property
    def shadow(self) -> int:
        return self.hot + self.cold


def log_counts(lines: Sequence[str]) -> LogCounts:
    """Count the log's lines; a handshake or a health check is not a model request."""
    requests = websocket = hot = cold = facts = 0
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("method") not in ("POST", "WEBSOCKET"):
            continue
        requests += 1
        websocket += entry["method"] == "WEBSOCKET"
        hot += entry.get("shadow") == "hot"
        cold += entry.get("shadow") == "cold"
        if entry.get("shadow") in ("hot", "cold"):
            facts += int(entry.get("facts") or 0)
    return LogCounts(requests, websocket, hot, cold, facts)


def settle_state(
    running: bool, since_start: float, since_change: float, reach: float, quiet: float, left: float
) -> str:
    """``settled`` once nothing runs, ``reach`` seconds have passed since the client's last
    command (a trigger that may still fire has fired) and nothing changed for ``quiet``
    seconds; ``deadline`` past the deadline; else ``wait``."""
    if not running and since_start >= reach and since_change >= quiet:
        return "settled"
    return "deadline" if left <= 0 else "wait"


@dataclass
class Row:
    """One scenario's line of the table (and its JSON)."""

    name: str
    stated: int
    stored: int
    runs: RunTally
    client: Spend
    log: LogCounts | None = None  # the emulator's request log (None: no --log)
    injected: bool | None = None
    injected_fact: bool | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def hot_share(self) -> float | None:
        all_runs = self.runs.hot + self.runs.cold + self.runs.skipped
        return self.runs.hot / all_runs if all_runs else None


def total_row(rows: Sequence[Row]) -> Row:
    """Every count summed, every share pooled (a ratio of sums, never a mean of ratios)."""
    runs = RunTally()
    client = Spend()
    for r in rows:
        for name in ("hot", "cold", "skipped", "failed", "cancelled"):
            setattr(runs, name, getattr(runs, name) + getattr(r.runs, name))
        for why, n in r.runs.reasons.items():
            runs.reasons[why] = runs.reasons.get(why, 0) + n
        runs.spend.add(asdict(r.runs.spend.tokens), r.runs.spend.usd)
        client.add(asdict(r.client.tokens), r.client.usd)
    logs = [r.log for r in rows]
    return Row(
        "total",
        sum(r.stated for r in rows),
        sum(r.stored for r in rows),
        runs,
        client,
        None if None in logs else _sum_logs([x for x in logs if x is not None]),
        None,
        None,
        {
            "injected": sum(bool(r.injected) for r in rows),
            "facts_injected": sum(bool(r.injected_fact) for r in rows),
            "scenarios": len(rows),
        },
    )


def _sum_logs(logs: Sequence[LogCounts]) -> LogCounts:
    return LogCounts(*(sum(getattr(x, f.name) for x in logs) for f in fields(LogCounts)))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def cells(r: Row) -> list[str]:
    """The printed cells of one row."""
    share, basis = spend_share(r.runs.spend, r.client)
    if r.name == "total":
        d = r.details
        nxt = f"{d['injected']}/{d['scenarios']} ({d['facts_injected']} fact)"
    else:
        nxt = (
            "-"
            if r.injected is None
            else ("fact" if r.injected_fact else "yes" if r.injected else "no")
        )
    return [
        r.name,
        str(r.stated),
        str(r.stored),
        _pct(r.stored / r.stated if r.stated else None),
        f"{r.runs.hot}/{r.runs.cold}/{r.runs.skipped}",
        _pct(r.hot_share),
        _pct(cache_read_share(r.runs.spend.tokens)),
        "-" if share is None else f"{share:.3f} {basis}",
        "-" if r.log is None else f"{r.log.shadow}/{r.log.facts}",
        nxt,
    ]


HEAD = [
    "scenario",
    "stated",
    "stored",
    "%",
    "hot/cold/skip",
    "hot %",
    "cache-read",
    "shadow/client",
    "emu Qs/facts",
    "next session",
]


def table(rows: Sequence[Row], total: Row) -> str:
    """The rows and the total, aligned, with a rule above the total."""
    lines = [cells(r) for r in [*rows, total]]
    widths = [max(len(x[i]) for x in [HEAD, *lines]) for i in range(len(HEAD))]

    def fmt(cs: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cs, widths, strict=True))
        )

    rule = "-" * len(fmt(HEAD))
    return "\n".join([fmt(HEAD), rule, *map(fmt, lines[:-1]), rule, fmt(lines[-1])])


def targets(total: Row) -> str:
    """The targets beside the total, each with met / missed."""
    share, basis = spend_share(total.runs.spend, total.client)
    stored = total.stored / total.stated if total.stated else None
    checks = [
        (
            f"facts stored >= {TARGET_STORED:.0%}",
            stored,
            stored is not None and stored >= TARGET_STORED,
        ),
        (
            f"shadow calls hot >= {TARGET_HOT:.0%}",
            total.hot_share,
            total.hot_share is not None and total.hot_share >= TARGET_HOT,
        ),
        (
            f"shadow spend <= {TARGET_SHARE} of the client's ({basis})",
            share,
            share is not None and share <= TARGET_SHARE,
        ),
    ]
    return "targets: " + "; ".join(
        f"{label}: {'-' if v is None else f'{v:.3f}'} {'met' if ok else 'MISSED'}"
        for label, v, ok in checks
    )


# -- reading what a user can read ----------------------------------------------------------------


def ember_json(env: dict[str, str], *args: str) -> list[Any]:
    """An ember command's ``--json`` output as a list: a list command's array as it is ([]
    when the project has no data yet), any other document as a list of one."""
    out = subprocess.run(
        [EMBER, *args, "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    return json_rows(out.stdout)


def json_rows(text: str) -> list[Any]:
    """``--json`` output (one document) as rows; nothing printed is no rows."""
    if not text.strip():
        return []
    doc = json.loads(text)
    return doc if isinstance(doc, list) else [doc]


def shadow_runs(env: dict[str, str], proj: Path) -> list[dict[str, Any]]:
    """``ember shadow runs --json``: every run of the project, newest first."""
    return ember_json(env, "shadow", "runs", "--cwd", str(proj), "--limit", "10000")


@contextlib.contextmanager
def project_db(ember_home: Path) -> Iterator[sqlite3.Connection | None]:
    """The scenario's one project database, read-only (None before the first request)."""
    found = sorted(ember_home.glob("projects/*/ember.db"))
    if not found:
        yield None
        return
    conn = sqlite3.connect(f"file:{found[0]}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        yield conn
    finally:
        conn.close()


def db_facts(ember_home: Path) -> dict[str, Any]:
    """What no CLI prints, read-only from the project database: spend by origin (a check of
    the CLI numbers), the largest client prompt, requests by thread kind, injections."""
    with project_db(ember_home) as conn:
        if conn is None:
            return {}
        origins = {
            r["origin"]: dict(r)
            for r in conn.execute(
                "SELECT origin, COUNT(*) AS requests, SUM(input_tokens) AS input_tokens, "
                "SUM(cache_read_tokens) AS cache_read_tokens, SUM(cache_write_tokens) AS "
                "cache_write_tokens, SUM(output_tokens) AS output_tokens, COUNT(*) - "
                "COUNT(cost_usd) AS unpriced, SUM(cost_usd) AS cost_usd FROM exchanges GROUP BY 1"
            )
        }
        kinds = dict(
            conn.execute(
                "SELECT COALESCE(thread_kind, '?'), COUNT(*) FROM exchanges WHERE origin='client' "
                "GROUP BY 1"
            ).fetchall()
        )
        [(largest,)] = conn.execute(
            "SELECT MAX(input_tokens + cache_read_tokens + cache_write_tokens) FROM exchanges "
            "WHERE origin='client'"
        ).fetchall()
        models = [
            r[0] for r in conn.execute("SELECT DISTINCT model FROM exchanges WHERE origin='client'")
        ]
        injections = [
            dict(r)
            for r in conn.execute(
                "SELECT session_id, block, created_at FROM memory_injections ORDER BY created_at"
            )
        ]
    return {
        "by_origin": origins,
        "client_thread_kinds": kinds,
        "largest_client_prompt": largest,
        "client_models": models,
        "injections": injections,
    }


def read_log(path: Path | None) -> list[str]:
    """The emulator's request log so far ([] without one)."""
    if path is None or not path.exists():
        return []
    return path.read_text(errors="replace").splitlines()


# -- running one scenario ------------------------------------------------------------------------


@dataclass
class Setup:
    """One scenario's directories, ports and processes."""

    sc: Scenario
    root: Path
    clients: Clients
    log_requests: bool
    port: int = field(default_factory=free_port)
    up_port: int = field(default_factory=free_port)
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def proj(self) -> Path:
        return self.root / "proj"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def ember_home(self) -> Path:
        return self.root / "ember-home"

    @property
    def emu_log(self) -> Path | None:
        return self.root / "emulator-requests.jsonl" if self.log_requests else None

    @property
    def proxy_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        env = client_env(
            self.home, self.ember_home, self.port, f"http://127.0.0.1:{self.up_port}", self.clients
        )
        if self.sc.mode == "proxy" and self.sc.client == "claude":
            env["ANTHROPIC_BASE_URL"] = self.proxy_url
        return env


def prepare(s: Setup) -> None:
    """The project's files and the client's fresh HOME."""
    for folder in (s.proj, s.home, s.ember_home):
        folder.mkdir(parents=True)
    for name, text in PROJECT_FILES.items():
        (s.proj / name).write_text(text)
    if s.sc.client == "codex":
        (s.home / ".codex").mkdir()
        proxy = s.proxy_url if s.sc.mode == "proxy" else None
        (s.home / ".codex" / "config.toml").write_text(codex_config(s.sc.model, proxy))
    elif s.sc.mode == "tui":
        (s.home / ".claude.json").write_text(claude_state(s.proj))


def start_servers(s: Setup) -> None:
    """The emulator, and for ``proxy`` scenarios an ``ember proxy`` started as a user would."""
    up = f"http://127.0.0.1:{s.up_port}"
    s.procs.append(start_upstream(s.up_port, s.emu_log, s.root / "emulator.out"))
    wait_healthy(up)
    if s.sc.mode != "proxy":
        return
    argv = [
        EMBER,
        "proxy",
        "--port",
        str(s.port),
        "--anthropic-url",
        up,
        "--openai-url",
        up + "/v1",
    ]
    with open(s.root / "proxy.log", "wb") as log:
        s.procs.append(
            subprocess.Popen(argv, env=s.env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        )
    wait_healthy(s.proxy_url)


def session_argv(s: Setup, prompt: str, first: bool) -> list[str]:
    """One client command: a new session (``first``) or the next turn of the last one."""
    if s.sc.client == "claude":
        args = ["-p", prompt, *ALLOWED] if first else ["-p", "--continue", prompt, *ALLOWED]
        via_wrap = s.sc.mode != "proxy"
        return (
            [EMBER, "wrap", "claude", "--", *args] if via_wrap else [str(s.clients.claude), *args]
        )
    args = [*EXEC, prompt] if first else [*EXEC, "resume", "--last", prompt]
    return (
        [EMBER, "wrap", "codex", "--", *args]
        if s.sc.mode == "wrap"
        else [str(s.clients.codex), *args]
    )


def run_sessions(s: Setup, timeout: float, pause: float) -> list[Ran]:
    """The scenario's turns; a turn that failed is reported, and the next still runs."""
    prompts = s.sc.prompts()
    if s.sc.mode == "tui":
        ran = drive_tui(
            [EMBER, "wrap", "claude"],
            s.proj,
            s.env,
            prompts,
            lambda: client_requests(s.ember_home),
            timeout,
            pause,
        )
        _say_ran(ran)
        return [ran]
    done = []
    for i, prompt in enumerate(prompts):
        if i:
            time.sleep(pause)  # the user reads the answer, types the next prompt
        done.append(run_bounded(session_argv(s, prompt, i == 0), s.proj, s.env, timeout))
        _say_ran(done[-1])
    return done


def _say_ran(ran: Ran) -> None:
    status = "timed out" if ran.code is None else f"rc={ran.code}"
    print(f"    {status} {ran.seconds:5.1f} s  {' '.join(ran.argv[-4:])[:90]}", flush=True)
    if ran.code != 0:
        print("      " + ran.tail[-600:].replace("\n", "\n      "), flush=True)


def settle(s: Setup, since: float) -> dict[str, Any]:
    """Poll ``ember shadow runs`` until the shadow has settled (``settle_state``). While our
    own proxy still runs, its idle trigger may fire up to idle + tick seconds after the last
    request (once: it re-arms only with a new request), so the wait reaches past that; an
    ``ember wrap`` has stopped its proxy (and its shutdown read) before it returned."""
    reach = IDLE_SECONDS + TICK_SECONDS + 5 if s.sc.mode == "proxy" else 0.0
    quiet = 10.0 if s.sc.mode == "proxy" else 3.0
    print(
        f"    settling: at least {reach:.0f} s, then {quiet:.0f} s without a change; "
        f"deadline {SETTLE_DEADLINE:.0f} s",
        flush=True,
    )
    last_key: tuple[Any, ...] | None = None
    changed = since
    while True:
        runs = shadow_runs(s.env, s.proj)
        key = tuple(sorted((r["id"], r["status"]) for r in runs))
        now = time.monotonic()
        if key != last_key and last_key is not None:
            changed = now
        last_key = key
        running = any(r["status"] == "running" for r in runs)
        left = since + SETTLE_DEADLINE - now
        state = settle_state(running, now - since, now - changed, reach, quiet, left)
        if state != "wait":
            return {"state": state, "seconds": round(now - since, 1), "runs": len(runs)}
        time.sleep(2.0)


RUN_FIELDS = (
    "id",
    "session_id",
    "path",
    "model",
    "status",
    "trigger",
    "reason",
    "error",
    "calls",
    "input_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "estimated_usd",
    "proposals",
    "valid_proposals",
)


def measure(s: Setup) -> Row:
    """The row of the scenario, before its next session."""
    env, proj = s.env, str(s.proj)
    memories = [m["content"] for m in ember_json(env, "memory", "list", "--cwd", proj)]
    runs = shadow_runs(env, s.proj)
    proposals = ember_json(env, "shadow", "proposals", "--cwd", proj)
    stats = (ember_json(env, "stats", "--cwd", proj) or [{}])[0]
    stored = [fact_stored(f, memories) for f in s.sc.facts]
    counts = log_counts(read_log(s.emu_log))
    row = Row(
        s.sc.name,
        len(stored),
        sum(stored),
        tally_runs(runs),
        client_spend(stats.get("sessions", [])),
        counts if s.emu_log is not None else None,
    )
    row.details = {
        "facts": {f.sentence: ok for f, ok in zip(s.sc.facts, stored, strict=True)},
        "memories": memories,
        "proposals": len(proposals),
        "invalid_proposals": [
            p.get("validation_error") for p in proposals if p.get("validation_error")
        ],
        "runs": [{k: r.get(k) for k in RUN_FIELDS} for r in runs],
        "client_sessions": [
            {k: x.get(k) for k in ("session_id", "models", "requests", "cost_usd")}
            for x in stats.get("sessions", [])
        ],
        "ember_spend": stats.get("ember_spend"),
        "db": db_facts(s.ember_home),
    }
    return row


def next_session(s: Setup, row: Row, timeout: float) -> None:
    """One more session asking about the first stated fact; did ember inject a memory block,
    and did it hold that fact? (the ``memory_injections`` table: the log holds no bodies)."""
    fact = s.sc.facts[0]
    before = len(db_facts(s.ember_home).get("injections", []))
    ran = run_bounded(session_argv(s, fact.question, True), s.proj, s.env, timeout)
    _say_ran(ran)
    # the ledger also records "nothing injected here" (an empty block) to keep bytes stable
    rows = db_facts(s.ember_home).get("injections", [])[before:]
    blocks = [i["block"] for i in rows if i["block"].strip()]
    row.injected = bool(blocks)
    row.injected_fact = any(fact.key.lower() in b.lower() for b in blocks)
    row.details["next_session"] = {
        "question": fact.question,
        "rc": ran.code,
        "blocks": blocks,
    }


def run_scenario(sc: Scenario, args: argparse.Namespace, clients: Clients) -> Row:
    """Sessions, settle, measure, the next session; every process started is stopped."""
    s = Setup(sc, args.work / sc.name, clients, args.log_requests)
    shutil.rmtree(s.root, ignore_errors=True)  # a previous run's, under a --work DIR
    print(f"{sc.name}: {s.root}", flush=True)
    prepare(s)
    try:
        start_servers(s)
        runs = run_sessions(s, args.timeout, args.pause)
        info = settle(s, time.monotonic())
        row = measure(s)
        next_session(s, row, args.timeout)
        row.details["settle"] = info
        row.details["client_runs"] = [
            {"argv": list(r.argv[-6:]), "rc": r.code, "seconds": round(r.seconds, 1)} for r in runs
        ]
        return row
    finally:
        for proc in reversed(s.procs):
            stop_process(proc)
        if stop_wrap_leftover(s.ember_home, s.port):
            print("    stopped a proxy an ember wrap left behind", flush=True)


# -- the run ---------------------------------------------------------------------------------------


def print_notes(rows: Sequence[Row]) -> None:
    """Below the table: skip reasons, failures, invalid proposals, and what the client did."""
    for r in rows:
        for why, n in r.runs.reasons.items():
            print(f"  {r.name}: skipped x{n}: {why}")
        d = r.details
        if r.runs.failed or r.runs.cancelled:
            print(f"  {r.name}: {r.runs.failed} failed, {r.runs.cancelled} cancelled runs")
        if d.get("invalid_proposals"):
            print(f"  {r.name}: invalid proposals: {d['invalid_proposals']}")
        db = d.get("db", {})
        models = ",".join(str(m) for m in db.get("client_models", []))
        wire = "-" if r.log is None else f"{r.log.websocket}/{r.log.requests} over WebSocket"
        print(
            f"  {r.name}: client model {models or '-'}; "
            f"{len(d.get('client_sessions', []))} session(s), requests {wire}, largest "
            f"prompt {db.get('largest_client_prompt')} tokens; {d.get('proposals')} "
            f"proposal(s), {len(d.get('memories', []))} memories"
        )


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options; ``chosen`` holds the scenarios to run, in the table's order."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    names = [sc.name for sc in SCENARIOS]
    parser.add_argument(
        "--scenarios",
        default=",".join(names),
        help="comma-separated subset of: " + ", ".join(names),
    )
    parser.add_argument("--npm", type=Path, help="npm prefix already holding both CLIs")
    parser.add_argument("--work", type=Path, help="work directory (not under /tmp)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--json", type=Path, help="write the rows as JSON to this file")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per client command")
    parser.add_argument("--pause", type=float, default=5.0, help="seconds between a user's turns")
    args = parser.parse_args(argv)
    chosen = [n.strip() for n in args.scenarios.split(",") if n.strip()]
    unknown = sorted(set(chosen) - set(names))
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(unknown)}")
    args.chosen = [sc for sc in SCENARIOS if sc.name in chosen]
    return args


def work_dir(args: argparse.Namespace) -> list[Path]:
    """Set ``args.work`` (a fresh directory under ~/.cache/ember-bench by default) and return
    what to remove at the end: all of it when it was empty, else only what the bench makes in
    it (the scenarios' directories, and the npm install when it makes one)."""
    base = Path.home() / ".cache" / "ember-bench"
    base.mkdir(parents=True, exist_ok=True)
    args.work = (args.work or Path(tempfile.mkdtemp(prefix="shadow-capture-", dir=base))).absolute()
    if args.work.is_relative_to(Path(tempfile.gettempdir()).resolve()):
        print(f"warning: {args.work} is under the temp dir: Codex will not set up its helpers")
    args.work.mkdir(parents=True, exist_ok=True)
    if not any(args.work.iterdir()):
        return [args.work]
    npm = [args.work / "npm"] if args.npm is None and not (args.work / "npm").exists() else []
    return [args.work / sc.name for sc in args.chosen] + npm


def main() -> None:
    """Install (or reuse) the clients, run the scenarios, print the table."""
    args = parse_args()
    ours = work_dir(args)
    try:
        clients = install_clients(args.npm, args.work / "npm", max(args.timeout, 600.0))
        if clients is None:
            print("shadow_capture: npm not found; skipped (install Node.js/npm, or give --npm DIR)")
            return
        args.log_requests = dev_upstream_logs(EMBER)
        print(
            f"work dir {args.work}; emulator: ember dev upstream (request log: "
            f"{'yes' if args.log_requests else 'no'}); shipped ember defaults",
            flush=True,
        )
        rows = [run_scenario(sc, args, clients) for sc in args.chosen]
        report(rows, args)
    finally:
        for path in [] if args.keep else ours:  # a --work DIR of the user's keeps the rest
            shutil.rmtree(path, ignore_errors=True)


def report(rows: Sequence[Row], args: argparse.Namespace) -> None:
    """The table, the targets, the notes, and the JSON file."""
    total = total_row(rows)
    print()
    print(table(rows, total))
    print(targets(total))
    print("shadow/client: $ = list-price USD; t = input-equivalent tokens (no price for a model)")
    print_notes(rows)
    if args.json:
        doc = {"rows": [_row_json(r) for r in [*rows, total]]}
        args.json.write_text(json.dumps(doc, indent=2, default=str) + "\n")
        print(f"wrote {args.json}")


def _row_json(r: Row) -> dict[str, Any]:
    share, basis = spend_share(r.runs.spend, r.client)
    return {
        **dict(zip(HEAD, cells(r), strict=True)),
        "stated": r.stated,
        "stored": r.stored,
        "hot_share": r.hot_share,
        "runs": asdict(r.runs),
        "client": asdict(r.client),
        "cache_read_share": cache_read_share(r.runs.spend.tokens),
        "spend_share": share,
        "spend_basis": basis,
        "emulator_log": None if r.log is None else asdict(r.log),
        "injected": r.injected,
        "injected_fact": r.injected_fact,
        "details": r.details,
    }


if __name__ == "__main__":
    main()
