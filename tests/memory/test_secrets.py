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

import pytest
from click.testing import CliRunner, Result

from ember.cli import cli
from ember.memory import HierarchicalMemory, SavePayload, SecretRefused
from ember.memory.models import NewMemory
from ember.memory.scrub import scrub
from ember.shadow.models import parse_facts
from tests.memory.conftest import HashEmbedder, OpenStore

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
