"""Which conversation of a session a request is (pure), on synthetic shapes and on what the
real clients sent."""

from __future__ import annotations

import random
import re

import pytest

from ember.protocols import adapter_for_path
from ember.sessions import SessionRegistry
from ember.threads import RequestShape, SessionThreads, classify, is_compaction, stable_system
from tests.client_fixtures import THREAD_KIND, load_scenario, scenarios

MAIN = RequestShape.of(
    "main prompt", ("Bash", "Read"), "fix it", structured=False, subagent_marker=False
)
TITLE = RequestShape.of(
    "title prompt", (), "<session>fix it</session>", structured=True, subagent_marker=False
)
EXPLORE = RequestShape.of(
    "explore prompt", ("Bash",), "find files", structured=False, subagent_marker=False
)


def run(*shapes: RequestShape) -> list[str]:
    state = SessionThreads()
    kinds = []
    for shape in shapes:
        thread, state = classify("s", shape, state)
        kinds.append(thread.kind)
    return kinds


def test_a_title_request_sent_before_the_first_turn_is_a_side_request() -> None:
    assert run(TITLE, MAIN, MAIN) == ["side", "main", "main"]


def test_another_agent_under_the_session_is_a_subagent_with_its_own_thread() -> None:
    assert run(MAIN, EXPLORE, EXPLORE, MAIN) == ["main", "subagent", "subagent", "main"]
    state = classify("s", MAIN, SessionThreads())[1]
    a = classify("s", EXPLORE, state)[0]
    b = classify(
        "s",
        RequestShape.of(
            "explore prompt", ("Bash",), "other task", structured=False, subagent_marker=False
        ),
        state,
    )[0]
    assert a.id != b.id != "s"


def test_a_title_generator_sent_before_the_first_turn_leaves_it_the_main_thread() -> None:
    """OpenCode asks for a title first, tool-less and without a JSON schema; the turn after it
    is the user's thread, not a sub-agent of the title."""
    title = RequestShape.of(
        "You are a title generator. You output ONLY a thread title.",
        (),
        "Generate a title for this conversation:\nfix it",
        structured=False,
        subagent_marker=False,
    )
    assert run(title, MAIN, MAIN) == ["side", "main", "main"]


def test_a_side_request_repeating_the_main_history_with_tools_stays_side() -> None:
    """Qwen Code's managed-memory extraction resends the main thread's first message with
    tools of its own: it must not take the main thread's memory block."""
    extraction = RequestShape.of(
        "You are now acting as the managed memory extraction subagent for an AI coding agent.",
        ("read_file", "glob"),
        "fix it",
        structured=False,
        subagent_marker=False,
    )
    assert run(MAIN, extraction, MAIN) == ["main", "side", "main"]
    assert run(extraction, MAIN) == ["side", "main"]


def test_a_side_prompt_is_only_a_side_request_when_it_opens_the_system_prompt() -> None:
    quoted = RequestShape.of(
        "main prompt. Never say: You are a title generator.",
        (),
        "hi",
        structured=False,
        subagent_marker=False,
    )
    assert run(quoted) == ["main"]


def test_a_plain_chat_without_tools_is_the_main_thread() -> None:
    chat = RequestShape.of("be nice", (), "hello", structured=False, subagent_marker=False)
    assert run(chat, chat) == ["main", "main"]


def test_a_changed_system_prompt_with_the_same_first_message_stays_main() -> None:
    later = RequestShape.of(
        "main prompt, new date", ("Bash", "Read"), "fix it", structured=False, subagent_marker=False
    )
    assert run(MAIN, later) == ["main", "main"]


def test_the_client_marking_a_subagent_wins() -> None:
    marked = RequestShape.of(
        "main prompt", ("Bash", "Read"), "x", structured=False, subagent_marker=True
    )
    assert run(MAIN, marked) == ["main", "subagent"]


def test_compaction_is_recognised_by_claude_codes_instructions() -> None:
    assert is_compaction("...\nCRITICAL: Respond with TEXT ONLY. Do NOT call any tools.\n...")
    assert not is_compaction("Please read notes.txt and tell me what it says.")


@pytest.mark.parametrize(("client", "scenario"), scenarios())
def test_recorded_requests_get_the_thread_kind_they_are(client: str, scenario: str) -> None:
    registry = SessionRegistry()
    for req in load_scenario(client, scenario):
        if not req.is_model_call:
            continue
        adapter = adapter_for_path(req.path.split("?")[0])
        assert adapter is not None
        body = req.json()
        shape = RequestShape.of(
            adapter.system_text(body),
            adapter.tool_names(body),
            adapter.first_user_text(body) or "",
            structured=adapter.wants_structured_output(body),
            subagent_marker=bool(req.headers.get("x-claude-code-agent-id")),
        )
        thread, _ = registry.observe(str(req.session_id()), shape, None)
        assert thread.kind == THREAD_KIND[req.kind], req.name


def test_the_billing_header_line_does_not_change_the_agent_lineage() -> None:
    """Claude Code's header changes its ``cc_version`` suffix when a conversation restarts:
    the same agent must stay the same lineage, while a header quoted mid-line is content."""
    body = "You are Claude Code.\nBe brief."
    a = RequestShape.of(f"x-anthropic-billing-header: cc_version=2.1.1.aa\n{body}", ("Bash",),
                        "hi", structured=False, subagent_marker=False)  # fmt: skip
    b = RequestShape.of(f"x-anthropic-billing-header: cc_version=2.1.1.bb\n{body}", ("Bash",),
                        "hi", structured=False, subagent_marker=False)  # fmt: skip
    c = RequestShape.of(f"say x-anthropic-billing-header: 1\n{body}", ("Bash",), "hi",
                        structured=False, subagent_marker=False)  # fmt: skip
    d = RequestShape.of(f"say x-anthropic-billing-header: 2\n{body}", ("Bash",), "hi",
                        structured=False, subagent_marker=False)  # fmt: skip
    assert a.lineage == b.lineage
    assert c.lineage != d.lineage


def test_stable_system_empties_exactly_the_lines_the_multiline_rule_names() -> None:
    """The same text as ``re.sub(r"(?m)^x-anthropic-billing-header:[^\\n]*$", "", s)``, the
    rule it replaced, on texts with the header at the start, mid-line, last, twice, after
    CRLF lines and alone."""
    rule = re.compile(r"(?m)^x-anthropic-billing-header:[^\n]*$")
    head = "x-anthropic-billing-header:"
    pieces = [head, f"{head} v=1", "text", "", "\r", "\n", " ", f"a {head} b", "x-anthropic"]
    rng = random.Random(7)
    texts = ["", head, f"{head}\n", f"\n{head}", f"a\n{head} x\r\nb\n{head}"]
    texts += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    for text in texts:
        assert stable_system(text) == rule.sub("", text), repr(text)
