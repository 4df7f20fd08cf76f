"""The shadow-memory part of the demo: a fact stated in one session, extracted on the hot path,
recalled in the next — with shipped settings.

Session 1 is a short coding task through the proxy with ``EMBER_SHADOW=primary`` (the
default); in one ask the user states how releases are deployed. Then the agent exits and the
proxy stops, as ``ember wrap``'s does: before it stops it reads the session while the
provider's cache is still hot — the shadow forks the session's last request, the provider
reads the old prefix from its cache, and the emulated model answers the shadow question with
the fact and the id of the user's message. Ember checks that pointer and makes the fact a
memory of the project. Session 2, another session of the same project through a new proxy,
asks about releases and gets the fact injected with its ``[id]``.

Everything printed is read back from what the provider received (the emulator's recording)
and from the project database (``shadow_memory_runs``, ``shadow_fact_proposals``, the
transcript, ``session_totals``): the demo asserts nothing it did not find there. What the run
costs is set against the project's budget (``ember.shadow.spend_share``), as ``ember stats``
shows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
from rich.console import Console

from ember.compose import build_app
from ember.config import Settings, load_settings
from ember.demo.memory import injected_block, wait_for_embedder
from ember.project import resolve_project
from ember.server import BackgroundServer
from ember.shadow import reads
from ember.shadow.settings import ShadowSettings
from ember.store.driver import connect
from ember.store.transcript_rows import by_ids
from ember.testing import Emulator
from ember.testing.agent import ScriptedAgent, Task
from ember.testing.shadow import question_of, shadow_replies

CWD = "/home/dev/acme-web"
SESSION_1 = "5ead0000-0000-4000-8000-000000000001"
SESSION_2 = "5ead0000-0000-4000-8000-000000000002"
FACT = "releases deploy to eu-west-1 through the deploy workflow on a version tag, never by hand"
#: How long a stopping proxy may take: its reading of session 1 (``shadow_stop_seconds``),
#: then its own flush.
STOP_WAIT = 30.0
#: What a fork must leave exactly as the provider last received it, besides the messages
#: (changing any of them would miss the provider's cache).
KEPT = ("model", "system", "tools", "tool_choice", "thinking", "max_tokens", "metadata")

SESSION_1_TASKS = [
    Task(
        "The release job failed on tag v2.3.0. Find out why.",
        [
            ("Read", {"path": ".github/workflows/deploy.yml"}),
            ("Bash", {"command": "gh run view --log-failed"}),
            ("Read", {"path": "deploy/config.py"}),
        ],
        "The workflow still targets us-east-1, where the release bucket no longer exists.",
    ),
    Task(
        f"Fix it. And remember: {FACT}.",
        [
            (
                "Edit",
                {"path": ".github/workflows/deploy.yml", "old": "us-east-1", "new": "eu-west-1"},
            ),
            ("Bash", {"command": "act -j deploy --dryrun"}),
        ],
        "The workflow now deploys to eu-west-1; a dry run of the job passes.",
    ),
    Task(
        "Run the test suite and the linter.",
        [("Bash", {"command": "pytest -q"}), ("Bash", {"command": "ruff check ."})],
        "42 tests pass and the linter is clean.",
    ),
    Task(
        "Add a changelog entry for the fix.",
        [
            ("Read", {"path": "CHANGELOG.md"}),
            (
                "Edit",
                {
                    "path": "CHANGELOG.md",
                    "old": "## Unreleased",
                    "new": "## Unreleased\n- deploy: eu-west-1",
                },
            ),
        ],
        "Added under Unreleased.",
    ),
    Task("Thanks. One line on what changed?", [], "Releases target eu-west-1 again."),
]
ASK_2 = Task(
    "We just tagged v2.4.0. Where does the release get deployed to, and how?",
    [],
    "Through the deploy workflow, to eu-west-1: the tag starts it.",
)


Say = Callable[[str], None]


@dataclass(frozen=True)
class Fork:
    """The shadow request against the last request of the session it forks, as the provider
    received both."""

    #: the last request's messages repeated unchanged (0 when anything differed, in the
    #: messages or in ``KEPT``)
    repeated_messages: int
    #: the fields of ``KEPT`` the last request had (all of them unchanged when
    #: ``repeated_messages``)
    kept: list[str]
    #: the roles of the messages added after them
    added_roles: list[str]
    #: the added assistant message says what the client had received
    answer_unchanged: bool
    #: the ``m:<id>`` lines the shadow question lists, and those the evidence points at
    listed: int
    evidence_lines: list[str]


@dataclass
class ShadowSummary:
    """What the shadow part found (None where it found nothing)."""

    mode: str
    max_share: float
    session_requests: int = 0
    session_usd: float | None = None
    #: from the end of session 1 until its run was over (and its fact a memory)
    waited_seconds: float = 0.0
    #: session 1's run, as ``ember shadow runs --json`` shows it
    run: dict[str, Any] | None = None
    #: the shadow request as the provider received it, against session 1's last request
    fork: Fork | None = None
    #: the run's first proposal, as ``ember shadow proposals --json`` shows it
    proposal: dict[str, Any] | None = None
    #: (kind, message id, the kind of the transcript message found there, its text)
    evidence: list[tuple[str, str, str | None, str | None]] = field(default_factory=list)
    injected_block: str | None = None
    embedder_error: str | None = None

    @property
    def cache_read_share(self) -> float | None:
        """cache read / (fresh input + cache read + cache write) of the run's calls."""
        r = self.run
        if r is None:
            return None
        total = r["input_tokens"] + r["cache_read_tokens"] + r["cache_write_tokens"]
        return r["cache_read_tokens"] / total if total else None

    @property
    def cost_share(self) -> float | None:
        """The run's cost over the session's own (both at list prices)."""
        cost = None if self.run is None else self.run["estimated_usd"]
        return cost / self.session_usd if cost is not None and self.session_usd else None

    @property
    def memory_id(self) -> str | None:
        return None if self.proposal is None else self.proposal.get("memory_id")


