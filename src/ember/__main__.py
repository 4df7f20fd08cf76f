"""``python -m ember``: the same as the ``ember`` command."""

from ember.cli import main

if __name__ == "__main__":  # imported on its own (a tool listing modules), it runs nothing
    main()
