"""aider through ember (pure).

Facts this relies on (aider 0.86.2 with litellm 1.81, recorded in
tests/fixtures/clients/README.md):

- It reaches providers through litellm, which takes OpenAI's base URL from ``OPENAI_BASE_URL``
  (before ``OPENAI_API_BASE``, which ``--openai-api-base`` sets) and Anthropic's from
  ``ANTHROPIC_API_BASE`` (before ``ANTHROPIC_BASE_URL``). aider loads ``.env`` files over the
  environment, then applies ``--set-env NAME=value`` (from ``~/.aider.conf.yml`` first, then
  the command line, in order): only ``--set-env`` is sure to win.
- Its requests name no working directory (files go by relative names) and no session; its
  first user message is a fixed example exchange, the same in every session. ember cannot
  tell its project from a request, so a run sends one in a header: ``extra_headers`` of the
  model settings entry ``aider/extra_params``, which applies to every model. Model settings
  files are read in order (``~/.aider.model.settings.yml``, the git root's, the working
  directory's, then ``--model-settings-file``); an entry replaces an earlier one of its name,
  so the run's file carries the user's own ``aider/extra_params`` with ember's headers added.
- ``~/.aider.conf.yml`` is YAML whose keys are the long options (``set-env:`` a list).
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ember.clients import Launch
from ember.clients.address import ProxyAddress, bypass_proxies, project_header
from ember.errors import ClientError

SETTINGS_FLAG = "--model-settings-file"
SETTINGS_NAME = ".aider.model.settings.yml"
EXTRA = "aider/extra_params"
PROJECT_HEADER = "x-ember-cwd"
SESSION_HEADER = "x-ember-session-id"


def base_urls(address: ProxyAddress) -> dict[str, str]:
    """The variables litellm reads first, each at the proxy."""
    return {"OPENAI_BASE_URL": address.openai_base, "ANTHROPIC_API_BASE": address.origin}


def settings_files(args: Sequence[str], home: Path, cwd: Path, git_root: Path | None) -> list[Path]:
    """The model settings files aider reads before the run's, in its order (the user's own
    ``--model-settings-file`` last)."""
    files = [home / SETTINGS_NAME]
    if git_root is not None and "--no-git" not in args:
        files.append(git_root / SETTINGS_NAME)
    files.append(cwd / SETTINGS_NAME)
    own = own_settings_file(args)
    if own is not None:
        files.append(cwd / own)
    unique: list[Path] = []
    for f in files:
        if f not in unique:
            unique.append(f)
    return unique


def own_settings_file(args: Sequence[str]) -> str | None:
    """The user's ``--model-settings-file`` value, if they gave one."""
    found = None
    for i, arg in enumerate(args):
        if arg == SETTINGS_FLAG and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(SETTINGS_FLAG + "="):
            found = arg.split("=", 1)[1]
    return found


