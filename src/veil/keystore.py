"""Where a run's release key lives: outside MLflow, beside the user's store, readable by its owner only.

`veil run` draws a 32-byte key per run (`veil.randomness.ReleaseKey`), releases its audited z under it and keeps
it here as `<key dir>/<run id>.key` (64 hex digits; directory 0700, file 0600); `veil release RUN` loads it
back, so a row it releases gets the noise the certificate audited for that row, every time. The key never
enters MLflow (params, tags, artifacts): whoever can read the store can read the weights, and with the key
they could regenerate the noise; only its one-way fingerprint is tagged (`KEY_ID_TAG`), so that `veil release`
can refuse a key file that is not the run's. The key dir is $VEIL_KEY_DIR, else `.veil/keys` beside a local
store (the directory of its sqlite file or file store), else `.veil/keys` in the directory `veil run` ran from
(Ray workers are told the driver's: `key_env`). A missing key is an error, never a new key: a new key would
draw new noise for rows already released, and averaging the two releases would shrink it.

The ledger (`ledger.json` in the key dir, 0600) counts, per source file (by SHA-256), the distinct keys that
released it and their eps: re-releasing rows under one key spends nothing more; under k keys an eps-LDP
release spends the sum of their eps (k * eps at one eps), which `veil release` stamps as `eps_spent`."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veil.errors import VeilError
from veil.paths import unmakeable_dir

if TYPE_CHECKING:  # veil.randomness imports torch; `veil run --check` reads only where the keys go
    from veil.randomness import ReleaseKey

KEY_ENV = "VEIL_KEY_DIR"
BASE_ENV = "VEIL_KEY_BASE"
"""Where the last fallback's `.veil/keys` goes instead of the working directory: Ray workers get the driver's
(a Tune trial runs in its own directory, where `veil release` would never look)."""
LEDGER = "ledger.json"
KEY_ID_TAG = "veil.release_key_id"
"""The run's tag holding its key's fingerprint (`ReleaseKey.id`, one-way): `veil release` refuses any other key."""


class KeyStoreError(VeilError):
    """A release key that cannot be read or written."""


def key_dir(tracking_uri: str | None = None) -> Path:
    """$VEIL_KEY_DIR, else `.veil/keys` beside the local store of `tracking_uri`, else `.veil/keys` in
    $VEIL_KEY_BASE or the working directory (absolute)."""
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
    return (Path(os.environ.get(BASE_ENV) or Path.cwd()) / ".veil" / "keys").resolve()


def key_env() -> dict[str, str]:
    """The variables Ray workers need to keep keys where this process would."""
    return {BASE_ENV: os.environ.get(BASE_ENV) or str(Path.cwd().resolve())}


def key_path(run_id: str, tracking_uri: str | None = None) -> Path:
    return key_dir(tracking_uri) / f"{run_id}.key"


def _private_dir(d: Path) -> None:
    """Create `d` owner-only where it does not exist; an existing directory keeps its mode (it may be a shared
    one the user chose: the files in it are 0600)."""
    if d.is_dir():
        return
    try:
        d.mkdir(mode=0o700, parents=True)
        os.chmod(d, 0o700)  # mkdir's mode passes through the umask
    except FileExistsError:
        if not d.is_dir():
            raise KeyStoreError(f"the release key directory {d} is a file, not a directory (${KEY_ENV})") from None
    except OSError as e:
        raise KeyStoreError(f"cannot create the release key directory {d}: {e.strerror or e} (${KEY_ENV})") from None


def check_key_dir(tracking_uri: str | None = None) -> Path:
    """The key dir a run will keep its key in, refused up front (before any training) when it cannot be created
    or written: nothing is created here."""
    d = key_dir(tracking_uri)
    problem = unmakeable_dir(d)
    if problem:
        raise KeyStoreError(f"the release key directory {d} cannot be used: {problem} (${KEY_ENV})")
    return d


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
    try:
        _write_private(path, key.secret.hex().encode() + b"\n")
    except OSError as e:
        raise KeyStoreError(f"cannot write the release key {path}: {e.strerror or e} (${KEY_ENV})") from None
    return path


def key_file_present(path: Path) -> bool:
    """Whether `path` exists; a directory on the way that cannot be searched is an error naming it."""
    try:
        return path.exists()
    except OSError as e:
        raise KeyStoreError(f"cannot look for the release key {path}: {e.strerror or e}") from None


def load_key(path: Path) -> ReleaseKey:
    """The key in `path` (64 hex digits, as `save_key` writes it)."""
    from veil.randomness import KEY_BYTES, ReleaseKey

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
    from filelock import FileLock

    _private_dir(directory)
    path = directory / LEDGER
    with FileLock(str(path) + ".lock"):  # concurrent releases: each read-modify-write sees the last one's entry
        ledger = _read_ledger(path)
        seen = ledger.setdefault(source_sha256, {})
        seen[key.id] = eps
        _write_private(path, json.dumps(ledger, indent=1, sort_keys=True).encode())
    eps_of = [v for v in seen.values() if v is not None]
    spent = float(sum(eps_of)) if len(eps_of) == len(seen) else None
    return {"keys": len(seen), "eps_spent": spent}


def _read_ledger(path: Path) -> dict[str, dict[str, float | None]]:
    """The ledger at `path` ({} where there is none yet); an unreadable one is refused, never reset: starting it
    again would count too few keys, and too little eps, for every file it held."""
    if not path.exists():
        return {}
    try:
        ledger = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise KeyStoreError(
            f"the release ledger {path} cannot be read ({e}): it counts the keys that released each file and their "
            "eps. Restore it from a backup, or move it aside to start counting again (the counts then miss the "
            "releases it held)"
        ) from None
    if not isinstance(ledger, dict):
        raise KeyStoreError(f"the release ledger {path} is not a mapping of files to keys; restore or move it aside")
    return ledger


__all__ = [
    "BASE_ENV",
    "KEY_ENV",
    "KEY_ID_TAG",
    "KeyStoreError",
    "check_key_dir",
    "key_dir",
    "key_env",
    "key_file_present",
    "key_path",
    "load_key",
    "record_release",
    "save_key",
]
