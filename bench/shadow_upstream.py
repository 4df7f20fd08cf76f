"""The provider emulator as ``bench/shadow_cost.py`` needs it, served in a process of its own.

Three things beyond ``ember dev upstream``:

* an agent's turns: an ask whose text holds ``[tools N]`` is answered by N ``Read`` calls, one
  per request, then by a final text (``end_turn``); any other ask gets the usual default answer;
* ember's shadow question (hot, cold page or steward page) is answered with the contract's
  fenced json block (``ember.testing.shadow``); when the request's system prompt names
  ``HANG_MARKER`` it is not answered at all (an upstream that hangs), until the caller gives up;
* every shadow request's arrival and every abandoned one (the caller disconnected before an
  answer) is appended to ``--events`` as a JSON line with ``time.monotonic()`` — the same clock
  in every process of the machine, so the bench can time a cancellation from its own side.

    python bench/shadow_upstream.py --port 8788 --events /tmp/events.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from ember.server import serve_forever
from ember.testing import Emulator, Reply
from ember.testing.asgi_io import Message, Receive, Scope, Send
from ember.testing.shadow import question_of, shadow_replies

HANG_MARKER = "bench-hang-shadow"
SHADOW_MARKERS = (b"[ember shadow turn]", b"\\nMessages:\\n")


def _ask_and_results(messages: list[dict[str, Any]]) -> tuple[str, int]:
    """The latest text ask and how many tool-result turns followed it."""
    results = 0
    for m in reversed(messages):
        content = m.get("content")
        if m.get("role") != "user":
            continue
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in blocks):
            results += 1
            continue
        return " ".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict)), results
    return "", results


def agent_replies() -> Any:
    shadow = shadow_replies()

    def reply(body: dict[str, Any], path: str) -> Reply | None:
        if question_of(body) is not None:
            answer = shadow(body, path)
            if answer is not None and HANG_MARKER in json.dumps(body.get("system", "")):
                return answer.replace(delay_headers=3600.0)
            return answer
        messages = body.get("messages")
        if not isinstance(messages, list):
            return None
        ask, done = _ask_and_results(messages)
        if "[tools " not in ask:
            return None
        wanted = int(ask.split("[tools ", 1)[1].split("]", 1)[0])
        if done < wanted:
            return Reply(f"Reading part {done}.", [("Read", {"path": f"src/part_{done}.py"})])
        return Reply(f"Finished: {ask[:80]}. The checks pass now.")

    return reply


class EventLog:
    """ASGI middleware: notes when a shadow request arrives and when one is abandoned."""

    def __init__(self, app: Emulator, path: Path) -> None:
        self.app = app
        self.path = path

    def write(self, event: str, tag: str) -> None:
        line = json.dumps({"event": event, "t": time.monotonic(), "tag": tag})
        with self.path.open("a") as f:
            f.write(line + "\n")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        seen: list[bytes] = []
        state = {"shadow": False, "answered": False, "tag": ""}

        async def watched_receive() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                seen.append(message.get("body", b""))
                if not message.get("more_body", False):
                    body = b"".join(seen)
                    state["shadow"] = any(m in body for m in SHADOW_MARKERS)
                    if state["shadow"]:
                        state["tag"] = "hang" if HANG_MARKER.encode() in body else "shadow"
                        self.write("shadow-start", str(state["tag"]))
            elif message["type"] == "http.disconnect" and state["shadow"] and not state["answered"]:
                self.write("shadow-abandoned", str(state["tag"]))
            return message

        async def watched_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["answered"] = True
            await send(message)

        await self.app(scope, watched_receive, watched_send)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--events", type=Path, required=True)
    args = parser.parse_args()
    emulator = Emulator()
    emulator.reply_fn = agent_replies()
    serve_forever(EventLog(emulator, args.events), "127.0.0.1", args.port, "warning")


if __name__ == "__main__":
    main()
