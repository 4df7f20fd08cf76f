"""Retrieval policy, pure: the query, fusion and recency ranking, the budget, the rendered block.

Nothing here touches a database, a model or a request; the same inputs give the same output
(and the same bytes), which is what keeps an injected block byte-stable across turns.
"""
