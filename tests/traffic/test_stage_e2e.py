"""Traffic learning through the real proxy and the official SDK.

Two sessions of one project each run ``python -m pytest`` (it fails: no ``python`` here),
then ``python3 -m pytest`` (it works). The lesson is seen twice and saved once, as a project
memory whose evidence names the transcript rows of the successful results; the requests
themselves go upstream byte for byte as the client sent them.
"""

from __future__ import annotations

from tests.conftest import Stack, StackFactory
from tests.traffic.conversation import run_session, tool_evidence, traffic_memories


def session(stack: Stack, name: str) -> None:
    run_session(stack.url, name)
    stack.settle()


def test_a_recovery_seen_in_two_sessions_becomes_one_memory_with_checked_evidence(
    make_stack: StackFactory,
) -> None:
    stack = make_stack(stages="features", shadow="primary", shadow_max_share=0.0)
    session(stack, "aaaaaaaa-0001")
    assert traffic_memories(stack.home) == []  # seen once: not enough
    session(stack, "bbbbbbbb-0002")
    recovery = [m for m in traffic_memories(stack.home) if m[1] == "error_recovery"]
    assert len(recovery) == 1
    assert "`python -m pytest -q` fails" in recovery[0][2]
    assert "`python3 -m pytest -q | tail -3` works" in recovery[0][2]
    evidence = tool_evidence(stack.home, recovery[0][0])
    # one successful result from each session, each a row of the transcript
    assert [(kind, text) for kind, text, _ in evidence] == [
        ("tool_result", "12 passed in 0.4s")
    ] * 2
    assert len({session for _, _, session in evidence}) == 2


def test_learning_never_changes_what_goes_upstream(make_stack: StackFactory) -> None:
    sent = []
    for learning in (False, True):  # one home: the run that learns comes second
        # No shadow turn either: a share of 0 still leaves the allowance for short sessions,
        # and whether its turn lands inside a run depends on timing.
        stack = make_stack(
            stages="features",
            shadow="primary",
            shadow_max_share=0.0,
            shadow_allowance_tokens=0,
            traffic_learning=learning,
        )
        session(stack, "aaaaaaaa-0001")
        session(stack, "bbbbbbbb-0002")
        sent.append([r.body for r in stack.emulator.requests])
        assert bool(traffic_memories(stack.home)) is learning
    assert sent[0] == sent[1]


def test_traffic_learning_works_with_shadow_memory_off(make_stack: StackFactory) -> None:
    """The transcript its evidence points at is the kernel's, not shadow memory's: switching
    the shadow off used to switch traffic learning off with it, silently."""
    stack = make_stack(stages="features", shadow="off")
    session(stack, "aaaaaaaa-0001")
    session(stack, "bbbbbbbb-0002")
    recovery = [m for m in traffic_memories(stack.home) if m[1] == "error_recovery"]
    assert len(recovery) == 1
    evidence = tool_evidence(stack.home, recovery[0][0])
    assert [(kind, text) for kind, text, _ in evidence] == [
        ("tool_result", "12 passed in 0.4s")
    ] * 2
    # and no shadow ran: nothing went upstream but the client's own six requests
    assert len(stack.emulator.requests) == 6
