"""Semantic coverage: a light model pairs steward facts with shadow proposals that say the same
thing — reviewable pairs, not ground truth.

Guard rails, each against a way the measure could lie:
- one call per group (a session's facts of both sides); a group with only one side makes no
  call — there is nothing to pair, and its facts simply count as not covered;
- the model answers index pairs; an index out of range (or anything but a list of two-int
  pairs) raises ``PairingError``: a pairing that breaks its contract is not trusted, and no
  pair of it is reported — the model must not make up a fact that is not there;
- dry-run makes no call at all (it says which groups would be sent);
- without ``--semantic`` or a key for the light model, nothing is called and the section says
  it was not computed, and why. Each call is accounted with origin ``compare``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ember.config import Settings
from ember.errors import EmberError
from ember.exchange import UpstreamClient
from ember.prices import PriceTable
from ember.protocols import ANTHROPIC, OPENAI_CHAT
from ember.protocols.base import ProtocolAdapter
from ember.protocols.plain import plain_request
from ember.shadow import calls
from ember.shadow.compare import FactRow, Share, pair_json, usd_sum
from ember.shadow.question import parse_answer
from ember.shadow.settings import ShadowSettings
from ember.store.database import Database

LABEL = "reviewable pairs, not ground truth"
ORIGIN = "compare"
#: The light model when ``light_model`` is not set.
DEFAULT_LIGHT_MODEL = "claude-haiku-4-5"
ANTHROPIC_VERSION = "2023-06-01"
#: Output allowed for one group's pairs.
MAX_TOKENS = 2048

PAIRING_SYSTEM = """You compare two lists of facts that two extractors took from the same \
coding-agent session. Pair a fact of list A with a fact of list B only when both state the \
same thing (the same decision, convention or outcome), even if worded differently. Facts that \
only share a topic are not a pair. Answer with one fenced json block and nothing else:
```json
{"pairs": [[0, 2], [1, 0]]}
```
where each pair is [index in A, index in B]. If nothing pairs, answer {"pairs": []}."""


class PairingError(EmberError):
    """The light model's pairing broke its contract (no pairs, an index out of range...)."""


@dataclass(frozen=True)
class Group:
    """The facts of one session, both sides."""

    session_id: str
    steward: tuple[FactRow, ...]
    shadow: tuple[FactRow, ...]


def groups(steward: Sequence[FactRow], shadow: Sequence[FactRow]) -> list[Group]:
    by_session: dict[str, tuple[list[FactRow], list[FactRow]]] = defaultdict(lambda: ([], []))
    for f in steward:
        by_session[f.session_id][0].append(f)
    for f in shadow:
        by_session[f.session_id][1].append(f)
    return [Group(s, tuple(a), tuple(b)) for s, (a, b) in sorted(by_session.items())]


def prompt(group: Group) -> tuple[str, str]:
    """(system, user) for one group."""
    a = "\n".join(f"A{i}: {f.content}" for i, f in enumerate(group.steward))
    b = "\n".join(f"B{i}: {f.content}" for i, f in enumerate(group.shadow))
    return PAIRING_SYSTEM, f"List A:\n{a}\n\nList B:\n{b}"


def parse_pairs(text: str, n_steward: int, n_shadow: int) -> list[tuple[int, int]]:
    """The index pairs of an answer; raises ``PairingError`` saying what broke the contract."""
    try:
        batch = parse_answer(text)
    except ValueError as exc:
        raise PairingError(f"the pairing answer is unreadable: {exc}") from exc
    pairs = batch.get("pairs") if isinstance(batch, dict) else None
    if not isinstance(pairs, list):
        raise PairingError('the pairing answer is not {"pairs": [[a, b], ...]}')
    out: list[tuple[int, int]] = []
    for pair in pairs:
        if (
            not isinstance(pair, list)
            or len(pair) != 2
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in pair)
        ):
            raise PairingError(f"the pairing answer holds {pair!r}, not a pair of two indices")
        a, b = pair
        if not (0 <= a < n_steward and 0 <= b < n_shadow):
            raise PairingError(
                f"the pairing answer pairs A{a} with B{b}, but list A has {n_steward} facts "
                f"and list B has {n_shadow}: an index out of range is never a pair"
            )
        out.append((a, b))
    return sorted(set(out))


#: ``(session_id, system, user)`` -> (the answer's text, what the call cost in USD or None).
#: Raises ``PairingError`` (or ``EmberError``) when the call fails.
Ask = Callable[[str, str, str], Awaitable[tuple[str, float | None]]]


