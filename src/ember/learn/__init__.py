"""The learning loop: agents' own session logs -> loops and lessons -> their instruction files.

``logs`` reads every agent's format into one model (``model``); ``loops`` finds repeated calls
and measures their waste; ``digest`` builds what the model reads; ``analyze`` makes the one
model call; ``pipeline`` ties them together for ``ember learn``.
"""
