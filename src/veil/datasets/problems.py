"""How a refused table is reported, for a run's file and for the new rows of `veil release` alike: every problem
found in one error (a table is fixed in one go, not one column per try), rows counted as the user counts them."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from veil.errors import DataError

FLOAT32_MAX = float(np.finfo(np.float32).max)
"""Features are float32: larger magnitudes would become inf."""


def data_rows(positions: np.ndarray) -> str:
    """'data row 9' or 'data row 9 (and 3 more)': 1-based data rows (the header is not counted)."""
    more = f" (and {len(positions) - 1} more)" if len(positions) > 1 else ""
    return f"data row {int(positions[0]) + 1}{more}"


def refuse(source: str, problems: Sequence[str]) -> None:
    """Raise one DataError naming `source` and every problem (one line each when there are several); nothing
    when there is none."""
    if len(problems) == 1:
        raise DataError(f"{source}: {problems[0]}")
    if problems:
        raise DataError(f"{source}: {len(problems)} problems:\n" + "\n".join(f"  - {p}" for p in problems))
