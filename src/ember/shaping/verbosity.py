"""The verbosity levels: constant texts, rendered inside ember's sentinel block.

Invariant: the block for a level is the same string in every process, on every turn, forever.
It sits at the tail of the system prompt, inside the provider's cached prefix, so a byte that
differs between two turns of a session turns the whole message history into a full-price cache
write. Editing any text below is therefore a cache-busting change for every user on upgrade:
add a new level rather than rewording an old one.

Levels are cumulative: level ``n`` asks for everything levels ``1..n`` ask for. Level 0 means
"no steering": no block is rendered and the request keeps its system prompt as sent.
"""

from __future__ import annotations

OPEN_TAG = "<ember_output_shaping>"
CLOSE_TAG = "</ember_output_shaping>"

MIN_LEVEL = 0
MAX_LEVEL = 4
DEFAULT_LEVEL = 2

#: One rule per level; level ``n`` renders rules ``1..n``.
_RULES: tuple[str, ...] = (
    "Open with the substance. Do not announce what you are about to do and do not recap what "
    "you just did.",
    "Refer to code, files, diffs and tool output that are already in this conversation by "
    "path:line instead of repeating them. When a tool call succeeds, do not describe its "
    "result back.",
    "State conclusions without the reasoning behind them unless the user asks why. Change the "
    "fewest lines that do the job instead of rewriting whole files.",
    "Spend as few tokens as possible: fragments are fine; give only the answer and the "
    "smallest change.",
)

LEVEL_NAMES: dict[int, str] = {
    0: "off",
    1: "no preamble",
    2: "no restating",
    3: "conclusions only",
    4: "minimal",
}


def _render(level: int) -> str | None:
    if level == 0:
        return None
    rules = "\n".join(f"- {rule}" for rule in _RULES[:level])
    return f"{OPEN_TAG}\nHow to write your answers:\n{rules}\n{CLOSE_TAG}"


_BLOCKS: tuple[str | None, ...] = tuple(_render(n) for n in range(MIN_LEVEL, MAX_LEVEL + 1))


def steering_text(level: int) -> str | None:
    """The block for ``level`` (tags included), or None for level 0.

    Raises ``ValueError`` for a level outside 0..4: a caller with a bad level has a bug, and
    silently clamping it would send a block nobody asked for.
    """
    if not MIN_LEVEL <= level <= MAX_LEVEL:
        raise ValueError(f"verbosity level must be {MIN_LEVEL}..{MAX_LEVEL}, got {level}")
    return _BLOCKS[level]
