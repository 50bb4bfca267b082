"""Where datasets are cached, and the Parquet form of a Dataset (class counts and params kept in the file's
metadata)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from veil.datasets.dataset import Dataset, from_frame, to_frame
from veil.datasets.transform import FeatureTransform
from veil.paths import cache_root

META_KEY = b"veil.dataset"


def cache_dir() -> Path:
    """Where built datasets are cached: $VEIL_CACHE_DIR/datasets, else ~/.cache/veil/datasets."""
    return cache_root() / "datasets"


def write_parquet(ds: Dataset, path: str | Path) -> Path:
    """Write `ds` to `path` atomically (a failed write leaves nothing behind)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(to_frame(ds), preserve_index=False)
    meta = {
        "name": ds.name,
        "num_classes": dict(ds.num_classes),
        "params": dict(ds.params),
        "feature_names": list(ds.feature_names),
        "transform": ds.transform.to_dict() if ds.transform is not None else None,
        "class_names": {k: list(v) for k, v in ds.class_names.items()},
    }
    table = table.replace_schema_metadata(
        {**(table.schema.metadata or {}), META_KEY: json.dumps(meta, default=str).encode()}
    )
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    os.close(fd)
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def read_parquet(path: str | Path) -> Dataset:
    """Read a Dataset written by `write_parquet`."""
    table = pq.read_table(path)
    meta = json.loads(table.schema.metadata[META_KEY])
    transform = FeatureTransform.from_dict(meta["transform"]) if meta.get("transform") else None
    return from_frame(
        table.to_pandas(),
        meta["name"],
        meta["num_classes"],
        meta["params"],
        tuple(meta["feature_names"]),
        transform,
        meta.get("class_names"),  # caches written before class names were kept: codes are shown
    )
