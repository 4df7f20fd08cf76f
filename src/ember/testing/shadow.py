"""The emulated model's side of a shadow turn, for tests, the demo and benchmarks.

``shadow_replies(choose)`` is a reply function for ``Emulator.reply_fn``: when a request asks
ember's shadow question (hot or cold), it reads the listed ``m:<id> kind: text`` lines and
answers with the fenced json block the contract asks for, holding the facts ``choose`` picks
(or, when the request offers library mode's resident ``memory_propose`` tool, with a call of
it holding the same batch); any other request gets the emulator's usual answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ember.testing.replies import Reply

_LINE = re.compile(r"^m:(m[0-9a-f]{12}) (\w+): (.*)$", re.MULTILINE)
#: Library mode's resident tool: a shadow turn that offers it is answered by calling it.
PROPOSE_TOOL = "memory_propose"
_MARKERS = ("[ember shadow turn]", "Messages not yet read", "\nMessages:\n")


@dataclass(frozen=True)
class Line:
    id: str
    kind: str
    text: str


Chooser = Callable[[Sequence[Line], str], list[dict[str, Any]]]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return ""


def question_of(body: dict[str, Any]) -> str | None:
    """The shadow question of a request, or None when it is not one."""
    conversation = body.get("messages") or body.get("input") or []
    if not isinstance(conversation, list) or not conversation:
        return None
    last = conversation[-1]
    text = _text(last.get("content")) if isinstance(last, dict) else ""
    return text if any(m in text for m in _MARKERS) else None


def _tool_names(body: dict[str, Any]) -> set[str]:
    names = set()
    for tool in body.get("tools") or []:
        if isinstance(tool, dict):
            fn = tool.get("function")
            name = fn.get("name") if isinstance(fn, dict) else tool.get("name")
            if isinstance(name, str):
                names.add(name)
    return names


def _session(question: str) -> str:
    m = re.search(r"This session's id \(for observed-outcome\): (\S+)", question)
    return m.group(1) if m else ""


def remember_statements(lines: Sequence[Line], session_id: str) -> list[dict[str, Any]]:
    """The default chooser: every user line that says "remember" becomes a user-stated fact
    (its text without the "remember" lead-in)."""
    facts = []
    for line in lines:
        if line.kind != "user" or "remember" not in line.text.lower():
            continue
        content = re.sub(r"(?i)^.*?remember( that|:)?\s*", "", line.text).strip(" .") + "."
        facts.append(
            {
                "content": content[0].upper() + content[1:],
                "category": "convention",
                "evidence": [{"kind": "user-stated", "messageId": line.id}],
            }
        )
    return facts


def shadow_replies(
    choose: Chooser = remember_statements,
) -> Callable[[dict[str, Any], str], Reply | None]:
    def reply(body: dict[str, Any], path: str) -> Reply | None:
        question = question_of(body)
        if question is None:
            return None
        lines = [Line(*m.groups()) for m in _LINE.finditer(question)]
        facts = choose(lines, _session(question))
        if PROPOSE_TOOL in _tool_names(body):
            return Reply.tool_use(PROPOSE_TOOL, {"facts": facts})
        return Reply("```json\n" + json.dumps({"facts": facts}) + "\n```")

    return reply
