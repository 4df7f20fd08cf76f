"""Where a client reaches the proxy, and what every client's environment needs for that (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: Addresses a server binds to mean "every interface"; a client cannot connect to them.
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1", "[::]": "::1"}
_PROXY_VARS = ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "https_proxy", "HTTPS_PROXY")
_NO_PROXY_VARS = ("NO_PROXY", "no_proxy")


@dataclass(frozen=True)
class ProxyAddress:
    """The proxy as a client dials it: ``host`` is never a wildcard address."""

    host: str
    port: int

    @classmethod
    def for_listener(cls, host: str, port: int) -> ProxyAddress:
        """The address to dial for a proxy bound to ``host`` (``0.0.0.0`` -> ``127.0.0.1``)."""
        return cls(_WILDCARDS.get(host, host), port)

    @property
    def origin(self) -> str:
        """``http://127.0.0.1:8787``: Anthropic clients' base URL (they add ``/v1/...``)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def openai_base(self) -> str:
        """``http://127.0.0.1:8787/v1``: OpenAI clients' base URL (they add ``/responses``)."""
        return self.origin + "/v1"


def project_header(path: str | None) -> str | None:
    """``path`` as an ``x-ember-cwd`` value, or None when it cannot travel in a header.

    A header value is bytes; ember reads it as Latin-1, so a non-ASCII path would reach it
    spelled differently from ``ember memory --cwd`` (another project), and a newline would end
    Claude Code's ``ANTHROPIC_CUSTOM_HEADERS`` line early. Without the header ember still finds
    the directory the client writes into its prompt."""
    if not path or not all(0x20 <= ord(c) < 0x7F for c in path):
        return None
    return path


def bypass_proxies(env: Mapping[str, str], host: str) -> dict[str, str]:
    """``NO_PROXY``/``no_proxy`` additions so a client reaches the local proxy directly.

    A user behind a corporate HTTP proxy has ``HTTPS_PROXY``/``HTTP_PROXY`` set; both CLIs
    honour them, and a request for ``http://127.0.0.1:8787`` would be sent to that proxy, which
    cannot reach the user's loopback (and would see their API key). Nothing is added when no
    proxy variable is set."""
    if not any(env.get(name) for name in _PROXY_VARS):
        return {}
    entries: list[str] = []
    for name in _NO_PROXY_VARS:
        for entry in env.get(name, "").split(","):
            if entry.strip() and entry.strip() not in entries:
                entries.append(entry.strip())
    if host not in entries:
        entries.append(host)
    value = ",".join(entries)
    return {name: value for name in _NO_PROXY_VARS if env.get(name) != value}
