"""Record request fixtures from OpenCode, Gemini CLI, Qwen Code and aider, offline.

The companion of ``record_client_fixtures.py`` (Claude Code and Codex), with its recorder,
scrubbing and README table: each CLI runs straight against ember's provider emulator, so the
recorded bytes are what the client sent. The model's side is ``ember dev upstream``'s (an ask
holding ``run: `cat notes.txt` `` is answered with a call of the client's shell tool, anything
else with the emulator's deterministic sentence). Every scenario is a session of two turns,
the second one a new process that continues the first (``--continue``,
``--restore-chat-history``), except the one-shot variants.

    npm install --prefix "$D/npm" opencode-ai@1.18.33 @google/gemini-cli@0.61.0 \\
        @qwen-code/qwen-code@0.15.10
    python3 -m venv "$D/aider" && "$D/aider/bin/pip" install aider-chat==0.86.2
    PYTHONPATH=src python scripts/record_agent_clients.py --npm "$D/npm" --aider "$D/aider" \\
        --work "$D/rec"
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from record_client_fixtures import (
    NOTES,
    Exchange,
    Recorder,
    Scrubber,
    save_request,
    share,
    update_readme,
)

from ember.cli.dev import upstream_emulator
from ember.server import BackgroundServer
from ember.testing import Emulator, Reply

KEY = "sk-test"
ASK = "Please read notes.txt and tell me what it says. run: `cat notes.txt`"
FOLLOWUP = "Thanks. In one word: is it a todo list?"
VERSIONS = {
    "opencode": "1.18.33",
    "gemini-cli": "0.61.0",
    "qwen-code": "0.15.10",
    "aider": "0.86.2",
}
#: Each client's own side requests, by how their system prompt opens (ember.threads).
SIDE_KINDS = (
    ("You are a title generator.", "title"),
    ("You are now acting as the managed memory extraction subagent", "memory"),
    ("You are an expert software engineer that generates concise, one-line Git", "commit"),
    ("*Briefly* summarize this partial conversation", "summary"),
)


@dataclass(frozen=True)
class Scenario:
    client: str  # fixtures folder: opencode | gemini-cli | qwen-code | aider
    name: str
    turns: tuple[tuple[str, ...], ...]
    env: tuple[tuple[str, str], ...] = ()
    stdin: str | None = None  # typed into the one process (aider reads its turns from stdin)


def _words(text: str) -> tuple[str, ...]:
    """OpenCode quotes an argument holding a space: its prompt goes as separate words."""
    return tuple(text.split(" "))


_OC = ("run", "--model")
_QWEN = ("--auth-type", "openai", "--yolo")
_AIDER = (
    "--yes-always",
    "--no-git",
    "--analytics-disable",
    "--no-check-update",
    "--no-show-release-notes",
    "--no-pretty",
)
_GEMINI = ("--skip-trust", "-m", "gemini-2.5-flash")

SCENARIOS = (
    Scenario(
        "opencode",
        "run-then-continue",
        (
            (*_OC, "anthropic/claude-sonnet-4-5", *_words(ASK)),
            (*_OC, "anthropic/claude-sonnet-4-5", "--continue", *_words(FOLLOWUP)),
        ),
    ),
    Scenario("opencode", "openai-run", ((*_OC, "openai/gpt-5.1", *_words(ASK)),)),
    Scenario(
        "qwen-code",
        "prompt-then-continue",
        ((*_QWEN, "-p", ASK), (*_QWEN, "--continue", "-p", FOLLOWUP)),
        (("OPENAI_MODEL", "gpt-4.1"),),
    ),
    Scenario(
        "qwen-code",
        "anthropic-prompt",
        (("--auth-type", "anthropic", "--yolo", "-p", ASK),),
        (("ANTHROPIC_MODEL", "claude-sonnet-4-5"),),
    ),
    Scenario(
        "aider",
        "message-then-restore",
        (
            ("--model", "openai/gpt-4.1", *_AIDER, "--message", ASK),
            ("--model", "openai/gpt-4.1", *_AIDER, "--restore-chat-history", "--message", FOLLOWUP),
        ),
    ),
    Scenario(
        "aider",
        "two-turns-one-process",
        (("--model", "openai/gpt-4.1", *_AIDER, "--no-fancy-input"),),
        stdin=f"{ASK}\n{FOLLOWUP}\n",
    ),
    Scenario(
        "aider",
        "anthropic-cache-prompts",
        (("--model", "anthropic/claude-sonnet-4-5", "--cache-prompts", *_AIDER, "--message", ASK),),
    ),
    Scenario(
        "gemini-cli",
        "prompt-then-resume",
        ((*_GEMINI, "-p", ASK), (*_GEMINI, "--resume", "latest", "-p", FOLLOWUP)),
    ),
    # its default model (`auto`): a routing call picks the model first
    Scenario("gemini-cli", "auto-model-prompt", (("--skip-trust", "-p", ASK),)),
)


def emulator() -> Emulator:
    """``ember dev upstream``'s model, which also answers Gemini CLI's routing call in the JSON
    its schema asks for (a sentence there makes it retry five times over a minute)."""
    emu = upstream_emulator()
    answer = emu.reply_fn

    def reply(body: dict[str, Any], path: str) -> Reply | None:
        config = body.get("generationConfig") or {}
        schema = json.dumps(config.get("responseJsonSchema") or {})
        if "complexity_score" in schema:
            return Reply('{"complexity_reasoning": "A simple read.", "complexity_score": 10}')
        return answer(body, path) if answer is not None else None

    emu.reply_fn = reply
    return emu


def client_env(sc: Scenario, home: Path, base: str) -> dict[str, str]:
    """A fresh home, a dummy key, telemetry and update checks off, pointed at ``base``."""
    keep = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "LOGNAME", "SHELL")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(HOME=str(home), TERM="dumb", NO_COLOR="1", **dict(sc.env))
    if sc.client == "opencode":
        provider = {"options": {"baseURL": base + "/v1"}}
        config = {"provider": {"anthropic": provider, "openai": provider}}
        env.update(
            OPENCODE_CONFIG_CONTENT=json.dumps(config),
            OPENCODE_DISABLE_AUTOUPDATE="1",
            OPENCODE_DISABLE_MODELS_FETCH="1",
            OPENCODE_DISABLE_SHARE="1",
            OPENCODE_DISABLE_LSP_DOWNLOAD="1",
            ANTHROPIC_API_KEY=KEY,
            OPENAI_API_KEY=KEY,
        )
    elif sc.client == "qwen-code":
        env.update(
            OPENAI_API_KEY=KEY,
            OPENAI_BASE_URL=base + "/v1",
            ANTHROPIC_API_KEY=KEY,
            ANTHROPIC_BASE_URL=base,
        )
    elif sc.client == "gemini-cli":
        settings = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
        (home / ".gemini").mkdir(parents=True, exist_ok=True)
        (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
        env.update(GEMINI_API_KEY=KEY, GOOGLE_GEMINI_BASE_URL=base)
    else:  # aider: litellm's price list kept local (it fetches one otherwise)
        caches = home / ".aider" / "caches"
        caches.mkdir(parents=True, exist_ok=True)
        (caches / "model_prices_and_context_window.json").write_text('{"_offline": {}}')
        env.update(
            OPENAI_API_KEY=KEY,
            ANTHROPIC_API_KEY=KEY,
            OPENAI_BASE_URL=base + "/v1",
            ANTHROPIC_API_BASE=base,
            LITELLM_LOCAL_MODEL_COST_MAP="True",
        )
    return env


def binary(sc: Scenario, npm: Path, aider: Path) -> str:
    name = {"opencode": "opencode", "gemini-cli": "gemini", "qwen-code": "qwen"}.get(sc.client)
    return str(aider / "bin" / "aider") if name is None else str(npm / "node_modules/.bin" / name)


def run_scenario(sc: Scenario, root: Path, exe: str, base: str, timeout: float) -> None:
    shutil.rmtree(root, ignore_errors=True)
    proj, home = root / "proj", root / "home"
    proj.mkdir(parents=True)
    home.mkdir()
    (proj / "notes.txt").write_text(NOTES)
    env = client_env(sc, home, base)
    for args in sc.turns:
        done = subprocess.run(
            [exe, *args],
            cwd=proj,
            env=env,
            input=sc.stdin or "",
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        tail = done.stdout.strip().replace("\n", " ")[-80:]
        print(f"  {' '.join(args[-3:])[:50]!r} rc={done.returncode} {tail!r}")
        if done.returncode != 0:
            print(done.stderr[-2000:])
        time.sleep(0.5)  # a client's background requests (title, memory) finish first


# -- scrubbing and writing ----------------------------------------------------------------------

_OPENCODE_ID = re.compile(r"\bses_[A-Za-z0-9]{20,}")


class AgentScrubber(Scrubber):
    """The recorder's scrubber, plus OpenCode's ``ses_`` session ids (same length, numbered
    per scenario) and the date and folder lines that differ between recordings are kept."""

    def text(self, value: str) -> str:
        value = _OPENCODE_ID.sub(self._session, value)
        return super().text(value)

    def headers(self, pairs: list[tuple[str, str]], body_len: int) -> dict[str, str]:
        out = super().headers(pairs, body_len)
        if "x-goog-api-key" in out:
            out["x-goog-api-key"] = "<redacted>"
        return out

    def _session(self, m: re.Match[str]) -> str:
        fake = f"ses_{self.number:04x}" + "0" * (len(m.group(0)) - 9) + f"{len(self.ids) + 1}"
        return self.ids.setdefault(m.group(0), fake)


def kind_of(ex: Exchange, body: Any) -> str:
    if ex.method != "POST" or not isinstance(body, dict):
        return "probe"
    system = _system_text(body)
    for opening, kind in SIDE_KINDS:
        if system.lstrip().startswith(opening):
            return kind
    if ":generateContent" in ex.path:
        return "router"
    return "main"


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("system") or body.get("systemInstruction") or ""
    if isinstance(system, list):
        return "\n".join(b.get("text", "") for b in system if isinstance(b, dict))
    if isinstance(system, dict):
        return "\n".join(p.get("text", "") for p in system.get("parts") or [])
    if system:
        return str(system)
    for m in body.get("messages") or body.get("input") or []:
        if isinstance(m, dict) and m.get("role") in ("system", "developer"):
            content = m.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def write(sc: Scenario, number: int, root: Path, exchanges: list[Exchange], out: Path) -> None:
    scrub = AgentScrubber(number, root, exchanges)
    folder = out / sc.client / sc.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    base = exchanges[0].start if exchanges else 0.0
    for index, ex in enumerate(e for e in exchanges if e.method == "POST"):
        body = scrub.text(ex.body.decode("utf-8")).encode("utf-8")
        headers = scrub.headers(ex.headers, len(body))
        kind = kind_of(ex, json.loads(body) if body else None)
        where = f"{sc.client}/{sc.name} #{index}"
        save_request(
            folder, index, kind, ex, body, headers, base, (str(root.parent.parent), KEY), where
        )
        print(f"    {index:03d}-{kind} {ex.path} status={ex.status}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--npm", type=Path, required=True, help="npm prefix with the three CLIs")
    parser.add_argument("--aider", type=Path, required=True, help="venv holding aider")
    parser.add_argument("--work", type=Path, required=True, help="scratch directory")
    parser.add_argument("--out", type=Path, default=Path("tests/fixtures/clients"))
    parser.add_argument("--only", default="", help="run only scenarios whose name holds this")
    parser.add_argument("--timeout", type=float, default=180.0)
    args = parser.parse_args()
    for number, sc in enumerate(SCENARIOS, 0x21):
        if args.only not in f"{sc.client}/{sc.name}":
            continue
        print(f"{sc.client}/{sc.name}")
        recorder = Recorder(emulator())
        root = (args.work / sc.client / sc.name).absolute()
        exe = binary(sc, args.npm.absolute(), args.aider.absolute())
        with BackgroundServer(recorder) as upstream:
            run_scenario(sc, root, exe, upstream.url, args.timeout)
            time.sleep(1.0)
            exchanges = list(recorder.exchanges)
        print(f"  direct: {share(exchanges)}")
        write(sc, number, root, exchanges, args.out)
    update_readme(args.out)


if __name__ == "__main__":
    main()
