"""Output shaping: request-side levers that make the model write less, without costing the
prompt cache: every edit splices into the client's own bytes and a level's block is the same
text on every turn, so the prefix the provider cached stays byte for byte what it was.

Pure policies -- ``policy`` (turn kinds, effort ranks, safety rules), ``verbosity`` (the
constant level texts), ``strata`` (strata and holdout arms), ``controller`` (AIMD), ``signals``
(interrupts, fast skips, asks for detail), ``levels`` (level resolution), ``savings``
(confidence bands, the ledger), ``echo`` -- are kept apart from the code that edits requests
(``apply``) or does I/O (``files``, ``recorder``). ``stage.ShapingStage`` wires them into the
proxy; ``from_logs`` learns a level and a baseline from agents' logs (``ember learn
--verbosity``).
"""

from __future__ import annotations

from ember.shaping.controller import ControllerState, Signal, observe
from ember.shaping.levels import ResolvedLevel, resolve_level
from ember.shaping.policy import EffortPlan, TurnKind, classify_turn, plan_effort
from ember.shaping.recorder import SavingsRecorder, read_state
from ember.shaping.stage import ShapingNote, ShapingStage
from ember.shaping.verbosity import CLOSE_TAG, DEFAULT_LEVEL, OPEN_TAG, steering_text

__all__ = [
    "CLOSE_TAG",
    "DEFAULT_LEVEL",
    "OPEN_TAG",
    "ControllerState",
    "EffortPlan",
    "ResolvedLevel",
    "SavingsRecorder",
    "ShapingNote",
    "ShapingStage",
    "Signal",
    "TurnKind",
    "classify_turn",
    "observe",
    "plan_effort",
    "read_state",
    "resolve_level",
    "steering_text",
]
