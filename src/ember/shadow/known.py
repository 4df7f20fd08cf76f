"""What a shadow read is shown as already remembered, asked of memory without failing the run.

The question lists the facts the session was given and those its earlier reads stored, each
with its id, so that a correction can name what it replaces (``supersedes``). Memory answers
through ``question.Known`` (wired by ``ShadowCore``); when it cannot, the read goes on without
the list rather than not at all.
"""

from __future__ import annotations

import logging

from ember.errors import StorageUnavailable
from ember.project import ProjectRef
from ember.shadow import question

log = logging.getLogger(__name__)


async def remembered(
    known: question.Known | None, project: ProjectRef, session_id: str
) -> list[question.Remembered]:
    """What the question shows as already remembered; nothing when memory cannot say (the
    run goes on without: a fact it proposes is then only merged with one it restates)."""
    if known is None:
        return []
    try:
        return (await known(project, session_id))[: question.MAX_KNOWN]
    except StorageUnavailable:
        return []
    except Exception:
        log.exception("reading what session %s remembers failed", session_id)
        return []
