"""What a user's message states: the facts the emulated model proposes for it (pure).

Offline, the provider emulator plays the model that answers ember's shadow question, so its
answer must read like a careful model's: the durable facts the user stated, each in the user's
own words, and nothing else. A chooser that proposed every line would teach nothing about
extraction (and would make memories of "thanks!"); one that proposed only lines saying
"remember" would show a user trying ember nothing at all. The rules below are a small,
deterministic stand-in for judgement: the same text always gives the same facts.

A message is cleaned (client context wrappers such as ``<system-reminder>...</system-reminder>``
or ``<environment_context>...</environment_context>`` removed) and split into sentences (after
``.``, ``!`` or ``?`` followed by a space). A message ember shortened for the question ends with
``…``: its last sentence is dropped, because a cut-off fragment proposed as a fact would be a
claim the user never made. Each sentence then, in this order:

1. loses leading connectives ("and", "also", "btw", "note:", "ok," ...);
2. is dropped when it is markup or a client note (starts with ``[`` or ``<``) or a question
   (ends with ``?``);
3. "remember (that|:) X" gives X, and "remember to X" gives "Always X": the user said what to
   keep, so no other rule but 4 applies;
4. is dropped when it holds a credential ("the password is ...", ``sk-...``): the shadow rules
   forbid proposing secrets;
5. is dropped when it has fewer than three distinct words ("ok", "thanks!", "hello", padding);
6. is dropped when it is chit-chat ("thanks a lot", "great work", "good morning");
7. a standing instruction ("always ...", "never ...", "use ...", "prefer ...", "avoid ...",
   "don't ...", also after "please") is kept: it holds for later sessions too;
8. a question without its ``?`` ("what is in this directory", "can you ...") or a one-off
   request ("please ...", "read notes.txt", "let's ...", "I want you to ...") is dropped;
9. a report of the moment ("the job failed", "tests are failing", "we just tagged",
   "currently", "today") is dropped: it is why the user asks for help, not a durable fact;
10. anything left is a declarative statement and becomes a fact: its first letter upper-cased
    when its first word is all letters, and ending with one ``.``.

Facts are returned in the order stated, each once.
"""

from __future__ import annotations

import re

