"""Qwen Code through ember (pure).

Facts this relies on (Qwen Code 0.15.10, recorded in tests/fixtures/clients/README.md):

- ``--auth-type openai`` sends Chat Completions to ``$OPENAI_BASE_URL/chat/completions``;
  ``--auth-type anthropic`` sends Messages to ``$ANTHROPIC_BASE_URL/v1/messages``.
- Where a request goes is decided, first match wins, by: the ``baseUrl`` of the selected model
  in ``modelProviders`` of a settings file, ``--openai-base-url``, the environment
  (``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``), then ``security.auth.baseUrl`` of a settings
  file (``~/.qwen/settings.json``, then the project's ``.qwen/settings.json``; both may hold
  comments).
- It sends no session id. Its first user message opens with the date, the OS and
  ``I'm currently working in the directory: /path``: ember finds the project there, and a
  session is the digest of that first message (the same for ``--continue``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ember.clients import Launch, jsonc
from ember.clients.address import ProxyAddress, bypass_proxies
from ember.errors import ClientError

#: The variables a run gets, and the base URL each needs.
OPENAI_VAR = "OPENAI_BASE_URL"
ANTHROPIC_VAR = "ANTHROPIC_BASE_URL"


def urls(address: ProxyAddress) -> dict[str, str]:
    return {OPENAI_VAR: address.openai_base, ANTHROPIC_VAR: address.origin}


def settings_files(env: Mapping[str, str], home: Path, project_dir: str) -> list[Path]:
    """The settings files Qwen Code reads for a run in ``project_dir``, lowest precedence
    first."""
    return [config_path(env, home), Path(project_dir) / ".qwen" / "settings.json"]


def provider_urls(files: Sequence[tuple[str, str | None]]) -> list[str]:
    """One line per model of ``modelProviders`` (in ``files``: (where, text or None)) whose own
    ``baseUrl`` wins over ember's for a run; a file that cannot be read says nothing here
    (Qwen Code says so itself)."""
    found: list[str] = []
    for where, text in files:
        try:
            data = jsonc.loads(text, where)
        except ClientError:  # an unreadable file: Qwen Code reports it itself
            continue
        providers = data.get("modelProviders")
        if not isinstance(providers, dict):
            continue
        for auth, models in providers.items():
            for model in models if isinstance(models, list) else []:
                if isinstance(model, dict) and isinstance(model.get("baseUrl"), str):
                    found.append(
                        f"{where} gives model {model.get('id')!r} ({auth}) its own baseUrl "
                        f"{model['baseUrl']}, which wins over ember's: that model's requests "
                        "do not go through ember"
                    )
    return found


def launch(
    binary: str,
    args: Sequence[str],
    address: ProxyAddress,
    env: Mapping[str, str],
    configured: Sequence[str] = (),
) -> Launch:
    """Qwen Code with ``OPENAI_BASE_URL`` and ``ANTHROPIC_BASE_URL`` at the proxy (whichever
    auth type it uses). ``configured``: ``provider_urls`` of its settings files, passed on as
    notes. Its files are not touched."""
    out = dict(env)
    notes = list(configured)
    for name, url in urls(address).items():
        previous = env.get(name, "").rstrip("/")
        if previous and previous != url:
            notes.append(f"{name}={previous} is replaced for this run; ember forwards upstream")
        out[name] = url
    out.update(bypass_proxies(env, address.host))
    return Launch([binary, *args], out, notes)


# -- lasting configuration (``ember setup qwen``) --------------------------------------------


def config_path(env: Mapping[str, str], home: Path) -> Path:
    folder = env.get("QWEN_HOME")
    return (Path(folder).expanduser() if folder else home / ".qwen") / "settings.json"


def _base_for(data: Mapping[str, Any], address: ProxyAddress) -> str:
    """The base URL the selected auth type needs: Anthropic's without ``/v1``."""
    auth = (data.get("security") or {}).get("auth") if isinstance(data, Mapping) else None
    selected = auth.get("selectedType") if isinstance(auth, dict) else None
    return address.origin if selected == "anthropic" else address.openai_base


def snippet(address: ProxyAddress) -> str:
    return merge(None, address)


def merge(text: str | None, address: ProxyAddress, where: str = "settings.json") -> str:
    """``text`` (None when absent) with ``security.auth.baseUrl`` at the proxy, for the auth
    type it selects (OpenAI's unless it selects ``anthropic``); comments and every other key
    kept, the same text back when nothing changes. An ``OPENAI_BASE_URL`` in the environment,
    or a model's own ``baseUrl`` in ``modelProviders``, still wins over it."""
    base = _base_for(jsonc.loads(text, where), address)
    return jsonc.set_key(text, ("security", "auth", "baseUrl"), base, where)
