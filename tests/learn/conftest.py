"""Where the real agent-log fixtures are: ``../shared/fixtures/agent-logs`` next to the
checkout (a worktree under ``wt/`` finds it one level further up)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_CANDIDATES = [ROOT.parent / "shared", ROOT.parent.parent / "shared"]
SHARED = next((p for p in _CANDIDATES if p.is_dir()), _CANDIDATES[0])
AGENT_LOGS = SHARED / "fixtures" / "agent-logs"
