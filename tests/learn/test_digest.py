"""The digest: loops first, previously learned patterns next, sessions while the budget lasts."""

from __future__ import annotations

from ember.learn.digest import DigestBuilder
from ember.learn.loops import detect_loops
from ember.learn.model import SessionData, SessionEvent, ToolCall


def session(sid: str, calls: int, *, failing: bool = False) -> SessionData:
    s = SessionData("claude", sid, f"/logs/{sid}.jsonl", project="/p")
    s.events.append(SessionEvent("user_prompt", f"task of {sid}"))
    for i in range(calls):
        command = "cat missing.txt" if failing else f"grep -rn word{i} src/module_{i}"
        s.add_call(ToolCall("Bash", {"command": command}, is_error=failing, error="no such file"))
    return s


def test_loops_come_first_then_learned_then_sessions() -> None:
    builder = DigestBuilder()
    for s in (session("plain", 3), session("loopy", 5, failing=True)):
        builder.add(s, detect_loops(s))
    digest = builder.build("## Commands\n- Use make test.")
    text = digest.text
    assert text.index("## Loops") < text.index("## Previously learned") < text.index("## Sessions")
    assert "`Bash: cat missing.txt` x5 (5 failed)" in text
    assert "(same call 4 more times)" in text  # repeats collapsed in the session stream
    assert (digest.sessions_included, digest.sessions_left_out, digest.loops_included) == (2, 0, 1)


def test_budget_cuts_the_session_streams_not_the_loops() -> None:
    builder = DigestBuilder(budget_tokens=2_000)
    loopy = session("loopy", 4, failing=True)
    builder.add(loopy, detect_loops(loopy))
    for i in range(200):
        s = session(f"s{i}", 30)
        builder.add(s, detect_loops(s))
    digest = builder.build()
    assert digest.tokens <= 2_000
    assert "cat missing.txt" in digest.text.split("## Sessions")[0]
    assert digest.sessions_included + digest.sessions_left_out == 201
    assert digest.sessions_left_out > 150
    assert len(builder.blocks) < 60  # what could never fit was not kept


def test_digest_is_the_same_for_the_same_sessions() -> None:
    def build() -> str:
        builder = DigestBuilder()
        for s in (session("a", 4, failing=True), session("b", 3, failing=True)):
            builder.add(s, detect_loops(s))
        return builder.build().text

    assert build() == build()
