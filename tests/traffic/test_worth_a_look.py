"""Which requests traffic learning reads at all (``stage._worth_a_look``): the user's own
words decide, not the reminders a client puts inside the user's message."""

from __future__ import annotations

import json

from ember.exchange import Exchange
from ember.project import ProjectRef
from ember.protocols import ANTHROPIC
from ember.protocols.jsonedit import JsonDoc
from ember.traffic.stage import _worth_a_look

PROJECT = ProjectRef("/home/dev/app", "header:x-ember-cwd")
#: What Claude Code puts before the user's words: rules that read like instructions.
REMINDER = (
    "<system-reminder>\nContents of CLAUDE.md: Never push to main. Always run the linter. "
    "Do not edit generated files.\n</system-reminder>\n"
)


def ask(text: str) -> Exchange:
    message = {"role": "user", "content": [{"type": "text", "text": text}]}
    body = {"model": "m", "max_tokens": 10, "messages": [message]}
    doc = JsonDoc(json.dumps(body).encode())
    return Exchange(ANTHROPIC, "/v1/messages", "", {}, doc, "s1", PROJECT)


def test_a_client_reminder_alone_is_not_the_user_stating_a_preference() -> None:
    assert not _worth_a_look(ask(REMINDER + "What does app.py do?"))


def test_the_users_own_instruction_beside_a_reminder_is_read() -> None:
    assert _worth_a_look(ask(REMINDER + "What does app.py do? Always answer in French."))
    assert _worth_a_look(ask("Never use tabs in this repo."))
