"""The learning part of the demo: ``ember learn`` on a Claude Code log it writes itself.

The log is generated (the demo needs nothing outside the package): a short Claude Code session
in which the agent cats a misspelt path four times and gets "No such file" each time, then
finds the right file. ``ember learn``'s own path runs on it — the reader, loop detection, the
digest, one call to a fresh provider emulator that gives a canned answer, the write-back plan —
first as the dry run (the diff, nothing written), then applied: the block in
``CLAUDE.local.md``, the user's own text above it untouched. Everything is deterministic:
fixed ids and timestamps, paths shown relative to the demo project.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from ember.learn.analyze import ApiBackend
from ember.learn.logs import Scan, readers, sources
from ember.learn.logs.claude import project_slug
from ember.learn.pipeline import analyse, fold
from ember.learn.run import learned_text, plan_targets, write_targets
from ember.learn.writeback import LEARN, apply_writeback
from ember.server import BackgroundServer
from ember.testing import Emulator
from ember.testing.replies import Reply

WRONG = "cat src/app/setings.py"
USER_NOTES = "# My notes\n\nI review every migration by hand.\n"
ANSWER: dict[str, Any] = {
    "recommendations": [
        {
            "section": "Paths",
            "text": "Settings are in `src/app/settings.py` (not `setings.py`).",
            "evidence": f"`{WRONG}` failed 4 times in session demo-learn",
            "estimated_tokens_saved": 50,
        },
        {
            "section": "Commands",
            "text": "Run the tests with `make test`.",
            "estimated_tokens_saved": 300,
        },
    ]
}


@dataclass
class LearnSummary:
    loops: list[str]
    model_calls: int
    diff: str
    written_before_apply: bool
    block: str
    user_text_kept: bool
    second_apply_changes: int


def demo_log(project: Path) -> list[dict[str, Any]]:
    """A Claude Code session in ``project`` with an error loop (the same failing cat x4)."""
    base = {"sessionId": "demo-learn", "cwd": str(project), "version": "2.1.90"}

    def at(second: int) -> str:
        return f"2026-03-02T10:00:{second:02d}.000Z"

    lines: list[dict[str, Any]] = [
        {**base, "type": "user", "timestamp": at(0), "message": {"content": "Fix the timeout"}}
    ]
    commands = [WRONG] * 4 + ["cat src/app/settings.py"]
    for i, command in enumerate(commands):
        call = {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": command}}
        usage = {"input_tokens": 40, "cache_read_input_tokens": 9000, "output_tokens": 30}
        message = {"id": f"m{i}", "model": "claude-sonnet-4-5", "content": [call], "usage": usage}
        failed = command == WRONG
        output = f"cat: {command[4:]}: No such file or directory" if failed else "TIMEOUT = 30\n"
        result = {"type": "tool_result", "tool_use_id": f"t{i}", "is_error": failed}
        lines += [
            {**base, "type": "assistant", "timestamp": at(2 * i + 1), "message": message},
            {
                **base,
                "type": "user",
                "timestamp": at(2 * i + 2),
                "message": {"content": [{**result, "content": output}]},
            },
        ]
    return lines


def run_learn_demo(home: Path, console: Console) -> LearnSummary:
    root = home / "learn-demo"
    project = root / "shop"
    project.mkdir(parents=True, exist_ok=True)
    (project / "CLAUDE.local.md").write_text(USER_NOTES, encoding="utf-8")
    logs = root / "claude-projects" / project_slug(project)
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / "demo-learn.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in demo_log(project)), encoding="utf-8")

    available = readers()
    emulator = Emulator()
    with BackgroundServer(emulator) as upstream:
        backend = ApiBackend(upstream.url, "claude-sonnet-4-5", "demo-key-not-real")
        for _ in range(2):
            emulator.script(Reply("```json\n" + json.dumps(ANSWER) + "\n```"))
        first = _learn(available, log, project, backend)
        before = (project / "CLAUDE.local.md").read_bytes()
        written_early = before != USER_NOTES.encode()
        for plan in first[1]:
            apply_writeback(plan)
        second = _learn(available, log, project, backend)
    result, plans = first
    text = (project / "CLAUDE.local.md").read_text(encoding="utf-8")
    summary = LearnSummary(
        loops=[f"{loop.signature} x{loop.occurrences}" for loop in result.loops],
        model_calls=len(emulator.requests),
        diff="".join(p.diff() for p in plans).replace(f"{project}/", ""),
        written_before_apply=written_early,
        block=_block(text),
        user_text_kept=text.startswith(USER_NOTES),
        second_apply_changes=sum(len(p.changes) for p in second[1]),
    )
    _print(summary, console)
    return summary


def _block(text: str) -> str:
    span = LEARN.find(text)
    return text[span.start : span.end] if span is not None else "(no block)"


def _learn(available: Any, log: Path, project: Path, backend: ApiBackend) -> tuple[Any, list[Any]]:
    """``ember learn --agent claude --path LOG`` in ``project``: the result and its plans."""
    found = Scan(sources(available, ["claude"], project, [log]))
    builder = fold(available, found)
    targets, _ = write_targets(found.agents, project, None)
    result = analyse(builder, found, backend, learned_text(targets, project))
    return result, plan_targets(result.recommendations, targets, project)


def _print(s: LearnSummary, console: Console) -> None:
    console.print(
        "[bold]Learning from the agent's own logs[/] (ember learn, on a Claude Code log the "
        "demo wrote):\n"
        f"  loops found: {', '.join(s.loops) or 'none'}; one model call per run "
        f"({s.model_calls} for two runs)\n"
        "  dry run (`ember learn`): the diff it would apply, nothing written:"
    )
    console.print(s.diff.rstrip("\n"), style="dim", markup=False, highlight=False, soft_wrap=True)
    console.print("  applied (`ember learn --apply`): CLAUDE.local.md now ends with")
    console.print(s.block.rstrip("\n"), style="dim", markup=False, highlight=False, soft_wrap=True)
    console.print(
        "  the user's own notes above the markers: "
        + ("untouched" if s.user_text_kept else "CHANGED — write-back failed")
        + f"; a second --apply changed {s.second_apply_changes} files.\n"
    )
