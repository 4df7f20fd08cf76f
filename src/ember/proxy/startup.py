"""Settings that load fine but probably do not do what the user meant, reviewed once when
``ember proxy`` starts: fixed where the fix is certain, each with a one-line warning.

Pure: ``review`` returns the settings to serve with and the warnings; printing them is the
command's job, and ``Settings`` validation stays a plain check of each value.

What is warned about, and why only that:
- ``openai_url`` with no path at all (``http://localhost:11434``): OpenAI-style bases end in
  ``/v1`` as ``OPENAI_BASE_URL`` does, and ember appends ``/chat/completions`` to it, so the bare
  host would 404 on every request. ``/v1`` is appended and the warning says so.
- ``openai_url`` ending in an endpoint ember appends itself (``.../v1/chat/completions``): a
  pasted endpoint, not a base; kept, and the warning shows the URL requests would go to.
- Any other path is kept silently: OpenAI-compatible providers use ``/api/v1``,
  ``/v1beta/openai``, ``/compatible-mode/v1``..., and a warning on every such start-up would
  teach users to ignore warnings.
- A ``host`` that is not loopback: other machines can reach the proxy, and through it this
  machine's project memories. Without ``proxy_token`` that is refused outright (a
  ``ConfigError``: ``ember proxy`` does not start), since the proxy would then be open to the
  whole network; with one, it is warned about.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from ember.config import Settings
from ember.errors import ConfigError
from ember.hosts import is_loopback_name
from ember.proxy.doors import TOKEN_HEADER

#: Endpoints ember appends to ``openai_url``; a base ending in one of them is a pasted endpoint.
_OPENAI_ENDPOINTS = ("/chat/completions", "/responses")


def review_openai_url(url: str) -> tuple[str, str | None]:
    """The OpenAI base to use and a warning, or ``(url, None)`` when it is fine as given."""
    path = urlsplit(url).path.rstrip("/")
    if not path:
        fixed = url.rstrip("/") + "/v1"
        return fixed, (
            f"openai_url {url} has no path; using {fixed} (OpenAI bases end in /v1, like "
            "OPENAI_BASE_URL). Give the full base to silence this."
        )
    if path.endswith(_OPENAI_ENDPOINTS):
        return url, (
            f"openai_url {url} looks like an endpoint, not a base: chat requests would go to "
            f"{url}/chat/completions. Use the part before the endpoint (usually up to /v1)."
        )
    return url, None


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the proxy on this machine (``127.0.0.0/8``, ``::1``,
    ``localhost``); a name that is not an address is not assumed to be loopback."""
    return is_loopback_name(host)


def exposure_warning(host: str, port: int) -> str | None:
    """A warning when ``host`` is reachable from other machines, else ``None``."""
    if is_loopback(host):
        return None
    return (
        f"host {host} is not loopback: any machine that can reach port {port} and sends "
        f"{TOKEN_HEADER} can use this proxy and, through it, this machine's project "
        "memories. Bind 127.0.0.1 unless you mean that."
    )


def check_exposure(settings: Settings) -> None:
    """Refuse a bind beyond loopback without ``proxy_token``: every machine on the network
    could use the proxy, and the memories of every project on this one."""
    if is_loopback(settings.host) or settings.proxy_token is not None:
        return
    raise ConfigError(
        "host",
        f"{settings.host} is not loopback and no proxy_token is set: the proxy would serve "
        "every machine that reaches it, with this machine's project memories. Bind "
        "127.0.0.1, or set a token (EMBER_PROXY_TOKEN, at least 16 characters: python -c "
        '"import secrets; print(secrets.token_urlsafe(32))") that other machines\' clients '
        f"send in {TOKEN_HEADER}",
    )


def review(settings: Settings) -> tuple[Settings, list[str]]:
    """The settings ``ember proxy`` serves with, and the warnings to print at start-up;
    ``ConfigError`` for settings it must not start with."""
    check_exposure(settings)
    warnings: list[str] = []
    openai_url, note = review_openai_url(settings.openai_url)
    if note is not None:
        warnings.append(note)
    if openai_url != settings.openai_url:
        settings = settings.model_copy(update={"openai_url": openai_url})
    exposed = exposure_warning(settings.host, settings.port)
    if exposed is not None:
        warnings.append(exposed)
    return settings, warnings
