"""Exporting into agents' files: ranking, dedup, budgets, formats, and the user's text kept."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ember.memory import Memory
from ember.memory.models import content_hash
from ember.memory.writers import WRITERS, export, writer_for
from ember.memory.writers.base import claude_project_dir, default_dest, render
from ember.memory.writers.markers import END, START
from ember.memory.writers.rank import export_score
from ember.tokens import count_tokens

NOW = 1_790_000_000.0
DAY = 86400.0


def mem(i: int, content: str, **kw: object) -> Memory:
    base = Memory(
        id=f"{i:012x}",
        content=content,
        created_at=NOW,
        valid_from=NOW,
        importance=0.5,
        content_hash=content_hash(content),
    )
    return dataclasses.replace(base, **kw)  # type: ignore[arg-type]


def test_rank_is_importance_times_recency_times_access() -> None:
    important = mem(1, "a", importance=0.9)
    used = mem(2, "b", access_count=20)
    stale = mem(3, "c", importance=0.9, created_at=NOW - 60 * DAY)
    assert export_score(important, NOW) > export_score(mem(4, "d"), NOW)
    assert export_score(used, NOW) > export_score(mem(5, "e"), NOW)
    assert export_score(stale, NOW) < export_score(mem(6, "f"), NOW)


def test_render_dedups_skips_history_and_orders_by_score() -> None:
    ms = [
        mem(1, "low fact", importance=0.2),
        mem(2, "High fact", importance=0.9),
        mem(3, "high   fact", importance=0.9, session_id="s"),  # same fact, other scope
        mem(4, "old version", importance=1.0, valid_until=NOW),
    ]
    body, kept, _ = render(writer_for("generic"), ms, NOW)
    assert kept == 2
    assert body.index("High fact") < body.index("low fact")
    assert "old version" not in body and "high   fact" not in body


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_each_format_respects_its_token_budget(fmt: str) -> None:
    many = [mem(i, f"fact {i}: " + "detail " * 30, importance=0.5) for i in range(400)]
    body, kept, tokens = render(writer_for(fmt), many, NOW)
    assert 0 < kept < 400
    assert tokens <= WRITERS[fmt].budget_tokens == (2000 if fmt == "claude" else 3000)
    assert count_tokens(body) == tokens


def test_export_never_touches_user_text_outside_the_markers(tmp_path: Path) -> None:
    target = tmp_path / "AGENTS.md"
    before = b"# Agents\r\n\r\nRun `make test` before committing.\r\n\r\n"
    after = b"\r\n\r\n## Style\r\nNo tabs. \xe2\x9c\x93\r\n"
    target.write_bytes(before + f"{START}\r\nstale\r\n{END}".encode() + after)
    result = export([mem(1, "The API uses gRPC")], writer_for("codex"), tmp_path, NOW)
    data = target.read_bytes()
    assert result.changed and result.path == target
    assert data.startswith(before) and data.endswith(after)
    middle = data[len(before) : len(data) - len(after)].decode()
    assert middle.startswith(START) and middle.endswith(END)
    assert "- The API uses gRPC (2026-09-21)" in middle and "\r\n" in middle
    again = export([mem(1, "The API uses gRPC")], writer_for("codex"), tmp_path, NOW)
    assert not again.changed and target.read_bytes() == data


def test_export_appends_to_a_file_without_markers(tmp_path: Path) -> None:
    target = tmp_path / "EMBER_MEMORY.md"
    user = "My notes, no trailing newline"
    target.write_text(user)
    export([mem(1, "fact")], writer_for("generic"), tmp_path, NOW)
    text = target.read_text()
    assert text.startswith(user + "\n\n" + START)


def test_cursor_rule_gets_frontmatter_only_when_ember_creates_it(tmp_path: Path) -> None:
    export([mem(1, "fact")], writer_for("cursor"), tmp_path, NOW)
    rule = tmp_path / ".cursor" / "rules" / "ember-memory.mdc"
    text = rule.read_text()
    assert text.startswith("---\ndescription:") and "alwaysApply: true" in text
    mine = "---\ndescription: mine\n---\nhand-written rule\n"
    rule.write_text(mine)
    export([mem(1, "fact")], writer_for("cursor"), tmp_path, NOW)
    assert rule.read_text().startswith(mine) and rule.read_text().count("---\n") == 2


def test_default_destinations(tmp_path: Path) -> None:
    assert default_dest("codex", "/home/u/api", tmp_path) == Path("/home/u/api")
    assert default_dest("claude", "/home/u/my.api", tmp_path) == (
        tmp_path / ".claude" / "projects" / "-home-u-my-api" / "memory"
    )
    assert default_dest("claude", None, tmp_path) is None
    assert claude_project_dir("/a/b", Path("/c")) == Path("/c/projects/-a-b")


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_an_exported_file_never_holds_a_secret_a_store_still_has(fmt: str) -> None:
    """A memory an older ember stored with a password: the file every session reads gets
    the fact with the password masked."""
    held = mem(1, "Staging DB is postgres://shop:Xk9-pa55w0rd@staging-db.internal/shop")
    body, kept, _ = render(writer_for(fmt), [held], NOW)
    assert kept == 1
    assert "Xk9-pa55w0rd" not in body
    assert "postgres://shop:[redacted password in a URL]@staging-db.internal/shop" in body
