"""The features' dashboard views over a proxy that served real SDK traffic: lessons from
traffic, ember learn's blocks in the agent's own file, TOIN's patterns, shadow's comparison,
and the budget's standing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2 as httpx

from ember.learn.writeback import render_block
from tests.conftest import Stack, StackFactory
from tests.memory.test_stage_e2e import run_agent


def get(stack: Stack, path: str, **params: Any) -> Any:
    r = httpx.get(f"{stack.url}/ui/api/{path}", params=params, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def the_project(stack: Stack) -> dict[str, Any]:
    [project] = [p for p in get(stack, "projects") if p["kind"] == "project"]
    return project


def test_every_builtin_feature_declares_its_views(make_stack: StackFactory) -> None:
    stack = make_stack(stages="features")
    listed = get(stack, "features")
    assert {"memory", "shadow", "shaping", "traffic", "learn", "budget"} <= set(listed)
    assert {"method": "POST", "path": "forget", "writes": True} in listed["memory"]


def test_learn_blocks_are_read_from_the_projects_own_folder(
    make_stack: StackFactory, tmp_path: Path
) -> None:
    folder = tmp_path / "api"
    folder.mkdir()
    block = render_block({"Testing": "- run pytest -q before committing"})
    (folder / "CLAUDE.local.md").write_text("# mine\n\n" + block, encoding="utf-8")
    stack = make_stack(stages="features")
    run_agent(stack, cwd=str(folder))
    project = the_project(stack)
    assert project["identity"] == str(folder)
    found = get(stack, "f/learn/blocks", project=project["name"])
    assert found["folder"] == str(folder)
    [claude] = found["files"]
    assert claude["file"] == "CLAUDE.local.md"
    assert claude["sections"] == [
        {"section": "Testing", "text": "- run pytest -q before committing"}
    ]


def test_toin_lessons_compare_and_budget_answer_for_a_served_project(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages="features", budget_daily_usd=1.0)
    run_agent(stack)  # two tool calls: outputs TOIN observes
    stack.settle()
    name = the_project(stack)["name"]
    patterns = get(stack, "f/learn/toin")
    assert patterns and all(p["observations"] >= 1 for p in patterns)
    [lesson] = get(stack, "f/traffic/lessons", project=name)  # the test command that passed
    assert "pytest" in lesson["lesson"] and lesson["seen"] == 1
    assert lesson["state"].startswith("seen once")  # a memory only at its second sighting
    compared = get(stack, "f/shadow/compare", project=name)
    assert compared["scope"]["compared_sessions"] == 0 and compared["semantic"]["computed"] is False
    standing = get(
        stack, "f/budget/standing", project=name, identity=the_project(stack)["identity"]
    )
    [day] = standing["limits"]
    assert day["state"] == "ok" and 0 < day["spent_usd"] < 1
