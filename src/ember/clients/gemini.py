"""Gemini CLI through ember (pure).

Facts this relies on (Gemini CLI 0.61.0, recorded in tests/fixtures/clients/README.md):

- With an API key it sends ``POST $GOOGLE_GEMINI_BASE_URL/v1beta/models/{model}:
  streamGenerateContent?alt=sse`` (and, on its default ``auto`` model, a ``:generateContent``
  routing call first). No settings key names that base URL: only the environment does, or a
  ``.env`` file it loads (the first of ``.gemini/.env`` or ``.env`` from the working directory
  up, then ``~/.gemini/.env`` in a trusted folder, then ``~/.env``).
- ``GOOGLE_GEMINI_BASE_URL`` alone makes it pick the ``gateway`` auth type, which its
  non-interactive mode refuses (exit 41, "Invalid auth method selected."): it needs
  ``security.auth.selectedType = "gemini-api-key"`` in a settings file. Settings merge system
  defaults (``$GEMINI_CLI_SYSTEM_DEFAULTS_PATH``) < user ``~/.gemini/settings.json`` < the
  project's ``.gemini/settings.json`` < system settings; each may hold comments.
- ``GEMINI_CLI_CUSTOM_HEADERS`` adds headers to every request: ``Name: value`` entries separated
  by commas (a comma followed by ``name:`` starts the next entry).
- A Google sign-in (``oauth-personal``) or Vertex AI goes to other APIs, which ember does not
  serve: ember runs it with an API key (``$GEMINI_API_KEY``) only.
- It sends no session id; its first user message holds ``<session_context>`` with the date and
  ``Workspace Directories:``, where ember finds the project.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from ember.clients import Launch, jsonc
from ember.clients.address import ProxyAddress, bypass_proxies, project_header
from ember.errors import ClientError

BASE_URL_VAR = "GOOGLE_GEMINI_BASE_URL"
HEADERS_VAR = "GEMINI_CLI_CUSTOM_HEADERS"
DEFAULTS_VAR = "GEMINI_CLI_SYSTEM_DEFAULTS_PATH"
KEY_VAR = "GEMINI_API_KEY"
API_KEY_AUTH = "gemini-api-key"
AUTH_PATH = ("security", "auth", "selectedType")
PROJECT_HEADER = "x-ember-cwd"
#: Where Gemini CLI looks for system defaults on Linux when ``DEFAULTS_VAR`` is unset.
SYSTEM_DEFAULTS = Path("/etc/gemini-cli/system-defaults.json")


def settings_files(env: Mapping[str, str], home: Path, project_dir: str) -> list[Path]:
    """The settings files that can select an auth type for a run in ``project_dir``, lowest
    precedence first (system defaults apart: ``SYSTEM_DEFAULTS``)."""
    return [config_path(env, home), Path(project_dir) / ".gemini" / "settings.json"]


def selected_auth(files: Sequence[tuple[str, str | None]]) -> tuple[str, str] | None:
    """(auth type, file) of the settings file that wins, or None when none selects one.
    A file that cannot be read selects nothing here (Gemini CLI says so itself)."""
    found = None
    for where, text in files:
        try:
            data = jsonc.loads(text, where)
        except ClientError:
            continue
        auth = (data.get("security") or {}).get("auth") if isinstance(data, dict) else None
        value = auth.get("selectedType") if isinstance(auth, dict) else None
        if isinstance(value, str) and value:
            found = (value, where)
    return found


def launch(
    binary: str,
    args: Sequence[str],
    address: ProxyAddress,
    project_dir: str | None,
    env: Mapping[str, str],
    selected: tuple[str, str] | None,
    defaults: tuple[Path, str | None] | None = None,
) -> Launch:
    """Gemini CLI with ``GOOGLE_GEMINI_BASE_URL`` at the proxy and the project header added to
    ``GEMINI_CLI_CUSTOM_HEADERS`` (the user's own headers kept).

    ``selected``: ``selected_auth`` of its settings. Another auth type than an API key cannot go
    through ember: refused in one line. None selected: the run gets a system-defaults file
    (``defaults``: where to write it, and the text of the user's own system defaults, kept
    with the one key added) selecting the API key, which any setting of the user's still beats;
    nothing of theirs is written."""
    if selected is not None and selected[0] != API_KEY_AUTH:
        raise ClientError(
            f"{selected[1]} selects security.auth.selectedType={selected[0]!r}: Gemini CLI then "
            "talks to Google's sign-in APIs, which ember does not serve. Set it to "
            f'"{API_KEY_AUTH}" and your key in ${KEY_VAR} (`ember setup gemini --write` does '
            "the first)"
        )
    if not env.get(KEY_VAR):
        raise ClientError(
            f"Gemini CLI through ember reads your Gemini API key from ${KEY_VAR}, which is "
            "not set. Set it (ember forwards it to Google and never stores it)"
        )
    out = dict(env)
    notes = []
    previous = env.get(BASE_URL_VAR, "").rstrip("/")
    if previous and previous != address.origin:
        notes.append(f"{BASE_URL_VAR}={previous} is replaced for this run; ember forwards upstream")
    out[BASE_URL_VAR] = address.origin
    headers = custom_headers(env.get(HEADERS_VAR, ""), _header_value(project_dir))
    if headers:
        out[HEADERS_VAR] = headers
    files: dict[str, str] = {}
    if selected is None and defaults is not None:
        path, theirs = defaults
        files[str(path)] = jsonc.set_key(theirs, AUTH_PATH, API_KEY_AUTH, str(path))
        out[DEFAULTS_VAR] = str(path)
    out.update(bypass_proxies(env, address.host))
    return Launch([binary, *args], out, notes, files)


def _header_value(project_dir: str | None) -> str | None:
    """The project as a header value, or None when it cannot travel in this variable (a comma
    there would start another entry); ember then reads ``Workspace Directories:``."""
    value = project_header(project_dir)
    return value if value and "," not in value else None


def custom_headers(existing: str, project: str | None) -> str:
    """``existing`` entries without any ``x-ember-cwd`` one, plus ours when known."""
    entries = [e.strip() for e in _entries(existing)]
    kept = [e for e in entries if e and e.split(":", 1)[0].strip().lower() != PROJECT_HEADER]
    if project:
        kept.append(f"{PROJECT_HEADER}: {project}")
    return ", ".join(kept)


def _entries(value: str) -> list[str]:
    """Split as Gemini CLI does: at a comma followed by ``name:``."""
    import re

    return re.split(r",(?=\s*[^,:]+:)", value) if value else []


def defaults_path(env: Mapping[str, str]) -> Path:
    """The system-defaults file Gemini CLI reads (the user's own, copied into a run's)."""
    named = env.get(DEFAULTS_VAR)
    return Path(named).expanduser() if named else SYSTEM_DEFAULTS


# -- lasting configuration (``ember setup gemini``) ------------------------------------------


def config_path(env: Mapping[str, str], home: Path) -> Path:
    return home / ".gemini" / "settings.json"


def env_path(home: Path) -> Path:
    """``~/.gemini/.env``: where the lasting base URL goes (no settings key holds one)."""
    return home / ".gemini" / ".env"


def snippet(address: ProxyAddress) -> str:
    return merge(None, address)


def merge(text: str | None, address: ProxyAddress, where: str = "settings.json") -> str:
    """``text`` (None when absent) selecting the API-key auth type; comments and other keys
    kept. Another auth type already selected is the user's to change: refused, not replaced."""
    selected = selected_auth([(where, text)])
    if selected is not None and selected[0] != API_KEY_AUTH:
        raise ClientError(
            f"{where} selects security.auth.selectedType={selected[0]!r} (a sign-in that ember "
            f'cannot proxy); change it to "{API_KEY_AUTH}" yourself if you mean to use an API '
            "key through ember"
        )
    return jsonc.set_key(text, AUTH_PATH, API_KEY_AUTH, where)


def merge_env(text: str | None, address: ProxyAddress) -> str:
    """``~/.gemini/.env`` (None when absent) with ``GOOGLE_GEMINI_BASE_URL`` at the proxy;
    every other line kept, the same text back when nothing changes."""
    lines = (text or "").splitlines(keepends=True)
    wanted = f"{BASE_URL_VAR}={address.origin}\n"
    for i, line in enumerate(lines):
        name = line.split("=", 1)[0].strip().removeprefix("export ").strip()
        if name == BASE_URL_VAR:
            if line.rstrip("\r\n") == wanted.rstrip("\n"):
                return text or ""
            lines[i] = wanted
            return "".join(lines)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return "".join(lines) + wanted
