"""Upper bounds on sizes, derived from the machine's memory: estimate what a run's configuration will allocate
and refuse, naming the field, what cannot fit, before anything is generated or trained."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from veil.errors import ConfigError

FLOAT64, FLOAT32 = 8, 4
# weights, their gradients and Adam's two moments
COPIES_PER_WEIGHT = 4
# generators without `dim` produce at most this many columns of their own
GENERATOR_OWN_COLUMNS = 8


def available_bytes() -> int:
    """Memory the kernel could give this process now (MemAvailable), else the machine's free pages."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def _gib(n: float) -> str:
    return f"{n / 2**30:,.1f} GiB"


def dataset_terms(dcfg: Any) -> tuple[int, dict[str, int]]:
    """(feature count, bytes per field) for generators sized by `n` (and `dim`): the float64 table they draw."""
    n = getattr(dcfg, "n", None)
    dim = getattr(dcfg, "dim", None)
    features = max(int(dim or 0), GENERATOR_OWN_COLUMNS)
    if not isinstance(n, int):
        return features, {}
    table = n * features * FLOAT64
    return features, {"dim" if dim and dim > n else "n": table}


# a user's table is held as the parsed frame, its float feature matrix and the tensors made from it
FILE_TABLE_COPIES = 3
CSV_SAMPLE_BYTES = 1 << 16


def file_terms(path: Path) -> tuple[int, dict[str, int]]:
    """(column count, bytes) of a user's .csv / .parquet table once loaded: parquet from its footer, CSV from the
    file size over the mean line length of its first 64 KiB. Estimates, read without loading the file."""
    if path.suffix.lower() in (".parquet", ".pq"):
        try:
            import pyarrow.parquet as pq

            meta = pq.read_metadata(path)
            rows, cols = meta.num_rows, meta.num_columns
        except Exception:  # an unreadable file is the loader's to report, with its own message
            return 0, {}
    else:
        with open(path, "rb") as f:
            head = f.read(CSV_SAMPLE_BYTES)
        lines = head.splitlines()
        if len(lines) < 2:
            return 0, {}
        cols = lines[0].count(b",") + 1
        rows = int(path.stat().st_size / (len(head) / len(lines)))
    return cols, {"dataset": rows * cols * FLOAT64 * FILE_TABLE_COPIES}


def model_terms(mcfg: Any, d_in: int, releases_input: bool) -> dict[str, int]:
    """Bytes of the encoder chain d_in -> encoder_hidden -> d_z and of a head's first layer on z; each layer is
    counted against the field of its wider side."""
    hidden = [int(h) for h in getattr(mcfg, "encoder_hidden", ()) or ()]
    heads = [int(h) for h in getattr(mcfg, "head_hidden", ()) or ()] or [2]
    d_z = getattr(mcfg, "d_z", None)
    out = d_in if releases_input or not isinstance(d_z, int) else d_z
    widths = [d_in, *hidden, out, heads[0]]
    names = ["dataset.dim", *["encoder_hidden"] * len(hidden), "d_z" if out != d_in else "dataset.dim", "head_hidden"]
    terms: dict[str, int] = {}
    for i in range(len(widths) - 1):
        name = names[i] if widths[i] > widths[i + 1] else names[i + 1]
        terms[name] = terms.get(name, 0) + widths[i] * widths[i + 1] * FLOAT32 * COPIES_PER_WEIGHT
    return terms


def check_memory(mcfg: Any, dcfg: Any, dataset: str, releases_input: bool, budget: int | None = None) -> None:
    """Refuse a configuration whose data table plus model would not fit in `budget` (default: available memory),
    naming the field that contributes most."""
    budget = available_bytes() if budget is None else budget
    user_file = Path(dataset).expanduser()
    if user_file.suffix.lower() in (".csv", ".parquet", ".pq") and user_file.is_file():
        d_in, terms = file_terms(user_file)
    else:
        d_in, data = dataset_terms(dcfg)
        terms = {f"dataset.{k}": v for k, v in data.items()}
    model = model_terms(mcfg, d_in, releases_input)
    for k, v in model.items():
        terms[k] = terms.get(k, 0) + v
    nodes = getattr(mcfg, "K", None)
    if isinstance(nodes, int) and nodes > 1:  # every federated node holds its own copy beside the coordinator's
        terms["K"] = sum(model.values()) * nodes
    total = sum(terms.values())
    if total <= budget:
        return
    field, size = max(terms.items(), key=lambda kv: kv[1])
    if field == "dataset":
        value: Any = dataset
    else:
        obj, attr = (dcfg, field.split(".", 1)[1]) if field.startswith("dataset.") else (mcfg, field)
        value = getattr(obj, attr, None)
    raise ConfigError(
        field,
        value,
        f"a size that fits in memory: this run would allocate about {_gib(total)} ({_gib(size)} from {field}) "
        f"and {_gib(budget)} are available",
        f"dataset '{dataset}'" if field.startswith("dataset.") else None,
    )
