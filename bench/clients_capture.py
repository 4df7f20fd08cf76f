"""OpenCode, Gemini CLI, Qwen Code and aider through ``ember wrap``, offline: does each answer,
get its project, its memory and its cache as it would without ember, and have what its user
states remembered?

Each scenario runs twice against a fresh provider emulator of its own (``ember dev upstream
--log``): **direct** (the client pointed at the emulator) and **via ember** (``ember wrap
<client> -- ...`` with shipped defaults, a project memory added before the first turn). The
user's turns are the same both times:

1. "The database is PostgreSQL 16. Where do releases deploy? run: `cat notes.txt`" (a stated
   fact, a question the added memory answers, a command the emulated model runs with the
   client's shell tool when it has one);
2. (multi-turn) "Thanks. Tests run with pytest in parallel. Which file did you read?", as the
   client continues a session: OpenCode ``run --continue``, Qwen Code ``--continue``, Gemini
   CLI ``--resume latest`` (a second process each), aider both lines on stdin (one process).
   (No word of a prompt starts with "-": OpenCode takes its prompt as words and would read it
   as an option.)

Measured per scenario: every turn answered (exit 0, an answer printed); the client's requests
accounted to the project (rows in its database / requests the emulator got; rows left without
a project); the added memory injected (the project's injection ledger holds it); the
cache-read share of the client's requests, direct and via ember, from the usage the emulator
answered with (``cache read / (input + cache read + cache write)``, shadow calls left out),
and the input not read from the cache on the calls after the first (what a broken cached
prefix would raise; ember's own blocks, once cached, raise the share instead);
the stated facts stored by shadow memory (a current memory holding "postgresql 16" /
"pytest in parallel"), and how shadow read the session (hot/cold runs); rows priced.

    python bench/clients_capture.py --npm DIR --aider VENV [--work DIR] [--only NAME] [--json F]

``--npm``: an npm prefix holding opencode-ai, @google/gemini-cli and @qwen-code/qwen-code;
``--aider``: a venv holding aider-chat. The work directory defaults to
``~/.cache/ember-bench/clients``: Gemini CLI refuses a settings file (the one ``ember wrap``
gives a run) below a directory others may write, such as ``/tmp``. Nothing leaves loopback;
not part of ``make test``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from capture_clients import run_bounded, start_upstream, stop_process, wait_healthy
from common import EMBER
from ember.server import free_port

KEY = "sk-test"
MEMORY = "Releases deploy to fly.io from the main branch."
TURNS = (
    "The database is PostgreSQL 16. Where do releases deploy? run: `cat notes.txt`",
    "Thanks. Tests run with pytest in parallel. Which file did you read?",
)
STATED = ("postgresql 16", "pytest in parallel")
NOTES = "# Notes\n\n- buy milk\n- fix the flaky test in test_session.py\n"
AIDER_FLAGS = (
    "--model",
    "openai/gpt-4.1",
    "--yes-always",
    "--no-git",
    "--analytics-disable",
    "--no-check-update",
    "--no-show-release-notes",
    "--no-pretty",
    "--no-fancy-input",
)


@dataclass(frozen=True)
class Scenario:
    name: str
    client: str  # opencode | gemini | qwen | aider
    turns: int  # 1: one-shot; 2: a multi-turn session


SCENARIOS = tuple(
    Scenario(f"{client}-{'session' if n == 2 else 'oneshot'}", client, n)
    for client in ("opencode", "gemini", "qwen", "aider")
    for n in (1, 2)
)


def argvs(sc: Scenario) -> list[tuple[list[str], str | None]]:
    """Each process of the scenario: its arguments after the executable, and its stdin."""
    said = TURNS[: sc.turns]
    if sc.client == "opencode":
        model = ["--model", "anthropic/claude-sonnet-4-5"]
        cont = [[], ["--continue"]]
        return [
            (["run", *model, *c, *t.split(" ")], None) for c, t in zip(cont, said, strict=False)
        ]
    if sc.client == "qwen":
        cont = [[], ["--continue"]]
        base = ["--auth-type", "openai", "--yolo"]
        return [([*base, *c, "-p", t], None) for c, t in zip(cont, said, strict=False)]
    if sc.client == "gemini":
        cont = [[], ["--resume", "latest"]]
        base = ["--skip-trust", "-m", "gemini-2.5-flash"]
        return [([*base, *c, "-p", t], None) for c, t in zip(cont, said, strict=False)]
    if sc.turns == 1:
        return [([*AIDER_FLAGS, "--message", said[0]], None)]
    return [(list(AIDER_FLAGS), "".join(t + "\n" for t in said))]


@dataclass
class Paths:
    npm: Path
    aider: Path

    def binary(self, client: str) -> str:
        if client == "aider":
            return str(self.aider / "bin" / "aider")
        return str(self.npm / "node_modules" / ".bin" / client)


def client_env(sc: Scenario, home: Path, direct_url: str | None) -> dict[str, str]:
    """A fresh HOME, a dummy key, telemetry and updates off; ``direct_url``: the emulator the
    client is pointed at itself (None: ``ember wrap`` points it)."""
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "USER", "LOGNAME", "SHELL")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(HOME=str(home), TERM="dumb", NO_COLOR="1", NO_PROXY="127.0.0.1,localhost")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if sc.client == "opencode":
        env.update(ANTHROPIC_API_KEY=KEY, OPENAI_API_KEY=KEY)
        for name in ("AUTOUPDATE", "MODELS_FETCH", "SHARE", "LSP_DOWNLOAD"):
            env[f"OPENCODE_DISABLE_{name}"] = "1"
        if direct_url:
            provider = {"options": {"baseURL": direct_url + "/v1"}}
            config = {"provider": {"anthropic": provider, "openai": provider}}
            env["OPENCODE_CONFIG_CONTENT"] = json.dumps(config)
    elif sc.client == "qwen":
        env.update(OPENAI_API_KEY=KEY, OPENAI_MODEL="gpt-4.1")
        if direct_url:
            env["OPENAI_BASE_URL"] = direct_url + "/v1"
    elif sc.client == "gemini":
        env["GEMINI_API_KEY"] = KEY
        if direct_url:  # through ember, `ember wrap` selects the API key for the run
            (home / ".gemini").mkdir(parents=True, exist_ok=True)
            auth = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
            (home / ".gemini" / "settings.json").write_text(json.dumps(auth))
            env["GOOGLE_GEMINI_BASE_URL"] = direct_url
    else:
        caches = home / ".aider" / "caches"
        caches.mkdir(parents=True, exist_ok=True)
        (caches / "model_prices_and_context_window.json").write_text('{"_offline": {}}')
        env.update(OPENAI_API_KEY=KEY, LITELLM_LOCAL_MODEL_COST_MAP="True")
        if direct_url:
            env["OPENAI_BASE_URL"] = direct_url + "/v1"
    return env


# -- one run -------------------------------------------------------------------------------------


@dataclass
class Run:
    answered: int = 0  # processes that exited 0 and printed something
    processes: int = 0
    share: float | None = None
    later_fresh: int = 0  # input not read from the cache, over the calls after the first
    client_calls: int = 0
    shadow_calls: int = 0
    tails: list[str] = field(default_factory=list)


def run_processes(
    sc: Scenario, paths: Paths, proj: Path, env: dict[str, str], wrap: list[str] | None
) -> Run:
    out = Run()
    for args, stdin in argvs(sc):
        argv = [*wrap, "--", *args] if wrap else [paths.binary(sc.client), *args]
        ran = _run(argv, proj, env, stdin)
        out.processes += 1
        out.answered += ran[0] == 0 and bool(ran[1].strip())
        out.tails.append(ran[1][-300:])
    return out


def _run(argv: list[str], cwd: Path, env: dict[str, str], stdin: str | None) -> tuple[int, str]:
    if stdin is None:
        ran = run_bounded(argv, cwd, env, 300)
        return (-1 if ran.code is None else ran.code), ran.tail
    done = subprocess.run(
        argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=300
    )
    return done.returncode, done.stdout + done.stderr


def usage_share(log: Path) -> tuple[float | None, int, int, int]:
    """(cache-read share of the client's calls, their fresh input after the first call,
    client calls, shadow calls) from the emulator's log."""
    read = total = calls = shadow = later = 0
    for line in log.read_text().splitlines() if log.exists() else []:
        e = json.loads(line)
        if e.get("method") != "POST":
            continue
        if e.get("shadow") != "none":
            shadow += 1
            continue
        calls += 1
        u = e.get("usage") or {}
        read += u.get("cache_read_tokens", 0)
        total += sum(
            u.get(k, 0) for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens")
        )
        if calls > 1:
            later += u.get("input_tokens", 0) + u.get("cache_write_tokens", 0)
    return (read / total if total else None), later, calls, shadow


