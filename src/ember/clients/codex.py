"""Codex CLI through ember (pure).

Facts this relies on (Codex CLI 0.171.0, recorded in tests/fixtures/clients/README.md):

- ``OPENAI_BASE_URL`` is ignored; requests go to the selected *model provider*:
  ``model_provider = "<id>"`` and a ``[model_providers.<id>]`` table with ``base_url`` (ending in
  ``/v1``), ``env_key`` (the variable holding the API key), ``wire_api = "responses"`` and
  optional ``http_headers``, in ``$CODEX_HOME/config.toml`` (default ``~/.codex``).
- ``-c key.path=value`` on the command line overrides one key, the value parsed as TOML; a
  dotted path merges into the table instead of replacing it, so a user's extra keys under
  ``[model_providers.ember]`` (timeouts, retries) still apply.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.clients import Launch
from ember.clients.address import ProxyAddress, bypass_proxies, project_header
from ember.clients.mcp import SERVER_NAME
from ember.errors import ClientError

if TYPE_CHECKING:
    from tomlkit import TOMLDocument

PROVIDER_ID = "ember"
DEFAULT_ENV_KEY = "OPENAI_API_KEY"
#: Whether Codex may try the Responses API over a WebSocket first; ``wrap`` and ``setup`` both
#: follow it. Ember relays it (``ember.proxy.websocket``) and, when the provider does not serve
#: WebSocket (or ``openai_websocket = off``), answers the upgrade 426, on which Codex switches
#: to HTTP at once; before that, each refused attempt cost about 6 s of back-off (7 attempts
#: recorded with ``true`` against a 404).
SUPPORTS_WEBSOCKETS = True
_CD_FLAGS = ("-C", "--cd")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def provider(address: ProxyAddress, env_key: str = DEFAULT_ENV_KEY) -> dict[str, Any]:
    """The ``[model_providers.ember]`` keys ember sets, in the order they are written."""
    return {
        "name": "Ember",
        "base_url": address.openai_base,
        "env_key": check_env_key(env_key),
        "wire_api": "responses",
        "supports_websockets": SUPPORTS_WEBSOCKETS,
    }


def check_env_key(name: str) -> str:
    if not _ENV_NAME.match(name):
        raise ClientError(
            f"--env-key {name!r} is not an environment variable name; give the name of the "
            "variable that holds your OpenAI API key, e.g. OPENAI_API_KEY"
        )
    return name


def launch(
    binary: str,
    args: Sequence[str],
    address: ProxyAddress,
    project_dir: str | None,
    env: Mapping[str, str],
    env_key: str = DEFAULT_ENV_KEY,
) -> Launch:
    """Codex with ``-c`` overrides selecting the ember provider, before the user's arguments
    (root options apply to every subcommand: ``codex -c ... exec "..."``).

    The user's config file is never touched. The project goes as an ``x-ember-cwd`` provider
    header, except when the user's arguments move Codex elsewhere (``-C``/``--cd``): then ember
    reads the directory Codex writes into its prompt."""
    if not env.get(env_key):
        raise ClientError(
            f"Codex through ember reads your OpenAI API key from ${env_key}, which is not set. "
            f"Set it (ember forwards it to OpenAI and never stores it), or name the variable "
            "that holds it with --env-key"
        )
    table = f"model_providers.{PROVIDER_ID}"
    overrides = [("model_provider", PROVIDER_ID)]
    overrides += [(f"{table}.{k}", v) for k, v in provider(address, env_key).items()]
    project = None if _moves_cwd(args) else project_header(project_dir)
    if project:
        overrides.append((f"{table}.http_headers.x-ember-cwd", project))
    import tomlkit  # only `wrap codex` and `setup codex` need it, not every ember command

    argv = [binary]
    for key, value in overrides:
        argv += ["-c", f"{key}={tomlkit.item(value).as_string()}"]
    out = dict(env)
    out.update(bypass_proxies(env, address.host))
    return Launch([*argv, *args], out)


def _moves_cwd(args: Sequence[str]) -> bool:
    return any(a in _CD_FLAGS or a.startswith(("--cd=", "-C")) for a in args)


# -- lasting configuration (``ember setup codex``) -------------------------------------------


def config_path(env: Mapping[str, str], home: Path) -> Path:
    folder = env.get("CODEX_HOME")
    return (Path(folder).expanduser() if folder else home / ".codex") / "config.toml"


def snippet(address: ProxyAddress, env_key: str = DEFAULT_ENV_KEY) -> str:
    return merge(None, address, env_key)


def merge(
    text: str | None,
    address: ProxyAddress,
    env_key: str = DEFAULT_ENV_KEY,
    where: str = "config.toml",
) -> str:
    """``text`` (the config file, None when absent) selecting the ember provider.

    Every other key, table and comment is kept as written (tomlkit edits the parsed document in
    place); only keys whose value differs are set, so a second run returns the same text."""
    doc = _parse(text, where)
    if doc.get("model_provider") != PROVIDER_ID:
        doc["model_provider"] = PROVIDER_ID
    _set_in(doc, "model_providers", PROVIDER_ID, provider(address, env_key).items(), where)
    return doc.as_string()


def _set_in(
    doc: TOMLDocument, parent: str, name: str, values: Iterable[tuple[str, Any]], where: str
) -> None:
    """``[parent.name]`` holding ``values``: each table made when absent (inline inside an
    inline parent), only keys whose value differs set, the rest of the table kept as written;
    a parent or table that is not a table is the user's to fix, never overwritten."""
    import tomlkit
    from tomlkit.items import InlineTable, Table

    outer = doc.get(parent)
    if outer is None:
        outer = tomlkit.table(is_super_table=True)
        doc[parent] = outer
    if not isinstance(outer, Table | InlineTable):
        raise ClientError(f"{where}: {parent} is not a table; fix it by hand, then run again")
    ours = outer.get(name)
    if ours is None:
        ours = tomlkit.inline_table() if isinstance(outer, InlineTable) else tomlkit.table()
        outer[name] = ours
    if not isinstance(ours, Table | InlineTable):
        raise ClientError(
            f"{where}: {parent}.{name} is not a table; fix it by hand, then run again"
        )
    for key, value in values:
        if ours.get(key) != value:
            ours[key] = value