#: Elements the clients wrap around context they add to a user message: a name holding ``-``
#: or ``_`` (``system-reminder``, ``environment_context``, ``command-name``...), which HTML's
#: own elements never have, so "render <b>names</b> in bold" keeps its words.
_WRAPPER = re.compile(r"<([a-z]+[-_][\w-]*)\b[^>]*>.*?</\1\s*>", re.DOTALL | re.IGNORECASE)
#: A context wrapper left open (the text was cut inside it) runs to the end; only the two
#: the clients send, so a user's "<app-shell>" does not swallow the rest of the sentence.
_OPEN_CONTEXT = re.compile(
    r"<(?:system-reminder|environment_context)\b[^>]*>.*$", re.DOTALL | re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
#: ember's mark on a message it shortened for the question.
CUT = "…"
_LEADS = re.compile(
    r"^(?:(?:(?:and|also|so|but|plus|btw|fyi|just)[,:]?|note that|note:)\s+|"
    r"(?:yes|yeah|no|ok|okay|right|sure|well|oh|actually|alright|anyway)\s*,\s*)+",
    re.IGNORECASE,
)
_REMEMBER = re.compile(
    r"^(?:(?:please|pls|always|now|just)\s+)*remember\b(?:\s+that\b|\s*[:,-])?\s*(?P<what>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_SECRET = re.compile(
    r"\b(?:password|passphrase|api[ _-]?key|secret|token)s?\b\s*(?:is|=|:)\s*\S"
    r"|\b(?:sk|pk|rk|ghp|gho|xox[abp])[-_][A-Za-z0-9_-]{6,}",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w[\w.'’/-]*")


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


CHITCHAT = _wordset(
    "hello hi hey thanks thank thx ty cheers bye goodbye welcome great perfect nice cool "
    "awesome excellent amazing wonderful good fine ok okay sure yes yeah yep no nope sorry "
    "wow lgtm hmm lol haha"
)
STANDING = _wordset("always never use prefer avoid don't dont only")
QUESTION_LEADS = _wordset(
    "what why who whom whose how is are was were am do does did can could would will should "
    "shall may might have has isn't aren't doesn't didn't won't"
)
REQUEST_VERBS = _wordset(
    "read run tell show fix check open look find explain list write create add make build "
    "update change remove delete implement refactor summarize summarise describe give help "
    "go start stop continue install test debug review rename move copy commit push deploy try "
    "let let's lets keep send search grep print clean set get put edit modify replace generate "
    "draft convert compare investigate analyze analyse verify figure note do"
)
TRANSIENT = _wordset(
    "just today yesterday tonight tomorrow currently fail fails failed failing broke broken "
    "crashed crashes crashing"
)
_TRANSIENT_PHRASES = ("right now", "at the moment", "for now", "this time", "not working")
_REQUEST_PHRASE = re.compile(r"^i(?: really)?(?: want| need|'d like| would like) you\b")


def clean(text: str) -> str:
    """The text without client context wrappers, its whitespace collapsed."""
    return " ".join(_OPEN_CONTEXT.sub(" ", _WRAPPER.sub(" ", text)).split())


def sentences(text: str) -> list[str]:
    """The complete sentences of ``text`` (cleaned); a text ending with ``…`` was cut short,
    so its last sentence is dropped even when it looks complete (the cut may have fallen
    right after a dot inside it)."""
    text = clean(text)
    cut = text.endswith(CUT)
    parts = [p for p in _SENTENCE_END.split(text.removesuffix(CUT).strip()) if p.strip()]
    return parts[:-1] if cut else parts


def _words(sentence: str) -> list[str]:
    return [w.replace("’", "'").strip(".'-/") for w in _WORD.findall(sentence.lower())]


def _as_fact(text: str) -> str | None:
    text = text.strip().rstrip(" .!;:,")
    if not text:
        return None
    first = text.split(" ", 1)[0]
    if first.isalpha():
        text = text[0].upper() + text[1:]
    return text + "."


def _remembered(sentence: str) -> str | None:
    found = _REMEMBER.match(sentence)
    if found is None:
        return None
    what = found.group("what").strip()
    if what.lower().startswith("to "):
        what = "always " + what[3:]
    return what


def _is_statement(sentence: str) -> bool:
    """Rules 5-9 of the module docstring."""
    words = _words(sentence)
    if len(set(words)) < 3 or words[0] in CHITCHAT:
        return False
    lowered = " ".join(words)
    if words[0] == "please":
        return words[1] in STANDING or lowered.startswith("please do not ")
    if any(w in ("please", "pls", "plz", "kindly") for w in words):
        return False
    standing = words[0] in STANDING or lowered.startswith("do not ")
    if not standing and (
        words[0] in QUESTION_LEADS or words[0] in REQUEST_VERBS or _REQUEST_PHRASE.match(lowered)
    ):
        return False
    transient = any(w in TRANSIENT for w in words)
    return not transient and not any(p in lowered for p in _TRANSIENT_PHRASES)


def statement(sentence: str) -> str | None:
    """The fact one sentence states, or None (rules 1-10 of the module docstring)."""
    sentence = _LEADS.sub("", sentence.strip()).strip()
    if not sentence or sentence[0] in "[<" or sentence.endswith("?"):
        return None
    remembered = _remembered(sentence)
    if remembered is not None:
        return None if _SECRET.search(remembered) else _as_fact(remembered)
    if _SECRET.search(sentence) or not _is_statement(sentence):
        return None
    if sentence.lower().startswith("please "):
        sentence = sentence[len("please ") :]
    return _as_fact(sentence)


def stated_facts(text: str) -> list[str]:
    """The facts a user's message states, in order, each once (see the module docstring)."""
    facts: list[str] = []
    for sentence in sentences(text):
        fact = statement(sentence)
        if fact is not None and fact not in facts:
            facts.append(fact)
    return facts