def _without_own_settings(args: Sequence[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == SETTINGS_FLAG:
            skip = True
        elif not arg.startswith(SETTINGS_FLAG + "="):
            out.append(arg)
    return out


def _entries(text: str | None) -> list[dict[str, Any]]:
    """A model settings file's entries; none when it is absent, empty or not readable (aider
    reports a broken file itself)."""
    if not text or not text.strip():
        return []
    yaml = importlib.import_module("yaml")  # a dependency of huggingface_hub, and ours
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def model_settings(
    sources: Sequence[tuple[str, str | None]], own: str | None, headers: Mapping[str, str]
) -> str:
    """The run's model settings file (JSON, which is YAML): the user's ``--model-settings-file``
    entries (``own``: its text) and their last ``aider/extra_params`` (of ``sources``, in
    aider's order) with ``headers`` added to its ``extra_headers``."""
    inherited: dict[str, Any] = {}
    for _, text in sources:
        for entry in _entries(text):
            if entry.get("name") == EXTRA and isinstance(entry.get("extra_params"), dict):
                inherited = dict(entry["extra_params"])
    theirs = inherited.get("extra_headers")
    inherited["extra_headers"] = {**(theirs if isinstance(theirs, dict) else {}), **headers}
    kept = [e for e in _entries(own) if e.get("name") != EXTRA]
    return json.dumps([*kept, {"name": EXTRA, "extra_params": inherited}], indent=2) + "\n"


def launch(
    binary: str,
    args: Sequence[str],
    address: ProxyAddress,
    project_dir: str | None,
    env: Mapping[str, str],
    session_id: str,
    settings_path: Path,
    sources: Sequence[tuple[str, str | None]],
) -> Launch:
    """aider with ``--set-env`` base URLs at the proxy and ``--model-settings-file`` naming the
    run's file (``settings_path``), which sends the project and ``session_id`` (one session per
    run: aider names none) with every request. ``sources``: ``settings_files`` with their text.
    The user's ``--model-settings-file`` is read into the run's file and replaced by it."""
    headers = {SESSION_HEADER: session_id}
    project = project_header(project_dir)
    if project:
        headers[PROJECT_HEADER] = project
    own = own_settings_file(args)
    own_text = sources[-1][1] if own is not None and sources else None
    notes = []
    if own is not None:
        notes.append(f"{SETTINGS_FLAG} {own} is read into ember's own for this run, headers added")
    text = model_settings(sources, own_text, headers)
    argv = [binary]
    for name, url in base_urls(address).items():
        argv += ["--set-env", f"{name}={url}"]
    argv += [SETTINGS_FLAG, str(settings_path), *_without_own_settings(args)]
    out = dict(env)
    out.update(base_urls(address))
    out.update(bypass_proxies(env, address.host))
    return Launch(argv, out, notes, {str(settings_path): text})


# -- lasting configuration (``ember setup aider``) -------------------------------------------

_KEY = "set-env"
_TOP_KEY = re.compile(r"^([A-Za-z0-9_-]+)\s*:(.*)$")
_ITEM = re.compile(r"^(\s*)-\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)=(.*?)\2\s*(#.*)?$")


def config_path(env: Mapping[str, str], home: Path) -> Path:
    return home / ".aider.conf.yml"


def snippet(address: ProxyAddress) -> str:
    return merge(None, address)


def merge(text: str | None, address: ProxyAddress, where: str = ".aider.conf.yml") -> str:
    """``text`` (None when absent) whose ``set-env`` list sets litellm's base URLs to the
    proxy: an item naming one of them is replaced in place, a missing one added after the last
    item; every other line (comments too) kept, the same text back when nothing changes.
    A ``set-env`` written another way than a block list is the user's to edit."""
    lines = (text or "").splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    start = next((i for i, line in enumerate(lines) if _is_key(line)), None)
    wanted = [f"{name}={url}" for name, url in base_urls(address).items()]
    if start is None:
        out = "".join(lines) + f"{_KEY}:\n" + "".join(f"  - {w}\n" for w in wanted)
        return out if text is None or out != text else text
    rest = _TOP_KEY.match(lines[start].rstrip("\n"))
    if rest is not None and rest.group(2).split("#", 1)[0].strip():
        raise ClientError(
            f"{where}: {_KEY} is not written as a list of `- NAME=value` lines; add "
            + ", ".join(wanted)
            + " to it by hand"
        )
    end, indent = start + 1, "  "
    while end < len(lines) and (_item(lines[end]) or not lines[end].strip()):
        item = _item(lines[end])
        if item is not None:
            indent = item.group(1)
        end += 1
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1  # blank lines after the list stay after it
    for want in wanted:
        name, value = want.split("=", 1)
        items = {
            m.group(3): (i, m.group(4)) for i in range(start + 1, end) if (m := _item(lines[i]))
        }
        if name not in items:
            lines.insert(end, f"{indent}- {want}\n")
            end += 1
        elif items[name][1] != value:
            lines[items[name][0]] = f"{indent}- {want}\n"
    merged = "".join(lines)
    return text if text is not None and merged.rstrip("\n") == text.rstrip("\n") else merged


def _item(line: str) -> re.Match[str] | None:
    return _ITEM.match(line.rstrip("\n"))


def _is_key(line: str) -> bool:
    m = _TOP_KEY.match(line.rstrip("\n"))
    return m is not None and m.group(1) == _KEY
