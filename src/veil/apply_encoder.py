"""`veil release RUN --data FILE -o z.parquet`: a certified run's encoder applied to new rows.

The run's recorded artifacts are all it needs: the trained weights (`model/state.pt`, loaded with
weights_only=True), the method's config and task (`model/config.json`), how the source table's columns became its
input (`model/features.json`, `veil.datasets.transform`) and its certificate (`certificate.json`). New rows must
have the run's schema (the same feature columns; label and extra columns are allowed and ignored, never released).
The release noise is permanent: it derives from the run's secret release key (kept by `veil run` outside MLflow,
`veil.keystore`; `--key FILE` names where it was moved; a key whose fingerprint is not the one the run tagged is
refused) and each row's content, so a row released again gets the same noise (and the z the certificate audited,
up to the float rounding of the encoder's arithmetic), and averaging releases gains nothing. A missing key is an
error, never a new key. A run with a `release_seed` derives its key from it (reproducible from its params: no
guarantee, and the stamp says so). Each noisy release is entered in the key dir's ledger, and the stamp records
how many distinct keys have released the same source file and, for an eps-LDP release, the eps they spent
together (`eps_spent`: the sum of the keys' eps; the same key again spends nothing). A run without a
certificate, or whose certificate is not met, is refused unless the user passes --allow-unmet, which the written
certificate then records. z is written with the certificate beside it
(`<output>.certificate.json`)."""

from __future__ import annotations

import datetime
import json
import tempfile
from pathlib import Path
from typing import Any

from veil.console import warn
from veil.errors import ConfigError, DataError, VeilError

ARTIFACTS = ("model/config.json", "model/state.pt", "model/features.json", "certificate.json")


class ReleaseRefused(VeilError):
    """The run cannot release new rows (no certificate, an unmet one, a method whose encoders stay elsewhere)."""


def fetch_run(uri: str, run_id: str, into: Path) -> tuple[dict[str, Path | None], dict[str, str]]:
    """Download the run's release artifacts into `into` (a missing one maps to None) and read its tags. An unknown
    run is refused."""
    from veil.tracking.mlflow_run import client

    c = client(uri)
    try:
        run = c.get_run(run_id)
    except Exception:  # noqa: BLE001 - MlflowException: RESOURCE_DOES_NOT_EXIST, or a malformed id
        raise ReleaseRefused(
            f"the store at {uri} has no run {run_id!r}. `veil run` prints its run's id on its last line ('MLflow run "
            f"<id> ...'); `veil ui --tracking-uri {uri}` lists the store's runs"
        ) from None
    folders = {Path(n).parent.as_posix() for n in ARTIFACTS}
    logged = {f.path for d in folders for f in c.list_artifacts(run_id, None if d == "." else d)}
    out: dict[str, Path | None] = {}
    for name in ARTIFACTS:
        if name not in logged:
            out[name] = None
            continue
        try:
            out[name] = Path(c.download_artifacts(run_id, name, str(into)))
        except Exception as e:  # noqa: BLE001 - logged but not fetched: never read as "the run has none"
            raise ReleaseRefused(f"run {run_id}'s {name} could not be downloaded from {uri}: {e}") from None
    return out, dict(run.data.tags)


def check_key(key: Any, tags: dict[str, str], run_id: str, kfile: Path) -> None:
    """Refuse a key that is not the one run `run_id` released under (its tagged fingerprint): another key draws
    other noise for the same rows, and the two releases average it away."""
    from veil.keystore import KEY_ID_TAG, KeyStoreError

    expected = tags.get(KEY_ID_TAG)
    if expected is not None and key.id != expected:
        raise KeyStoreError(
            f"{kfile} holds the release key {key.id}, not run {run_id}'s ({expected}): under another key the same "
            "rows get other noise, and averaging the two releases strips it. Pass --key with the run's own key file"
        )