@contextlib.contextmanager
def emulator(root: Path, name: str) -> Iterator[tuple[str, Path]]:
    port = free_port()
    log = root / f"{name}-emulator.jsonl"
    proc = start_upstream(port, log, root / f"{name}-emulator.out")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url)
        yield url, log
    finally:
        stop_process(proc)


def port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


# -- what ember did -------------------------------------------------------------------------------


def ember_facts(ember_home: Path) -> dict[str, Any]:
    """Read-only from the project's database and the global one."""
    found = sorted(ember_home.glob("projects/*/ember.db"))
    facts: dict[str, Any] = {"projects": len(found), "rows": 0, "unpriced": 0}
    stats = ember_home / "stats.db"
    if stats.exists():
        with (
            contextlib.closing(sqlite3.connect(f"file:{stats}?mode=ro", uri=True)) as conn,
            contextlib.suppress(sqlite3.Error),
        ):
            facts["unresolved"] = conn.execute("SELECT COUNT(*) FROM exchanges").fetchone()[0]
    if not found:
        return facts
    with contextlib.closing(sqlite3.connect(f"file:{found[0]}?mode=ro", uri=True)) as conn:
        q = conn.execute
        facts["rows"], facts["unpriced"] = q(
            "SELECT COUNT(*), COUNT(*) - COUNT(cost_usd) FROM exchanges WHERE origin='client'"
        ).fetchone()
        facts["threads"] = dict(
            q("SELECT thread_kind, COUNT(*) FROM exchanges WHERE origin='client' GROUP BY 1")
        )
        facts["models"] = [r[0] for r in q("SELECT DISTINCT model FROM exchanges")]
        facts["injected"] = any(
            "fly.io" in (b or "") for (b,) in q("SELECT block FROM memory_injections")
        )
        memories = [
            c.lower() for (c,) in q("SELECT content FROM memories WHERE valid_until IS NULL")
        ]
        facts["stored"] = [s for s in STATED if any(s in m for m in memories)]
        facts["runs"] = [
            f"{p}/{s}"
            for p, s in q("SELECT path, status FROM shadow_memory_runs ORDER BY started_at")
        ]
    return facts


