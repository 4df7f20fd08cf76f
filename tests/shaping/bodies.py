"""Hypothesis strategies: request bodies of all three wire formats, serialised several ways."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

texts = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x1F600),
    max_size=30,
)
ids = st.text(alphabet="abcdef0123456789", min_size=1, max_size=6)
cache_controls = st.sampled_from([None, {"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}])
efforts = st.sampled_from(["low", "medium", "high", "xhigh", "max", "minimal", "none", "turbo"])
verbosities = st.sampled_from(["low", "medium", "high"])


def _with_cc(block: dict[str, Any], cc: dict[str, Any] | None) -> dict[str, Any]:
    return {**block, "cache_control": cc} if cc is not None else block


# -- Anthropic ----------------------------------------------------------------------------

a_text = st.builds(lambda t, cc: _with_cc({"type": "text", "text": t}, cc), texts, cache_controls)
a_image = st.just(
    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
)
a_tool_result = st.builds(
    lambda i, t, err: {
        "type": "tool_result",
        "tool_use_id": i,
        "content": t,
        **({} if err is None else {"is_error": err}),
    },
    ids,
    texts,
    st.sampled_from([None, None, False, True]),
)
a_tool_use = st.builds(
    lambda i, t: {"type": "tool_use", "id": i, "name": "Read", "input": {"path": t}}, ids, texts
)
a_thinking = st.builds(lambda t: {"type": "thinking", "thinking": t, "signature": "sig"}, texts)
a_user = st.builds(
    lambda c: {"role": "user", "content": c},
    st.one_of(texts, st.lists(st.one_of(a_text, a_image, a_tool_result), min_size=1, max_size=4)),
)
a_assistant = st.builds(
    lambda c: {"role": "assistant", "content": c},
    st.lists(st.one_of(a_text, a_tool_use, a_thinking), min_size=1, max_size=3),
)
#: The last turn decides the classification: tool-result-only turns (mechanical or error
#: continuations) are as likely as asks, as in a real agent loop.
a_results_turn = st.builds(
    lambda c: {"role": "user", "content": c}, st.lists(a_tool_result, min_size=1, max_size=3)
)
a_thinking_param = st.one_of(
    st.builds(lambda b: {"type": "enabled", "budget_tokens": b}, st.integers(0, 40_000)),
    st.just({"type": "adaptive"}),
    st.just({"type": "disabled"}),
)


@st.composite
def anthropic_bodies(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": draw(st.sampled_from(["claude-sonnet-4-5", "claude-opus-4-1"])),
        "max_tokens": draw(st.integers(1, 64_000)),
        "messages": draw(st.lists(st.one_of(a_user, a_assistant), max_size=4))
        + draw(
            st.lists(st.one_of(a_results_turn, a_results_turn, a_user, a_assistant), max_size=1)
        ),
    }
    optional = {
        "system": st.one_of(st.none(), texts, st.lists(a_text, max_size=3)),
        "tools": st.lists(
            st.builds(
                lambda n, cc: _with_cc({"name": n, "input_schema": {"type": "object"}}, cc),
                ids,
                cache_controls,
            ),
            max_size=2,
        ),
        "thinking": a_thinking_param,
        "output_config": st.one_of(
            st.builds(lambda e: {"effort": e}, efforts),
            st.just({"format": {"type": "json_schema", "schema": {}}}),
        ),
        "stream": st.booleans(),
        "metadata": st.just({"user_id": "user_x_account_y_session_abc12345"}),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            body[key] = draw(strategy)
    return _shuffled(draw, body)


# -- OpenAI Chat Completions --------------------------------------------------------------

c_parts = st.lists(st.builds(lambda t: {"type": "text", "text": t}, texts), min_size=1, max_size=3)
c_system = st.builds(
    lambda r, c: {"role": r, "content": c},
    st.sampled_from(["system", "developer"]),
    st.one_of(texts, c_parts),
)
c_user = st.builds(
    lambda c: {"role": "user", "content": c},
    st.one_of(
        texts,
        st.lists(
            st.one_of(
                st.builds(lambda t: {"type": "text", "text": t}, texts),
                st.just({"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}}),
            ),
            min_size=1,
            max_size=3,
        ),
    ),
)
c_assistant = st.builds(
    lambda i: {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "sh", "arguments": "{}"}}
        ],
    },
    ids,
)
tool_outputs = st.one_of(
    texts,
    st.builds(
        lambda code: json.dumps({"output": "x", "metadata": {"exit_code": code}}),
        st.integers(0, 2),
    ),
)
c_tool = st.builds(
    lambda i, c: {"role": "tool", "tool_call_id": i, "content": c}, ids, tool_outputs
)


@st.composite
def chat_bodies(draw: st.DrawFn) -> dict[str, Any]:
    head = draw(st.lists(c_system, max_size=2))
    rest = draw(st.lists(st.one_of(c_user, c_assistant, c_tool, c_system), max_size=4))
    rest += draw(st.lists(c_tool, max_size=2))  # often end on tool results
    body: dict[str, Any] = {
        "model": draw(st.sampled_from(["gpt-5", "gpt-5-mini", "gpt-4.1", "o3"])),
        "messages": head + rest,
    }
    optional = {
        "reasoning_effort": efforts,
        "reasoning": st.builds(lambda e: {"effort": e}, efforts),
        "verbosity": verbosities,
        "tools": st.just([{"type": "function", "function": {"name": "sh"}}]),
        "stream": st.booleans(),
        "prompt_cache_retention": st.sampled_from(["in_memory", "24h"]),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            body[key] = draw(strategy)
    return _shuffled(draw, body)


# -- OpenAI Responses ---------------------------------------------------------------------

r_message = st.builds(
    lambda c: {"role": "user", "content": c},
    st.one_of(
        texts,
        st.lists(
            st.builds(lambda t: {"type": "input_text", "text": t}, texts), min_size=1, max_size=2
        ),
    ),
)
r_call = st.builds(
    lambda i: {"type": "function_call", "call_id": i, "name": "sh", "arguments": "{}"}, ids
)
r_output = st.builds(
    lambda i, o: {"type": "function_call_output", "call_id": i, "output": o}, ids, tool_outputs
)
r_reasoning = st.just({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"})


@st.composite
def responses_bodies(draw: st.DrawFn) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": draw(st.sampled_from(["gpt-5", "gpt-5-codex", "gpt-4.1"])),
        "input": draw(
            st.one_of(
                texts,
                st.builds(
                    lambda a, b: a + b,
                    st.lists(st.one_of(r_message, r_call, r_output, r_reasoning), max_size=4),
                    st.lists(r_output, max_size=2),  # often end on tool outputs
                ),
            )
        ),
    }
    optional = {
        "instructions": st.one_of(st.none(), texts),
        "reasoning": st.builds(lambda e: {"effort": e, "summary": "auto"}, efforts),
        "text": st.one_of(
            st.just({"format": {"type": "text"}}),
            st.builds(lambda v: {"verbosity": v}, verbosities),
        ),
        "tools": st.just([{"type": "function", "name": "sh", "parameters": {}}]),
        "store": st.booleans(),
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            body[key] = draw(strategy)
    return _shuffled(draw, body)


# -- serialisation ------------------------------------------------------------------------


def _shuffled(draw: st.DrawFn, body: dict[str, Any]) -> dict[str, Any]:
    keys = draw(st.permutations(list(body)))
    return {k: body[k] for k in keys}


STYLES: list[dict[str, Any]] = [
    {"separators": (",", ":"), "ensure_ascii": False},
    {"ensure_ascii": True},
    {"indent": 2, "ensure_ascii": False},
    {"separators": (", ", " : "), "ensure_ascii": True},
]


@st.composite
def serialised(draw: st.DrawFn, bodies: st.SearchStrategy[dict[str, Any]]) -> bytes:
    """A body as some client would send it: key order, whitespace and escapes vary."""
    body = draw(bodies)
    style = draw(st.sampled_from(STYLES))
    return json.dumps(body, **style).encode("utf-8")
