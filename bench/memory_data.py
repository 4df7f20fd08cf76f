"""Deterministic data for the memory benchmarks (same seed, same bytes, on every machine).

* ``short_memories(n)``: ~10-word project facts, for the import and search-latency runs.
* ``search_queries(n)``: short questions over the same vocabulary.
* ``conversation_set()``: a long multi-session coding-agent conversation — 40 sessions on 40
  days, 1,600+ turns — where the user states facts once, in one turn, among small talk, tool
  chatter and *distractors* (the same services in other sentences, the same kind of fact
  about other services). Each question paraphrases one fact and names the turn that holds
  the answer (its evidence). Some questions are answered by an exact token (a port, a flag,
  a ticket), some only by meaning (the question shares almost no word with the fact), most
  by both: the mix real agents ask.

    python bench/memory_data.py            # (re)write bench/data/memory_conversations.json
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

# The benches' entry point: the composition root installs the features' settings and
# tables (``ember.installed``) for the databases a bench opens in its own process.
import ember.compose  # noqa: F401

DATA = Path(__file__).with_name("data") / "memory_conversations.json"

SERVICES = [
    "billing-api", "ledger", "notifier", "search-indexer", "auth-gateway", "image-resizer",
    "report-builder", "payments-worker", "inventory-sync", "mail-relay", "feature-store",
    "audit-log", "session-cache", "geo-lookup", "pdf-renderer", "webhook-dispatcher",
    "user-profile", "rate-limiter", "export-service", "scheduler", "metrics-collector",
    "checkout-ui", "admin-console", "data-loader",
]  # fmt: skip
PEOPLE = ["Alice", "Bruno", "Chen", "Dana", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jules"]
DATABASES = ["PostgreSQL", "MySQL", "DynamoDB", "MongoDB", "CockroachDB", "SQLite", "Redis"]
FLAGS = ["legacy-auth", "new-cart", "dark-mode", "bulk-export", "v2-pricing", "fast-path"]
CAUSES = [
    ("a race in the connection pool", "concurrent connections"),
    ("timezone handling around midnight", "clock and date boundaries"),
    ("an expired test certificate", "TLS setup"),
    ("shared state between test cases", "test isolation"),
    ("a slow DNS resolver in CI", "name resolution"),
]
STYLES = [
    ("black with a line length of 100", "Python", "format my Python code"),
    ("prettier with single quotes", "TypeScript", "style TypeScript files"),
    ("gofmt plus goimports", "Go", "lay out Go sources"),
    ("rustfmt with edition 2021", "Rust", "format Rust crates"),
]
QUEUES = ["Kafka", "RabbitMQ", "SQS", "NATS", "Google Pub/Sub"]
CLOUDS = ["eu-west-1", "us-east-2", "ap-southeast-1", "eu-central-1"]
BRANCHES = ["main", "release", "staging", "develop", "hotfix", "gh-pages"]

SUBJECTS = ["The API", "Our CI", "The build", "The frontend", "The team", "The deploy script",
            "The test suite", "The CLI", "The docs site", "The cache layer"]  # fmt: skip
VERBS = ["uses", "requires", "avoids", "depends on", "switched to", "pins", "caches",
         "logs to", "retries with", "runs on"]  # fmt: skip
OBJECTS = ["PostgreSQL 16", "pytest with xdist", "a Redis cluster", "Python 3.12", "ruff",
           "Docker compose", "port 8443", "a nightly cron job", "TypeScript strict mode",
           "structured JSON logs", "exponential backoff", "feature flags", "OAuth device flow",
           "Kubernetes 1.30", "the staging bucket", "SQLite in WAL mode", "GraphQL",
           "a monorepo layout", "uv for environments", "Grafana dashboards"]  # fmt: skip
TAILS = ["since March", "for performance reasons", "after the outage", "per the style guide",
         "in production only", "when tests are flaky", "for the mobile client",
         "until the next release", "on weekends", "because of memory limits"]  # fmt: skip


def short_memories(n: int, seed: int = 7) -> list[str]:
    """``n`` distinct ~10-word facts (a ticket number keeps each one unique)."""
    rng = random.Random(seed)
    return [
        f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
        f"{rng.choice(TAILS)}, ticket {i}"
        for i in range(n)
    ]


def search_queries(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    forms = ["what does {s} use for {o}?", "why does {s} depend on {o}", "is {o} still used by {s}"]
    return [
        rng.choice(forms).format(s=rng.choice(SUBJECTS).lower(), o=rng.choice(OBJECTS))
        for _ in range(n)
    ]


# -- the conversation set ------------------------------------------------------------------------


def _fact(rng: random.Random, svc: str, kind: int) -> tuple[str, str, str, str]:
    """(statement, question, match, key) about ``svc``: ``match`` says what the question can
    match on, ``key`` what it identifies (two facts with one key would be two answers)."""
    if kind == 0:
        port = rng.randrange(3000, 9999)
        return (
            f"heads up: {svc} listens on port {port} in staging, not the default",
            f"which port is {svc} on in the staging environment?",
            "both",
            f"{svc}/{kind}",
        )
    if kind == 1:
        a, b = rng.sample(DATABASES, 2)
        return (
            f"we finished moving {svc} off {a}, it stores everything in {b} now",
            f"what database backs {svc} these days?",
            "both",
            f"{svc}/{kind}",
        )
    if kind == 2:
        who = rng.choice(PEOPLE)
        return (
            f"{who} is the on-call owner for {svc} this quarter",
            f"who should I page when {svc} goes down at night?",
            "both",
            f"{svc}/{kind}",
        )
    if kind == 3:
        flag = rng.choice(FLAGS)
        return (
            f"before you deploy {svc}, switch off the {flag} flag or the rollout fails",
            f"is there anything I must disable prior to shipping {svc}?",
            "both",
            f"{svc}/{kind}",
        )
    if kind == 4:
        cause, topic = rng.choice(CAUSES)
        return (
            f"the {svc} tests are flaky because of {cause}",
            f"why does the {svc} suite fail intermittently? something about {topic}?",
            "both",
            f"{svc}/{kind}",
        )
    if kind == 5:
        q = rng.choice(QUEUES)
        return (
            f"{svc} publishes its events through {q}",
            f"which message broker does {svc} emit to?",
            "both",
            f"{svc}/{kind}",
        )
    return _fact_other(rng, svc, kind)


def _fact_other(rng: random.Random, svc: str, kind: int) -> tuple[str, str, str, str]:
    """The kinds whose question does not name the service (a ticket, a language, a person)."""
    if kind == 6:
        ticket = f"OPS-{rng.randrange(1000, 9999)}"
        region = rng.choice(CLOUDS)
        return (
            f"the {region} outage is tracked in {ticket}, it hit {svc}",
            f"what did {ticket} break?",
            "keyword",
            f"ticket/{ticket}",
        )
    if kind == 7:
        style, lang, verb = rng.choice(STYLES)
        return (
            f"for anything in {lang} I want {style}, please remember that",
            f"how do I like to {verb}?",
            "meaning",
            f"lang/{lang}",
        )
    if kind == 8:
        branch = rng.choice(BRANCHES)
        return (
            f"never force-push to {branch}, it breaks the mirror",
            f"any rule about rewriting git history on {branch}?",
            "meaning",
            f"branch/{branch}",
        )
    who = rng.choice(PEOPLE)
    return (
        f"{who} prefers to do code reviews first thing in the morning",
        f"when is {who} most available to look at pull requests?",
        "meaning",
        f"person/{who}",
    )


def _filler(rng: random.Random, svc: str) -> str:
    return rng.choice(
        [
            f"can you open the {svc} README and summarise it",
            f"run the {svc} tests again please",
            f"let's look at the latest {svc} logs",
            f"rename the helper in {svc} to something clearer",
            f"the {svc} build is green now, thanks",
            f"add a docstring to the main function of {svc}",
            "ok, next task",
            "looks good to me",
            "can you explain that diff?",
            "let's take a break and continue later",
            f"bump the dependencies of {svc}",
            f"is the {svc} staging deploy finished?",
        ]
    )


def _assistant(rng: random.Random, svc: str) -> str:
    return rng.choice(
        [
            f"Done. I updated {svc} and the tests pass.",
            f"I looked at {svc}; the change touches three files.",
            "Noted.",
            f"Here is the summary of {svc}: it exposes a small HTTP API and a worker.",
            f"The {svc} logs show a few retries but no errors.",
            "I ran the linter; no findings.",
        ]
    )


def conversation_set(seed: int = 2026, sessions: int = 40, turns: int = 40) -> dict[str, Any]:
    """Sessions of user/assistant turns and questions naming their evidence turn."""
    rng = random.Random(seed)
    out_turns: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    stated: set[str] = set()  # one fact per key: one right answer per question
    for s in range(sessions):
        for t in range(turns):
            svc = rng.choice(SERVICES)
            tid = f"s{s:02d}t{t:02d}"
            if t % 2 == 1:
                out_turns.append({"id": tid, "session": s, "role": "assistant",
                                  "text": _assistant(rng, svc)})  # fmt: skip
                continue
            kind = rng.randrange(10)
            text, question, match, key = _fact(rng, svc, kind)
            if rng.random() < 0.3 and key not in stated:
                stated.add(key)
                questions.append({"question": question, "evidence": tid, "match": match})
            elif rng.random() < 0.3:
                other = rng.choice(SERVICES)
                text = _fact(rng, other, kind)[0].replace("heads up: ", "")
                text = "not sure yet, maybe " + text  # a near-miss: same shape, uncommitted
            else:
                text = _filler(rng, svc)
            out_turns.append({"id": tid, "session": s, "role": "user", "text": text})
    return {"seed": seed, "turns": out_turns, "questions": questions}


def main() -> None:
    data = conversation_set()
    DATA.parent.mkdir(exist_ok=True)
    DATA.write_text(json.dumps(data, indent=1) + "\n")
    n_t, n_q = len(data["turns"]), len(data["questions"])
    print(f"wrote {DATA} ({n_t} turns, {n_q} questions)", file=sys.stderr)


if __name__ == "__main__":
    main()
