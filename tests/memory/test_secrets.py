"""Every door that writes a memory keeps secrets out of it: a table of secret kinds x doors.

A secret inside a fact is masked (the rest of the fact is kept); a fact that is nothing but a
secret is refused, saying why. The doors: the store's own writes (what shadow promotion,
traffic learning, MCP and tool mode call), ``ember memory add`` and ``import``, and a shadow
proposal. A store written by an older ember is scrubbed once when it is opened.
"""

from __future__ import annotations

import json
import os
import random
import string
from collections.abc import Callable
from pathlib import Path

import anthropic
import pytest
from click.testing import CliRunner, Result

from ember.cli import cli
from ember.memory import HierarchicalMemory, SavePayload, SecretRefused
from ember.memory.models import NewMemory
from ember.memory.scrub import scrub
from ember.project import resolve_project
from ember.shadow.models import parse_facts
from ember.testing import Reply
from tests.conftest import StackFactory
from tests.memory.conftest import HashEmbedder, OpenStore
from tests.memory.mcp_support import call, error
from tests.memory.test_mcp_server import mcp_session
from tests.memory.test_tool_mode import memory_stage

_rng = random.Random(11)
_chars = string.ascii_letters + string.digits
GITHUB = "ghp_" + "".join(_rng.choice(_chars) for _ in range(36))
AWS = "AKIA" + "".join(_rng.choice(string.ascii_uppercase + string.digits) for _ in range(16))
OPENAI = "sk-proj-" + "".join(_rng.choice(_chars) for _ in range(48))
PASSWORD = "Xk9-pa55w0rd"

# (kind, a fact holding it that is worth keeping, a fact that is nothing but it, the secret)
KINDS = [
    (
        "password in a URL",
        f"Staging DB is postgres://shop:{PASSWORD}@staging-db.internal:5432/shop",
        f"password: {PASSWORD}",
        PASSWORD,
    ),
    (
        "GitHub token",
        f"CI pushes release tags to the mirror with {GITHUB} from the deploy job",
        f"The deploy token is {GITHUB}",
        GITHUB,
    ),
    (
        "AWS key",
        f"The backup job in eu-west-1 authenticates as {AWS} against the archive bucket",
        f"aws key {AWS}",
        AWS,
    ),
    (
        "OpenAI key",
        f"The eval harness calls gpt-5 with {OPENAI} through the team proxy",
        f"OPENAI_API_KEY={OPENAI}",
        OPENAI,
    ),
]


# -- the store: every write path ------------------------------------------------------------

StoreDoor = Callable[[HierarchicalMemory, str], str]


def _add(store: HierarchicalMemory, text: str) -> str:
    return store.add(text).content


def _add_many(store: HierarchicalMemory, text: str) -> str:
    return store.add_many([NewMemory(text)], background=True)[0].content


def _update(store: HierarchicalMemory, text: str) -> str:
    m = store.add("The staging database runs PostgreSQL 16")
    return store.update(m.id, content=text).content


def _supersede(store: HierarchicalMemory, text: str) -> str:
    m = store.add("The staging database runs PostgreSQL 15")
    return store.supersede(m.id, text).content


def _save(store: HierarchicalMemory, text: str) -> str:
    payload = SavePayload.model_validate({"facts": [{"content": text}]})
    return store.save(payload).memories[0].content


STORE_DOORS = {"add": _add, "add_many": _add_many, "update": _update, "supersede": _supersede}
STORE_DOORS["save"] = _save


@pytest.mark.parametrize("index_kind", ["sqlite-vec"])
@pytest.mark.parametrize("door", sorted(STORE_DOORS))
@pytest.mark.parametrize(("kind", "kept", "only", "secret"), KINDS)
def test_the_store_masks_a_secret_and_refuses_a_bare_one(
    open_store: OpenStore, door: str, kind: str, kept: str, only: str, secret: str
) -> None:
    store = open_store()
    stored = STORE_DOORS[door](store, kept)
    assert secret not in stored
    assert f"[redacted {kind}]" in stored
    with pytest.raises(SecretRefused, match="a memory never holds"):
        STORE_DOORS[door](store, only)
    assert all(secret not in m.content for m in store.list(include_history=True))


@pytest.mark.parametrize("index_kind", ["sqlite-vec"])
def test_metadata_is_masked_too(open_store: OpenStore) -> None:
    store = open_store()
    m = store.add("The wiki page explains the release train", metadata={"src": f"x {GITHUB}"})
    assert GITHUB not in json.dumps(m.metadata)
    assert GITHUB not in json.dumps(store.get(m.id).metadata)  # type: ignore[union-attr]


# -- the command line -----------------------------------------------------------------------


@pytest.fixture
def run(tmp_path: Path) -> Callable[..., Result]:
    env = {k: None for k in os.environ if k.startswith("EMBER_")}
    env["EMBER_HOME"] = str(tmp_path / "home")
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(cli, ["memory", *args], obj={"embedder": HashEmbedder}, env=env)

    return invoke


P = ("--project-id", "acme")


@pytest.mark.parametrize(("kind", "kept", "only", "secret"), KINDS)
def test_memory_add_masks_says_so_and_refuses_a_bare_secret(
    run: Callable[..., Result], kind: str, kept: str, only: str, secret: str
) -> None:
    added = run("add", *P, kept)
    assert added.exit_code == 0
    assert secret not in added.output
    assert f"note: redacted a{'n' if kind[0] in 'AEIOU' else ''} {kind}" in added.stderr
    as_json = json.loads(run("add", *P, "--json", "Nightly job: " + only).stdout)
    assert as_json["redacted"] and secret not in as_json["content"]
    assert as_json["content"].startswith("Nightly job: ")
    refused = run("add", *P, only)
    assert refused.exit_code != 0
    assert isinstance(refused.exception, SecretRefused)
    assert "a memory never holds" in str(refused.exception)
    listed = run("list", *P, "--json").stdout
    assert secret not in listed and len(json.loads(listed)) == 2


