"""A small agent framework per wire format, as a library-mode user writes one.

Each calls the model with the official async SDK (``with_raw_response``: the exact request
bytes and the raw answer), keeps ``memory_propose`` in its tool list on every turn, asks the
policy before running a tool call, and tells the library about every call (``note``) and
every user message (``user_message``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai

from ember.protocols.tooling import TOOLING, ToolSpec
from ember.shadow.library import ShadowLibrary, guard_tool_call, memory_propose_tool
from ember.testing.agent import TOOLS, system_prompt

CWD = "/home/dev/library-project"
KEY = "sk-framework"


def agent_tools(protocol: str) -> list[dict[str, Any]]:
    """The framework's own tools in ``protocol``'s format, memory_propose last (resident)."""
    ops = TOOLING[protocol]
    own = [ops.definition(ToolSpec(t["name"], t["description"], t["input_schema"])) for t in TOOLS]
    return [*own, memory_propose_tool(protocol)]


def instructions() -> str:
    return "\n\n".join(b["text"] for b in system_prompt(CWD))


@dataclass
class Framework:
    """One conversation (session) of a framework; ``sent`` keeps each request's bytes."""

    protocol: str
    url: str
    lib: ShadowLibrary
    session: str
    model: str
    history: list[dict[str, Any]] = field(default_factory=list)
    sent: list[bytes] = field(default_factory=list)
    refusals: list[dict[str, Any]] = field(default_factory=list)

    async def user(self, text: str) -> dict[str, Any]:
        """The user speaks: the library drops its shadow work, then the turn runs; every
        tool call is refused or answered, until the model answers in text."""
        self.lib.user_message(self.session)
        self._add_user(text)
        answer = await self._call()
        while calls := self._calls(answer):
            results = []
            for call_id, name in calls:
                refusal = guard_tool_call(self.protocol, name, call_id)
                if refusal is not None:
                    self.refusals.append(refusal)
                    results.append(refusal)
                else:
                    results.append(self._tool_output(call_id, "ok"))
            self._add_results(results)
            answer = await self._call()
        return answer

    async def _call(self) -> dict[str, Any]:
        raw = await self._create()
        request = raw.http_request
        self.sent.append(request.content)
        await self.lib.note(
            self.session,
            project=CWD,
            protocol=self.protocol,
            request=request.content,
            answer=raw.http_response.content,
            headers=list(request.headers.multi_items()),
        )
        answer: dict[str, Any] = json.loads(raw.http_response.content)
        self._add_answer(answer)
        return answer

    async def _create(self) -> Any:
        if self.protocol == "anthropic":
            async with anthropic.AsyncAnthropic(base_url=self.url, api_key=KEY, max_retries=0) as a:
                return await a.messages.with_raw_response.create(
                    model=self.model,
                    max_tokens=1024,
                    system=system_prompt(CWD),  # type: ignore[arg-type]
                    tools=agent_tools("anthropic"),  # type: ignore[arg-type]
                    messages=self.history,  # type: ignore[arg-type]
                )
        async with openai.AsyncOpenAI(base_url=self.url + "/v1", api_key=KEY, max_retries=0) as o:
            if self.protocol == "openai_chat":
                return await o.chat.completions.with_raw_response.create(
                    model=self.model,
                    messages=[{"role": "system", "content": instructions()}, *self.history],  # type: ignore[list-item]
                    tools=agent_tools("openai_chat"),  # type: ignore[arg-type]
                )
            return await o.responses.with_raw_response.create(
                model=self.model,
                instructions=instructions(),
                input=self.history,  # type: ignore[arg-type]
                tools=agent_tools("openai_responses"),  # type: ignore[arg-type]
            )

    # -- the conversation in each wire format -------------------------------------------------

    def _add_user(self, text: str) -> None:
        if self.protocol == "anthropic":
            # One moving breakpoint on the latest user message, as Claude Code does.
            for m in self.history:
                if m["role"] == "user" and isinstance(m["content"], list):
                    for block in m["content"]:
                        block.pop("cache_control", None)
            block = {"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}
            self.history.append({"role": "user", "content": [block]})
        else:
            self.history.append({"role": "user", "content": text})

    def _add_answer(self, answer: dict[str, Any]) -> None:
        if self.protocol == "anthropic":
            self.history.append({"role": "assistant", "content": answer["content"]})
        elif self.protocol == "openai_chat":
            message = dict(answer["choices"][0]["message"])
            self.history.append({k: v for k, v in message.items() if v is not None})
        else:
            self.history.extend(answer["output"])

    def _calls(self, answer: dict[str, Any]) -> list[tuple[str, str]]:
        if self.protocol == "anthropic":
            return [(b["id"], b["name"]) for b in answer["content"] if b["type"] == "tool_use"]
        if self.protocol == "openai_chat":
            calls = answer["choices"][0]["message"].get("tool_calls") or []
            return [(c["id"], c["function"]["name"]) for c in calls]
        return [(i["call_id"], i["name"]) for i in answer["output"] if i["type"] == "function_call"]

    def _tool_output(self, call_id: str, text: str) -> dict[str, Any]:
        if self.protocol == "anthropic":
            return {"type": "tool_result", "tool_use_id": call_id, "content": text}
        if self.protocol == "openai_chat":
            return {"role": "tool", "tool_call_id": call_id, "content": text}
        return {"type": "function_call_output", "call_id": call_id, "output": text}

    def _add_results(self, results: list[dict[str, Any]]) -> None:
        if self.protocol == "anthropic":
            self.history.append({"role": "user", "content": results})
        else:
            self.history.extend(results)
