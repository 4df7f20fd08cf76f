"""What answers on the proxy's port: an ember proxy, one still starting, something else, nothing.

``GET /healthz`` -> ``{"status": "ok"}`` alone does not prove ember: many services answer it,
ember's own provider emulator included, and pointing an agent at one of them would hand it the
user's API key. So an ``ok`` is confirmed by a request only the ember proxy answers in its own
words: a ``POST /v1/messages`` whose body is not JSON gets a 400 whose message starts with
``ember:``. That request is refused before any project, database or provider is touched.

Plain ``http.client`` on purpose: it ignores ``HTTP_PROXY``, which must not see loopback
traffic.
"""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from typing import Literal

State = Literal["free", "ember", "starting", "other"]
_FINGERPRINT_BODY = b"ember-wrap-probe"
_FINGERPRINT_PREFIX = "ember:"


@dataclass(frozen=True)
class Probe:
    state: State
    detail: str = ""  #: for "other": what answered, in a few words


def probe(host: str, port: int, timeout: float = 2.0) -> Probe:
    """One look at ``host:port``; never raises for network reasons."""
    try:
        status, body = _request(host, port, "GET", "/healthz", None, timeout)
    except ConnectionRefusedError:
        return Probe("free")
    except (OSError, http.client.HTTPException) as exc:
        return Probe("other", f"it does not answer HTTP ({type(exc).__name__}: {exc})")
    health = classify_health(status, body)
    if health == "starting":
        return Probe("starting")
    if health != "ok":
        return Probe("other", health)
    try:
        status, body = _request(host, port, "POST", "/v1/messages", _FINGERPRINT_BODY, timeout)
    except (OSError, http.client.HTTPException) as exc:
        return Probe("other", f"it answers /healthz but not POST ({exc})")
    if is_ember_refusal(status, body):
        return Probe("ember")
    return Probe("other", "it answers /healthz like ember but is not an ember proxy")


def settle(host: str, port: int, timeout: float) -> Probe:
    """``probe``, waiting up to ``timeout`` while an ember proxy is still starting (another
    wrap, or the user, launched it a moment ago): using or refusing it then would be wrong."""
    deadline = time.monotonic() + timeout
    found = probe(host, port)
    while found.state == "starting" and time.monotonic() < deadline:
        time.sleep(0.05)
        found = probe(host, port)
    return found


def classify_health(status: int, body: bytes) -> str:
    """``ok``, ``starting``, or a description of what is not ember's ``/healthz``."""
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    value = doc.get("status") if isinstance(doc, dict) else None
    if status == 200 and value == "ok":
        return "ok"
    if status == 503 and value == "starting":
        return "starting"
    return f"GET /healthz answered {status} {body[:80]!r}"


def is_ember_refusal(status: int, body: bytes) -> bool:
    """The ember proxy's 400 for a body that is not JSON (Anthropic error shape)."""
    try:
        doc = json.loads(body)
        message = doc["error"]["message"]
    except (ValueError, KeyError, TypeError):
        return False
    return status == 400 and isinstance(message, str) and message.startswith(_FINGERPRINT_PREFIX)


def _request(
    host: str, port: int, method: str, path: str, body: bytes | None, timeout: float
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        headers = {"content-type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read(64 * 1024)
    finally:
        conn.close()