def test_memory_import_reports_a_bare_secret_by_line_and_masks_the_rest(
    run: Callable[..., Result], tmp_path: Path
) -> None:
    lines = [
        {"content": "Deploys go to Render since March"},
        {"content": f"The deploy token is {GITHUB}"},
        {"content": KINDS[0][1]},
    ]
    f = tmp_path / "facts.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    out = run("import", *P, "--json", str(f))
    assert out.exit_code == 1
    doc = json.loads(out.stdout)
    assert doc["imported"] == 2
    assert [e["line"] for e in doc["errors"]] == [2]
    assert "a memory never holds a GitHub token" in doc["errors"][0]["error"]
    assert doc["redacted"] == [{"line": 3, "redacted": "redacted a password in a URL"}]
    listed = run("list", *P, "--json").stdout
    assert GITHUB not in listed and PASSWORD not in listed


# -- a shadow proposal ----------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "kept", "only", "secret"), KINDS)
def test_a_shadow_proposal_is_masked_or_refused_before_it_is_stored(
    kind: str, kept: str, only: str, secret: str
) -> None:
    evidence = [{"kind": "user-stated", "messageId": "m0123456789ab"}]
    good, bare = parse_facts(
        {
            "facts": [
                {"content": kept, "evidence": evidence},
                {"content": only, "evidence": evidence},
            ]
        }
    )
    assert good.error is None and good.fact is not None
    assert secret not in good.content and f"[redacted {kind}]" in good.content
    assert bare.fact is None and bare.error is not None
    assert bare.error.startswith("secret: refused: a memory never holds")
    assert secret not in bare.content and secret not in json.dumps(bare.raw)


# -- a store an older ember wrote ---------------------------------------------------------------


@pytest.mark.parametrize("index_kind", ["sqlite-vec"])
def test_an_old_store_is_scrubbed_once_when_opened(open_store: OpenStore) -> None:
    store = open_store()
    kept = store.add("Deploys go to Render")
    # What an older ember wrote, straight into the rows (no door of today's lets it in).
    leaky = store.add("Staging DB is postgres://shop:placeholder@staging-db.internal/shop")
    bare = store.add("The deploy token is a placeholder")
    store.database.write(
        lambda c: c.executemany(
            "UPDATE memories SET content=? WHERE id=?",
            [(KINDS[0][1], leaky.id), (KINDS[1][2], bare.id)],
        )
    )
    assert scrub(store) == 2
    contents = {m.id: m.content for m in store.list()}
    assert set(contents) == {kept.id, leaky.id}  # the bare secret is gone for good
    assert PASSWORD not in contents[leaky.id] and "staging-db.internal" in contents[leaky.id]
    hits = store.search("staging database postgres", top_k=3)
    assert hits and hits[0].memory.id == leaky.id  # re-indexed under its masked words
    assert scrub(store) == 0  # once per store


# -- the model's own doors: tool mode (through the proxy) and MCP (the official client) ------


def test_tool_mode_masks_a_saved_secret_and_refuses_a_bare_one(make_stack: StackFactory) -> None:
    stack = make_stack(stages=memory_stage, memory_mode="tool")
    facts = [{"content": KINDS[0][1]}]
    stack.emulator.script(Reply.tool_use("memory_save", {"facts": facts}), Reply("Saved."))
    headers = {"x-ember-project-id": "acme", "x-ember-session-id": "s-tool"}
    with anthropic.Anthropic(
        base_url=stack.url, api_key="k", max_retries=0, default_headers=headers
    ) as client:

        def turn(text: str) -> str:
            client.messages.create(
                model="claude-sonnet-4-5",
                max_tokens=256,
                messages=[{"role": "user", "content": text}],
            )
            result = stack.emulator.requests[-1].json()["messages"][-1]["content"][0]
            return str(result["content"])

        saved = turn("Keep the staging database URL in mind.")
        assert PASSWORD not in saved and "[redacted password in a URL]" in saved
        stack.emulator.script(
            Reply.tool_use("memory_save", {"facts": [{"content": KINDS[1][2]}]}), Reply("Ok.")
        )
        refused = turn("And the deploy token.")
        assert "refused: a memory never holds a GitHub token" in refused
    ref = resolve_project({"x-ember-project-id": "acme"})
    assert ref is not None
    with HierarchicalMemory(ref.db_path(stack.home), HashEmbedder()) as mem:
        stored = [m.content for m in mem.list()]
    assert len(stored) == 1 and PASSWORD not in stored[0] and GITHUB not in stored[0]


async def test_mcp_masks_a_saved_secret_and_refuses_a_bare_one(tmp_path: Path) -> None:
    project = tmp_path / "acme-api"
    project.mkdir()
    home, log = tmp_path / "home", tmp_path / "server.log"
    async with mcp_session(home, "--cwd", str(project), errlog=log) as session:
        saved = await call(session, "memory_save", facts=[{"content": KINDS[0][1]}])
        [fact] = saved["saved"]
        assert PASSWORD not in fact["content"]
        assert "[redacted password in a URL]" in fact["content"]
        said = await error(session, "memory_save", facts=[{"content": KINDS[1][2]}])
        assert "a memory never holds a GitHub token" in said and GITHUB not in said
        updated = await error(session, "memory_update", id=fact["id"], content=KINDS[3][2])
        assert "a memory never holds" in updated
        listed = await call(session, "memory_list")
        assert [m["id"] for m in listed["memories"]] == [fact["id"]]
    assert PASSWORD not in log.read_text(encoding="utf-8")
