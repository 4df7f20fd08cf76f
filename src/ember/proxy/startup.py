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
- A ``host`` that is not loopback: the proxy has no authentication of its own.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from ember.config import Settings

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
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, port: int) -> str | None:
    """A warning when ``host`` is reachable from other machines, else ``None``."""
    if is_loopback(host):
        return None
    return (
        f"host {host} is not loopback: anyone who can reach port {port} can use this proxy "
        "and, through it, this machine's project memories (ember has no authentication; "
        "clients send their own provider key). Bind 127.0.0.1 unless you mean that."
    )


def review(settings: Settings) -> tuple[Settings, list[str]]:
    """The settings ``ember proxy`` serves with, and the warnings to print at start-up."""
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
