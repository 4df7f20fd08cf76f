"""``ember memory`` as scripts and users call it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from ember.cli import cli
from ember.errors import ProjectError
from ember.memory.errors import MemoryNotFound
from tests.cli import realistic
from tests.memory.conftest import HashEmbedder

EMBER = str(Path(sys.executable).with_name("ember"))


@pytest.fixture
def run(tmp_path: Path):  # type: ignore[no-untyped-def]
    env = {k: None for k in os.environ if k.startswith("EMBER_")}
    env["EMBER_HOME"] = str(tmp_path / "home")
    runner = CliRunner()

    def invoke(*args: str, stdin: str | None = None, **extra: str) -> Result:
        return runner.invoke(
            cli,
            ["memory", *args],
            obj={"embedder": HashEmbedder},
            env=env | extra,
            input=stdin,
        )

    return invoke


P = ("--project-id", "acme")


def test_add_list_show_delete(run) -> None:  # type: ignore[no-untyped-def]
    added = json.loads(run("add", *P, "--json", "--importance", "0.4", "Builds use ninja").output)
    assert added["content"] == "Builds use ninja" and added["scope"] == "user"
    listed = json.loads(run("list", *P, "--json").output)  # one document: an array
    assert [m["id"] for m in listed] == [added["id"]]
    shown = json.loads(run("show", *P, "--json", added["id"]).output)
    assert shown["importance"] == 0.4 and shown["history"][0]["id"] == added["id"]
    assert "Builds use ninja" in run("list", *P).output
    deleted = json.loads(run("delete", *P, "--json", added["id"]).output)
    assert deleted == {"deleted": [added["id"]]}
    assert json.loads(run("list", *P, "--json").output) == []  # empty: [], never nothing
    missing = run("delete", *P, added["id"])
    assert isinstance(missing.exception, MemoryNotFound)


def test_search_json_prints_one_object_per_query_in_the_contract_shape(run) -> None:  # type: ignore[no-untyped-def]
    run("add", *P, "--metadata", '{"src": "wiki"}', "The API uses PostgreSQL 16")
    run("add", *P, "Tests run with pytest and xdist")
    out = run("search", *P, "--json", "--top-k", "1", "PostgreSQL API", "pytest xdist tests")
    docs = json.loads(out.output)  # several queries: one array of one object per query
    assert [d["query"] for d in docs] == ["PostgreSQL API", "pytest xdist tests"]
    hit = docs[0]["hits"][0]
    assert set(hit) == {"id", "content", "score", "created_at", "metadata"}
    assert hit["content"] == "The API uses PostgreSQL 16" and hit["metadata"] == {"src": "wiki"}
    assert hit["created_at"].endswith("Z") and isinstance(hit["score"], float)
    assert docs[1]["hits"][0]["content"] == "Tests run with pytest and xdist"
    assert len(docs[0]["hits"]) == 1


def test_search_reads_queries_from_stdin(run) -> None:  # type: ignore[no-untyped-def]
    run("add", *P, "Deploys go to fly.io")
    out = run("search", *P, "--json", "--stdin", stdin="fly.io deploys\n\nwhere do deploys go\n")
    assert [d["query"] for d in json.loads(out.output)] == [
        "fly.io deploys",
        "where do deploys go",
    ]
    assert run("search", *P).exit_code == 2  # no query at all: a usage error


def _local_noon(days_ago: int) -> str:
    """Noon ``days_ago`` days back in the machine's zone, as the UTC time ``import`` reads."""
    day = datetime.now().astimezone() - timedelta(days=days_ago)
    noon = day.replace(hour=12, minute=0, second=0, microsecond=0)
    return noon.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_query_naming_a_time_prefers_memories_from_then(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "mem.jsonl"
    lines = [
        {"content": "we watched the film Alien", "created_at": _local_noon(1)},
        {"content": "we watched the film Heat", "created_at": _local_noon(40)},
    ]
    f.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert run("import", *P, str(f)).exit_code == 0
    ask = "which film did we watch yesterday"

    def scores(*flags: str, **env: str) -> dict[str, float]:
        out = run("search", *P, "--json", *flags, ask, **env)
        return {h["content"][-5:]: h["score"] for h in json.loads(out.output)["hits"]}

    aware, off = scores(), scores("--no-time-aware")
    assert list(aware) == ["Alien", " Heat"]
    assert aware["Alien"] == off["Alien"]  # inside the window: untouched
    assert aware[" Heat"] == pytest.approx(off[" Heat"] * 0.7, rel=0.01)  # 40 days out
    assert scores(EMBER_MEMORY_TIME_AWARE="false") == off
    assert scores("--time-aware", EMBER_MEMORY_TIME_AWARE="false") == aware


def test_import_turns_keeps_every_message_and_ranks_the_reply(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    chat = [
        ("what time does the chat party start?", "2026-11-14T10:00:00Z"),
        ("at 7 tonight", "2026-11-14T10:01:00Z"),
        ("ok", "2026-11-14T10:02:00Z"),
        ("ok", "2026-11-14T10:03:00Z"),
    ]
    f = tmp_path / "chat.jsonl"
    f.write_text(
        "".join(
            json.dumps({"content": c, "created_at": t, "session_id": "chat-1"}) + "\n"
            for c, t in chat
        )
    )
    out = json.loads(run("import", *P, "--turns", "--json", str(f)).output)
    assert out["imported"] == 4  # both "ok"s: a conversation keeps each message
    hits = json.loads(run("search", *P, "--json", "--top-k", "2", chat[0][0]).output)["hits"]
    assert [h["content"] for h in hits] == [chat[0][0], "at 7 tonight"]


def test_explain_shows_what_each_score_is_made_of_and_the_floor(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    chat = [
        ("what time does the chat party start?", "2026-11-14T10:00:00Z"),
        ("tonight", "2026-11-14T10:01:00Z"),
    ]
    f = tmp_path / "chat.jsonl"
    f.write_text("".join(json.dumps({"content": c, "created_at": t, "session_id": "chat-1"})
                         + "\n" for c, t in chat))  # fmt: skip
    run("import", *P, "--turns", str(f))
    run("add", *P, "Lunch is at noon on Fridays")
    ask = "what time does the chat party start?"
    doc = json.loads(run("search", *P, "--json", "--explain", ask).output)
    by = {h["content"]: h for h in doc["hits"]}
    question, reply = by[chat[0][0]]["explain"], by["tonight"]["explain"]
    assert question["short_turn"] == 1.0 and question["reply_of"] is None
    assert question["above_floor"] is True and question["floor"] == pytest.approx(0.21)
    assert reply["reply_of"] == by[chat[0][0]]["id"]  # its score is inherited
    assert reply["short_turn"] == pytest.approx(0.5)  # one content word of four
    assert by["tonight"]["score"] == pytest.approx(0.7 * by[chat[0][0]]["score"], abs=1e-6)
    for h in doc["hits"]:
        assert set(h["explain"]) == {"cosine", "keywords", "time", "short_turn", "reply_of",
                                     "floor", "above_floor"}  # fmt: skip
        assert h["explain"]["above_floor"] == (h["score"] >= h["explain"]["floor"])
    assert by["Lunch is at noon on Fridays"]["explain"]["short_turn"] == 1.0  # a fact
    text = " ".join(run("search", *P, "--explain", ask).output.split())  # wrapped at 80
    assert "reply to [" in text and "above the floor 0.21" in text
    assert "cosine" not in run("search", *P, ask).output  # only when asked


def test_import_reports_bad_lines_by_number_and_writes_only_good_ones(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "mem.jsonl"
    f.write_text(
        '{"content": "good one", "importance": 0.6, "created_at": "2026-01-02T03:04:05Z"}\n'
        '{"content": "bad importance", "importance": 7}\n'
        "\n"
        "not json at all\n"
        '{"content": "good two", "metadata": {"k": 1}}\n'
    )
    res = run("import", *P, "--json", str(f))
    assert res.exit_code == 1
    doc = json.loads(res.output)
    assert doc["imported"] == 2
    assert [e["line"] for e in doc["errors"]] == [2, 4]
    assert "importance" in doc["errors"][0]["error"]
    contents = {m["content"] for m in json.loads(run("list", *P, "--json").output)}
    assert contents == {"good one", "good two"}
    human = run("import", *P, str(f))
    assert "line 2:" in human.output and "Imported 2 memories" in human.output


def test_export_writes_inside_markers(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run("add", *P, "--importance", "0.9", "The API uses gRPC")
    dest = tmp_path / "out"
    res = run("export", *P, "--format", "codex", "--dest", str(dest), "--json")
    doc = json.loads(res.output)
    assert doc["memories"] == 1 and doc["changed"] is True
    text = (dest / "AGENTS.md").read_text()
    assert "<!-- ember:memory:start -->" in text and "The API uses gRPC" in text
    no_dest = run("export", *P, "--format", "codex")
    assert no_dest.exit_code == 2 and "--dest" in no_dest.output


def test_export_default_destination_is_the_project_directory(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    proj = tmp_path / "proj"
    proj.mkdir()
    run("add", "--cwd", str(proj), "Lint with ruff")
    res = run("export", "--cwd", str(proj), "--format", "generic")
    assert res.exit_code == 0, res.output
    assert "Lint with ruff" in (proj / "EMBER_MEMORY.md").read_text()


def test_without_a_project_nothing_is_written(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = run("add", "orphan fact")
    assert isinstance(res.exception, ProjectError)
    assert not (tmp_path / "home").exists()


def test_the_real_command_fails_closed_with_a_one_line_error(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env["EMBER_HOME"] = str(tmp_path)
    r = subprocess.run(
        [EMBER, "memory", "add", "x"], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "--project-id" in r.stderr and "Traceback" not in r.stderr
    assert (
        "memory"
        in subprocess.run(
            [EMBER, "--help"], env=env, capture_output=True, text=True, timeout=60
        ).stdout
    )


def test_the_real_command_with_the_real_embedder(tmp_path: Path) -> None:
    """End to end: the installed ``ember`` with the offline MiniLM model."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EMBER_")}
    env["EMBER_HOME"] = str(tmp_path)

    def ember(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [EMBER, "memory", *args, "--project-id", "real"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    assert ember("add", "The staging database is PostgreSQL on port 5433").returncode == 0
    assert ember("add", "Frontend tests use Playwright").returncode == 0
    r = ember("search", "--json", "what port does the staging db listen on")
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)["hits"]
    assert hits[0]["content"].startswith("The staging database")


def test_show_prints_the_evidence_its_help_promises(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Each pointer: its kind and the message or session it points at, in the text and in
    --json (CONTRACT.md's pointer shape: messageId or sessionId, never both)."""
    ids = realistic.build(tmp_path / "home")
    mine = ("--project-id", realistic.PROJECT_ID)
    doc = json.loads(run("show", *mine, "--json", ids["memory"]).output)
    assert doc["evidence"] == [
        {"kind": "user-stated", "messageId": "m1"},
        {"kind": "observed-outcome", "sessionId": realistic.SESSIONS[0]},
    ]
    text = run("show", *mine, ids["memory"]).output
    assert "evidence: user-stated -> message m1" in text
    assert f"observed-outcome -> session {realistic.SESSIONS[0]}" in text
    assert "The API uses PostgreSQL 16 [db]" in text  # brackets are text, not markup
    by_hand = json.loads(run("add", *mine, "--json", "Typed by hand").output)["id"]
    assert "evidence: none recorded" in run("show", *mine, by_hand).output
    assert json.loads(run("show", *mine, "--json", by_hand).output)["evidence"] == []


def test_show_counts_the_requests_it_went_into_and_the_cited(run, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Two asks carried the memory: the answers after the first cite it, the second has no
    answer yet. --json keeps every key it had and adds ``injections``."""
    import asyncio

    from ember.memory.ledger import InjectionLedger, LedgerEntry
    from ember.memory.retrieval.render import render_block
    from ember.project import ProjectRef
    from ember.store.registry import Storage
    from ember.store.transcript_rows import Row, insert_rows

    added = json.loads(run("add", *P, "--json", "Builds use ninja with ccache enabled").output)
    before = json.loads(run("show", *P, "--json", added["id"]).output)
    assert before["injections"] == {
        "requests": 0, "cited": 0, "unanswered": 0, "last_injected_at": None,
    }  # fmt: skip
    assert "injected: never" in run("show", *P, added["id"]).output
    fact = as_rendered(added)
    db = ProjectRef("acme", "header:x-ember-project-id").db_path(tmp_path / "home")
    storage = Storage(tmp_path / "home")
    ledger = InjectionLedger(storage)
    for index in (0, 4):
        entry = LedgerEntry(index, f"d{index}", render_block([fact]), (fact.id,))
        asyncio.run(ledger.record(db, "s1", entry))
    said = Row("a1", "s1", 1, 1, 0, "assistant", "assistant", "d-a1",
               "Configured the build: ninja runs with ccache enabled now.")  # fmt: skip
    storage.database(db).write(lambda c: insert_rows(c, [said]))
    storage.close()
    doc = json.loads(run("show", *P, "--json", added["id"]).output)
    assert {k: v for k, v in doc.items() if k != "injections"} == {
        k: v for k, v in before.items() if k != "injections"
    }  # every other key as it was
    use = doc["injections"]
    assert (use["requests"], use["cited"], use["unanswered"]) == (2, 1, 1)
    assert use["last_injected_at"].endswith("Z")
    text = " ".join(run("show", *P, added["id"]).output.split())  # wrapped at 80 columns
    last = use["last_injected_at"][:16].replace("T", " ")
    assert f"injected: into 2 requests (1 cited, 1 not answered yet), last {last} UTC" in text


def as_rendered(doc: dict[str, object]):  # type: ignore[no-untyped-def]
    """The memory ``memory add --json`` printed, as the block renders it."""
    from ember.memory.models import Memory

    created = datetime.fromisoformat(str(doc["created_at"]).replace("Z", "+00:00")).timestamp()
    return Memory(str(doc["id"]), str(doc["content"]), created, created)
