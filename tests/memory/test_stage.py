"""Pure parts of the memory stage."""

from __future__ import annotations

from ember.memory.stage import ask_text


def test_the_query_leaves_out_client_context_blocks() -> None:
    text = (
        "<system-reminder>\nContents of CLAUDE.md: always use tabs ...\n</system-reminder>\n"
        "why does login return 500?"
    )
    assert ask_text(text) == "why does login return 500?"
    assert ask_text("<environment_context><cwd>/x</cwd></environment_context>") == ""
