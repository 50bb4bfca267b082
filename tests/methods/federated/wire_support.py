"""What the federation tests that inspect messages share."""

from __future__ import annotations

import numpy as np


def contains_window(haystack: np.ndarray, needle: np.ndarray) -> bool:
    """Whether `needle` occurs as a contiguous run anywhere in the flattened `haystack` (as numbers)."""
    h = np.asarray(haystack, dtype=np.float64).ravel()
    n = np.asarray(needle, dtype=np.float64).ravel()
    if len(n) == 0 or len(h) < len(n):
        return False
    win = np.lib.stride_tricks.sliding_window_view(h, len(n))
    return bool(np.any(np.all(win == n, axis=1)))
