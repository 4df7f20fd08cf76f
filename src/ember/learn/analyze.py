"""The analysis: one model call over the digest, its answer parsed into recommendations.

No regexes over the logs, no hard-coded heuristics: the model reads the digest and says what an
agent should know next time. Exactly one call per analysis, through either an API endpoint
(Anthropic Messages, or Chat Completions under an OpenAI-compatible ``/v1`` base URL, each
through its official SDK) or an
agent CLI (``ember.learn.cli_backend``). Any failure — unreachable endpoint, error status,
timeout, an answer with no JSON — raises :class:`AnalysisFailed` with what went wrong, so the
caller reports it instead of printing "0 recommendations" as if the logs held nothing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anthropic
import openai
import orjson

from ember.learn.cli_backend import CLI_COMMANDS, CliFailed, answer_of, run_cli
from ember.learn.model import LearnError, Recommendation
from ember.protocols.anthropic import AnthropicAdapter
from ember.protocols.base import Usage
from ember.protocols.openai_chat import openai_usage

#: Sent with every model call of ``ember learn``: when ``--llm-url`` (or the agent CLI it runs)
#: points at an ember proxy, the call is ember's own, not a session of the user's — without it
#: the proxy added its verbosity block to learn's prompt and recorded the call as a client
#: "main" session. The proxy forwards it untouched and records nothing (learn accounts its own
#: calls, with their origin); a provider ignores the header, and the proxy never forwards it.
OWN_CALL_HEADERS = {"x-ember-bypass": "1"}

__all__ = [
    "SYSTEM_PROMPT",
    "AnalysisFailed",
    "Answer",
    "ApiBackend",
    "Backend",
    "CliBackend",
    "parse_recommendations",
]

MAX_ANSWER_TOKENS = 8192

SYSTEM_PROMPT = """\
You read a digest of a coding agent's own session logs and write what the agent should know \
at the start of its next session in this project, so it stops wasting tokens and time.

Look for: loops (the same call repeated; listed first, with the tokens they measurably \
wasted), failing commands and their working replacements, wrong paths and where files really \
are, environment facts (tools, versions, how to run tests), and the user's stated preferences.

