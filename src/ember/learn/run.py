"""What ``ember learn`` does after the scan: which files it writes, what it already learned,
— the parts the CLI and the demo share. (The verbosity pass over the same sessions is
shaping's: ``ember.shaping.from_logs``.)

Where lessons go (``write_targets``): ``--target FILE`` is exactly one file. Otherwise each
agent whose sessions were read gets its own default file in the project root
(``writeback.AGENT_FILES``: Claude Code ``CLAUDE.local.md``, Codex/OpenCode/Grok
``AGENTS.md``, Gemini CLI ``GEMINI.md``), each file once: the lessons come from one analysis
of every session read, and an agent only reads its own file, so writing the same lessons into
each agent's file is what makes every agent see them. An agent with no default file (a
plugin's) is reported, never guessed at.

What was learned before (``learned_text``): the sections already in those files' learn blocks
(and a legacy block in ``CLAUDE.md``), each section once, handed to the digest as "previously
learned patterns" so the model revises them instead of rediscovering them. Read before the
model call: a file with broken markers stops the run before anything is spent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ember.learn.writeback import (
    AGENT_FILES,
    CLAUDE_SHARED,
    RecommendationLike,
    WritebackPlan,
    plan_writeback,
    read_learned,
)

__all__ = [
    "Target",
    "learned_text",
    "plan_targets",
    "write_targets",
]


@dataclass(frozen=True)
class Target:
    """One file to write: ``agent`` is whose file it is (for the defaults), ``explicit`` that
    the user named it with ``--target`` (then no other file is touched)."""

    agent: str
    path: Path
    explicit: bool = False


def write_targets(
    agents: Iterable[str], project: Path, target: Path | None
) -> tuple[list[Target], list[str]]:
    """The files to write and the agents that have no default file (sorted, each once)."""
    names = sorted(set(agents))
    if target is not None:
        return [Target(names[0] if names else "claude", target, explicit=True)], []
    out: list[Target] = []
    seen: set[Path] = set()
    homeless: list[str] = []
    for agent in names:
        name = AGENT_FILES.get(agent)
        if name is None:
            homeless.append(agent)
            continue
        path = project / name
        if path not in seen:
            seen.add(path)
            out.append(Target(agent, path))
    return out, homeless


def learned_text(targets: Sequence[Target], project: Path) -> str | None:
    """The sections already learned into ``targets`` as one text (None: nothing yet)."""
    sections: dict[str, str] = {}
    for t in targets:
        paths = [t.path]
        if not t.explicit and t.agent == "claude":
            paths.append(project / CLAUDE_SHARED)  # an older run's block, moved on --apply
        for path in paths:
            for name, content in read_learned(path).items():
                sections.setdefault(name, content)
    if not sections:
        return None
    return "\n\n".join(f"### {name}\n{content}".rstrip() for name, content in sections.items())


def plan_targets(
    recommendations: Sequence[RecommendationLike], targets: Sequence[Target], project: Path
) -> list[WritebackPlan]:
    """One write-back plan per target (reading files only)."""
    return [
        plan_writeback(
            recommendations,
            agent=t.agent,
            project=project,
            target=t.path if t.explicit else None,
        )
        for t in targets
    ]
