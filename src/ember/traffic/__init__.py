"""Traffic learning: facts the proxy picks up from traffic it already sees, with no model call.

A tool that failed and the call that then worked (error -> recovery), the commands and tools
this environment has, the user's stated preferences and the project's layout become project
memories once seen often enough, each with evidence pointing at the transcript rows it came
from. Pure policy in ``intent``, ``patterns`` and ``learner``; the proxy side
in ``stage``.
"""
