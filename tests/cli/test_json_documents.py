"""``--json`` is one JSON document, in every command that has it: a list command prints one
array (``[]`` when there is nothing), every other command one object; its objects keep the
fields CONTRACT.md lists.

``ember shadow runs --json`` used to print JSON Lines, ``ember shadow proposals --json``
nothing at all when there were none, while ``ember stats --json`` printed one document: a
script had to guess which. The table below must name every command that takes --json (the
first test walks the command tree), so a new one cannot skip the rule.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from ember.cli import cli
from ember.demo.learn import demo_log
from ember.learn.logs.claude import project_slug
from tests.cli import realistic
from tests.memory.conftest import HashEmbedder

P = ("--project-id", realistic.PROJECT_ID)
RUN_KEYS = {"id", "session_id", "path", "model", "status", "input_tokens", "cache_read_tokens",
            "cache_write_tokens", "output_tokens", "latency_ms", "estimated_usd",
            "error"}  # fmt: skip
PROPOSAL_KEYS = {"id", "run_id", "content", "evidence", "validation_error"}
HIT_KEYS = {"id", "content", "score", "created_at", "metadata"}

#: command -> (arguments, "list" when it prints an array else "object")
COMMANDS: dict[str, tuple[tuple[str, ...], str]] = {
    "stats": (("stats", *P), "object"),
    "memory add": (("memory", "add", *P, "A new fact"), "object"),
    "memory import": (("memory", "import", *P, "{jsonl}"), "object"),
    "memory search": (("memory", "search", *P, "deploys"), "object"),
    "memory list": (("memory", "list", *P), "list"),
    "memory show": (("memory", "show", *P, "{memory}"), "object"),
    "memory delete": (("memory", "delete", *P, "{memory}"), "object"),
    "memory export": (("memory", "export", *P, "--format", "generic", "--dest", "{out}"), "object"),
    "shadow runs": (("shadow", "runs", *P), "list"),
    "shadow proposals": (("shadow", "proposals", *P), "list"),
    "shadow compare": (("shadow", "compare", *P), "object"),
    "output-savings": (("output-savings",), "object"),
    "doctor": (("doctor",), "object"),
    "toin publish": (("toin", "publish", "-o", "{out}/r.toml"), "object"),
    "toin import": (("toin", "import", "{toin}"), "object"),
    "toin show": (("toin", "show"), "object"),
    "learn": (("learn", "--agent", "claude", "--path", "{logs}", "--scan-only"), "object"),
    "features": (("features",), "object"),
    "store copy": (("store", "copy", "--from", "{out}/home", "--to", "{out}/copy"), "object"),
    "store prune": (("store", "prune", "--older-than", "90d", "--dry-run"), "object"),
}


def _with_json(group: click.Command, prefix: str = "") -> set[str]:
    name = f"{prefix} {group.name}".strip() if prefix or group.name != "cli" else ""
    found = {name} if any(p.name == "as_json" for p in group.params) else set()
    if isinstance(group, click.Group):  # through the group's own lookup: it loads lazily
        ctx = click.Context(group)
        for sub_name in group.list_commands(ctx):
            sub = group.get_command(ctx, sub_name)
            assert sub is not None, sub_name
            found |= _with_json(sub, name)
    return found


def test_the_table_names_every_command_that_takes_json() -> None:
    assert _with_json(cli) == set(COMMANDS)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    base = tmp_path_factory.mktemp("json")
    ids = realistic.build(base / "home")
    (base / "imp.jsonl").write_text('{"content": "imported fact"}\n')
    export = CliRunner().invoke(cli, ["toin", "export", str(base / "toin.json")],
                                env=_env(base / "other"))  # fmt: skip
    assert export.exit_code == 0, export.output
    project = base / "shop"
    logs = base / "logs" / project_slug(project)
    logs.mkdir(parents=True)
    (logs / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in demo_log(project)))
    files = {"jsonl": base / "imp.jsonl", "toin": base / "toin.json", "logs": base / "logs"}
    return base, {**ids, **{k: str(v) for k, v in files.items()}}


def _env(home: Path) -> dict[str, str | None]:
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("EMBER_")}
    return env | {"EMBER_HOME": str(home)}


def ember_json(home: Path, *args: str) -> Any:
    """The command's stdout parsed as exactly one JSON document."""
    r = CliRunner().invoke(cli, [*args, "--json"], env=_env(home), obj={"embedder": HashEmbedder})
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("command", list(COMMANDS))
def test_json_is_one_document(
    template: tuple[Path, dict[str, str]], tmp_path: Path, command: str
) -> None:
    base, values = template
    home = tmp_path / "home"
    shutil.copytree(base / "home", home)  # a command that writes keeps to its own copy
    args, shape = COMMANDS[command]
    doc = ember_json(home, *(a.format(out=tmp_path, **values) for a in args))
    assert isinstance(doc, list if shape == "list" else dict)


def test_list_commands_keep_the_contract_fields(template: tuple[Path, dict[str, str]]) -> None:
    home = template[0] / "home"
    runs = ember_json(home, "shadow", "runs", *P)
    assert len(runs) == 3 and all(set(r) >= RUN_KEYS for r in runs)
    proposals = ember_json(home, "shadow", "proposals", *P)
    assert len(proposals) == 3 and all(set(p) >= PROPOSAL_KEYS for p in proposals)
    assert ember_json(home, "shadow", "proposals", *P, "--run", "r_nope") == []
    memories = ember_json(home, "memory", "list", *P)
    assert len(memories) == 4 and all({"id", "content", "scope"} <= set(m) for m in memories)
    one = ember_json(home, "memory", "search", *P, "deploys")
    assert one["query"] == "deploys" and all(set(h) == HIT_KEYS for h in one["hits"])
    several = ember_json(home, "memory", "search", *P, "deploys", "ruff")
    assert [d["query"] for d in several] == ["deploys", "ruff"]
