"""Ember: a token-economy and memory layer for LLM agents.

The public API is what ``__all__`` lists, here and in the modules the README imports from
(``ember.compose``, ``ember.config``, ``ember.shadow.library``, ``ember.memory.library``;
``tests/test_public_api.py`` keeps the two in step); everything else is internal and may
change.
"""

from __future__ import annotations

from ember.errors import (
    ConfigError,
    EmberError,
    ProjectError,
    ProtocolError,
    UpstreamError,
    UpstreamTimeout,
)

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "EmberError",
    "ProjectError",
    "ProtocolError",
    "UpstreamError",
    "UpstreamTimeout",
    "__version__",
]
