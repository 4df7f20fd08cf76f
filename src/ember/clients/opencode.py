"""OpenCode through ember (pure).

Facts this relies on (OpenCode 1.18.33, recorded in tests/fixtures/clients/README.md):

- Its ``anthropic`` provider (the AI SDK's) sends ``POST {baseURL}/messages``; its ``openai``
  provider ``POST {baseURL}/responses``. ``provider.<id>.options.baseURL`` sets where, and
  ``provider.<id>.options.headers`` adds headers to every request of that provider.
- ``OPENCODE_CONFIG_CONTENT`` (a JSON document in the environment) is merged over every config
  file, the project's ``opencode.json`` included, key by key (checked: a project file naming
  another ``baseURL`` and a header of its own kept the header and lost the URL).
- The user's configuration is ``~/.config/opencode/opencode.json`` (``$XDG_CONFIG_HOME`` when
  set), or ``opencode.jsonc`` beside it; both may hold comments.
- It names its session in an ``x-session-id`` header and its working directory in the system
  prompt's ``<env>`` block, so ember needs no header of its own to find either.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ember.clients import Launch, jsonc
from ember.clients.address import ProxyAddress, bypass_proxies, project_header
from ember.errors import ClientError

CONTENT_VAR = "OPENCODE_CONFIG_CONTENT"
PROJECT_HEADER = "x-ember-cwd"
#: The providers ember serves; each wants the base URL with ``/v1`` (it adds ``/messages`` or
#: ``/responses``).
PROVIDERS = ("anthropic", "openai")


def overrides(address: ProxyAddress, project: str | None) -> dict[str, Any]:
    """The configuration one run gets: each served provider's ``baseURL``, and the project
    header when the directory can travel in one."""
    options: dict[str, dict[str, Any]] = {}
    for provider in PROVIDERS:
        opts: dict[str, Any] = {"baseURL": address.openai_base}
        if project:
            opts["headers"] = {PROJECT_HEADER: project}
        options[provider] = {"options": opts}
    return {"provider": options}


def launch(
    binary: str,
    args: Sequence[str],
    address: ProxyAddress,
    project_dir: str | None,
    env: Mapping[str, str],
) -> Launch:
    """OpenCode with ``OPENCODE_CONFIG_CONTENT`` pointing its Anthropic and OpenAI providers at
    the proxy. A ``OPENCODE_CONFIG_CONTENT`` of the user's is kept, ember's keys merged into
    it (its own ``baseURL`` for those providers replaced, said in a note)."""
    out = dict(env)
    notes: list[str] = []
    theirs = _content(env.get(CONTENT_VAR))
    for provider in PROVIDERS:
        previous = ((theirs.get("provider") or {}).get(provider) or {}).get("options") or {}
        url = previous.get("baseURL") if isinstance(previous, dict) else None
        if isinstance(url, str) and url.rstrip("/") != address.openai_base:
            notes.append(
                f"{CONTENT_VAR} sets provider.{provider}.options.baseURL={url}: replaced for "
                "this run; ember forwards to its own upstream"
            )
    merged = _merge(theirs, overrides(address, project_header(project_dir)))
    out[CONTENT_VAR] = json.dumps(merged, separators=(",", ":"))
    out.update(bypass_proxies(env, address.host))
    return Launch([binary, *args], out, notes)


def _content(raw: str | None) -> dict[str, Any]:
    if not raw or not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ClientError(
            f"{CONTENT_VAR} is not valid JSON ({exc}); fix or unset it, then run again"
        ) from exc
    if not isinstance(value, dict):
        raise ClientError(f"{CONTENT_VAR} does not hold a JSON object; fix or unset it")
    return value


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``extra`` merged in, object by object (``extra`` wins on a leaf)."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


# -- lasting configuration (``ember setup opencode``) ----------------------------------------


def config_path(env: Mapping[str, str], home: Path) -> Path:
    """The user's OpenCode configuration: ``opencode.jsonc`` when that is the one there, else
    ``opencode.json``."""
    folder = env.get("XDG_CONFIG_HOME")
    base = (Path(folder).expanduser() if folder else home / ".config") / "opencode"
    commented = base / "opencode.jsonc"
    plain = base / "opencode.json"
    return commented if commented.exists() and not plain.exists() else plain


def wanted(address: ProxyAddress) -> list[tuple[tuple[str, ...], str]]:
    """The keys the lasting configuration sets. No project header: one file serves every
    project, and ember reads each session's directory from OpenCode's ``<env>`` block."""
    return [(("provider", p, "options", "baseURL"), address.openai_base) for p in PROVIDERS]


def snippet(address: ProxyAddress) -> str:
    return merge(None, address)


def merge(text: str | None, address: ProxyAddress, where: str = "opencode.json") -> str:
    """``text`` (None when absent) with each served provider's ``baseURL`` set to the proxy;
    comments, other keys and layout kept, the same text back when nothing changes."""
    out = text if text is not None else '{\n  "$schema": "https://opencode.ai/config.json"\n}\n'
    for path, value in wanted(address):
        out = jsonc.set_key(out, path, value, where)
    return out
