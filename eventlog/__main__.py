"""``python -m eventlog``: the ``eventlog`` command."""

from eventlog.cli import run

run()