@dataclass
class Result:
    scenario: str
    client: str
    turns: int
    direct: Run
    via: Run
    ember: dict[str, Any]

    @property
    def delta(self) -> float | None:
        if self.direct.share is None or self.via.share is None:
            return None
        return self.via.share - self.direct.share


def run_scenario(sc: Scenario, paths: Paths, work: Path) -> Result:
    root = work / sc.name
    shutil.rmtree(root, ignore_errors=True)
    runs = {}
    for mode in ("direct", "via"):
        proj, home = root / mode / "proj", root / mode / "home"
        proj.mkdir(parents=True)
        home.mkdir(parents=True)
        (proj / "notes.txt").write_text(NOTES)
        with emulator(root, mode) as (url, log):
            if mode == "direct":
                run = run_processes(sc, paths, proj, client_env(sc, home, url), None)
            else:
                run, ember_home = _via(sc, paths, root, proj, home, url)
            run.share, run.later_fresh, run.client_calls, run.shadow_calls = usage_share(log)
        runs[mode] = run
    return Result(
        sc.name, sc.client, sc.turns, runs["direct"], runs["via"], ember_facts(ember_home)
    )


def _via(
    sc: Scenario, paths: Paths, root: Path, proj: Path, home: Path, url: str
) -> tuple[Run, Path]:
    ember_home = root / "ember-home"
    port = free_port()
    env = client_env(sc, home, None)
    env["PATH"] = f"{Path(paths.binary(sc.client)).parent}{os.pathsep}{env['PATH']}"
    env.update(
        EMBER_HOME=str(ember_home),
        EMBER_PORT=str(port),
        EMBER_ANTHROPIC_URL=url,
        EMBER_OPENAI_URL=url + "/v1",
        EMBER_GEMINI_URL=url,
    )
    added = subprocess.run(
        [EMBER, "memory", "add", "--cwd", str(proj), MEMORY],
        env=env,
        capture_output=True,
        timeout=120,
    )
    if added.returncode != 0:
        raise SystemExit(f"ember memory add failed: {added.stderr.decode()[-500:]}")
    wrap = [EMBER, "wrap", sc.client, "--cwd", str(proj)]
    for _ in range(3):  # a port picked free may be taken before the proxy binds it: another
        run = run_processes(sc, paths, proj, env, wrap)
        if not any("address already in use" in t for t in run.tails):
            break
        port = free_port()
        env["EMBER_PORT"] = str(port)
    deadline = time.monotonic() + 200  # the proxy reads the session, then stops by itself
    while not port_free(port) and time.monotonic() < deadline:
        time.sleep(0.5)
    return run, ember_home


