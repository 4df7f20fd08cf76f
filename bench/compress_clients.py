"""Compression with the real clients: Claude Code and Codex, direct and through ember, offline.

Each client runs the same two-turn session twice — against the provider emulator directly, and
through ``ember wrap`` with shipped defaults — in a project whose script prints a 600-line
pytest run with one failure. Turn one asks the model to run it (the emulator answers ``run:
`python3 gen.py` `` with a call of the client's own shell tool: ``ember.testing.commands``);
turn two asks a follow-up, so the first output is re-read as history. Read from the emulator's
request log (usage, never bodies) and ember's databases:

* every client command answered (exit 0);
* the cache-read share of the session's input, direct vs through ember (target: within 0.02);
* the outputs ember shortened (``compress_outputs``) and the tokens they left out.

Codex runs over its WebSocket (what ``ember wrap codex`` configures): there ember offers no
``ember_retrieve`` and only regroups losslessly, so a log stays whole; a second Codex leg over
HTTP (a provider with ``supports_websockets = false``) shows the log shortened.

    python bench/compress_clients.py --npm DIR [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path

from capture_clients import (
    Clients,
    client_env,
    codex_config,
    install_clients,
    run_bounded,
    start_upstream,
    stop_process,
    stop_wrap_leftover,
    wait_healthy,
)
from common import EMBER, process, proxy_cmd
from ember.server import free_port
from ember.testing.tool_outputs import pytest_log

#: A run of this many tests prints ~20 KB: under Claude Code's own limit (past ~30 KB it saves
#: the output to a file and sends a preview), above ember's ``compress_min_chars``.
TESTS = 350
#: Codex's default model sends no tools to the emulator; gpt-5.1 does (exec_command).
CODEX_MODEL = "gpt-5.1"
TURNS = ("Check the tests: run: `python3 gen.py`", "Which test failed, and why?")
ALLOWED = ("--allowedTools", "Bash(python3:*)")


@dataclass
class Leg:
    name: str
    answered: int = 0
    commands: int = 0
    read: int = 0
    total: int = 0
    shortened: int = 0
    saved_tokens: int = 0

    @property
    def share(self) -> float:
        return self.read / self.total if self.total else 0.0


def project(root: Path) -> Path:
    proj = root / "proj"
    proj.mkdir(parents=True)
    (proj / "log.txt").write_text(pytest_log(TESTS).text)
    (proj / "gen.py").write_text('print(open("log.txt").read())\n')
    return proj


def usage(log: Path, since: int) -> tuple[int, int, int]:
    """(requests, cache-read tokens, input tokens) of the client calls logged after ``since``."""
    lines = log.read_text().splitlines()[since:]
    read = total = n = 0
    for line in lines:
        row = json.loads(line)
        u = row.get("usage")
        if not u or row.get("shadow") != "none":
            continue
        n += 1
        read += u["cache_read_tokens"]
        total += u["input_tokens"] + u["cache_read_tokens"] + u["cache_write_tokens"]
    return n, read, total


def compressed(ember_home: Path) -> tuple[int, int]:
    found = n = saved = 0
    for db in (ember_home / "projects").glob("*/ember.db"):
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            found, saved = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(original_tokens - shortened_tokens), 0) "
                "FROM compress_outputs"
            ).fetchone()
        finally:
            conn.close()
        n += found
    return n, saved


def run_leg(name: str, client: str, via: str, clients: Clients, work: Path) -> Leg:
    root = work / name
    proj = project(root)
    up_port, port = free_port(), free_port()
    log = root / "upstream.jsonl"
    up = start_upstream(up_port, log, root / "upstream.out")
    leg = Leg(name)
    try:
        wait_healthy(f"http://127.0.0.1:{up_port}")
        upstream = f"http://127.0.0.1:{up_port}"
        home, ember_home = root / "home", root / "ember"
        home.mkdir()
        env = client_env(home, ember_home, port, upstream, clients)
        since = len(log.read_text().splitlines())
        with contextlib.ExitStack() as stack:
            if via == "proxy":
                stack.enter_context(process(proxy_cmd(port, upstream), env))
                wait_healthy(f"http://127.0.0.1:{port}")
            for turn, prompt in enumerate(TURNS):
                argv = _argv(client, via, prompt, turn, clients, home, upstream, env)
                ran = run_bounded(argv, proj, env, 180)
                leg.commands += 1
                leg.answered += ran.code == 0
        stop_wrap_leftover(ember_home, port)
        _, leg.read, leg.total = usage(log, since)
        if via != "direct":
            leg.shortened, leg.saved_tokens = compressed(ember_home)
    finally:
        stop_process(up)
    return leg


def _argv(
    client: str,
    via: str,
    prompt: str,
    turn: int,
    clients: Clients,
    home: Path,
    upstream: str,
    env: dict[str, str],
) -> list[str]:
    if client == "claude":
        args = ["-p", prompt, *ALLOWED] if turn == 0 else ["-p", "--continue", prompt, *ALLOWED]
        if via == "direct":
            env["ANTHROPIC_BASE_URL"] = upstream
            return [str(clients.claude), *args]
        return [EMBER, "wrap", "claude", "--", *args]
    base = ["exec", "--skip-git-repo-check"]
    args = [*base, prompt] if turn == 0 else [*base, "resume", "--last", prompt]
    codex_home = home / ".codex"
    codex_home.mkdir(exist_ok=True)
    if via == "wrap":
        (codex_home / "config.toml").write_text(codex_config(CODEX_MODEL, None))
        return [EMBER, "wrap", "codex", "--", *args]
    url = upstream if via == "direct" else f"http://127.0.0.1:{env['EMBER_PORT']}"
    (codex_home / "config.toml").write_text(codex_config(CODEX_MODEL, url))
    return [str(clients.codex), *args]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--npm", type=Path, default=None, help="a prefix holding the clients")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="compress-clients-", dir=Path.home() / ".cache"))
    clients = install_clients(args.npm, work / "npm", 900)
    if clients is None:
        raise SystemExit("npm is needed to install the clients (or pass --npm DIR)")
    legs = [
        run_leg("claude direct", "claude", "direct", clients, work),
        run_leg("claude via ember wrap", "claude", "wrap", clients, work),
        run_leg("codex direct", "codex", "direct", clients, work),
        run_leg("codex via ember wrap (ws)", "codex", "wrap", clients, work),
        run_leg("codex via ember (http)", "codex", "proxy", clients, work),
    ]
    print(
        f"{'leg':30s} {'answered':>9s} {'cache-read':>11s} {'shortened':>10s} {'tokens out':>11s}"
    )
    for leg in legs:
        print(
            f"{leg.name:30s} {leg.answered:>4d}/{leg.commands:<4d} {leg.share:11.3f} "
            f"{leg.shortened:10d} {leg.saved_tokens:11d}"
        )
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"kept: {work}")


if __name__ == "__main__":
    main()
