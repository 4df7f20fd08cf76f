"""Sentence embedders (no torch at run time)."""

from ember.memory.embed.base import Embedder

__all__ = ["Embedder"]
