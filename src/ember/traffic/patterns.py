"""What a run of tool calls teaches, as observations (pure: no I/O, no clock).

Each observation has a category, a key (two sightings of one lesson share it), the fact as a
sentence, the evidence it rests on and the message it was seen in (``seen``: a sighting counts
once per such message, so history a resumed session sends again is not a second sighting).
Evidence kinds follow shadow memory's rules so the same checks hold: ``tool-verified`` only
ever points at a *successful* tool result, ``user-stated`` at the user's own words, and a
failure is attested by ``observed-outcome`` on the session (a failed result is never evidence
that something works).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ember.facts import Evidence
from ember.redaction import mask
from ember.traffic.intent import SHELL_TOOLS, command_of, describe, intent_key, path_of


class Category(StrEnum):
    ERROR_RECOVERY = "error_recovery"
    ENVIRONMENT = "environment"
    PREFERENCE = "preference"
    ARCHITECTURE = "architecture"


@dataclass(frozen=True)
class ToolRun:
    """One tool call and its result. ``result_id``: the transcript id of the result;
    ``seen``: the result as any replay of the conversation names it (``Observation.seen``)."""

    tool: str
    arguments: dict[str, Any]
    output: str
    is_error: bool
    result_id: str | None = None
    seen: str | None = None


@dataclass(frozen=True)
class Observation:
    """One sighting of a lesson. ``seen`` names the message it was seen in the same way
    whenever the conversation is sent again (a restarted proxy, a resumed session under a new
    session id): the lesson's count rises once per such name, never twice for one message.
    None: the first message pointer of ``evidence`` names it."""

    category: Category
    key: str
    content: str
    evidence: tuple[Evidence, ...] = field(default=())
    seen: str | None = None

    def __post_init__(self) -> None:
        # A lesson quotes commands, and a command may carry a token: what is counted and
        # kept (``traffic_sightings.content``, then the memory) never holds it.
        object.__setattr__(self, "content", mask(self.content))

    @property
    def pointer(self) -> str | None:
        """What this sighting counts once for (None: nothing; it always counts)."""
        if self.seen is not None:
            return self.seen
        return next((e.message_id for e in self.evidence if e.message_id), None)


#: A recovery is the first success of the same tool within this many later calls.
RECOVERY_WINDOW = 5
#: Programs whose successful run says how this project is built, tested or run.
BUILD_TOOLS = {
    "make", "pytest", "tox", "nox", "uv", "poetry", "pip", "npm", "pnpm", "yarn", "npx",
    "cargo", "go", "mvn", "gradle", "./gradlew", "docker", "just", "bun", "deno", "ruff",
    "mypy", "eslint", "tsc", "jest", "vitest", "bundle", "rake", "dotnet", "cmake", "bazel",
}  # fmt: skip
#: Files whose presence says what kind of project this is.
MANIFESTS = {
    "pyproject.toml": "Python", "setup.py": "Python", "requirements.txt": "Python",
    "package.json": "JavaScript/TypeScript", "tsconfig.json": "TypeScript",
    "Cargo.toml": "Rust", "go.mod": "Go", "pom.xml": "Java (Maven)",
    "build.gradle": "Java/Kotlin (Gradle)", "Gemfile": "Ruby", "composer.json": "PHP",
    "Makefile": "make", "Dockerfile": "Docker", "docker-compose.yml": "Docker Compose",
    "CMakeLists.txt": "CMake",
}  # fmt: skip
_MISSING = re.compile(r"(?:^|\W)([\w.+-]+): (?:command )?not found|command not found: ([\w.+-]+)")
_PREFERENCE = re.compile(
    r"^\s*(?:please\s+)?(?:always|never|don't|do not|stop|prefer|from now on|make sure to)\b"
    r"|\binstead of\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def first_line(text: str, limit: int = 120) -> str:
    line = next((s.strip() for s in text.splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _program(command: str) -> str:
    words = command.split()
    while words and "=" in words[0] and not words[0].startswith("="):  # FOO=1 make test
        words = words[1:]
    return words[0] if words else ""


def recoveries(
    earlier: Sequence[ToolRun], new: Sequence[ToolRun], session_id: str
) -> Iterator[Observation]:
    """A success of a tool among ``new`` whose previous call of the same tool, within the
    window, failed: the pair is the lesson. ``earlier`` are the session's previous calls (the
    failure usually came back one request before its recovery). The same call succeeding on a
    retry is a flake, not a lesson, and is skipped; each success closes at most one pair."""
    seq = [*earlier, *new]
    for j in range(len(earlier), len(seq)):
        fixed = seq[j]
        if fixed.is_error or fixed.result_id is None:
            continue
        for failed in reversed(seq[max(0, j - RECOVERY_WINDOW) : j]):
            if failed.tool != fixed.tool:
                continue
            before = describe(failed.tool, failed.arguments)
            after = describe(fixed.tool, fixed.arguments)
            if failed.is_error and before != after:
                yield Observation(
                    Category.ERROR_RECOVERY,
                    "recovery:" + intent_key(failed.tool, failed.arguments) + "->"
                    + intent_key(fixed.tool, fixed.arguments),
                    f"When `{before}` fails ({first_line(failed.output)}), `{after}` works "
                    "instead.",
                    (Evidence("tool-verified", message_id=fixed.result_id),
                     Evidence("observed-outcome", session_id=session_id)),
                    fixed.seen,
                )  # fmt: skip
            break


def environment(runs: Sequence[ToolRun], session_id: str) -> Iterator[Observation]:
    """Programs that are missing here, and build/test commands that work here."""
    for run in runs:
        command = command_of(run.arguments) if run.tool.lower() in SHELL_TOOLS else None
        if not command:
            continue
        if run.is_error:
            found = _MISSING.search(run.output)
            name = next((g for g in found.groups() if g), None) if found else None
            if name:
                yield Observation(
                    Category.ENVIRONMENT,
                    f"missing:{name}",
                    f"`{name}` is not installed (or not on PATH) in this environment.",
                    (Evidence("observed-outcome", session_id=session_id),),
                    run.seen,
                )
            continue
        key = intent_key(run.tool, run.arguments)
        if _program(command) in BUILD_TOOLS and run.result_id is not None:
            shown = key.removeprefix("shell:")
            yield Observation(
                Category.ENVIRONMENT,
                f"works:{shown}",
                f"`{shown}` runs successfully in this project.",
                (Evidence("tool-verified", message_id=run.result_id),),
                run.seen,
            )


def architecture(runs: Sequence[ToolRun]) -> Iterator[Observation]:
    """Manifest files the agent read or edited successfully."""
    for run in runs:
        path = path_of(run.arguments)
        if run.is_error or path is None or run.result_id is None:
            continue
        name = posixpath.basename(path)
        if name in MANIFESTS:
            yield Observation(
                Category.ARCHITECTURE,
                f"manifest:{name}",
                f"The project has a {name} ({MANIFESTS[name]}).",
                (Evidence("tool-verified", message_id=run.result_id),),
                run.seen,
            )


def states_a_preference(user_text: str) -> bool:
    """Cheap check before the full read: does any sentence read like a standing instruction?"""
    return any(_PREFERENCE.search(s) for s in _SENTENCE.split(user_text.strip()))


def preferences(
    user_text: str, message_id: str | None, seen: str | None = None
) -> Iterator[Observation]:
    """The user's explicit corrections and standing instructions, one per sentence
    (``seen``: the message as a replay names it)."""
    if message_id is None:
        return
    for sentence in _SENTENCE.split(user_text.strip()):
        sentence = " ".join(sentence.split())
        if 8 <= len(sentence) <= 300 and _PREFERENCE.search(sentence):
            yield Observation(
                Category.PREFERENCE,
                "preference:" + re.sub(r"\W+", " ", sentence.lower()).strip(),
                f"The user asked: “{sentence}”",
                (Evidence("user-stated", message_id=message_id),),
                seen,
            )


def observe(
    earlier: Sequence[ToolRun],
    new: Sequence[ToolRun],
    session_id: str,
    user_text: str = "",
    user_id: str | None = None,
    user_seen: str | None = None,
) -> list[Observation]:
    """Everything one request's new tool calls (after the session's ``earlier`` ones) and
    the user's latest words (transcript id ``user_id``, named ``user_seen`` by a replay)
    teach."""
    return [
        *recoveries(earlier, new, session_id),
        *environment(new, session_id),
        *architecture(new),
        *preferences(user_text, user_id, user_seen),
    ]
