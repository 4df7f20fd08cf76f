"""Watching the proxy while the client runs, to say on the terminal what the client will not.

Claude Code retries a 502 for minutes without a word, so a provider that cannot be reached
looked like a hang under ``ember wrap`` (100+ s, the cause only in the proxy's log file). The
wrap polls the proxy's ``/healthz`` while its client runs; the first time a provider is listed
under ``upstream`` (``ember.proxy.reach``) it says so, once per provider, in one line.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

from ember.clients.address import ProxyAddress
from ember.launch.probe import _request

#: How often ``/healthz`` is read (seconds): the first failure is on the terminal within this.
POLL_SECONDS = 1.0


def upstream_lines(body: bytes) -> dict[str, str]:
    """The providers ``/healthz`` lists as unreachable, each with the line to print."""
    try:
        doc = json.loads(body)
    except ValueError:
        return {}
    found = doc.get("upstream") if isinstance(doc, dict) else None
    out = {}
    for item in found if isinstance(found, list) else []:
        if isinstance(item, dict) and isinstance(item.get("provider"), str):
            out[item["provider"]] = (
                f"the {item['provider']} provider cannot be reached at {item.get('url')} "
                f"({item.get('error')}); the client keeps retrying. Check the network, or "
                "EMBER_ANTHROPIC_URL / EMBER_OPENAI_URL"
            )
    return out


class HealthWatch:
    def __init__(self, address: ProxyAddress, say: Callable[[str], None]) -> None:
        self.address = address
        self.say = say
        self._stop = threading.Event()
        self._said: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="ember-wrap-watch", daemon=True)

    def __enter__(self) -> HealthWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(POLL_SECONDS + 2)

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                _, body = _request(
                    self.address.host, self.address.port, "GET", "/healthz", None, 1.0
                )
            except OSError:
                continue
            for provider, line in upstream_lines(body).items():
                if provider not in self._said:
                    self._said.add(provider)
                    self.say(line)