def run_shadow_demo(home: Path, console: Console, **overrides: Any) -> ShadowSummary:
    """The demo with shipped settings (``overrides``: for the tests that show the budget
    refusing a run)."""
    emulator = Emulator()
    emulator.reply_fn = shadow_replies()  # how the emulated model answers a shadow question
    with BackgroundServer(emulator) as upstream:
        settings = load_settings(
            None,
            {},
            home=home,
            anthropic_url=upstream.url,
            openai_url=upstream.url + "/v1",
            **overrides,
        )
        summary = ShadowSummary(
            settings.section(ShadowSettings).shadow,
            settings.section(ShadowSettings).shadow_max_share,
        )
        # Promoting the fact and session 2's recall both need the embedder.
        summary.embedder_error = wait_for_embedder(settings)
        db = _db_path(settings)
        since = time.time()  # a --home used before holds runs of earlier demos
        proxy = BackgroundServer(build_app(settings)).start()
        try:
            agent = _session(proxy.url, emulator, SESSION_1, SESSION_1_TASKS)
            _announce(settings, console)
        finally:
            started = time.monotonic()
            proxy.stop(STOP_WAIT)  # reads what session 1 said, then stops
        summary.waited_seconds = time.monotonic() - started
        _read_database(db, since, summary)
        _read_fork(emulator, summary, agent.history[-1])
        if summary.memory_id is not None:
            with BackgroundServer(build_app(settings)) as proxy:
                _session(proxy.url, emulator, SESSION_2, [ASK_2])
                summary.injected_block = injected_block(emulator)
    print_shadow(summary, console)
    return summary


def _db_path(settings: Settings) -> Path:
    project = resolve_project({}, None, f"Working directory: {CWD}")
    assert project is not None
    return project.db_path(settings.home)


def _session(proxy_url: str, emulator: Emulator, session: str, tasks: list[Task]) -> ScriptedAgent:
    with anthropic.Anthropic(
        base_url=proxy_url, api_key="demo-key-not-real", max_retries=0
    ) as client:
        agent = ScriptedAgent(client, emulator, cwd=CWD, session_id=session)
        agent.run(tasks)
    return agent


def _announce(settings: Settings, console: Console) -> None:
    console.print(
        f"\n[bold]Shadow memory[/] (EMBER_SHADOW={settings.section(ShadowSettings).shadow}, "
        "shipped settings): "
        f"session 1, {CWD}, a short task in which the user states how releases are deployed.\n"
        f"  The agent exits and the proxy stops, as `ember wrap`'s does: first it reads what "
        f"the session said while the provider's cache is hot (at most "
        f"{settings.section(ShadowSettings).shadow_stop_seconds:g} s)..."
    )


