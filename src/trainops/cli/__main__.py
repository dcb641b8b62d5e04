"""``python -m trainops.cli``: the same as the ``trainops`` command."""

from trainops.cli import entry

entry()
