"""The emulated model's side of a shadow turn, for tests, the demo, benchmarks and
``ember dev upstream``.

``shadow_replies(choose)`` is a reply function for ``Emulator.reply_fn``: when a request asks
ember's shadow question (hot or cold), it reads the listed ``m:<id> kind: text`` lines and
answers with the fenced json block the contract asks for, holding the facts ``choose`` picks
(or, when the request offers library mode's resident ``memory_propose`` tool, with a call of
it holding the same batch); any other request gets the emulator's usual answer.

Two choosers: :func:`user_statements` (the default) plays the model, proposing what the user
stated (``ember.testing.stated``) with the ids of the messages that said it;
:func:`remember_statements` proposes only lines that say "remember" (its text after that
word), for tests that want exactly one fact from a chatty session.

The question is recognised by its text, never by who sent it, so the same answer comes back
over every wire format and transport: the question is the last user message (hot: appended to
the session's own request; cold: the only one, under ``COLD_SYSTEM``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ember.testing.replies import Reply
from ember.testing.stated import stated_facts

_LINE = re.compile(r"^m:(m[0-9a-f]{12}) (\w+): (.*)$", re.MULTILINE)
#: Library mode's resident tool: a shadow turn that offers it is answered by calling it.
PROPOSE_TOOL = "memory_propose"
_HOT_MARKERS = ("[ember shadow turn]", "Messages not yet read")
_MARKERS = (*_HOT_MARKERS, "\nMessages:\n")
_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)\n?```", re.DOTALL)


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
    conversation = body.get("messages") or body.get("input") or body.get("contents") or []
    if isinstance(conversation, str):  # Responses' input may be a bare string
        conversation = [{"role": "user", "content": conversation}]
    if not isinstance(conversation, list) or not conversation:
        return None
    last = conversation[-1]
    # a message's content, or a Gemini content's parts
    text = _text(last.get("content", last.get("parts"))) if isinstance(last, dict) else ""
    return text if any(m in text for m in _MARKERS) else None


def shadow_path(body: dict[str, Any]) -> str | None:
    """``"hot"`` or ``"cold"`` when the request asks the shadow question, else None."""
    question = question_of(body)
    if question is None:
        return None
    return "hot" if any(m in question for m in _HOT_MARKERS) else "cold"


def facts_in(reply: Reply) -> int:
    """How many facts a reply proposes: the ``facts`` of its ``memory_propose`` calls, else of
    the last fenced json block of its text that parses (0 when there is none)."""
    calls = [c for c in reply.tool_calls if c.name == PROPOSE_TOOL]
    batches: list[Any] = [dict(c.input) for c in calls]
    if not calls:
        for block in reversed(_FENCE.findall(reply.text)):
            try:
                batches = [json.loads(block)]
            except ValueError:
                continue
            break
    found = [b.get("facts") for b in batches if isinstance(b, dict)]
    return sum(len(f) for f in found if isinstance(f, list))


def _tool_names(body: dict[str, Any]) -> set[str]:
    names = set()
    for tool in body.get("tools") or []:
        if not isinstance(tool, dict):
            continue
        declared = tool.get("functionDeclarations")  # Gemini: several functions a tool
        for d in declared if isinstance(declared, list) else []:
            if isinstance(d, dict) and isinstance(d.get("name"), str):
                names.add(d["name"])
        fn = tool.get("function")
        name = fn.get("name") if isinstance(fn, dict) else tool.get("name")
        if isinstance(name, str):
            names.add(name)
    return names


def _session(question: str) -> str:
    m = re.search(r"This session's id \(for observed-outcome\): (\S+)", question)
    return m.group(1) if m else ""


def user_statements(lines: Sequence[Line], session_id: str) -> list[dict[str, Any]]:
    """The default chooser, the emulator playing the model: every declarative, durable
    sentence of a user line (``ember.testing.stated``: not a question, greeting, request or
    chit-chat, never a fragment cut off by ember's shortening) becomes a fact citing that
    line's id as ``user-stated``. The same fact stated in several lines is proposed once,
    citing each of them; facts come in the order the lines list them."""
    facts: dict[str, dict[str, Any]] = {}
    for line in lines:
        if line.kind != "user":
            continue
        for content in stated_facts(line.text):
            evidence = {"kind": "user-stated", "messageId": line.id}
            fact = facts.setdefault(
                content, {"content": content, "category": "convention", "evidence": []}
            )
            if evidence not in fact["evidence"]:
                fact["evidence"].append(evidence)
    return list(facts.values())


def remember_statements(lines: Sequence[Line], session_id: str) -> list[dict[str, Any]]:
    """Every user line that says "remember" becomes a user-stated fact (its text without the
    "remember" lead-in); nothing else is proposed."""
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


#: What makes a stated fact a correction of an earlier one ("no longer", "instead", ...).
_CORRECTION = re.compile(
    r"\b(correction|no longer|not any ?more|instead|actually|changed|switched|moved to|now)\b",
    re.IGNORECASE,
)
_REMEMBERED = re.compile(r"^- \[([0-9a-f]{12})\] (.*)$", re.MULTILINE)
_TERM = re.compile(r"[a-z0-9][a-z0-9.-]*[a-z0-9]")
_COMMON = frozenset(
    [
        "the",
        "and",
        "are",
        "was",
        "were",
        "for",
        "with",
        "from",
        "that",
        "this",
        "these",
        "those",
        "our",
        "now",
        "not",
        "any",
        "more",
        "instead",
        "actually",
        "correction",
        "longer",
        "changed",
        "switched",
        "moved",
        "into",
    ]
)
#: Words a correction must share with what it corrects.
_SHARED = 2


def _remembered(question: str) -> list[tuple[str, str]]:
    """The (id, text) of each fact the question lists as already remembered."""
    return [(m.group(1), m.group(2)) for m in _REMEMBERED.finditer(question)]


def _terms(text: str) -> set[str]:
    return {t for t in _TERM.findall(text.lower()) if len(t) > 2 and t not in _COMMON}


def corrections(
    facts: list[dict[str, Any]], known: Sequence[tuple[str, str]]
) -> list[dict[str, Any]]:
    """The facts as a careful model answers with them: a fact stated as a correction ("no
    longer", "instead", "now", ...) names the remembered fact it corrects (the one sharing
    the most words with it, at least ``_SHARED``) in ``supersedes``, and an earlier fact of
    the same answer that it corrects is not proposed at all (only the fact as it stands)."""
    out: list[dict[str, Any]] = []
    for fact in facts:
        content = str(fact.get("content", ""))
        if not _CORRECTION.search(content):
            out.append(fact)
            continue
        terms = _terms(content)
        out = [f for f in out if len(terms & _terms(str(f.get("content", "")))) < _SHARED]
        best = max(known, key=lambda k: (len(terms & _terms(k[1])), k[0]), default=None)
        if best is not None and len(terms & _terms(best[1])) >= _SHARED:
            fact = {**fact, "supersedes": [best[0]]}
        out.append(fact)
    return out


def shadow_replies(
    choose: Chooser = user_statements,
) -> Callable[[dict[str, Any], str], Reply | None]:
    """A reply function answering the shadow question with the facts ``choose`` picks (None,
    the emulator's usual answer, for any other request)."""

    def reply(body: dict[str, Any], path: str) -> Reply | None:
        question = question_of(body)
        if question is None:
            return None
        lines = [Line(*m.groups()) for m in _LINE.finditer(question)]
        facts = corrections(choose(lines, _session(question)), _remembered(question))
        if PROPOSE_TOOL in _tool_names(body):
            return Reply.tool_use(PROPOSE_TOOL, {"facts": facts})
        return Reply("```json\n" + json.dumps({"facts": facts}) + "\n```")

    return reply
