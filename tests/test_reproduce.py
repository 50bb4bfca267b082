"""Paper reproduction suites (`veil nightly --suite <kind: reproduce>`): the suite is validated up front (every
entry's spec in both modes, every figure's entry, grid point and metric), quick mode merges its overrides, the
verdict follows the row's tolerance, and a real run of a tiny suite (real Ray, Tune, Optuna and an MLflow store)
writes a table whose every number is the one MLflow recorded, which `--table` rebuilds from those records alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from veil.reproduce import Cell, Row, load_repro_suite, spec_mapping, verdict

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "tests" / "data" / "reproduce"


def write_suite(tmp_path: Path, change) -> Path:
    """The toy suite with `change(data)` applied, next to a copy of its specs."""
    shutil.copytree(TOY / "specs", tmp_path / "specs", dirs_exist_ok=True)
    data = yaml.safe_load((TOY / "suite.yaml").read_text())
    change(data)
    p = tmp_path / "suite.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_toy_suite_is_valid():
    suite = load_repro_suite(TOY / "suite.yaml")
    assert [r.id for r in suite.rows] == ["gpp-toy"]
    assert list(suite.rows[0].entries) == ["GPP", "PCA"]
    assert suite.rows[0].entries["GPP"].presets == ("paper", "default")


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        (lambda d: d["rows"][0].update(colour="red"), "row key", "colour"),
        (lambda d: d["rows"][0]["entries"]["GPP"].update(presets=["fast"]), "entries.GPP.presets", "'paper'"),
        (lambda d: d["rows"][0]["entries"]["PCA"].update(spec="specs/missing.yaml"), "entries.PCA.spec", "spec file"),
        (lambda d: d["rows"][0]["figures"][0].update(at={"lam": 1}), "figures[0].at", "searched key"),
        (lambda d: d["rows"][0]["figures"][0].update(entry="EIGAN"), "figures[0].entry", "['GPP', 'PCA']"),
        (
            lambda d: d["rows"][0]["figures"][1].update(metrics={"utility_auc": {"same_as": "PCA"}}),
            "figures[1].metrics.utility_auc",
            "another entry",
        ),
        (lambda d: d["rows"][0].update(tolerance=0), "tolerance", "> 0"),
        (lambda d: d["rows"].append(dict(d["rows"][0])), "rows[1].id", "no other row"),
        (lambda d: d["rows"][0]["entries"]["GPP"].update(quick={"params": {"bogus": 1}}), "params", "bogus"),
        (lambda d: d["rows"][0]["entries"]["PCA"].update({"with": [1]}), "entries.PCA.with", "mapping"),
        (lambda d: d["rows"][0]["entries"]["PCA"].update({"with": {"params": {"bogus": 1}}}), "params", "bogus"),
    ],
)
def test_bad_suites_are_refused_naming_the_field(tmp_path, change, field, says):
    with pytest.raises(Exception) as e:
        load_repro_suite(write_suite(tmp_path, change))
    text = str(e.value)
    assert says in text and (field in text or getattr(e.value, "field", "") == field), text


def test_quick_mode_merges_suite_row_and_entry_overrides():
    suite = load_repro_suite(TOY / "suite.yaml")
    row = suite.rows[0]
    full = spec_mapping(suite, row, row.entries["GPP"], "paper", "full")
    quick = spec_mapping(suite, row, row.entries["GPP"], "paper", "quick")
    assert full["seeds"] == [0, 1] and full["params"]["epochs"] == 3 and full["params"]["preset"] == "paper"
    assert full["space"]["beta"]["values"] == [0.5, 2.0] and full["dataset_params"] == {"n": 600}
    assert quick["seeds"] == [0] and quick["params"]["epochs"] == 1 and quick["params"]["preset"] == "paper"
    assert quick["space"]["beta"] == {"type": "categorical", "values": [2.0]} and quick["dataset_params"] == {"n": 400}
    assert quick["params"]["encoder_hidden"] == [16]  # untouched fields stay
    assert "preset" not in spec_mapping(suite, row, row.entries["PCA"], "", "full").get("params", {})


def test_an_entry_with_overrides_runs_another_entrys_spec_changed(tmp_path):
    """`with:` makes a variant of a spec without copying it: merged in both modes, before the quick overrides."""

    def add_variant(d):
        d["rows"][0]["entries"]["GPP-wide"] = {"spec": "specs/gpp.yaml", "with": {"params": {"d_z": 6, "epochs": 5}}}

    suite = load_repro_suite(write_suite(tmp_path, add_variant))
    row = suite.rows[0]
    base, wide = (spec_mapping(suite, row, row.entries[e], "", "full") for e in ("GPP", "GPP-wide"))
    assert wide["params"] == {**base["params"], "d_z": 6, "epochs": 5}
    assert {k: v for k, v in wide.items() if k != "params"} == {k: v for k, v in base.items() if k != "params"}
    quick = spec_mapping(suite, row, row.entries["GPP-wide"], "", "quick")
    assert quick["params"]["d_z"] == 6 and quick["params"]["epochs"] == 1  # the suite's quick epochs win


@pytest.mark.parametrize(("got", "said"), [(0.86, "reproduced"), (0.76, "close"), (0.70, "not reproduced")])
def test_verdict_follows_the_rows_tolerance(got, said):
    row = Row("r", "p", "d", {}, [], tolerance=0.05, why="the split differs")
    v, why = verdict(row, {"utility_acc": Cell(got, 0.01)}, {"utility_acc": 0.84})
    assert v == said
    assert f"utility_acc {abs(got - 0.84):.3f}" in why
    assert ("the split differs" in why) == (said == "not reproduced")
    assert verdict(row, {"utility_acc": Cell(None)}, {"utility_acc": 0.84})[0] == "not run"


def test_quick_flag_on_a_regression_suite_is_refused(capsys):
    from veil.cli import main

    assert main(["nightly", "--suite", str(ROOT / "benchmarks" / "nightly.yaml"), "--quick", "--check"]) == 2
    assert "kind: reproduce" in capsys.readouterr().err


# -- a real run ------------------------------------------------------------------------------------
@pytest.mark.ray
def test_run_then_rebuild_the_table_from_mlflow(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = tmp_path / "out"
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- reproduce:begin -->\nold\n<!-- reproduce:end -->\nrest\n")
    cmd = [sys.executable, "-m", "veil.cli", "nightly", "--suite", str(TOY / "suite.yaml"), "--tracking-uri", uri]
    cmd += ["--out", str(out)]
    proc = subprocess.run([*cmd, "--readme", str(readme)], capture_output=True, text=True, cwd=tmp_path, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    assert [(r["row"], r["entry"]) for r in results] == [("gpp-toy", "GPP"), ("gpp-toy", "PCA"), ("gpp-toy", "GPP")]

    # every number is the recorded trial's: the beta=2 trial's mean and std over the 2 seeds, per preset
    c = MlflowClient(uri)
    for preset, key in (("paper", "veil_paper"), ("default", "veil_default")):
        (sweep,) = c.search_runs(
            [c.get_experiment_by_name("repro-test").experiment_id],
            f"tags.`veil.reproduce.entry` = 'GPP' and tags.`veil.reproduce.preset` = '{preset}'",
        )
        trials = c.search_runs(
            [sweep.info.experiment_id],
            f"tags.`mlflow.parentRunId` = '{sweep.info.run_id}' and tags.`veil.role` = 'trial'",
        )
        (at2,) = [t for t in trials if json.loads(t.data.tags["veil.config"])["method.beta"] == 2.0]
        for m in ("utility_auc", "adversary_auc"):
            assert results[0][key][m] == pytest.approx([at2.data.metrics[m], at2.data.metrics["std/" + m]], abs=1e-12)
        assert results[2][key]["hypervolume"][0] == pytest.approx(sweep.data.metrics["hypervolume"], abs=1e-12)
    gpp, pca = results[0]["veil_paper"]["utility_auc"][0], results[1]["veil_paper"]["utility_auc"][0]
    assert results[1]["paper"]["utility_auc"].startswith("= GPP")  # a relative claim: PCA against GPP's figure
    gap = abs(pca - gpp)
    assert results[1]["verdict"] == ("reproduced" if gap <= 0.05 else "close" if gap <= 0.125 else "not reproduced")
    assert results[0]["verdict"] == "not reproduced" and "a toy figure" in results[0]["reason"]  # 0.9 is out of reach

    table = (out / "RESULTS.md").read_text()
    assert (out / "fronts" / "gpp-toy.png").stat().st_size > 5000
    text = readme.read_text()
    assert text.startswith("intro\n<!-- reproduce:begin -->\n| paper figure |") and text.endswith(
        "<!-- reproduce:end -->\nrest\n"
    )
    assert "old" not in text
    assert "(out/fronts/gpp-toy.png)" in text and "[RESULTS.md](out/RESULTS.md)" in text  # relative to the README

    # --table: nothing runs; the same table comes back from the records alone
    shutil.rmtree(out)
    again = subprocess.run([*cmd, "--table"], capture_output=True, text=True, cwd=tmp_path, timeout=200)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "[reproduce] 1/3" not in again.stderr
    assert (out / "RESULTS.md").read_text() == table
    reports = c.search_runs([c.get_experiment_by_name("repro-test").experiment_id], "tags.`veil.reproduce` = 'report'")
    assert len(reports) == 2
    for r in reports:
        assert {a.path for a in c.list_artifacts(r.info.run_id, "reproduce")} >= {
            "reproduce/RESULTS.md",
            "reproduce/results.json",
            "reproduce/records.json",
            "reproduce/fronts",
        }

    # --table on another store (a new machine): the records saved next to the table carry every figure over,
    # each still naming the store and run it was read from
    other = f"sqlite:///{tmp_path / 'other.db'}"
    moved = [*cmd[: cmd.index("--tracking-uri") + 1], other, "--out", str(out), "--table"]
    third = subprocess.run(moved, capture_output=True, text=True, cwd=tmp_path, timeout=200)
    assert third.returncode == 0, third.stderr[-3000:]
    assert json.loads((out / "results.json").read_text()) == results
    assert f"at `{uri}`" in (out / "RESULTS.md").read_text().split("## Records behind the table")[1]


def test_an_interrupted_sweep_stops_the_suite(monkeypatch, capsys):
    """Ctrl-C during a sweep: Tune stops it gracefully and returns (incomplete), and the suite stops too instead of
    starting its next sweep (unit test of the loop: run_sweep is replaced)."""
    import types

    import veil.reproduce as rp
    import veil.sweeps.runner as runner

    suite = load_repro_suite(TOY / "suite.yaml")
    todo = rp.variants(suite, ())
    assert len(todo) >= 2
    started = []

    def fake_run_sweep(spec, name, **kw):
        started.append(name)
        return types.SimpleNamespace(incomplete=True, name=name)

    monkeypatch.setattr(runner, "run_sweep", fake_run_sweep)
    with pytest.raises(KeyboardInterrupt, match=f"{len(todo) - 1} later sweep"):
        rp._run_all(suite, "quick", "sqlite:///unused.db", None, todo)
    assert len(started) == 1


def test_only_selects_rows_and_entries():
    """--only ROW keeps every entry (and preset) of the row; ROW/ENTRY keeps one entry; unknown names are errors
    that list the valid ones."""
    import veil.reproduce as rp
    from veil.errors import UnknownNameError

    suite = load_repro_suite(TOY / "suite.yaml")

    def picked(only):
        return [(r.id, e.label, p) for r, e, p in rp.variants(suite, only)]

    assert (
        picked(())
        == picked(["gpp-toy"])
        == [
            ("gpp-toy", "GPP", "paper"),
            ("gpp-toy", "GPP", "default"),
            ("gpp-toy", "PCA", ""),
        ]
    )
    assert picked(["gpp-toy/PCA"]) == [("gpp-toy", "PCA", "")]
    assert picked(["gpp-toy/PCA", "gpp-toy"]) == picked(())
    with pytest.raises(
        UnknownNameError, match=r"--only gpp-toy/: unknown entry label 'pca'; valid entry labels: GPP, PCA"
    ):
        rp.variants(suite, ["gpp-toy/pca"])
    with pytest.raises(UnknownNameError, match=r"--only: unknown row 'nope'; valid rows: gpp-toy"):
        rp.variants(suite, ["nope/GPP"])
