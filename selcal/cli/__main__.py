"""``python -m selcal.cli``: the ``selcal`` command."""

from . import run

run()
