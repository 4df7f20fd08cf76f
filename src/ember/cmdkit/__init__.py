"""What a command is built with, by the kernel's commands and every feature's alike: the
shared options (``options``), how a one-shot command reaches a database in ``EMBER_HOME``
(``access``), what tables and JSON print as (``render``) and how a hint spells the running
``ember`` (``invocation``).

It stands under the features and the CLI: it imports neither, so a feature's command module
imports on its own, and ``ember.cli`` only assembles commands. A helper the features' commands
share belongs here rather than in ``ember.cli``, which a feature never imports
(``tests/test_layering.py``).
"""
