"""One error hierarchy for everything ember raises on purpose.

    EmberError
     +-- ConfigError          bad setting: names the key (file key or EMBER_* variable) and the fix
     +-- ProjectError         the project cannot be resolved or its store cannot be opened
 +-- StorageError         a database cannot be opened, read or written
 |    +-- StorageUnavailable  switched off after a file-level failure (corrupt, read-only, full)
     +-- ProtocolError        a request body ember cannot read (malformed JSON, wrong shape)
     |    +-- RequestTooLarge a body past the size limit (answered 413, read no further)
     |    +-- NestingTooDeep  JSON nested deeper than the depth limit (answered 400)
     +-- UpstreamError        the provider could not be reached
          +-- UpstreamTimeout the provider did not answer in time
          +-- WebSocketRefused the provider answered a WebSocket upgrade without upgrading
     +-- ClientError          an agent CLI cannot be launched through ember, or its own config
                              file cannot be read (``ember wrap``, ``ember setup``)

Lower-layer exceptions (aiohttp, sqlite3, pydantic) are mapped onto these at the boundary
with ``raise ... from`` so callers never have to know which library failed.
"""

from __future__ import annotations


class EmberError(Exception):
    """Base class of every error ember raises deliberately."""


class ConfigError(EmberError):
    """A setting is unknown or has a bad value; the message names the key and how to fix it."""

    def __init__(self, key: str, problem: str) -> None:
        self.key = key
        self.problem = problem
        super().__init__(f"{key}: {problem}")


class FeatureError(EmberError):
    """A registered feature (``ember.features``) cannot be loaded, or takes a name already
    taken; the message names its reference and what to do."""


class ProjectError(EmberError):
    """The project a request belongs to cannot be resolved or opened."""


class StorageError(EmberError):
    """A database cannot be opened, read or written; the message names the file."""


class StorageUnavailable(StorageError):
    """The database was switched off after a file-level failure (corrupt, read-only, disk full);
    the message says which and what to do (``ember doctor``)."""


class ProtocolError(EmberError):
    """A request body that does not parse as the protocol's JSON."""


class RequestTooLarge(ProtocolError):
    """A request body longer than ``limit`` bytes; reading stopped at the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"request body is larger than {limit} bytes")


class NestingTooDeep(ProtocolError):
    """JSON nested deeper than ``limit`` levels (``None``: deeper than any parser here takes)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        where = f"more than {limit} levels" if limit is not None else "too deeply to parse"
        super().__init__(f"request body is nested {where}")


class UpstreamError(EmberError):
    """The provider could not be reached (connection refused, DNS, reset before an answer)."""


class UpstreamTimeout(UpstreamError):
    """The provider did not answer (or stopped streaming) within the configured timeout."""


class WebSocketRefused(UpstreamError):
    """The provider answered a WebSocket handshake with an HTTP status instead of upgrading."""

    def __init__(self, status: int, url: str) -> None:
        self.status = status
        super().__init__(f"the provider answered the WebSocket upgrade at {url} with {status}")


class ClientError(EmberError):
    """An agent CLI (Claude Code, Codex) cannot be launched through ember, or its configuration
    file cannot be read or merged; the message says what to do."""