Answer with one fenced JSON block and nothing else:
```json
{"recommendations": [{"section": "Commands", "text": "Run tests with `make test`; \
`pytest` alone fails (missing PYTHONPATH).", "evidence": "3 failed pytest calls in session X", \
"estimated_tokens_saved": 1200}]}
```
Rules:
- Each text is one short, concrete, imperative instruction an agent can follow.
- `section` is a short heading (e.g. Commands, Paths, Environment, Loops to avoid, Preferences).
- A section you emit replaces the previously learned section of that name entirely: emit its \
complete updated content (keep items still true, revise, drop one only on clear new evidence).
- Sections you do not emit are kept as they are: do not repeat them unchanged.
- Only write what the logs support; if nothing is worth writing, answer \
{"recommendations": []}.
"""

_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.DOTALL)


class AnalysisFailed(LearnError):
    """The model call did not produce an analysis; the message says why. ``answer`` is what
    came back when the call itself was answered (and billed), so it is still accounted."""

    def __init__(self, message: str, *, answer: Answer | None = None) -> None:
        super().__init__(message)
        self.answer = answer


@dataclass(frozen=True)
class Answer:
    """The model's answer: its text, and for an API call the model that answered and the usage
    it reported (what the call is accounted with; None through an agent CLI)."""

    text: str
    model: str | None = None
    usage: Usage | None = None


@dataclass(frozen=True)
class ApiBackend:
    """A model behind an API base URL: ``protocol`` ``anthropic`` (Messages) or ``openai``
    (Chat Completions under a base URL ending in ``/v1``)."""

    url: str
    model: str
    api_key: str
    protocol: str = "anthropic"
    timeout: float = 600.0

    @property
    def label(self) -> str:
        return f"{self.protocol} API {self.url} ({self.model})"

    def complete(self, system: str, prompt: str) -> Answer:
        try:
            if self.protocol == "openai":
                return self._openai(system, prompt)
            return self._anthropic(system, prompt)
        except (anthropic.APIError, openai.APIError) as exc:
            raise AnalysisFailed(f"the model call to {self.url} failed: {_describe(exc)}") from exc

    def _anthropic(self, system: str, prompt: str) -> Answer:
        client = anthropic.Anthropic(
            base_url=self.url,
            api_key=self.api_key,
            timeout=self.timeout,
            max_retries=0,
            default_headers=OWN_CALL_HEADERS,
        )
        with client:
            message = client.messages.create(
                model=self.model,
                max_tokens=MAX_ANSWER_TOKENS,
                system=system,
                messages=[{"role": "user", "content": prompt}],
            )
        text = "".join(b.text for b in message.content if b.type == "text")
        usage = AnthropicAdapter().usage(message.usage.model_dump())
        return Answer(text, message.model or self.model, usage)

    def _openai(self, system: str, prompt: str) -> Answer:
        client = openai.OpenAI(
            base_url=self.url,
            api_key=self.api_key,
            timeout=self.timeout,
            max_retries=0,
            default_headers=OWN_CALL_HEADERS,
        )
        with client:
            completion = client.chat.completions.create(
                model=self.model,
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": prompt},
                ],
            )
        raw = completion.usage.model_dump() if completion.usage is not None else None
        usage = openai_usage(raw, "prompt_tokens", "completion_tokens", "prompt_tokens_details")
        answer = Answer("", completion.model or self.model, usage if raw is not None else None)
        if not completion.choices:
            raise AnalysisFailed(
                f"{self.url} answered a chat completion with no choices", answer=answer
            )
        return Answer(completion.choices[0].message.content or "", answer.model, answer.usage)


@dataclass(frozen=True)
class CliBackend:
    """An agent CLI asked once, the prompt on its stdin (see ``cli_backend``)."""

    cli: str
    idle_timeout: float = 60.0
    wall_timeout: float = 600.0
    argv: tuple[str, ...] = ()
    env: Mapping[str, str] | None = field(default=None, compare=False)

    @property
    def label(self) -> str:
        return f"{self.cli} CLI"

    def complete(self, system: str, prompt: str) -> Answer:
        argv = self.argv or tuple(CLI_COMMANDS[self.cli])
        try:
            run = run_cli(
                argv,
                f"{system}\n\n{prompt}",
                idle_timeout=self.idle_timeout,
                wall_timeout=self.wall_timeout,
                env=self._env(),
            )
            return Answer(answer_of(self.cli, run.stdout))
        except CliFailed as exc:
            raise AnalysisFailed(str(exc)) from exc

    def _env(self) -> Mapping[str, str] | None:
        """Claude Code sends ``ANTHROPIC_CUSTOM_HEADERS`` lines with every request: learn's
        run of it carries ``OWN_CALL_HEADERS`` that way (a Claude settings file that sets the
        variable itself wins over this, as it does over any environment)."""
        if self.cli != "claude":
            return self.env
        env = dict(self.env if self.env is not None else os.environ)
        lines = [ln for ln in env.get("ANTHROPIC_CUSTOM_HEADERS", "").splitlines() if ln.strip()]
        lines += [f"{k}: {v}" for k, v in OWN_CALL_HEADERS.items()]
        env["ANTHROPIC_CUSTOM_HEADERS"] = "\n".join(lines)
        return env


Backend = ApiBackend | CliBackend


def _describe(exc: Exception) -> str:
    if isinstance(exc, anthropic.APIStatusError | openai.APIStatusError):
        return f"HTTP {exc.status_code}: {exc.message}"
    if isinstance(exc, anthropic.APITimeoutError | openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, anthropic.APIConnectionError | openai.APIConnectionError):
        return f"cannot connect ({exc.__cause__ or exc})"
    return f"{type(exc).__name__}: {exc}"


def parse_recommendations(answer: str) -> tuple[list[Recommendation], int]:
    """The recommendations in a model's answer, and how many items were unusable.

    Raises :class:`AnalysisFailed` when the answer holds no JSON object with a
    ``recommendations`` list (an answer cut short, a refusal, prose instead of JSON).
    """
    doc = _json_block(answer)
    items = doc.get("recommendations") if doc is not None else None
    if not isinstance(items, list):
        shown = answer.strip()[:200] or "(empty)"
        raise AnalysisFailed(f"the model's answer had no recommendations JSON block: {shown!r}")
    out: list[Recommendation] = []
    bad = 0
    for item in items:
        rec = _recommendation(item)
        if rec is None:
            bad += 1
        else:
            out.append(rec)
    return out, bad


def _json_block(answer: str) -> dict[str, Any] | None:
    candidates = [m.group(1) for m in _FENCE.finditer(answer)]
    start, end = answer.find("{"), answer.rfind("}")
    if start != -1 and end > start:
        candidates.append(answer[start : end + 1])
    for text in candidates:
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError:
            continue
        if isinstance(doc, dict):
            return doc
    return None


def _recommendation(item: Any) -> Recommendation | None:
    if not isinstance(item, dict):
        return None
    section, text = item.get("section"), item.get("text")
    if not isinstance(section, str) or not isinstance(text, str):
        return None
    if not section.strip() or not text.strip():
        return None
    saved = item.get("estimated_tokens_saved")
    evidence = item.get("evidence")
    if isinstance(evidence, str):
        evidence = [evidence]
    return Recommendation(
        section.strip(),
        text.strip(),
        saved if isinstance(saved, int) and saved > 0 else 0,
        False,
        [str(e) for e in evidence] if isinstance(evidence, list) else [],
    )
