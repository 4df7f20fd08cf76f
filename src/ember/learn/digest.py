"""The digest: what the model reads, built session by session under a token budget.

Order is deliberate. Loops come first: the per-session streams after them are what the budget
cuts, and loops are the evidence that matters most (their waste grows with each repetition).
Previously learned patterns (read back from the existing marker block) come next, so the model
starts from the current baseline and revises it rather than rediscovering it. Then one compact
block per session (prompts, events, tool calls with failures marked) while the budget lasts.

The builder keeps only what can still fit, so folding a scan of any size into it holds at most
about one budget of text (plus the loop list, trimmed to :data:`MAX_LOOPS`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ember.learn.loops import CHARS_PER_TOKEN, Loop, canonical_signature
from ember.learn.model import SessionData, ToolCall

__all__ = ["DEFAULT_BUDGET_TOKENS", "Digest", "DigestBuilder"]

DEFAULT_BUDGET_TOKENS = 80_000
#: Loops kept for the digest (the most wasteful); every loop is still counted.
MAX_LOOPS = 300
#: One session's block is cut at this many tokens, so one huge session cannot fill the digest.
SESSION_CAP_TOKENS = 4_000


@dataclass(frozen=True)
class Digest:
    text: str
    tokens: int
    sessions_included: int
    sessions_left_out: int
    loops_included: int


@dataclass
class DigestBuilder:
    budget_tokens: int = DEFAULT_BUDGET_TOKENS
    loops: list[Loop] = field(default_factory=list)
    loops_seen: int = 0
    sessions: int = 0
    calls: int = 0
    failed_calls: int = 0
    blocks: list[str] = field(default_factory=list)
    left_out: int = 0
    _chars: int = 0

    def add(self, session: SessionData, loops: list[Loop]) -> None:
        """Fold one session (and the loops found in it) in."""
        self.sessions += 1
        self.calls += len(session.tool_calls)
        self.failed_calls += sum(1 for c in session.tool_calls if c.is_error)
        self.loops_seen += len(loops)
        self.loops.extend(loops)
        if len(self.loops) > 2 * MAX_LOOPS:
            self._trim_loops()
        if self._chars >= self.budget_tokens * CHARS_PER_TOKEN:
            self.left_out += 1
            return
        block = render_session(session)
        self.blocks.append(block)
        self._chars += len(block)

    def _trim_loops(self) -> None:
        self.loops.sort(key=lambda loop: (-loop.wasted_tokens, loop.signature))
        del self.loops[MAX_LOOPS:]

    def build(self, learned: str | None = None) -> Digest:
        """The digest text, loops first, then ``learned``, then sessions, within the budget."""
        self._trim_loops()
        budget = self.budget_tokens * CHARS_PER_TOKEN
        head = (
            f"# Session logs digest\n{self.sessions} sessions, {self.calls} tool calls "
            f"({self.failed_calls} failed), {self.loops_seen} loops.\n"
        )
        parts = [head]
        used = len(head)
        loop_lines = ["\n## Loops (measured; waste in tokens)\n"]
        included = 0
        for loop in self.loops:
            line = render_loop(loop)
            if used + len(line) > budget // 2:
                break
            loop_lines.append(line)
            used += len(line)
            included += 1
        if included:
            parts.extend(loop_lines)
        if learned and learned.strip():
            section = f"\n## Previously learned patterns\n{learned.strip()}\n"
            section = section[: max(budget - used, 0)]
            parts.append(section)
            used += len(section)
        sessions_in = 0
        if self.blocks:
            parts.append("\n## Sessions\n")
        for block in self.blocks:
            if used + len(block) > budget:
                break
            parts.append(block)
            used += len(block)
            sessions_in += 1
        text = "".join(parts)
        left_out = self.left_out + len(self.blocks) - sessions_in
        return Digest(text, len(text) // CHARS_PER_TOKEN, sessions_in, left_out, included)


def render_loop(loop: Loop) -> str:
    error = f"; error: {loop.first_error}" if loop.first_error else ""
    examples = "; ".join(f"`{e}`" for e in loop.examples)
    return (
        f"- [{loop.kind} loop] {loop.agent} session {loop.session_id}: `{loop.signature}` "
        f"x{loop.occurrences} ({loop.errors} failed), ~{loop.wasted_tokens} tokens wasted"
        f"{error}. Variants: {examples}\n"
    )


def render_session(session: SessionData) -> str:
    """One session as compact text: header, prompts and events, calls (repeats collapsed)."""
    cap = SESSION_CAP_TOKENS * CHARS_PER_TOKEN
    failed = sum(1 for c in session.tool_calls if c.is_error)
    kind = " (sub-agent)" if session.is_subagent else ""
    lines = [
        f"\n### {session.agent} session {session.session_id}{kind}: "
        f"project {session.project or '?'}, model {session.model or '?'}, "
        f"{len(session.tool_calls)} calls, {failed} failed\n"
    ]
    for event in session.events:
        text = f": {event.text}" if event.text else ""
        lines.append(f"- {event.kind}{text}\n")
    previous, repeat = "", 0
    for call in session.tool_calls:
        line = _call_line(call)
        if line == previous:
            repeat += 1
            continue
        if repeat:
            lines.append(f"  (same call {repeat} more times)\n")
        lines.append(line)
        previous, repeat = line, 0
    if repeat:
        lines.append(f"  (same call {repeat} more times)\n")
    text = "".join(lines)
    return text if len(text) <= cap else text[: cap - 30] + "\n  (session cut here)\n"


def _call_line(call: ToolCall) -> str:
    outcome = f" -> FAILED: {call.error}" if call.is_error else f" -> {call.output_chars} chars"
    return f"- call {canonical_signature(call)[:240]}{outcome}\n"
