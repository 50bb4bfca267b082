"""Where a run's release key lives: outside MLflow, beside the user's store, readable by its owner only.

`veil run` draws a 32-byte key per run (`veil.randomness.ReleaseKey`), releases its audited z under it and keeps
it here as `<key dir>/<run id>.key` (64 hex digits; directory 0700, file 0600); `veil release RUN` loads it
back, so a row it releases gets exactly the z the certificate audited for that row, every time. The key never
enters MLflow (params, tags, artifacts): whoever can read the store can read the weights, and with the key
they could regenerate the noise. The key dir is $VEIL_KEY_DIR, else `.veil/keys` beside a local store (the
directory of its sqlite file or file store), else `./.veil/keys`. A missing key is an error, never a new key:
a new key would draw new noise for rows already released, and averaging the two releases would shrink it.

The ledger (`ledger.json` in the key dir, 0600) counts, per source file (by SHA-256), the distinct keys that
released it and their eps: re-releasing rows under one key spends nothing more; under k keys an eps-LDP
release spends the sum of their eps (k * eps at one eps), which `veil release` stamps as `eps_spent`."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from veil.errors import VeilError
from veil.randomness import KEY_BYTES, ReleaseKey

KEY_ENV = "VEIL_KEY_DIR"
LEDGER = "ledger.json"


class KeyStoreError(VeilError):
    """A release key that cannot be read or written."""


def key_dir(tracking_uri: str | None = None) -> Path:
    """$VEIL_KEY_DIR, else `.veil/keys` beside the local store of `tracking_uri`, else `./.veil/keys` (absolute)."""
    env = os.environ.get(KEY_ENV)
    if env:
        return Path(env).expanduser().resolve()
    if tracking_uri:
        from veil.tracking.mlflow_run import local_store

        store = local_store(tracking_uri)
        if store is not None and str(store) not in ("", ":memory:"):
            store = store.expanduser().resolve()
            base = store if store.is_dir() else store.parent
            return base / ".veil" / "keys"
    return (Path.cwd() / ".veil" / "keys").resolve()


def key_path(run_id: str, tracking_uri: str | None = None) -> Path:
    return key_dir(tracking_uri) / f"{run_id}.key"


def _private_dir(d: Path) -> None:
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(d, 0o700)


def _write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` created with mode 0600 (replaced atomically)."""
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def save_key(key: ReleaseKey, run_id: str, tracking_uri: str | None = None) -> Path:
    """Keep run `run_id`'s release key (directory 0700, file 0600); returns its path."""
    path = key_path(run_id, tracking_uri)
    _private_dir(path.parent)
    _write_private(path, key.secret.hex().encode() + b"\n")
    return path


def load_key(path: Path) -> ReleaseKey:
    """The key in `path` (64 hex digits, as `save_key` writes it)."""
    try:
        text = path.read_text().strip()
    except OSError as e:
        raise KeyStoreError(f"cannot read the release key {path}: {e.strerror or e}") from None
    try:
        secret = bytes.fromhex(text)
    except ValueError:
        secret = b""
    if len(secret) != KEY_BYTES:
        raise KeyStoreError(f"{path} is not a release key ({2 * KEY_BYTES} hex digits, as `veil run` writes)")
    return ReleaseKey(secret)


def loose_permissions(path: Path) -> bool:
    """Whether group or others may read `path`."""
    return bool(path.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO))


def record_release(directory: Path, source_sha256: str, key: ReleaseKey, eps: float | None) -> dict[str, Any]:
    """Add (source, key, eps) to the ledger in `directory`; returns what releases of that source have spent:
    `keys` (distinct keys that released it, this one included) and `eps_spent` (the sum of their eps, None
    when a key's release is not eps-LDP)."""
    _private_dir(directory)
    path = directory / LEDGER
    try:
        ledger = json.loads(path.read_text()) if path.exists() else {}
    except (OSError, ValueError):
        ledger = {}
    seen = ledger.setdefault(source_sha256, {})
    seen[key.id] = eps
    _write_private(path, json.dumps(ledger, indent=1, sort_keys=True).encode())
    spent = None if any(v is None for v in seen.values()) else float(sum(seen.values()))
    return {"keys": len(seen), "eps_spent": spent}


__all__ = ["KEY_ENV", "KeyStoreError", "key_dir", "key_path", "load_key", "record_release", "save_key"]
