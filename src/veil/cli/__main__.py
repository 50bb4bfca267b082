"""`python -m veil.cli ...`, as the `veil` script."""

import sys

from veil.cli import entry

sys.exit(entry())
