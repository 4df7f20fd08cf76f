"""What library mode's entry points share: a framework that calls the model itself names its
wire format, its project and its request the way it has them, and each is checked here once.

Used by shadow memory's library (``ember.shadow.library``) and memory's
(``ember.memory.library``): one spelling of each argument, and one error for a wrong one, so
a framework that uses both is never told two different things about the same mistake.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ember.errors import EmberError
from ember.project import IdentityMode, ProjectRef, project_from_cli
from ember.protocols import ADAPTERS
from ember.protocols.base import ProtocolAdapter
from ember.protocols.plain import PATHS

__all__ = ["LibraryError", "ProjectLike", "adapter_for", "project_ref", "request_bytes"]

ProjectLike = ProjectRef | str | os.PathLike[str]


class LibraryError(EmberError):
    """A call of the library API with arguments it cannot use; the message says which."""


def adapter_for(protocol: str) -> ProtocolAdapter:
    """The adapter of a wire format named as the README names them (``anthropic``,
    ``openai_chat``, ``openai_responses``) or by its path (``/v1/messages``)."""
    adapter = ADAPTERS.get(PATHS.get(protocol, protocol))
    if adapter is None:
        raise LibraryError(
            f"unknown wire format {protocol!r}: use one of {', '.join(PATHS)} "
            f"(or a path: {', '.join(ADAPTERS)})"
        )
    return adapter


def project_ref(project: ProjectLike, identity: IdentityMode = "path") -> ProjectRef:
    """A directory (named as ``project_identity`` says) or a ``ProjectRef`` given as it is."""
    if isinstance(project, ProjectRef):
        return project
    ref = project_from_cli(None, os.fspath(project), identity) if os.fspath(project) else None
    if ref is None:
        raise LibraryError("project is empty: pass the project's directory or a ProjectRef")
    return ref


def request_bytes(request: bytes | str | Mapping[str, Any]) -> tuple[bytes, Any]:
    """(the bytes, parsed). A mapping is serialised compactly, which is only identical to what
    goes out if the framework's HTTP client serialises it the same way: pass bytes when the
    exact bytes matter."""
    if isinstance(request, Mapping):
        try:
            raw = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode()
        except (TypeError, ValueError) as exc:
            raise LibraryError(
                f"request is not JSON ({exc}): pass plain dicts and lists (an SDK object's "
                "model_dump()), or the bytes"
            ) from exc
        return raw, dict(request)
    raw = request.encode() if isinstance(request, str) else bytes(request)
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise LibraryError(f"request is not the JSON body that was sent ({exc})") from exc
    if not isinstance(body, dict):
        raise LibraryError("request is not a JSON object: pass the body that was sent")
    return raw, body