def run_key_file(run_id: str, uri: str) -> Path:
    """Where run `run_id`'s key is kept: under its id, or, for a run started while its server was away and
    replayed since, under the offline id it ran with (the journal maps one to the other)."""
    from veil.keystore import key_file_present, key_path
    from veil.tracking.journal import ids, journal_root

    path = key_path(run_id, uri)
    if not key_file_present(path):
        for offline in (o for o, real in ids(journal_root()).items() if real == run_id):
            if key_file_present(key_path(offline, uri)):
                return key_path(offline, uri)
    return path


def redacted(uri: str) -> str:
    """`uri` without a password (a database URI's user:password@host), for what a release hands to its consumers."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def load_released_method(config_file: Path, state_file: Path) -> Any:
    """The run's method with its trained weights and its recorded config (a set release_seed stands for its key;
    otherwise the caller sets `release_key`)."""
    import torch

    from veil.datasets.dataset import TaskSpec
    from veil.methods.builtin import create_method, method_config

    meta = json.loads(config_file.read_text())
    task = TaskSpec(**meta["task"])
    config = method_config(meta["method"], meta["config"])
    method = create_method(meta["method"], config, task)
    method.load_state(torch.load(state_file, weights_only=True))
    return method, meta


def release(
    run_id: str,
    data: str,
    output: str,
    *,
    tracking_uri: str | None = None,
    allow_unmet: bool = False,
    keep: tuple[str, ...] = (),
    key_file: str | None = None,
) -> dict[str, Any]:
    """Release z for the rows of `data` with run `run_id`'s encoder under the run's release key (`key_file`, else
    the key store's), write it to `output` (Parquet) and the certificate beside it; returns what was written."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    from veil.datasets.files import file_sha256, read_table
    from veil.datasets.transform import FeatureTransform
    from veil.keystore import key_dir, key_file_present, load_key, loose_permissions, record_release
    from veil.randomness import MissingKey
    from veil.tracking.mlflow_run import check_tracking, require_existing_store

    uri = check_tracking(tracking_uri)
    require_existing_store(uri, "veil release")
    out = Path(output)
    if out.suffix.lower() not in (".parquet", ".pq") or out.is_dir():
        raise ConfigError("--output", output, "a .parquet file path (not a directory)")
    frame = read_table(data)  # a bad file is refused before the run is fetched
    with tempfile.TemporaryDirectory() as tmp:
        files, tags = fetch_run(uri, run_id, Path(tmp))
        cert_file, config_file, state_file = (
            files["certificate.json"],
            files["model/config.json"],
            files["model/state.pt"],
        )
        if config_file is None or state_file is None:
            raise ReleaseRefused(
                f"run {run_id} has no trained model to release with (model/config.json, model/state.pt)"
            )
        if cert_file is None:
            if not allow_unmet:
                raise ReleaseRefused(
                    f"run {run_id} has no certificate (it ran with target: none, or before Veil certified releases): "
                    "nothing says what its release leaks. Rerun it with a target, or pass --allow-unmet to release anyway"
                )
            certificate: dict[str, Any] = {"met": False, "missing": True}
        else:
            certificate = json.loads(cert_file.read_text())
        if not certificate.get("met") and not allow_unmet and cert_file is not None:
            raise ReleaseRefused(
                f"run {run_id}'s certificate is not met (target {certificate.get('target')}, worst privacy gap "
                f"{certificate.get('privacy_gap', {}).get('high', float('nan')):.3f} at its 95% upper end): its release "
                "leaks more than its target allows. Pass --allow-unmet to release anyway (recorded in the output)"
            )
        method, meta = load_released_method(config_file, state_file)
        features_file = files["model/features.json"]
        if features_file is None:
            raise ReleaseRefused(
                f"run {run_id} did not record its input schema (model/features.json); rerun it to release"
            )
        transform = FeatureTransform.from_dict(json.loads(features_file.read_text()))
    release_seed = method.config.release_seed
    kfile = Path(key_file) if key_file else run_key_file(run_id, uri)
    if release_seed is not None:
        warn(
            f"run {run_id} set release_seed={release_seed}: its release key derives from it, so anyone with its "
            "params can regenerate this release's noise (no privacy guarantee)"
            + (f"; --key {key_file} is not used" if key_file else "")
        )
    else:
        if key_file or key_file_present(kfile):
            method.release_key = load_key(kfile)
            check_key(method.release_key, tags, run_id, kfile)
            if loose_permissions(kfile):
                warn(
                    f"the release key {kfile} may be read by others (chmod 600 it): with it, anyone holding "
                    "this release can regenerate its noise"
                )
        else:  # an error at the first noise drawn: a release without noise needs no key
            method.release_key = MissingKey(
                f"run {run_id}'s release key is missing: not at {kfile}. `veil run` keeps it there (in $VEIL_KEY_DIR "
                "or .veil/keys beside the store); pass --key FILE where you moved it. Veil never draws a new key for "
                "a run: releasing rows again under a new key would let their releases be averaged"
            )
    used = [c.name for c in transform.columns] + list(transform.other)
    for k in keep:
        if k not in frame.columns:
            raise ConfigError("--keep", k, f"a column of {data}: {', '.join(frame.columns)}")
        if k in used:
            raise ConfigError(
                "--keep",
                k,
                "an id column that is neither a feature nor a label of the run (a feature or label copied beside z "
                "would be released unprotected)",
            )
    x = transform.apply(frame.drop(columns=list(keep)), data)
    if x.shape[1] != int(meta["task"]["d_in"]):
        raise DataError(f"{data}: the run's schema gives {x.shape[1]} features, its model takes {meta['task']['d_in']}")
    try:
        z = method.encode(x)
    except VeilError as e:
        raise ReleaseRefused(f"run {run_id} cannot release new rows: {e}") from None
    source_sha256 = file_sha256(Path(data))
    key = method.release_source()
    ldp = method.ldp_release()
    eps = float(ldp.mechanism.eps) if ldp is not None else None
    if isinstance(key, MissingKey) or not method.release_draws:  # nothing was drawn: a deterministic release
        noise = "none (a deterministic release: no key needed)"
        spent: dict[str, Any] = {"keys": 0, "eps_spent": None}
    else:
        spent = record_release(key_dir(uri), source_sha256, key, eps)  # one ledger per store, whatever --key
        noise = (
            f"derived from release_seed={release_seed}: reproducible from the run's params, no privacy guarantee"
            if release_seed is not None
            else "permanent: from the run's secret release key and each row's content (the same row, the same z)"
        )
    table = pd.DataFrame({f"z{i}": z[:, i] for i in range(z.shape[1])})
    for k in keep:
        table[k] = frame[k].to_numpy()
    stamp = {
        "run_id": run_id,
        "tracking_uri": redacted(uri),
        "method": meta["method"],
        "source": str(data),
        "source_sha256": source_sha256,
        "rows": int(len(z)),
        "released_at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "release_noise": noise,
        "release_key_id": None if isinstance(key, MissingKey) or not method.release_draws else key.id,
        "keys_used_on_source": spent["keys"],
        "eps": eps,
        "eps_spent": spent["eps_spent"],
        "eps_rule": "re-releasing rows under the same key spends no more eps; under k distinct keys, the sum of "
        "their eps (k * eps)",
        "certificate_met": bool(certificate.get("met")),
        "released_despite_unmet_certificate": bool(allow_unmet and not certificate.get("met")),
    }
    arrow = pa.Table.from_pandas(table, preserve_index=False)
    arrow = arrow.replace_schema_metadata(
        {**(arrow.schema.metadata or {}), b"veil.release": json.dumps(stamp).encode()}
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(arrow, out)
    cert_out = out.with_name(out.name + ".certificate.json")
    cert_out.write_text(json.dumps({**certificate, "release": stamp}, indent=2, default=str) + "\n")
    return {
        "output": str(out),
        "certificate": str(cert_out),
        "rows": int(len(z)),
        "width": int(z.shape[1]),
        **stamp,
        "finite": bool(np.isfinite(z).all()),
    }


__all__ = ["ReleaseRefused", "release"]
