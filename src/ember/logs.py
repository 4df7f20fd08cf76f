"""Logging set-up for the command-line edge only (the library never installs handlers).

Lines are ``time level logger message``; messages carry ``key=value`` pairs. Prompts, answers
and API keys are never logged at INFO or above.
"""

from __future__ import annotations

import logging
import sys


def configure(level: str = "info") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s", "%H:%M:%S")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("uvicorn.error").setLevel(level.upper())
