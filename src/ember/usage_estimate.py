"""Token usage ember estimates when the provider reported none (pure).

When: a complete answer without usage. In practice that is the OpenAI SDK's default streaming
Chat request: without ``stream_options.include_usage`` the provider sends no usage at all, and
the accounting row said 0 tokens at an unknown cost, so a session of such requests looked free
(OpenAI-compatible servers that leave usage out of an answer are the same case).

Why an estimate, and not asking the provider for usage on the client's behalf: adding
``stream_options: {"include_usage": true}`` upstream changes more than one extra chunk. OpenAI
then also puts ``"usage": null`` in *every* other chunk (documented, and the emulator does the
same), so giving the client its stream as it would be without ember means editing every chunk,
not dropping one; compatible servers place usage differently (some in the last content chunk),
and some refuse the parameter outright (older Azure API versions answer 400 to
``stream_options``), which would turn a working request into a failed one. An estimate leaves
the request and the client's stream untouched, byte for byte; the row says it is an estimate.

How: about four bytes of UTF-8 to a token, the usual rule of thumb for English text and code
with OpenAI's and Anthropic's tokenizers. Input is every string of the request as the provider
saw it (the conversation, tool definitions, keys), an inline image or file a flat
``MEDIA_TOKENS``; all of it is counted as fresh input (the provider may have read part from
its cache, so the input cost is an upper bound). Output is what the answer shows: text, tool
calls, visible thinking. Hidden reasoning tokens (OpenAI's reasoning models bill them as
output but never stream them) cannot be seen, so output can be well under the truth there.
"""

from __future__ import annotations

import json
from typing import Any

from ember.protocols.base import AssembledMessage, Usage

#: Bytes of UTF-8 per token, the rule of thumb for English text and code.
BYTES_PER_TOKEN = 4
#: An inline image or file (a ``data:`` URL or base64 field): billed by its pixels or pages,
#: not its bytes; a 1024x1024 image is 765 tokens at OpenAI's high detail, 85 at low.
MEDIA_TOKENS = 1000
#: Strings this long that are inline data are media, not text.
_MEDIA_MIN_CHARS = 256
_MEDIA_KEYS = frozenset({"data", "file_data", "image_url", "url"})


def estimate_usage(request: Any, answer: AssembledMessage) -> Usage:
    """Estimated usage of one exchange: ``request`` as the provider saw it (parsed JSON), the
    ``answer`` assembled from what reached the client. Never raises on odd shapes."""
    return Usage(input_tokens=_request_tokens(request), output_tokens=answer_tokens(answer))


def tokens_of(text: str) -> int:
    """About how many tokens ``text`` is (rounded up: a non-empty text is at least one)."""
    size = len(text.encode("utf-8", errors="replace"))
    return -(-size // BYTES_PER_TOKEN)


def answer_tokens(answer: AssembledMessage) -> int:
    """What the answer shows, in tokens: text, thinking, tool names and arguments."""
    total = 0
    for block in answer.blocks:
        total += tokens_of(block.text) + tokens_of(block.name or "")
        if block.input is not None:
            arguments = block.input if isinstance(block.input, str) else _dumps(block.input)
            total += tokens_of(arguments)
    return total


def _request_tokens(value: Any) -> int:
    chars = 0
    media = 0
    stack: list[tuple[str | None, Any]] = [(None, value)]
    while stack:  # iterative: a request may be nested as deep as max_json_depth allows
        key, item = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                chars += len(str(k).encode("utf-8", errors="replace"))
                stack.append((str(k), v))
        elif isinstance(item, list):
            stack.extend((key, v) for v in item)
        elif isinstance(item, str):
            if _is_media(key, item):
                media += 1
            else:
                chars += len(item.encode("utf-8", errors="replace"))
        elif item is not None:
            chars += len(str(item))
    return -(-chars // BYTES_PER_TOKEN) + media * MEDIA_TOKENS


def _is_media(key: str | None, text: str) -> bool:
    if len(text) < _MEDIA_MIN_CHARS:
        return False
    return text.startswith("data:") or (key in _MEDIA_KEYS and " " not in text[:_MEDIA_MIN_CHARS])


def _dumps(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(value)
