"""Where the real agent-log fixtures are: ``../shared/fixtures/agent-logs`` next to the
checkout (a worktree under ``wt/`` finds it one level further up).

They are third-party samples kept beside the repository, not in it: a plain clone has none, and
the tests that read them skip, saying so (``needs_agent_logs``), instead of failing a user's
``make test``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_CANDIDATES = [ROOT.parent / "shared", ROOT.parent.parent / "shared"]
SHARED = next((p for p in _CANDIDATES if p.is_dir()), _CANDIDATES[0])
AGENT_LOGS = SHARED / "fixtures" / "agent-logs"

#: Marks a test (or a module, as ``pytestmark``) that reads the third-party agent logs.
needs_agent_logs = pytest.mark.skipif(
    not AGENT_LOGS.is_dir(),
    reason=f"the third-party agent-log samples are not beside this checkout ({AGENT_LOGS}); "
    "see their SOURCES.md where they are",
)
