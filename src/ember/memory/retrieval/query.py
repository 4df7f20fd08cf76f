"""What to search memory with: the latest user text plus the context around it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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

    def to_embedding_input(self) -> str:
        """Assistant turns, then tool outputs, then the user's text last.

        The user's words go last because sentence encoders weigh the end of their input
        more; what the user just asked should dominate the vector, the context refine it.
        """
        parts = [*self.assistant_turns, *self.tool_outputs, self.user_text]
        return "\n\n".join(p.strip() for p in parts if p.strip())

    def lexical_texts(self) -> tuple[str, ...]:
        """Texts for keyword search, most important first: the user's words, then the newest
        tool output and assistant turn (a keyword cap keeps the head of this list)."""
        return (self.user_text, *reversed(self.tool_outputs), *reversed(self.assistant_turns))

    @property
    def is_empty(self) -> bool:
        return not self.to_embedding_input()
