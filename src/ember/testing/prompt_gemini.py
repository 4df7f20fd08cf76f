"""Gemini requests as the emulator reads them: checked as the API checks them, flattened into
the token sequence its implicit cache sees.

Order: ``systemInstruction``, then ``tools``, then ``contents``, as the API builds the prompt. A
content contributes a role marker token, then each part: a text part its tokens (and a
``thought`` marker), any other part the tokens of its canonical JSON. A change anywhere changes
the sequence from that point on and never before it, so the implicit cache reads the longest
unchanged prefix, as the real one does.

The check refuses what the API refuses with a 400 that a proxy could cause by editing a
request: an unknown field in the request or in a part (``{"type": "text", ...}``: Gemini has
no ``type``), ``contents`` that is not a list of contents each with a ``parts`` list.
"""

from __future__ import annotations

import base64
from typing import Any

from ember.testing.prompt_openai import tokenize
from ember.testing.tokens import canonical_json

#: Fields of ``GenerateContentRequest`` (either spelling).
REQUEST_FIELDS = frozenset(
    {
        "model",
        "contents",
        "systemInstruction",
        "system_instruction",
        "tools",
        "toolConfig",
        "tool_config",
        "generationConfig",
        "generation_config",
        "safetySettings",
        "safety_settings",
        "cachedContent",
        "cached_content",
        "labels",
    }
)
#: Fields of a ``Part`` (either spelling).
PART_FIELDS = frozenset(
    {
        "text",
        "thought",
        "thoughtSignature",
        "thought_signature",
        "inlineData",
        "inline_data",
        "fileData",
        "file_data",
        "functionCall",
        "function_call",
        "functionResponse",
        "function_response",
        "executableCode",
        "executable_code",
        "codeExecutionResult",
        "code_execution_result",
        "videoMetadata",
        "video_metadata",
        "partMetadata",
        "part_metadata",
        "mediaResolution",
        "media_resolution",
    }
)


class InvalidArgument(ValueError):
    """A request the API refuses with 400 INVALID_ARGUMENT; the message is the API's kind."""


def _unknown(name: str, where: str) -> InvalidArgument:
    return InvalidArgument(
        f"Invalid JSON payload received. Unknown name \"{name}\" at '{where}': Cannot find field."
    )


def _check_parts(parts: Any, where: str) -> None:
    if not isinstance(parts, list):
        raise InvalidArgument(f"{where}.parts must be a list of parts")
    for j, part in enumerate(parts):
        if not isinstance(part, dict):
            raise InvalidArgument(f"{where}.parts[{j}] must be an object")
        for name in part:
            if name not in PART_FIELDS:
                raise _unknown(name, f"{where}.parts[{j}]")


def check_request(body: dict[str, Any]) -> None:
    """Raise :class:`InvalidArgument` for a request the API would refuse (see the module)."""
    for name in body:
        if name not in REQUEST_FIELDS:
            raise _unknown(name, "")
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise InvalidArgument("* GenerateContentRequest.contents: contents is not specified")
    for i, content in enumerate(contents):
        if not isinstance(content, dict):
            raise InvalidArgument(f"contents[{i}] must be an object")
        _check_parts(content.get("parts"), f"contents[{i}]")
    system = body.get("systemInstruction", body.get("system_instruction"))
    if system is not None and not isinstance(system, str):
        if not isinstance(system, dict):
            raise InvalidArgument("system_instruction must be a content")
        _check_parts(system.get("parts"), "system_instruction")


def _signed(signature: Any) -> bool:
    """A signature the emulator issued (``render_gemini.signature_for``), in either base64
    alphabet (the Python SDK sends bytes back URL-safe)."""
    if not isinstance(signature, str):
        return False
    standard = signature.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(standard, validate=True).startswith(b"EmuSig")
    except ValueError:
        return False


def check_signatures(body: dict[str, Any]) -> None:
    """Gemini 3 refuses a turn whose function calls come back without their signature: in
    every model content since the user's latest ask, the first ``functionCall`` part must
    carry the ``thoughtSignature`` it was given."""
    contents = [c for c in body.get("contents") or [] if isinstance(c, dict)]
    start = 0
    for i, c in enumerate(contents):
        found = c.get("parts")
        parts = found if isinstance(found, list) else []
        if c.get("role", "user") == "user" and any(
            isinstance(p, dict) and "functionResponse" not in p for p in parts
        ):
            start = i
    for i in range(start, len(contents)):
        c = contents[i]
        if c.get("role") != "model":
            continue
        calls = [p for p in c.get("parts") or [] if isinstance(p, dict) and "functionCall" in p]
        if calls and not _signed(calls[0].get("thoughtSignature")):
            raise InvalidArgument(
                f"contents[{i}]: a function call of the current turn is missing its "
                "thought_signature; send the model's parts back as they were given"
            )


def _parts_tokens(parts: Any, out: list[str]) -> None:
    for part in parts if isinstance(parts, list) else []:
        text = part.get("text") if isinstance(part, dict) else None
        if isinstance(text, str):
            if part.get("thought") is True:
                out.append("<|thought|>")
            out.extend(tokenize(text))
        else:
            out.extend(tokenize(canonical_json(part)))


def prompt_tokens(body: dict[str, Any]) -> list[str]:
    """The prompt's tokens: system instruction, tools, then each content."""
    out: list[str] = []
    system = body.get("systemInstruction", body.get("system_instruction"))
    if isinstance(system, str):
        out.append("<|system|>")
        out.extend(tokenize(system))
    elif isinstance(system, dict):
        out.append("<|system|>")
        _parts_tokens(system.get("parts"), out)
    for tool in body.get("tools") or []:
        out.extend(tokenize(canonical_json(tool)))
    for content in body.get("contents") or []:
        role = content.get("role") if isinstance(content, dict) else None
        out.append(f"<|{role or 'user'}|>")
        _parts_tokens(content.get("parts") if isinstance(content, dict) else None, out)
    return out


def _text(content: Any) -> str:
    found = content.get("parts") if isinstance(content, dict) else None
    parts = found if isinstance(found, list) else []
    texts = [
        p["text"]
        for p in parts
        if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
    ]
    return " ".join(t for t in texts if t)


def latest_user_text(body: dict[str, Any]) -> str:
    """Text of the last user content that has any (function responses have none)."""
    for content in reversed(body.get("contents") or []):
        if isinstance(content, dict) and content.get("role", "user") == "user":
            text = _text(content)
            if text:
                return text
    return ""


def calls_forbidden(body: dict[str, Any]) -> bool:
    """``toolConfig.functionCallingConfig.mode`` is ``NONE``."""
    config = body.get("toolConfig", body.get("tool_config"))
    calling = config.get("functionCallingConfig") if isinstance(config, dict) else None
    if calling is None and isinstance(config, dict):
        calling = config.get("function_calling_config")
    mode = calling.get("mode") if isinstance(calling, dict) else None
    return isinstance(mode, str) and mode.upper() == "NONE"


def thoughts_included(body: dict[str, Any]) -> bool:
    """``generationConfig.thinkingConfig.includeThoughts`` is true."""
    config = body.get("generationConfig", body.get("generation_config"))
    if not isinstance(config, dict):
        return False
    thinking = config.get("thinkingConfig", config.get("thinking_config"))
    if not isinstance(thinking, dict):
        return False
    return thinking.get("includeThoughts", thinking.get("include_thoughts")) is True
