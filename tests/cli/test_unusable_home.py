"""Every command on a home it cannot use — EMBER_HOME a regular file, a home without write
permission, unreadable or damaged databases — says in one line what is wrong and how to fix
it, and exits non-zero: never a traceback, never "No sessions recorded" with exit 0, never the
proxy's "ember retries on its own" from a command that runs once.

The permission cases run as ``nobody`` when the tests run as root (root passes every
permission check); the homes live outside pytest's private tmp folder for that reason.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ember.demo.learn import demo_log
from ember.learn.logs.claude import project_slug
from tests.cli import realistic
from tests.cli.commands import Ran, clean_env, nobody_cannot_run, run, run_all

pytestmark = pytest.mark.fault  # the fault-injection suite: `make faults`

P = ("--project-id", realistic.PROJECT_ID)
LOGS = ("--agent", "claude", "--path", "{logs}")

#: Every command of ``ember --help`` that reads or writes EMBER_HOME (``setup``, ``dev``,
#: ``demo`` and ``learn --scan-only`` never touch it; ``proxy`` and ``wrap`` refuse such a
#: home at start-up, tested in tests/store/test_home.py).
COMMANDS: dict[str, tuple[str, ...]] = {
    "stats": ("stats",),
    "stats --project-id": ("stats", *P),
    "stats --json": ("stats", "--json"),
    "memory add": ("memory", "add", *P, "A new fact"),
    "memory import": ("memory", "import", *P, "{jsonl}"),
    "memory search": ("memory", "search", *P, "deploys"),
    "memory list": ("memory", "list", *P),
    "memory list --json": ("memory", "list", *P, "--json"),
    "memory show": ("memory", "show", *P, "{memory}"),
    "memory delete": ("memory", "delete", *P, "{memory}"),
    "memory export": ("memory", "export", *P, "--format", "generic", "--dest", "{out}"),
    "shadow runs": ("shadow", "runs", *P),
    "shadow proposals": ("shadow", "proposals", *P, "--json"),
    "shadow compare": ("shadow", "compare", *P),
    "output-savings": ("output-savings",),
    "toin show": ("toin", "show"),
    "toin publish": ("toin", "publish", "-o", "{out}/r.toml"),
    "toin export": ("toin", "export", "{out}/t.json"),
    "toin import": ("toin", "import", "{toin}"),
    "learn --verbosity": ("learn", *LOGS, "--verbosity"),
    "learn --verbosity --apply": ("learn", *LOGS, "--verbosity", "--apply"),
    "doctor": ("doctor",),
}
#: Commands that rightly succeed on a home of that kind: they touch no database, and read
#: (or write) only what is still usable.
SUCCEED = {
    "file": set(),
    "damaged": set(),
    # (shaping's state is in stats.db: reading it needs its lock files, as `ember stats` does)
    "read-only": set(),
    "unreadable": set(),
}
AS_ROOT = os.geteuid() == 0
needs_setpriv = pytest.mark.skipif(
    AS_ROOT and shutil.which("setpriv") is None,
    reason="as root, the permission cases need setpriv (util-linux) to run as nobody",
)


def _open_up(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        p.chmod(stat.S_IRWXU | stat.S_IRWXG | stat.S_IRWXO)


@pytest.fixture(scope="module")
def base() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="ember-unusable-"))
    path.chmod(0o755)  # nobody must get in
    yield path
    _open_up(path)
    shutil.rmtree(path)


@pytest.fixture(scope="module")
def inputs(base: Path) -> dict[str, str]:
    """Files the commands read (readable by anyone), from a good home."""
    good = base / "good"
    ids = realistic.build(good)
    (base / "imp.jsonl").write_text('{"content": "imported fact"}\n')
    assert run(("toin", "export", str(base / "toin.json")), clean_env(good)).code == 0
    project = base / "shop"
    logs = base / "logs" / project_slug(project)
    logs.mkdir(parents=True)
    (logs / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in demo_log(project)))
    (base / "nhome").mkdir()
    _open_up(base)
    return {"jsonl": str(base / "imp.jsonl"), "toin": str(base / "toin.json"),
            "logs": str(base / "logs"), "memory": ids["memory"]}  # fmt: skip


def _home(base: Path, kind: str) -> Path:
    home = base / kind
    if kind == "file":
        home.write_text("not a directory\n")
        return home
    realistic.build(home)
    dbs = [home / "stats.db", *home.glob("projects/*/ember.db")]
    if kind == "damaged":  # and no WAL left to repair it from
        for db in dbs:
            db.write_bytes(b"this is no database\n" * 64)
            for suffix in ("-wal", "-shm"):
                Path(f"{db}{suffix}").unlink(missing_ok=True)
    _open_up(home)
    if kind == "unreadable":
        for path in dbs:
            path.chmod(0)
    if kind == "read-only":
        for p in [home, *home.rglob("*")]:
            p.chmod(0o555 if p.is_dir() else 0o444)
    return home


@pytest.fixture(scope="module")
def outcomes(base: Path, inputs: dict[str, str]) -> Iterator[dict[str, dict[str, Ran]]]:
    """Each kind's results, every command run once (one child process per kind)."""

    class Lazy(dict[str, dict[str, Ran]]):
        def __missing__(self, kind: str) -> dict[str, Ran]:
            other = AS_ROOT and kind in ("read-only", "unreadable")
            if other and (why := nobody_cannot_run()) is not None:
                pytest.skip(why)
            home, out = _home(base, kind), base / f"out-{kind}"
            out.mkdir()
            out.chmod(0o777)
            env = clean_env(home, HOME=str(base / "nhome"))
            args = [[a.format(out=out, **inputs) for a in c] for c in COMMANDS.values()]
            self[kind] = dict(zip(COMMANDS, run_all(args, env, other_user=other), strict=True))
            return self[kind]

    yield Lazy()


@pytest.mark.parametrize("kind", list(SUCCEED))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_one_line_with_the_fix_and_a_non_zero_exit(
    outcomes: dict[str, dict[str, Ran]], kind: str, command: str
) -> None:
    r = outcomes[kind][command]
    said = r.stdout + r.stderr
    assert not r.traceback and "Traceback" not in said, said
    assert "ember retries on its own" not in said and "No sessions recorded" not in said
    if command in SUCCEED[kind]:
        assert r.code == 0, said
        return
    assert r.code != 0, said
    if command == "doctor" and r.code == 1:  # its report names the problem and the fix
        assert "problem" in r.stdout and "fix" in r.stdout
        return
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ember: error: "), said
    assert "`ember doctor" in lines[0], lines[0]  # README: every such error names it


def test_a_home_that_is_a_file_is_named_as_such(outcomes: dict[str, dict[str, Ran]]) -> None:
    for command, r in outcomes["file"].items():
        if command != "doctor":
            assert "is a file, not a directory" in r.stderr, (command, r.stderr)


def test_write_commands_say_what_cannot_be_written(outcomes: dict[str, dict[str, Ran]]) -> None:
    for command in ("memory add", "memory import", "toin export", "learn --verbosity --apply"):
        assert "not writable" in outcomes["read-only"][command].stderr, command
    for command in ("memory add", "toin export"):
        assert "cannot be written" in outcomes["unreadable"][command].stderr, command
    for command in ("stats", "memory list", "shadow runs", "toin show", "output-savings"):
        assert "cannot be read" in outcomes["unreadable"][command].stderr, command
        assert "ember doctor --recover" in outcomes["damaged"][command].stderr, command
