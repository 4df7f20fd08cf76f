"""Indexes over current memories: vectors (sqlite-vec, hnswlib fallback), FTS5 text, LRU cache."""