def not_computed(why: str) -> dict[str, Any]:
    return {"computed": False, "why": why, "label": LABEL}


async def semantic_coverage(
    steward: Sequence[FactRow],
    shadow: Sequence[FactRow],
    ask: Ask,
    *,
    model: str,
    dry_run: bool = False,
) -> dict[str, Any]:
    """The semantic section of the report. A call that fails or an answer that breaks the
    contract makes the whole section "not computed", with the error: partial pairs would
    understate coverage without saying so."""
    todo = [g for g in groups(steward, shadow) if g.steward and g.shadow]
    one_sided = len(groups(steward, shadow)) - len(todo)
    if dry_run:
        out = not_computed("dry run: no call was made")
        out["would_call"] = [
            {"session_id": g.session_id, "steward": len(g.steward), "shadow": len(g.shadow)}
            for g in todo
        ]
        out["groups_with_one_side"] = one_sided
        return out
    pairs: list[tuple[str, FactRow, FactRow]] = []
    costs: list[float | None] = []
    for g in todo:
        system, user = prompt(g)
        try:
            text, usd = await ask(g.session_id, system, user)
            costs.append(usd)
            found = parse_pairs(text, len(g.steward), len(g.shadow))
        except EmberError as exc:
            out = not_computed(f"session {g.session_id}: {exc}")
            out["calls"] = len(costs)
            out["estimated_usd"] = usd_sum(costs)
            return out
        pairs.extend((g.session_id, g.steward[a], g.shadow[b]) for a, b in found)
    return {
        "computed": True,
        "label": LABEL,
        "method": f"{model} paired the facts of each session (one call per session with "
        "facts on both sides); every pair is the model's judgment, to be reviewed",
        "model": model,
        "calls": len(todo),
        "groups_with_one_side": one_sided,
        "estimated_usd": usd_sum(costs),
        "steward_covered_by_shadow": Share(
            len({a.id for _, a, _ in pairs}), len(steward)
        ).to_json(),
        "shadow_covered_by_steward": Share(len({b.id for _, _, b in pairs}), len(shadow)).to_json(),
        "pairs": [
            {"session_id": s} | pair_json(a.id, b.id, {a.id: a.content, b.id: b.content})
            for s, a, b in pairs
        ],
    }


@dataclass(frozen=True)
class LightEndpoint:
    """Where and how the light model is called with ember's own key."""

    model: str
    adapter: ProtocolAdapter
    url: str
    headers: list[tuple[str, str]]


def light_endpoint(settings: Settings) -> LightEndpoint | None:
    """The light model with ``light_api_key``; None without a key. A ``claude-*`` model is
    called on the Anthropic Messages API, anything else on OpenAI Chat Completions."""
    key = settings.section(ShadowSettings).light_api_key
    if not key:
        return None
    model = settings.section(ShadowSettings).light_model or DEFAULT_LIGHT_MODEL
    if model.startswith("claude"):
        headers = [("x-api-key", key), ("anthropic-version", ANTHROPIC_VERSION)]
        return LightEndpoint(model, ANTHROPIC, settings.anthropic_url + "/v1/messages", headers)
    url = settings.openai_url + "/chat/completions"
    return LightEndpoint(model, OPENAI_CHAT, url, [("authorization", f"Bearer {key}")])


def model_ask(
    upstream: UpstreamClient,
    endpoint: LightEndpoint,
    prices: PriceTable,
    db: Database,
    project: str | None,
) -> Ask:
    """An ``Ask`` that calls the light model, each call accounted (origin ``compare``) under
    the session whose facts it paired."""

    async def ask(session_id: str, system: str, user: str) -> tuple[str, float | None]:
        body = plain_request(endpoint.adapter.name, endpoint.model, system, user, MAX_TOKENS)
        started = time.perf_counter()
        result = await calls.call(
            upstream,
            endpoint.adapter,
            endpoint.url,
            endpoint.headers,
            body,
            endpoint.model,
            prices,
        )
        calls.account(
            db,
            result,
            session_id=session_id,
            project=project,
            protocol=endpoint.adapter.name,
            origin=ORIGIN,
            started=started,
            prices=prices,
        )
        if not result.ok or result.answer is None:
            raise PairingError(f"the light model call failed: {result.error}")
        return result.answer.text, result.usage.usd

    return ask
