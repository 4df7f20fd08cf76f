"""The dashboard: a local page over what ember keeps (``ember ui``, and ``/ui`` on the proxy).

The kernel's part is here — the page itself (``static/``, no build step and nothing loaded from
anywhere else), spend, sessions and requests, and the live feed; each feature adds its own
views (``Feature.views``, ``ember.views``). It is served on loopback only, and what changes
data needs the per-process token the page got from the server that served it (``guard.py``).
"""
