"""Claude Code through ember (pure).

Facts this relies on (Claude Code 2.1.x, recorded in tests/fixtures/clients/README.md):

- ``ANTHROPIC_BASE_URL`` is the API origin without ``/v1``; the client adds
  ``/v1/messages?beta=true``.
- ``ANTHROPIC_CUSTOM_HEADERS`` is newline-separated ``Name: value`` lines added to every request.
- ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR/settings.json`` when that is set) may hold an
  ``"env"`` object whose variables Claude Code sets for itself: the lasting configuration.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ember.clients import Launch
from ember.clients.address import ProxyAddress, bypass_proxies, project_header
from ember.errors import ClientError

BASE_URL_VAR = "ANTHROPIC_BASE_URL"
HEADERS_VAR = "ANTHROPIC_CUSTOM_HEADERS"
PROJECT_HEADER = "x-ember-cwd"


def launch(
    binary: str,
    args: Sequence[str],
    address: ProxyAddress,
    project_dir: str | None,
    env: Mapping[str, str],
) -> Launch:
    """Claude Code with its requests sent to the proxy, tagged with the project directory.

    The user's own ``ANTHROPIC_CUSTOM_HEADERS`` lines are kept (a gateway may need them);
    only an ``x-ember-cwd`` line of theirs is replaced, so the header names one project."""
    out = dict(env)
    notes = []
    previous = env.get(BASE_URL_VAR, "").rstrip("/")
    if previous and previous != address.origin:
        notes.append(
            f"{BASE_URL_VAR}={previous} is replaced for this run; ember forwards to its own "
            "anthropic_url (EMBER_ANTHROPIC_URL)"
        )
    out[BASE_URL_VAR] = address.origin
    headers = custom_headers(env.get(HEADERS_VAR, ""), project_header(project_dir))
    if headers:
        out[HEADERS_VAR] = headers
    out.update(bypass_proxies(env, address.host))
    return Launch([binary, *args], out, notes)


def custom_headers(existing: str, project: str | None) -> str:
    """``existing`` header lines without any ``x-ember-cwd`` line, plus ours when known."""
    kept = [
        line
        for line in existing.splitlines()
        if line.strip() and line.split(":", 1)[0].strip().lower() != PROJECT_HEADER
    ]
    if project:
        kept.append(f"{PROJECT_HEADER}: {project}")
    return "\n".join(kept)


# -- lasting configuration (``ember setup claude``) ------------------------------------------


def config_path(env: Mapping[str, str], home: Path) -> Path:
    """Claude Code's user settings file."""
    folder = env.get("CLAUDE_CONFIG_DIR")
    return (Path(folder).expanduser() if folder else home / ".claude") / "settings.json"


def wanted(address: ProxyAddress) -> dict[str, str]:
    """The variables the lasting configuration sets. No project header: one file serves every
    project, and ember finds each session's directory in Claude Code's system prompt."""
    return {BASE_URL_VAR: address.origin}


def snippet(address: ProxyAddress) -> str:
    return json.dumps({"env": wanted(address)}, indent=2) + "\n"


def merge(text: str | None, address: ProxyAddress, where: str = "settings.json") -> str:
    """``text`` (the settings file, None when absent) with ember's variables in its ``env``.

    Every other key keeps its value and order. When nothing needs to change the very same text
    comes back, so a second ``ember setup --write`` rewrites nothing."""
    data = _load(text, where)
    env = data.setdefault("env", {})
    if not isinstance(env, dict):
        raise ClientError(f'{where}: "env" is not an object; fix it by hand, then run again')
    changes = {k: v for k, v in wanted(address).items() if env.get(k) != v}
    if text is not None and not changes:
        return text
    env.update(changes)
    return json.dumps(data, indent=_indent(text), ensure_ascii=False) + "\n"


def _load(text: str | None, where: str) -> dict[str, Any]:
    if text is None or not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClientError(
            f"{where} is not valid JSON ({exc}); fix it, or move it away and run again"
        ) from exc
    if not isinstance(data, dict):
        raise ClientError(f"{where} does not hold a JSON object; fix it by hand, then run again")
    return data


def _indent(text: str | None) -> int:
    """The file's own indentation (the first indented line), so a merge only shows our lines."""
    m = re.search(r"^( +)\S", text or "", re.MULTILINE)
    return len(m.group(1)) if m else 2
