"""The learning loop: agents' own session logs -> loops and lessons -> their instruction files.

``logs`` reads every agent's format into one model (``model``); ``loops`` finds repeated calls
and measures their waste; ``digest`` builds what the model reads; ``analyze`` makes the one
model call; ``pipeline`` ties them together for ``ember learn``; ``markers`` and ``writeback``
put the lessons into marker blocks of the agents' own files; ``toin`` observes tool outputs in
the proxy (observation only). ``ember learn --verbosity`` hands the same sessions to output
shaping (``ember.shaping.from_logs``): no feature imports another.
"""
