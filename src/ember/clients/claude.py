"""Claude Code through ember (pure).

Facts this relies on (Claude Code 2.1.x, recorded in tests/fixtures/clients/README.md):

- ``ANTHROPIC_BASE_URL`` is the API origin without ``/v1``; the client adds
  ``/v1/messages?beta=true``.
- ``ANTHROPIC_CUSTOM_HEADERS`` is newline-separated ``Name: value`` lines added to every request.
- ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR/settings.json`` when that is set) may hold an
  ``"env"`` object whose variables Claude Code sets for itself: the lasting configuration.
- Those ``env`` values win over the process environment (checked with 2.1.197: a
  ``settings.json`` naming another port made ``ember wrap``'s ``ANTHROPIC_BASE_URL`` a dead
  letter, and Claude Code hung on a port nothing listened on). Settings files apply user <
  project ``.claude/settings.json`` < ``.claude/settings.local.json`` < ``--settings JSON`` on
  the command line; managed settings (``/etc/claude-code/managed-settings.json``) beat them all.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ember.clients import Launch
from ember.clients.address import ProxyAddress, bypass_proxies, project_header
from ember.clients.mcp import SERVER_NAME
from ember.errors import ClientError

BASE_URL_VAR = "ANTHROPIC_BASE_URL"
HEADERS_VAR = "ANTHROPIC_CUSTOM_HEADERS"
PROJECT_HEADER = "x-ember-cwd"
SETTINGS_FLAG = "--settings"
#: Managed (policy) settings on Linux: nothing a user passes overrides them.
MANAGED_SETTINGS = Path("/etc/claude-code/managed-settings.json")
#: The variables ember sets for a run, which a settings file's ``env`` would override.
_OURS = (BASE_URL_VAR, HEADERS_VAR)


def settings_files(env: Mapping[str, str], home: Path, project_dir: str) -> list[Path]:
    """The settings files Claude Code reads for a run in ``project_dir``, lowest precedence
    first (managed settings apart: see ``MANAGED_SETTINGS``)."""
    project = Path(project_dir) / ".claude"
    return [config_path(env, home), project / "settings.json", project / "settings.local.json"]


def configured_env(files: Sequence[tuple[str, str | None]]) -> dict[str, tuple[str, str]]:
    """The variables of ``_OURS`` that settings files set in their ``env``, each with its value
    and the file that wins (``files``: (where, text or None when absent), lowest precedence
    first). A file that is not JSON sets nothing here (Claude Code says so itself)."""
    found: dict[str, tuple[str, str]] = {}
    for where, text in files:
        try:
            data = json.loads(text) if text else None
        except json.JSONDecodeError:
            continue
        env = data.get("env") if isinstance(data, dict) else None
        for key in _OURS:
            if isinstance(env, dict) and isinstance(env.get(key), str):
                found[key] = (env[key], where)
    return found


def launch(
    binary: str,
    args: Sequence[str],
    address: ProxyAddress,
    project_dir: str | None,
    env: Mapping[str, str],
    configured: Mapping[str, tuple[str, str]] | None = None,
    managed: Mapping[str, tuple[str, str]] | None = None,
) -> Launch:
    """Claude Code with its requests sent to the proxy, tagged with the project directory.

    The user's own ``ANTHROPIC_CUSTOM_HEADERS`` lines are kept (a gateway may need them);
    only an ``x-ember-cwd`` line of theirs is replaced, so the header names one project.
    ``configured``/``managed``: what the settings files and managed settings set
    (``configured_env``). A settings file's ``env`` would win over this run's environment, so
    ember's values then also go in a ``--settings`` of this run, which wins over every settings
    file; where that cannot win (managed settings, or the user's own ``--settings``), the run
    is refused in one line naming the file and the key, never left to hang on a wrong port."""
    out = dict(env)
    notes = []
    previous = env.get(BASE_URL_VAR, "").rstrip("/")
    if previous and previous != address.origin:
        notes.append(
            f"{BASE_URL_VAR}={previous} is replaced for this run; ember forwards to its own "
            "anthropic_url (EMBER_ANTHROPIC_URL)"
        )
    out[BASE_URL_VAR] = address.origin
    # The headers Claude Code would send: a settings file's win over the environment's.
    filed = (configured or {}).get(HEADERS_VAR)
    theirs = filed[0] if filed is not None else env.get(HEADERS_VAR, "")
    headers = custom_headers(theirs, project_header(project_dir))
    if headers:
        out[HEADERS_VAR] = headers
    out.update(bypass_proxies(env, address.host))
    argv = [binary, *args]
    _refuse_unbeatable(managed or {}, address, args, configured or {})
    if configured:
        wanted = {BASE_URL_VAR: address.origin, **({HEADERS_VAR: headers} if headers else {})}
        argv = [binary, SETTINGS_FLAG, json.dumps({"env": wanted}), *args]
        for key, (value, where) in sorted(configured.items()):
            done = "kept, with ember's header added" if key == HEADERS_VAR else "overridden"
            notes.append(f"{where} sets env.{key}={value!r}: {done} for this run (--settings)")
    return Launch(argv, out, notes)


def _refuse_unbeatable(
    managed: Mapping[str, tuple[str, str]],
    address: ProxyAddress,
    args: Sequence[str],
    configured: Mapping[str, tuple[str, str]],
) -> None:
    base = managed.get(BASE_URL_VAR)
    if base is not None and base[0].rstrip("/") != address.origin:
        raise ClientError(
            f"{base[1]} (managed settings) sets env.{BASE_URL_VAR}={base[0]!r}, which nothing "
            "can override: Claude Code would not go through ember. Ask whoever manages it, or "
            "run ember on that address"
        )
    own = any(a == SETTINGS_FLAG or a.startswith(SETTINGS_FLAG + "=") for a in args)
    found = configured.get(BASE_URL_VAR)
    if own and found is not None and found[0].rstrip("/") != address.origin:
        raise ClientError(
            f"{found[1]} sets env.{BASE_URL_VAR}={found[0]!r}, which wins over ember's for this "
            f"run, and your own {SETTINGS_FLAG} leaves no room for ember's: remove the key, or "
            f"set it to {address.origin} in your {SETTINGS_FLAG}"
        )


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


# -- the MCP server (``ember setup claude --mcp``) --------------------------------------------


def mcp_add_command(argv: Sequence[str]) -> str:
    """The command that registers ``ember mcp`` for every project (Claude Code keeps it in
    its own state file, which it rewrites while it runs: ember leaves that file to it)."""
    return shlex.join(["claude", "mcp", "add", "--scope", "user", SERVER_NAME, "--", *argv])


def mcp_config_path(project_dir: Path) -> Path:
    """A project's shared MCP configuration (Claude Code asks before it starts a server
    listed there)."""
    return project_dir / ".mcp.json"


def mcp_entry(argv: Sequence[str]) -> dict[str, Any]:
    return {"command": argv[0], "args": list(argv[1:])}


def mcp_snippet(argv: Sequence[str]) -> str:
    return json.dumps({"mcpServers": {SERVER_NAME: mcp_entry(argv)}}, indent=2) + "\n"


def mcp_merge(text: str | None, argv: Sequence[str], where: str = ".mcp.json") -> str:
    """``text`` (the project's ``.mcp.json``, None when absent) with ember's server in its
    ``mcpServers``; every other server and key kept, the same text back when nothing changes."""
    data = _load(text, where)
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise ClientError(f'{where}: "mcpServers" is not an object; fix it by hand, then run again')
    wanted = mcp_entry(argv)
    current = servers.get(SERVER_NAME)
    if text is not None and isinstance(current, dict) and _subset(wanted, current):
        return text
    servers[SERVER_NAME] = {**(current if isinstance(current, dict) else {}), **wanted}
    return json.dumps(data, indent=_indent(text), ensure_ascii=False) + "\n"


def _subset(wanted: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    return all(current.get(k) == v for k, v in wanted.items())
