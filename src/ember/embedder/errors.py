"""Errors of the embedder, inside ember's one hierarchy (``ember.errors.EmberError``).

    EmberError
     +-- EmbedderError            anything the embedder raises on purpose
          +-- EmbedderUnavailable no weights could be found or loaded; the message says the fix
          +-- EmbedderNotReady    the background load has not finished within the caller's timeout

Lower-layer failures (a corrupt safetensors file, an onnxruntime error, a network error from the
hub) are mapped onto ``EmbedderUnavailable`` at the boundary with ``raise ... from``, so memory code
only ever has to catch ``EmbedderError`` to fail open.
"""

from __future__ import annotations

from ember.errors import EmberError


class EmbedderError(EmberError):
    """Base class of every error the embedder raises deliberately."""


class EmbedderUnavailable(EmbedderError):
    """No usable weights: the message names what was tried and the command that fixes it."""


class EmbedderNotReady(EmbedderError):
    """The model is still loading in the background; memory work is skipped, not waited for."""