def _query(db: Path, sql: str, args: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    if not db.is_file():
        return []
    conn = connect(db, readonly=True).conn
    try:
        return [dict(r) for r in conn.execute(sql, args)]
    finally:
        conn.close()


def _read_database(db: Path, since: float, s: ShadowSummary) -> None:
    for totals in _query(db, "SELECT * FROM session_totals WHERE session_id = ?", (SESSION_1,)):
        s.session_requests, s.session_usd = totals["requests"], totals["cost_usd"]
    if not db.is_file():
        return
    conn = connect(db, readonly=True).conn
    try:
        mine = [
            r for r in reads.runs(conn) if r["session_id"] == SESSION_1 and r["started_at"] >= since
        ]
        s.run = _shown_run(mine)
        if s.run is None:
            return
        proposals = reads.proposals(conn, run_id=s.run["id"])
        s.proposal = proposals[0] if proposals else None
        raw = s.proposal["evidence"] if s.proposal is not None else None
        pointers = [e for e in raw if isinstance(e, dict)] if isinstance(raw, list) else []
        found = by_ids(conn, [str(e["messageId"]) for e in pointers if e.get("messageId")])
    finally:
        conn.close()
    for e in pointers:
        m = found.get(str(e.get("messageId")))
        target = f"m:{e['messageId']}" if e.get("messageId") else f"session {e.get('sessionId')}"
        s.evidence.append(
            (str(e.get("kind")), target, m.kind if m else None, m.content if m else None)
        )


def _shown_run(newest_first: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run the demo shows: the newest completed one, else the oldest of any status.

    Never a cancelled run when a completed one exists: a run cancelled by the next ask of the
    same session has no proposals, and showing it would hide the fact that was extracted."""
    for run in newest_first:
        if run["status"] == "completed":
            return run
    return newest_first[-1] if newest_first else None


def _read_fork(emulator: Emulator, s: ShadowSummary, answer: dict[str, Any]) -> None:
    """Set the fork's measures from the bodies the provider received: the shadow request
    against the last request of session 1 before it (``answer``: the last answer the client
    received)."""
    bodies = [r.json() for r in emulator.requests if r.path == "/v1/messages"]
    forks = [i for i, b in enumerate(bodies) if question_of(b) is not None]
    own = [
        b
        for b in bodies[: forks[0] if forks else 0]
        if SESSION_1 in str((b.get("metadata") or {}).get("user_id"))
    ]
    if not forks or not own:
        return
    body, last = bodies[forks[0]], own[-1]
    n = len(last["messages"])
    same = (
        all(body.get(k) == last.get(k) for k in KEPT) and body["messages"][:n] == last["messages"]
    )
    added = body["messages"][n:]
    question = question_of(body) or ""
    wanted = [t for _, t, _, _ in s.evidence]
    s.fork = Fork(
        repeated_messages=n if same else 0,
        kept=[k for k in KEPT if k in last],
        added_roles=[str(m.get("role")) for m in added],
        answer_unchanged=bool(added) and _text(added[0]) == _text(answer),
        listed=sum(line.startswith("m:") for line in question.splitlines()),
        evidence_lines=[ln for ln in question.splitlines() if ln.split(" ", 1)[0] in wanted],
    )


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def _usd(v: float | None) -> str:
    return "unknown (no price)" if v is None else f"${v:.4f}"


def print_shadow(s: ShadowSummary, console: Console) -> None:
    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False)

    say(
        f"  session 1       {SESSION_1}: {s.session_requests} requests, "
        f"{_usd(s.session_usd)} at list prices"
    )
    r = s.run
    if r is None:
        say(f"  no shadow run was recorded for session 1 within {s.waited_seconds:.0f} s")
        return
    why = r["reason"] or r["error"]
    say(
        f"  run             {r['id']}: path {r['path']}, model {r['model'] or '-'}, trigger "
        f"{r['trigger']}, {r['status']}"
        + (f" ({why})" if why else "")
        + f", while the proxy stopped ({s.waited_seconds:.1f} s)"
    )
    if r["status"] == "skipped":
        return
    _print_fork(s.fork, say)
    share, cost_share = s.cache_read_share, s.cost_share
    say(
        f"  its input       {r['input_tokens']:,} fresh + {r['cache_read_tokens']:,} cache read "
        f"+ {r['cache_write_tokens']:,} cache write: "
        + ("unknown" if share is None else f"{share:.0%} read from the cache")
        + f"; output {r['output_tokens']:,}"
    )
    say(
        f"  its cost        {_usd(r['estimated_usd'])} at list prices"
        + ("" if cost_share is None else f", {cost_share:.1%} of the session's own")
        + f"; the project's budget: {s.max_share:.0%} of its clients' spend over 7 days, "
        "plus a small allowance for a new project (as `ember stats` shows it: see the end)"
    )
    _print_proposal(s, say, console)


def _print_fork(f: Fork | None, say: Say) -> None:
    if f is None:
        say("  the fork        (the provider received no shadow request)")
        return
    if not f.repeated_messages:
        say("  the fork        did NOT repeat session 1's last request unchanged")
        return
    answer = "the answer the client had received" if f.answer_unchanged else "an answer"
    say(
        f"  the fork        the provider received session 1's last request again, its "
        f"{f.repeated_messages} messages and its {', '.join(f.kept)} unchanged, then "
        f"{' + '.join(f.added_roles)}: {answer}, and the shadow question listing the "
        f"{f.listed} messages not yet read, e.g."
    )
    for line in f.evidence_lines:
        say(f"                  {line}")


def _print_proposal(s: ShadowSummary, say: Say, console: Console) -> None:
    p = s.proposal
    if p is None:
        say("  proposal        none")
        return
    verdict = "valid" if p["validation_error"] is None else f"refused: {p['validation_error']}"
    memory = f", now memory [{p['memory_id']}]" if p["memory_id"] else ""
    say(f"  proposal        {p['id']} ({verdict}{memory}): {p['content']}")
    for kind, target, found_kind, text in s.evidence:
        found = (
            "not in the transcript" if found_kind is None else f"the {found_kind} message {text!r}"
        )
        say(f"  evidence        {kind} -> {target} = {found}")
    if s.memory_id is None:
        return
    say(f"  session 2       {SESSION_2}, same project, asks: {ASK_2.ask!r}")
    say("  its ask carried, after the client's own text:")
    if s.injected_block:
        console.print(s.injected_block, style="dim", markup=False, highlight=False)
    elif s.embedder_error is not None:
        say(f"  (nothing: the embedder is unavailable: {s.embedder_error})")
    else:
        say("  (nothing was injected)")
