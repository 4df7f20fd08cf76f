"""A stand-in for the `claude` / `codex` executables in `ember wrap` tests (standard library only).

It records its argv, environment and working directory to $FAKE_AGENT_RECORD (JSON). With
FAKE_AGENT_CALL=1 it also makes one request the way the real client would find the proxy --
Claude Code from ANTHROPIC_BASE_URL + ANTHROPIC_CUSTOM_HEADERS, Codex from its `-c` overrides
parsed as TOML -- and records the answer's status; the user's message is $FAKE_AGENT_TEXT
(default "hi"). With FAKE_AGENT_WAIT=1 it then touches
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


def call(name: str) -> dict[str, Any]:
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
