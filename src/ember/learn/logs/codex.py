"""Codex CLI: rollout files, ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`` (and
``~/.codex/archived_sessions/``), one session each.

Every line is ``{"timestamp", "type", "payload"}``. Tool calls are ``response_item`` payloads
(``function_call``, ``custom_tool_call``, ``local_shell_call``; the oldest rollouts wrote
``tool_call`` / ``tool_result``) answered by ``*_output`` items with the same ``call_id``. A
command's failure is its exit code: ``exec_command_end`` carries ``exit_code``, and outputs carry
it as ``metadata.exit_code`` (JSON) or an ``Exit code: N`` line — a shell that ran and returned
1 is the error loop the analysis looks for, even though the tool call itself "succeeded".
Token usage is cumulative in ``token_count`` events: the last one is the session's total.

Messages are kept for ``learn --verbosity`` (``SessionData.turns``): the user's own words, the
assistant's text, its tool calls and their outputs, and ``turn_aborted`` as an interruption.
The user's words come from ``user_message`` events, and from ``response_item`` messages of role
``user`` without the context Codex injects into them (``<environment_context>``, the AGENTS.md
instructions): Codex 0.171.0 writes only the latter, and a reader of the events alone found no
prompt at all in its rollouts. Where a rollout has both copies, the second is the same words
and is not counted again.
A ``token_count``'s ``last_token_usage`` is the usage of the API call just made: it goes to the
latest assistant message still without one (or the next, when it was logged first). A tool's
output does not close the turn for it: Codex 0.171.0 logs the call's usage after the output,
and closing there gave each answer the previous call's usage and lost the last one.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from ember.learn.logs.base import (
    LogSource,
    Progress,
    as_text,
    epoch,
    iter_jsonl,
    parse_arguments,
)
from ember.learn.model import (
    Message,
    ScanStats,
    SessionData,
    SessionEvent,
    ToolCall,
    Usage,
    snippet,
)

__all__ = ["CodexReader", "exit_code_of"]

_EXIT = re.compile(r"(?:exit code|process exited with code)[:\s]+(-?\d+)", re.IGNORECASE)
_CALLS = frozenset({"function_call", "custom_tool_call", "local_shell_call", "tool_call"})
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "tool_result"})
#: Payload types read and deliberately ignored (nothing in them for learning).
_IGNORED = frozenset(
    {
        "response_item/message",
        "response_item/reasoning",
        "response_item/web_search_call",
        "response_item/tool_search_call",
        "response_item/tool_search_output",
        "response_item/agent_message",
        "response_item/image_generation_call",
        "response_item/ghost_snapshot",
        "event_msg/task_started",
        "event_msg/task_complete",
        "event_msg/agent_message",
        "event_msg/agent_reasoning",
        "event_msg/turn.completed",
        "event_msg/web_search_end",
        "event_msg/item_completed",
        "event_msg/thread_name_updated",
        "event_msg/thread_settings_applied",
    }
)


def exit_code_of(output: Any) -> int | None:
    """The exit code a tool output reports, if it reports one (JSON ``metadata.exit_code``,
    ``exit_code`` / ``exitCode`` fields, or an ``Exit code: N`` line)."""
    if isinstance(output, str) and output.startswith("{"):
        with contextlib.suppress(orjson.JSONDecodeError):
            output = orjson.loads(output)
    if isinstance(output, dict):
        meta = output.get("metadata")
        for holder in (meta if isinstance(meta, dict) else {}, output):
            for key in ("exit_code", "exitCode"):
                if isinstance(holder.get(key), int):
                    return int(holder[key])
        output = as_text(output)
    if isinstance(output, list):
        output = as_text(output)
    if isinstance(output, str):
        match = _EXIT.search(output[:2000])
        if match:
            return int(match.group(1))
    return None


class CodexReader:
    name = "codex"

    def default_roots(self, home: Path) -> list[Path]:
        return [home / ".codex" / "sessions", home / ".codex" / "archived_sessions"]

    def discover(self, root: Path) -> Iterator[LogSource]:
        if root.is_file():
            yield LogSource(self.name, root, root.stat().st_size)
            return
        for path in sorted(root.rglob("*.jsonl")):
            yield LogSource(self.name, path, path.stat().st_size)

    def read(
        self, source: LogSource, stats: ScanStats, progress: Progress | None = None
    ) -> Iterator[SessionData]:
        state = _State(SessionData(self.name, source.path.stem, str(source.path)))
        for _lineno, record in iter_jsonl(source.path, stats, progress):
            kind = str(record.get("type"))
            payload = record.get("payload")
            sub = payload.get("type") if isinstance(payload, dict) else None
            key = f"{kind}/{sub}" if sub is not None else kind
            ts = record.get("timestamp") if isinstance(record.get("timestamp"), str) else None
            known = state.take(kind, str(sub), payload if isinstance(payload, dict) else {}, ts)
            stats.record(key, known=known or key in _IGNORED)
        state.finish()
        yield state.session


class _State:
    def __init__(self, session: SessionData) -> None:
        self.session = session
        self.calls: dict[str, ToolCall] = {}
        self.last_call: ToolCall | None = None
        self.total: Usage | None = None
        self.named = False
        #: the assistant messages since the user last spoke, waiting for their usage
        self.unbilled: list[Message] = []
        self.usage_ahead: tuple[int, int] | None = None
        #: the user's last words taken, so the other copy of them is not taken again
        self.last_said: str | None = None

    def take(self, kind: str, sub: str, p: dict[str, Any], ts: str | None) -> bool:
        s = self.session
        if kind == "session_meta":
            if not self.named and isinstance(p.get("id"), str):
                s.session_id, self.named = p["id"], True
            s.project = s.project or _str(p.get("cwd"))
            s.started = s.started or _str(p.get("timestamp"))
            return True
        if kind == "turn_context":
            s.model = _str(p.get("model")) or s.model
            s.project = s.project or _str(p.get("cwd"))
            return True
        if kind == "compacted":
            s.events.append(SessionEvent("compaction", None, ts))
            return True
        if kind == "response_item":
            return self._item(sub, p, ts)
        if kind == "event_msg":
            return self._event(sub, p, ts)
        return False

    def _item(self, sub: str, p: dict[str, Any], ts: str | None) -> bool:
        if sub in _CALLS:
            fn = p.get("function")
            name = p.get("name") or (fn.get("name") if isinstance(fn, dict) else None)
            raw = p.get("arguments", p.get("input", p.get("action")))
            call = ToolCall(str(name or sub), parse_arguments(raw), _str(p.get("call_id")))
            call.timestamp = ts
            self.session.add_call(call)
            self.last_call = call
            if call.call_id:
                self.calls[call.call_id] = call
            self._assistant(["tool_use"], "", ts)
            return True
        if sub in _OUTPUTS:
            self.session.add_message(Message("user", epoch(ts), ["tool_result"]))
            answered = self.calls.get(str(p.get("call_id")))
            if answered is None and sub == "tool_result":
                answered = self.last_call
            if answered is not None:
                call = answered
                output = p.get("output", p.get("result"))
                call.output_chars += len(as_text(output))
                code = exit_code_of(output)
                if code not in (None, 0):
                    self._fail(call, f"exit code {code}: {as_text(output)}")
            return True
        if sub == "message":
            self.session.messages += 1
            if p.get("role") == "assistant":
                self._assistant(["text"], as_text(p.get("content")), ts)
            elif p.get("role") == "user":
                self._said(typed(as_text(p.get("content"))), False, ts)
        return False

    def _said(self, text: str, images: bool, ts: str | None) -> None:
        """The user's own words, once (see the module: two copies of them may be logged)."""
        if not text or text == self.last_said:
            return
        self.last_said = text
        self.session.events.append(SessionEvent("user_prompt", snippet(text), ts))
        said = Message("user", epoch(ts), ["text"] + (["image"] if images else []))
        said.add_text(text)
        self._user(said)

    def _assistant(self, parts: list[str], text: str, ts: str | None) -> None:
        msg = Message("assistant", epoch(ts), parts, model=self.session.model)
        msg.add_text(text)
        self.session.add_message(msg)
        if self.usage_ahead is not None:
            msg.input_tokens, msg.output_tokens = self.usage_ahead
            self.usage_ahead = None
        else:
            self.unbilled.append(msg)

    def _user(self, msg: Message) -> None:
        self.session.add_message(msg)
        self.unbilled.clear()
        self.usage_ahead = None

    def _last_usage(self, info: Any) -> None:
        last = info.get("last_token_usage") if isinstance(info, dict) else None
        if not isinstance(last, dict):
            return
        usage = (_int(last.get("input_tokens")), _int(last.get("output_tokens")))
        if self.unbilled:
            msg = self.unbilled.pop()
            msg.input_tokens, msg.output_tokens = usage
            self.unbilled.clear()
        else:
            self.usage_ahead = usage

    def _event(self, sub: str, p: dict[str, Any], ts: str | None) -> bool:
        s = self.session
        call = self.calls.get(str(p.get("call_id")))
        if sub == "user_message":
            self._said(typed(as_text(p.get("message"))), bool(p.get("images")), ts)
        elif sub == "token_count":
            self._usage(p.get("info"))
            self._last_usage(p.get("info"))
        elif sub == "exec_command_end":
            code = p.get("exit_code")
            if call is not None and isinstance(code, int) and code != 0:
                self._fail(call, f"exit code {code}: {as_text(p.get('stderr') or p)}")
        elif sub == "patch_apply_end":
            if call is not None and p.get("success") is False:
                self._fail(call, as_text(p.get("stderr")) or "patch failed")
        elif sub == "mcp_tool_call_end":
            result = p.get("result")
            ok = result.get("Ok") if isinstance(result, dict) else None
            failed = isinstance(result, dict) and (
                "Err" in result or (isinstance(ok, dict) and ok.get("isError") is True)
            )
            if call is not None and isinstance(result, dict) and failed:
                self._fail(call, as_text(result.get("Err") or ok))
        elif sub == "turn_aborted":
            s.events.append(SessionEvent("interrupt", _str(p.get("reason")), ts))
            self._user(Message("user", epoch(ts), interrupted=True))
        elif sub == "error":
            s.events.append(SessionEvent("error", snippet(as_text(p.get("message"))), ts))
        elif sub == "context_compacted":
            s.events.append(SessionEvent("compaction", None, ts))
        else:
            return False
        return True

    def _fail(self, call: ToolCall, text: str) -> None:
        call.is_error = True
        call.error = snippet(text)

    def _usage(self, info: Any) -> None:
        if not isinstance(info, dict):
            return
        total = info.get("total_token_usage")
        if isinstance(total, dict):
            fresh, cached = _int(total.get("input_tokens")), _int(total.get("cached_input_tokens"))
            self.total = Usage(max(fresh - cached, 0), _int(total.get("output_tokens")), cached)
        elif "prompt" in info or "completion" in info:
            self.total = Usage(_int(info.get("prompt")), _int(info.get("completion")))

    def finish(self) -> None:
        if self.total is not None:
            self.session.usage = self.total


#: Context Codex puts into the user's messages, which the user never typed.
_INJECTED = re.compile(
    r"<(environment_context|user_instructions|INSTRUCTIONS)>.*?</\1>"
    r"|^# AGENTS\.md instructions for [^\n]*$",
    re.DOTALL | re.MULTILINE,
)


def typed(text: str) -> str:
    """What the user typed in a user message: without the context Codex injected into it."""
    return _INJECTED.sub("", text).strip()


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) else 0
