"""Filesystem checks made before work starts: whether a directory or file can be made at a path that may not
exist yet. Each caller words its own error around the reason returned here."""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def cache_root() -> Path:
    """Where Veil caches what it can rebuild (datasets, an empty MLflow store): $VEIL_CACHE_DIR, else
    ~/.cache/veil."""
    return Path(os.environ.get("VEIL_CACHE_DIR", Path.home() / ".cache" / "veil"))


def nearest_existing(path: Path) -> Path:
    """`path`, or its nearest ancestor that exists."""
    while not path.exists():
        path = path.parent
    return path


def unmakeable_dir(path: Path) -> str | None:
    """Why no directory can be made (or written) at `path`: its nearest existing ancestor is a file or is not
    writable; None when it can."""
    found = nearest_existing(path)
    if not found.is_dir():
        return f"{found} is a file"
    if not os.access(found, os.W_OK | os.X_OK):
        return f"{found} is not writable"
    return None


def write_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a synced file beside it, so a reader sees the old file or all of the new."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
