"""TOIN: what the tool outputs passing through the proxy look like, learned by watching.

Observation-only, always: TOIN never changes a request (``stage``), and what it learns reaches
anything else only through ``ember toin publish`` at a deploy boundary (``publish``). Private
by not storing: structure hashes, hashed field names, counts and rates -- never a value
(``privacy``). Keyed by ``(auth_mode, model_family, structure_hash)`` with an explicit
``unknown`` (``keys``); bounded to 10k patterns / 128 MB in the global ``stats.db``
(``store``); instances pool what they learned by export/import, weighted by sample size, with
a confidence that grows with observations and users (``patterns``).
"""

from ember.learn.toin.keys import UNKNOWN, PatternKey
from ember.learn.toin.patterns import Pattern, confidence
from ember.learn.toin.publish import DEFAULT_MIN_OBSERVATIONS, Published, render
from ember.learn.toin.stage import ToinStage
from ember.learn.toin.store import ToinImportError

__all__ = [
    "DEFAULT_MIN_OBSERVATIONS",
    "UNKNOWN",
    "Pattern",
    "PatternKey",
    "Published",
    "ToinImportError",
    "ToinStage",
    "confidence",
    "render",
]
