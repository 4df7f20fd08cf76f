"""A stand-in for the agent executables in `ember wrap` tests (standard library only).

It records its argv, environment and working directory to $FAKE_AGENT_RECORD (JSON). With
FAKE_AGENT_CALL=1 it also makes one request the way the real client would find the proxy --
Claude Code from ANTHROPIC_BASE_URL + ANTHROPIC_CUSTOM_HEADERS, Codex from its `-c` overrides
parsed as TOML, OpenCode from OPENCODE_CONFIG_CONTENT's anthropic provider, Qwen Code from
OPENAI_BASE_URL, aider from its last `--set-env OPENAI_BASE_URL=...` and the headers of its
`--model-settings-file` (read while it runs), Gemini CLI from GOOGLE_GEMINI_BASE_URL and
GEMINI_CLI_CUSTOM_HEADERS -- and records the answer's status; the user's message is
$FAKE_AGENT_TEXT (default "hi"). With FAKE_AGENT_WAIT=1 it then touches
$FAKE_AGENT_RECORD.ready and waits for SIGINT/SIGTERM, recording every one that arrived. It
exits with $FAKE_AGENT_EXIT (default 0), or 128 + the signal number.
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import signal
import sys
import time
import tomllib
import urllib.parse
from pathlib import Path
from typing import Any


def codex_config(argv: list[str]) -> dict[str, Any]:
    """The `-c key.path=value` overrides as one nested table, values parsed as Codex does."""
    config: dict[str, Any] = {}
    for flag, pair in itertools.pairwise(argv):
        if flag != "-c":
            continue
        key, value = pair.split("=", 1)
        *parents, last = key.split(".")
        table = config
        for part in parents:
            table = table.setdefault(part, {})
        table[last] = tomllib.loads(f"v = {value}")["v"]
    return config


def _post(url: str, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=20)
    conn.request(
        "POST", parts.path, json.dumps(body), {**headers, "content-type": "application/json"}
    )
    response = conn.getresponse()
    return {"status": response.status, "body": response.read().decode()[:500]}


def _text() -> str:
    return os.environ.get("FAKE_AGENT_TEXT", "hi")


def _chat(base: str, headers: dict[str, str], *first: str) -> dict[str, Any]:
    headers = {**headers, "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
    said = [{"role": "user", "content": text} for text in (*first, _text())]
    return _post(base + "/chat/completions", headers, {"model": "gpt-4.1", "messages": said})


def _aider() -> dict[str, Any]:
    argv = sys.argv
    envs = dict(v.split("=", 1) for f, v in itertools.pairwise(argv) if f == "--set-env")
    settings = next(v for f, v in itertools.pairwise(argv) if f == "--model-settings-file")
    entries = json.loads(Path(settings).read_text())
    extra = next(e for e in entries if e["name"] == "aider/extra_params")["extra_params"]
    return _chat(envs["OPENAI_BASE_URL"], extra["extra_headers"])


def _gemini() -> dict[str, Any]:
    headers = dict(
        (k.strip(), v.strip())
        for k, v in (
            entry.split(":", 1)
            for entry in os.environ.get("GEMINI_CLI_CUSTOM_HEADERS", "").split(", ")
            if ":" in entry
        )
    )
    headers["x-goog-api-key"] = os.environ["GEMINI_API_KEY"]
    body = {"contents": [{"role": "user", "parts": [{"text": _text()}]}]}
    url = os.environ["GOOGLE_GEMINI_BASE_URL"] + "/v1beta/models/gemini-2.5-flash:generateContent"
    return _post(url, headers, body)


def call(name: str) -> dict[str, Any]:
    if name == "opencode":
        provider = json.loads(os.environ["OPENCODE_CONFIG_CONTENT"])["provider"]["anthropic"]
        headers = {**provider["options"].get("headers", {}), "x-api-key": "sk-test"}
        headers["anthropic-version"] = "2023-06-01"
        body = {"model": "claude-sonnet-4-5", "max_tokens": 16}
        body["messages"] = [{"role": "user", "content": _text()}]
        return _post(provider["options"]["baseURL"] + "/messages", headers, body)
    if name == "qwen":  # Qwen Code names its directory in its first message
        where = f"I'm currently working in the directory: {os.getcwd()}"
        return _chat(os.environ["OPENAI_BASE_URL"], {}, where)
    if name == "aider":
        return _aider()
    if name == "gemini":
        return _gemini()
    if name == "claude":
        headers = dict(
            (k.strip(), v.strip())
            for k, v in (
                line.split(":", 1)
                for line in os.environ.get("ANTHROPIC_CUSTOM_HEADERS", "").splitlines()
                if line.strip()
            )
        )
        headers |= {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"}
        body = {"model": "claude-sonnet-4-5", "max_tokens": 16}
        body["messages"] = [{"role": "user", "content": os.environ.get("FAKE_AGENT_TEXT", "hi")}]
        return _post(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", headers, body)
    config = codex_config(sys.argv)
    provider = config["model_providers"][config["model_provider"]]
    headers = dict(provider.get("http_headers", {}))
    headers["authorization"] = "Bearer " + os.environ[provider["env_key"]]
    return _post(provider["base_url"] + "/responses", headers, {"model": "gpt-5.1", "input": "hi"})


def main() -> int:
    record_path = Path(os.environ["FAKE_AGENT_RECORD"])
    name = Path(sys.argv[0]).name
    record: dict[str, Any] = {"argv": sys.argv, "env": dict(os.environ), "cwd": os.getcwd()}
    if os.environ.get("FAKE_AGENT_CALL") == "1":
        record["call"] = call(name)
    record_path.write_text(json.dumps(record))
    if os.environ.get("FAKE_AGENT_WAIT") == "1":
        got: list[int] = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, _frame: got.append(signum))
        Path(str(record_path) + ".ready").touch()
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)  # a signal delivered twice (terminal and wrap) arrives meanwhile
        record["signals"] = [signal.Signals(s).name for s in got]
        record_path.write_text(json.dumps(record))
        return 128 + got[0] if got else 99
    return int(os.environ.get("FAKE_AGENT_EXIT", "0"))


if __name__ == "__main__":
    sys.exit(main())
