"""Project isolation: one file per project, fail closed, an LRU of open stores."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ember.config import load_settings
from ember.memory import MemoryRouter
from ember.project import resolve_project
from tests.memory.conftest import HashEmbedder


def router(tmp_path: Path, **overrides: object) -> MemoryRouter:
    settings = load_settings(env={"EMBER_HOME": str(tmp_path / "home")}, **overrides)
    return MemoryRouter(settings, HashEmbedder())


def test_two_projects_with_the_same_basename_never_share_memories(tmp_path: Path) -> None:
    r = router(tmp_path)
    a = resolve_project({"x-ember-cwd": "/work/acme/api"})
    b = resolve_project({"x-ember-cwd": "/other/api"})
    c = resolve_project({"x-ember-project-id": "acme/api"})
    d = resolve_project({"x-ember-project-id": "acme api"})
    paths = [r.path_for(p) for p in (a, b, c, d)]
    assert len(set(paths)) == 4
    names = [p.parent.name.rsplit("-", 1)[0] for p in paths if p is not None]
    assert names == ["api", "api", "acme-api", "acme-api"]  # readable, made unique by the digest
    r.for_project(a).add("acme api uses gRPC")  # type: ignore[union-attr]
    assert r.for_project(b).search("gRPC") == []  # type: ignore[union-attr]
    assert r.for_project(c).list() == []  # type: ignore[union-attr]
    r.for_project(c).add("acme/api is the public API")  # type: ignore[union-attr]
    assert r.for_project(d).search("public API") == []  # type: ignore[union-attr]
    assert len(r.for_project(a).search("gRPC")) == 1  # type: ignore[union-attr]
    r.close()


def test_an_unresolved_project_gets_no_store_and_nothing_is_written(tmp_path: Path) -> None:
    r = router(tmp_path)
    assert resolve_project({}, system_text="You are a helpful assistant.") is None
    assert r.for_project(None) is None
    assert not (tmp_path / "home").exists()


def test_global_store_is_an_explicit_opt_in_logged_as_a_leak_risk(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    r = router(tmp_path, unresolved_project="global")
    with caplog.at_level(logging.WARNING):
        store = r.for_project(None)
    assert store is not None and store.path == tmp_path / "home" / "global" / "ember.db"
    assert "leak" in caplog.text or "injected into another" in caplog.text
    r.close()


def test_cwd_named_in_a_system_reminder_message_selects_the_project(tmp_path: Path) -> None:
    reminder = (
        "<system-reminder>\nAs you answer the user's questions, you can use the following "
        "context:\n<env>\nWorking directory: /home/dev/shop\nIs directory a git repo: Yes\n"
        "</env>\n</system-reminder>"
    )
    ref = resolve_project({}, system_text="You are Claude Code.", message_texts=[reminder, "hi"])
    assert ref is not None and ref.identity == "/home/dev/shop"
    r = router(tmp_path)
    r.for_project(ref).add("shop deploys to fly.io")  # type: ignore[union-attr]
    same = resolve_project({"x-ember-cwd": "/home/dev/shop/"})
    assert [m.content for m in r.for_project(same).list()] == ["shop deploys to fly.io"]  # type: ignore[union-attr]
    r.close()


def test_the_least_recently_used_store_is_closed_when_the_lru_is_full(tmp_path: Path) -> None:
    r = router(tmp_path, memory_open_stores=2)
    refs = [resolve_project({"x-ember-project-id": f"p{i}"}) for i in range(3)]
    first = r.for_project(refs[0])
    r.for_project(refs[1])
    r.for_project(refs[0])  # p0 is now the most recent
    r.for_project(refs[2])  # evicts p1
    assert [p.parent.name.split("-")[0] for p in r.open_paths()] == ["p0", "p2"]
    assert first is r.for_project(refs[0])
    reopened = r.for_project(refs[1])
    assert reopened.list() == []
    r.close()


def test_open_store_answers_only_for_stores_already_open(tmp_path: Path) -> None:
    router = MemoryRouter(load_settings(env={"EMBER_HOME": str(tmp_path)}), None)
    ref = resolve_project({"x-ember-project-id": "acme"})
    assert router.open_store(ref) is None  # never opens a database itself
    opened = router.for_project(ref)
    assert opened is not None and router.open_store(ref) is opened
    assert router.open_store(None) is None
    router.close()


def test_a_slow_open_of_one_project_does_not_stall_another(tmp_path: Path) -> None:
    """``open_store`` runs on the event loop: it must never wait behind another project's open
    (before, the router held its lock while opening and migrating)."""
    import threading
    import time

    from ember.memory import HierarchicalMemory

    settings = load_settings(env={"EMBER_HOME": str(tmp_path / "home")})
    slow_started = threading.Event()

    def opener(path: Path) -> HierarchicalMemory:
        if "slow" in str(path):
            slow_started.set()
            time.sleep(1.5)  # a big migration, a slow disk
        return HierarchicalMemory(path, HashEmbedder())

    r = MemoryRouter(settings, HashEmbedder(), opener=opener)
    fast = resolve_project({"x-ember-cwd": "/work/fast"})
    slow = resolve_project({"x-ember-cwd": "/work/slow"})
    r.for_project(fast)
    opening = threading.Thread(target=r.for_project, args=(slow,))
    opening.start()
    assert slow_started.wait(5)
    started = time.perf_counter()
    assert r.open_store(fast) is not None
    assert time.perf_counter() - started < 0.1
    opening.join()
    r.close()
