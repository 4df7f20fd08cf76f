"""Where the logs are, and the scan that reads them session by session.

Default locations come from each reader (under the user's home); ``--path`` replaces them for
one agent. ``scan`` yields each session as soon as it is read, so a caller that folds sessions
one at a time (loops, the digest) holds one session at a time, whatever the size of the logs.
A session can be kept to one project: by its working directory (at or under the project), or,
for Gemini, by the hash of the project's directory that names its folder.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ember.learn.logs.base import LogReader, LogSource, Progress
from ember.learn.model import LearnError, ScanStats, SessionData

__all__ = ["Scan", "scan", "sources"]


@dataclass
class Scan:
    """What a scan found: the sources, and (filled while reading) the statistics."""

    sources: list[LogSource]
    stats: ScanStats = field(default_factory=ScanStats)
    sessions: int = 0
    #: sessions read but left out because they belong to another project
    other_projects: int = 0
    #: sessions read, per agent (whose files ``--apply`` writes)
    agents: Counter[str] = field(default_factory=Counter)

    @property
    def total_bytes(self) -> int:
        return sum(s.size for s in self.sources)


def sources(
    available: Mapping[str, LogReader],
    agents: Sequence[str],
    home: Path,
    paths: Sequence[Path] = (),
) -> list[LogSource]:
    """Every session source of ``agents`` (names of ``available`` readers). With ``paths``,
    only those (one agent must be named: a directory of JSONL files does not say whose
    format it is); otherwise each reader's default locations that exist."""
    unknown = [a for a in agents if a not in available]
    if unknown:
        names = ", ".join(sorted(available))
        raise LearnError(f"unknown agent {unknown[0]!r}; known agents: {names}, all")
    if paths and len(agents) != 1:
        raise LearnError("--path needs one --agent (which agent's format the files are in)")
    found: list[LogSource] = []
    for name in agents:
        reader = available[name]
        roots = list(paths) if paths else reader.default_roots(home)
        for root in roots:
            if paths and not root.exists():
                raise LearnError(f"--path {root}: no such file or directory")
            if root.exists():
                found.extend(reader.discover(root))
    return found


def in_project(session: SessionData, project: Path | None) -> bool:
    """True when ``session`` belongs to ``project`` (or no project was asked for). A session
    that names no directory at all is kept: nothing says it is another project's."""
    if project is None:
        return True
    if session.project is not None:
        where = Path(session.project)
        return where == project or project in where.parents
    if session.project_hash is not None:
        return session.project_hash == hashlib.sha256(str(project).encode()).hexdigest()
    return True


def scan(
    available: Mapping[str, LogReader],
    found: Scan,
    project: Path | None = None,
    progress: Progress | None = None,
) -> Iterator[SessionData]:
    """Read every source of ``found`` in turn, yielding its sessions (those of ``project``)."""
    for source in found.sources:
        reader = available[source.agent]
        for session in reader.read(source, found.stats, progress):
            if in_project(session, project):
                found.sessions += 1
                found.agents[session.agent] += 1
                yield session
            else:
                found.other_projects += 1