# -- the table ------------------------------------------------------------------------------------


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def row(r: Result) -> list[str]:
    e = r.ember
    stated = STATED[: r.turns]
    return [
        r.scenario,
        f"{r.via.answered}/{r.via.processes}",
        f"{e.get('rows', 0)}/{r.via.client_calls} ({e.get('unresolved', 0)} without)",
        "yes" if e.get("injected") else "no",
        _share(r.direct.share),
        _share(r.via.share),
        "-" if r.delta is None else f"{r.delta:+.3f}",
        f"{r.direct.later_fresh} / {r.via.later_fresh}",
        f"{len(e.get('stored', []))}/{len(stated)}",
        ",".join(e.get("runs", [])) or "-",
        f"{e.get('rows', 0) - e.get('unpriced', 0)}/{e.get('rows', 0)}",
    ]


HEAD = [
    "scenario",
    "answered",
    "rows in project / calls",
    "memory injected",
    "share direct",
    "share via ember",
    "delta",
    "fresh input after call 1, direct / via",
    "facts stored",
    "shadow runs",
    "priced",
]


def markdown(results: list[Result]) -> str:
    lines = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(row(r)) + " |" for r in results]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--npm", type=Path, required=True)
    parser.add_argument("--aider", type=Path, required=True)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--only", default="", help="scenarios whose name holds this")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    paths = Paths(args.npm.absolute(), args.aider.absolute())
    work = args.work or Path.home() / ".cache" / "ember-bench" / "clients"
    work.mkdir(parents=True, exist_ok=True)
    results = []
    for sc in SCENARIOS:
        if args.only not in sc.name:
            continue
        started = time.monotonic()
        result = run_scenario(sc, paths, work.absolute())
        results.append(result)
        print(f"{sc.name}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    print(markdown(results))
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")


if __name__ == "__main__":
    main()
