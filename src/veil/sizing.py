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
    d_in, data = dataset_terms(dcfg)
    terms = {f"dataset.{k}": v for k, v in data.items()}
    for k, v in model_terms(mcfg, d_in, releases_input).items():
        terms[k] = terms.get(k, 0) + v
    total = sum(terms.values())
    if total <= budget:
        return
    field, size = max(terms.items(), key=lambda kv: kv[1])
    obj, attr = (dcfg, field.split(".", 1)[1]) if field.startswith("dataset.") else (mcfg, field)
    raise ConfigError(
        field,
        getattr(obj, attr, None),
        f"a size that fits in memory: this run would allocate about {_gib(total)} ({_gib(size)} from {field}) "
        f"and {_gib(budget)} are available",
        f"dataset '{dataset}'" if field.startswith("dataset.") else None,
    )
