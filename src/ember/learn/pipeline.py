"""``ember learn`` as a library call: scan, find loops, build the digest, ask the model once,
weigh its recommendations by measured loop waste.

Sessions are folded one at a time (loops are found per session as it is read, the digest keeps
what fits), so memory follows the digest budget, not the size of the logs. A failed model call
is part of the result (``error``), with the scan and loops still there to report: the caller
says the analysis failed, it never shows an empty list as if the logs held nothing.

Write-back takes :attr:`LearnResult.recommendations` (``ember.learn.model.Recommendation``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ember.learn.analyze import (
    SYSTEM_PROMPT,
    AnalysisFailed,
    Answer,
    Backend,
    parse_recommendations,
)
from ember.learn.digest import DEFAULT_BUDGET_TOKENS, Digest, DigestBuilder
from ember.learn.logs.base import LogReader, Progress
from ember.learn.logs.discovery import Scan, scan
from ember.learn.loops import Loop, apply_loop_weighting, detect_loops
from ember.learn.model import Recommendation

__all__ = ["LearnResult", "analyse", "fold"]


@dataclass
class LearnResult:
    scan: Scan
    loops: list[Loop]
    digest: Digest
    recommendations: list[Recommendation]
    #: items of the model's answer that were not usable recommendations
    unusable: int = 0
    #: which model answered (None: no model was asked)
    backend: str | None = None
    #: why the model call failed (None: it did not fail)
    error: str | None = None
    model_seconds: float = 0.0
    #: the model's answer when the call was answered (its usage is what the call cost), even
    #: when the answer held no usable recommendations
    answer: Answer | None = None
    #: wall-clock time the model call started (seconds since the epoch)
    started: float = 0.0

    @property
    def failed(self) -> bool:
        return self.error is not None


def fold(
    available: Mapping[str, LogReader],
    found: Scan,
    *,
    project: Path | None = None,
    progress: Progress | None = None,
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
) -> DigestBuilder:
    """Read every session of ``found`` once, into a digest builder (loops included)."""
    builder = DigestBuilder(budget_tokens)
    for session in scan(available, found, project, progress):
        builder.add(session, detect_loops(session))
    return builder


def analyse(
    builder: DigestBuilder, found: Scan, backend: Backend | None, learned: str | None = None
) -> LearnResult:
    """The digest, and (unless ``backend`` is None) the one model call over it."""
    digest = builder.build(learned)
    result = LearnResult(found, list(builder.loops), digest, [])
    if backend is None:
        return result
    result.backend = backend.label
    result.started = time.time()
    start = time.monotonic()
    try:
        result.answer = backend.complete(SYSTEM_PROMPT, digest.text)
        recommendations, result.unusable = parse_recommendations(result.answer.text)
    except AnalysisFailed as exc:
        result.error = str(exc)
        result.answer = result.answer or exc.answer
        return result
    finally:
        result.model_seconds = time.monotonic() - start
    result.recommendations = apply_loop_weighting(recommendations, builder.loops)
    return result
