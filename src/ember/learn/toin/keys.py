"""The key a TOIN pattern is kept under: ``(auth_mode, model_family, structure_hash)`` (pure).

Each billing slice and each model family learns on its own: a subscription user and an API
key user, or two model families, re-fetch differently, and pooling them would teach each the
other's habits. What cannot be told is the explicit ``"unknown"``, never an empty string, so
``ember toin publish`` can leave that slice out on purpose.

Serialised as ``auth|family|hash``: ``|`` cannot occur in any part (auth modes and families
come from the fixed tables below, hashes are hex), so the string splits back unambiguously. A
bare hash (no ``|``) is read as the ``unknown|unknown`` slice rather than refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ember.strata import model_family

UNKNOWN = "unknown"
AUTH_MODES = ("api_key", "oauth", UNKNOWN)
_HEX = re.compile(r"^[0-9a-f]{1,64}$")


@dataclass(frozen=True, order=True)
class PatternKey:
    auth_mode: str
    model_family: str
    structure_hash: str

    def __str__(self) -> str:
        return f"{self.auth_mode}|{self.model_family}|{self.structure_hash}"


def parse_key(text: str) -> PatternKey:
    """The key ``str(key)`` wrote (or a legacy bare hash); raises ``ValueError`` otherwise."""
    parts = text.split("|")
    if len(parts) == 1:
        parts = [UNKNOWN, UNKNOWN, parts[0]]
    if len(parts) != 3 or not _HEX.match(parts[2]) or not all(parts):
        raise ValueError(f"not a TOIN pattern key: {text[:80]!r}")
    return PatternKey(*parts)


def auth_mode(headers: Mapping[str, str]) -> str:
    """How the request is billed, from the credential's *kind* only (the credential itself is
    never kept): an Anthropic ``x-api-key`` or an ``sk-`` bearer key is ``api_key``; Claude's
    subscription token (``sk-ant-oat``) and a ChatGPT sign-in (a JWT) are ``oauth``."""
    if headers.get("x-api-key"):
        return "api_key"
    value = headers.get("authorization", "")
    token = value[7:].lstrip() if value[:7].lower() == "bearer " else ""
    if token.startswith("sk-ant-oat"):
        return "oauth"
    if token.startswith("sk-"):
        return "api_key"
    if token.startswith("eyJ"):
        return "oauth"
    return UNKNOWN


def family(model: str | None) -> str:
    """The model family as output shaping names it; ``unknown`` when no model is named."""
    return model_family(model) if model else UNKNOWN
