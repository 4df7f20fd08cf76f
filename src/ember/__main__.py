"""``python -m ember``: the same as the ``ember`` command."""

from ember.cli import main

main()
