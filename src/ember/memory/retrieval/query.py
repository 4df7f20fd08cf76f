"""What to search memory with: the latest user text plus the context around it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ember.memory.retrieval.lexical import content_terms

#: What the query encoder reads: 256 word pieces are about 1,000 characters of English or code.
EMBED_WINDOW_CHARS = 1000
#: An ask holding this many content terms says what it is about: its vector is its own.
ASK_ALONE_TERMS = 2
#: A shorter ask ("yes, do that") is embedded with the newest context, this much in all
#: (about 50 word pieces).
SHORT_ASK_WINDOW_CHARS = 240
#: How much recent context joins the user's text by default.
TOOL_OUTPUTS = 3
ASSISTANT_TURNS = 2


@dataclass(frozen=True)
class MemoryQuery:
    """The latest user text, recent tool outputs and recent assistant turns, each kept whole.

    Nothing is truncated here (an older design cut the query to the first 500 characters of the
    user message and missed facts named at its end); the embedder applies its own window.
    ``tool_outputs`` and ``assistant_turns`` are in conversation order, oldest first.
    """

    user_text: str
    tool_outputs: tuple[str, ...] = ()
    assistant_turns: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        user_text: str,
        tool_outputs: Sequence[str] = (),
        assistant_turns: Sequence[str] = (),
        *,
        max_tool_outputs: int = TOOL_OUTPUTS,
        max_assistant_turns: int = ASSISTANT_TURNS,
    ) -> MemoryQuery:
        """Keep the most recent ``max_*`` items of each list (in order), drop empty ones."""
        tools = [t for t in tool_outputs if t.strip()]
        turns = [t for t in assistant_turns if t.strip()]
        return cls(
            user_text,
            tuple(tools[-max_tool_outputs:] if max_tool_outputs > 0 else ()),
            tuple(turns[-max_assistant_turns:] if max_assistant_turns > 0 else ()),
        )

    def to_embedding_input(self, window_chars: int | None = None) -> str:
        """Assistant turns, then tool outputs, then the user's text last.

        The user's words go last because sentence encoders weigh the end of their input
        more; what the user just asked should dominate the vector, the context refine it.

        ``window_chars`` is the encoder's window (all-MiniLM-L6-v2 reads 256 word pieces and
        drops the rest *from the end*): without it, a long tool output ahead of the ask would
        fill the window and the ask itself would never be embedded. With it, the user's text
        (its tail, if it alone is too long) always fits, and the newest context fills what
        is left, each part keeping its own tail.
        """
        parts = [p.strip() for p in (*self.assistant_turns, *self.tool_outputs) if p.strip()]
        user = self.user_text.strip()
        if window_chars is None:
            return "\n\n".join([*parts, user] if user else parts)
        user = user[-window_chars:]
        room = window_chars - len(user)
        kept: list[str] = []
        for part in reversed(parts):
            if room <= 2:
                break
            piece = part[-(room - 2) :]
            kept.append(piece)
            room -= len(piece) + 2
        return "\n\n".join([*reversed(kept), user] if user else list(reversed(kept)))

    def vector_input(self) -> str:
        """What the query vector is computed from: the ask alone when it holds
        ``ASK_ALONE_TERMS`` content terms (its tail, within the encoder's window); a shorter
        ask with the newest context, ``SHORT_ASK_WINDOW_CHARS`` in all.

        The encoder's cost is linear in word pieces (~0.35 ms of CPU each on a 2-core
        machine): an ask of 15 pieces embedded inside 1,000 characters of tool output and
        assistant turns cost 225 pieces, 60-75 ms, most of what memory added to a request. The
        ask alone is also what ``bench/memory_quality.py`` measures and what ``ember memory
        search`` embeds; the context still reaches the search through its keyword side
        (``lexical_texts``). Only an ask too short to say what it is about ("go on", "fix
        it") borrows the context's words, as before.
        """
        user = self.user_text.strip()
        if content_terms(user) >= ASK_ALONE_TERMS:
            return user[-EMBED_WINDOW_CHARS:]
        return self.to_embedding_input(SHORT_ASK_WINDOW_CHARS)

    def lexical_texts(self) -> tuple[str, ...]:
        """Texts for keyword search, most important first: the user's words, then the newest
        tool output and assistant turn (a keyword cap keeps the head of this list)."""
        return (self.user_text, *reversed(self.tool_outputs), *reversed(self.assistant_turns))

    @property
    def is_empty(self) -> bool:
        return not self.to_embedding_input()
