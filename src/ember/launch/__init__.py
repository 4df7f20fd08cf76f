"""Running an agent CLI behind a local ember proxy (``ember wrap``): the processes and files.

- ``probe``: is an ember proxy answering on a port, something else, or nothing?
- ``proxyproc``: start ``ember proxy`` in the background, wait until it serves, stop it.
- ``shared``: one proxy per port shared by every ``ember wrap`` using it; the last one out
  stops it, and a proxy the user started themselves is never stopped.
- ``client``: run the client in the foreground, forward signals, return its exit status.

POSIX only (process groups, ``fcntl`` locks). What to launch is decided in ``ember.clients``.
"""