def _parse(text: str | None, where: str) -> TOMLDocument:
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        return tomlkit.parse(text or "")
    except TOMLKitError as exc:
        raise ClientError(f"{where} is not valid TOML ({exc}); fix it, then run again") from exc


# -- the MCP server (``ember setup codex --mcp``) ---------------------------------------------


def mcp_snippet(argv: Sequence[str]) -> str:
    return mcp_merge(None, argv)


#: Variables Codex hands ``ember mcp`` (it passes a server only a short list of its own, HOME
#: and PATH among them): without them a user's EMBER_HOME store is not the one the server
#: opens, and what the agent saves goes where the proxy never looks (seen with Codex 0.171).
MCP_ENV_VARS = ("EMBER_HOME", "EMBER_CONFIG")


def mcp_merge(text: str | None, argv: Sequence[str], where: str = "config.toml") -> str:
    """``text`` (the config file, None when absent) with ``[mcp_servers.ember]`` starting
    ``ember mcp`` (``command``, ``args``), forwarding ``MCP_ENV_VARS``, and ``required``: Codex
    gives an optional server about a second to start and then runs the turn without its tools
    (``ember mcp`` takes 0.8-1.1 s here, so the tools came in some sessions and not in others);
    a required one it waits for. The server starts wherever Codex does, serving nothing where
    there is no project (``mcp_target``), so requiring it never stops Codex from starting.
    The user's other keys of that table (``env``, timeouts), other tables and comments are
    kept, and a second run returns the same text."""
    doc = _parse(text, where)
    values = (
        ("command", argv[0]),
        ("args", list(argv[1:])),
        ("env_vars", list(MCP_ENV_VARS)),
        ("required", True),
    )
    _set_in(doc, "mcp_servers", SERVER_NAME, values, where)
    return doc.as_string()
