"""`python -m veil.cli ...`, as the `veil` script."""

import sys

from veil.cli import main

sys.exit(main())
