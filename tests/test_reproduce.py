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
import reproduce_readme
import yaml

from veil.reproduce.render import AUC_LEAKS, NEITHER_HIDES, Cell, Measured, build_lines, line_record, verdict
from veil.reproduce.suite import Row, load_repro_suite, spec_mapping

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
        (lambda d: d["rows"][0].update(reference="Raw"), "reference", "['GPP', 'PCA']"),
        (lambda d: d["rows"][0].update(reference="GPP"), "reference", "no figure of its own"),
        (lambda d: d["rows"][0].update(seeds="three"), "seeds", "list of integer seeds"),
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
    assert "the split differs" not in why  # the row's cause is written once, in its section of RESULTS.md
    assert verdict(row, {"utility_acc": Cell(None)}, {"utility_acc": 0.84})[0] == "not run"


def test_a_match_where_both_sides_leak_what_the_unencoded_data_leaks_is_vacuous():
    """D-EIGAN = EIGAN at preset paper: both read the adversary's label as well as the unencoded data (the row's
    reference entry) does, so the match says nothing about hiding."""
    row = Row("deigan", "p", "d", {}, [], tolerance=0.03, reference="Unencoded")
    unencoded = {"utility_acc": Cell(0.764), "adversary_acc": Cell(0.777)}
    eigan = {"utility_acc": Cell(0.764, 0.012), "adversary_acc": Cell(0.778, 0.010)}
    deigan = {"utility_acc": Cell(0.763, 0.01), "adversary_acc": Cell(0.779, 0.01)}
    v, why = verdict(row, deigan, eigan, reference=unencoded, other="in EIGAN")
    assert v == NEITHER_HIDES, why
    assert "adversary_acc 0.779 here, 0.778 in EIGAN, 0.777 on the unencoded data (Unencoded)" in why
    assert "utility_acc" not in why.split(";")[1]  # only leakage figures are compared with the unencoded data
    # the same match where EIGAN hides (Veil's defaults): reproduced
    hiding = {"utility_acc": Cell(0.745), "adversary_acc": Cell(0.553)}
    assert verdict(row, {**deigan, "adversary_acc": Cell(0.54)}, hiding, reference=unencoded)[0] == "reproduced"
    # one side hiding is enough to make the match informative
    assert (
        verdict(
            row, {**deigan, "adversary_acc": Cell(0.76)}, eigan | {"adversary_acc": Cell(0.735)}, reference=unencoded
        )[0]
        == "reproduced"
    )
    # an absolute figure of a row with a reference: the paper's number and Veil's both at the unencoded data's
    assert verdict(row, deigan, {"utility_acc": 0.77, "adversary_acc": 0.79}, reference=unencoded)[0] == NEITHER_HIDES
    # without a recorded reference the rule cannot judge, and a gap beyond the tolerance stays what it was
    assert verdict(row, deigan, eigan, reference={"adversary_acc": Cell(None)})[0] == "reproduced"
    far = verdict(row, {**deigan, "adversary_acc": Cell(0.72)}, eigan, reference=unencoded)
    assert far[0] == "close" and "neither side hides" not in far[1]


LINEAR_ARL = {  # the eigan-adult linear-arl record: accuracy at the male share, AUC well off chance
    "utility_acc": 0.827,
    "adversary_acc": 0.675,
    "adversary_acc/sex": 0.675,
    "majority/sex": 0.674,
    "adversary_auc": 0.645,
    "adversary_auc/sex": 0.645,
    "privacy_gap": 0.145,
    "privacy_gap/sex": 0.145,
}


@pytest.mark.parametrize("metric", ["adversary_acc", "adversary_acc/sex"])
def test_an_adversary_accuracy_at_the_majority_rate_is_judged_by_its_auc(metric):
    """The paper's 0.67 is Adult's male share: Veil's probe matching it says nothing about hiding when the same
    probe's AUC is 0.645. Not reproduced; its own verdict, with the AUC in the reason."""
    row = Row("eigan-adult", "p", "d", {}, [], tolerance=0.02)
    measured = {"utility_acc": Cell(0.827), metric: Cell(0.675)}
    targets = {"utility_acc": 0.84, metric: 0.67}
    v, why = verdict(row, measured, targets, trial=LINEAR_ARL)
    assert v == AUC_LEAKS, why
    assert "majority rate (0.674)" in why and "AUC 0.645 leaks" in why and "privacy gap 0.145 > 0.02" in why
    # hidden for real: the AUC at chance -> reproduced
    hidden = LINEAR_ARL | {
        "adversary_auc": 0.51,
        "adversary_auc/sex": 0.51,
        "privacy_gap": 0.01,
        "privacy_gap/sex": 0.01,
    }
    assert verdict(row, measured, targets, trial=hidden)[0] == "reproduced"
    # an accuracy above the majority rate tells leaking by itself: the accuracy's verdict stands
    above = LINEAR_ARL | {"majority/sex": 0.60}
    assert verdict(row, measured, targets, trial=above)[0] == "reproduced"
    # records without the majority rate (older than the rule) cannot be judged by it
    older = {k: v for k, v in LINEAR_ARL.items() if not k.startswith("majority/")}
    assert verdict(row, measured, targets, trial=older)[0] == "reproduced"
    # a figure that does not match keeps its verdict and gains the finding in its reason
    far = verdict(row, measured | {"utility_acc": Cell(0.70)}, targets, trial=LINEAR_ARL)
    assert far[0] == "not reproduced" and "AUC 0.645 leaks" in far[1]


def test_a_row_can_run_fewer_seeds_than_the_suite(tmp_path):
    suite = load_repro_suite(write_suite(tmp_path, lambda d: d["rows"][0].update(seeds=[0, 1, 2])))
    row = suite.rows[0]
    assert spec_mapping(suite, row, row.entries["GPP"], "paper", "full")["seeds"] == [0, 1, 2]
    assert spec_mapping(suite, row, row.entries["GPP"], "paper", "quick")["seeds"] == [0]  # quick: the suite's


def _record(trials, sweep="s"):
    return Measured(sweep, "run", trials, {"hypervolume": 0.2}, 2, "sqlite:///gone.db", 1)


def test_the_readme_block_has_one_short_line_per_row_and_no_causes(tmp_path):
    """The README shows one line of at most 200 characters per paper row (its name linking to its section of
    RESULTS.md, its first figure as the paper has it and as Veil measured it, its verdicts), rendered from
    results.json by tools/reproduce_readme.py; the causes stay in RESULTS.md."""

    def two_rows(d):
        other = yaml.safe_load(yaml.safe_dump(d["rows"][0]))
        other.update(id="gpp-toy-2", why="a second, different cause")
        d["rows"].append(other)

    suite = load_repro_suite(write_suite(tmp_path, two_rows))
    gpp = [
        {"beta": b, "utility_auc": 0.88 + b / 100, "std/utility_auc": 0.01, "adversary_auc": 0.56, "privacy_gap": 0.06}
        for b in (0.5, 2.0)
    ]
    pca = [{"d_z": 2, "utility_auc": 0.9, "adversary_auc": 0.7, "privacy_gap": 0.2}]
    records = {}
    for rid in ("gpp-toy", "gpp-toy-2"):
        records |= {(rid, "GPP", p): _record(gpp) for p in ("paper", "default")}
        records[(rid, "PCA", "spec")] = _record(pca)
    lines = build_lines(suite, records)
    assert len(lines) == 6
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- reproduce:begin -->\nold\n<!-- reproduce:end -->\nrest\n")
    out = tmp_path / "benchmarks"
    out.mkdir()
    (out / "results.json").write_text(json.dumps([line_record(ln) for ln in lines], default=str))
    assert reproduce_readme.main(["--results", str(out), "--readme", str(readme)]) == 0
    assert readme.read_text().startswith("intro\n<!-- reproduce:begin -->\n| row |")
    assert readme.read_text().endswith("<!-- reproduce:end -->\nrest\n") and "old" not in readme.read_text()
    assert reproduce_readme.main(["--results", str(out), "--readme", str(readme), "--check"]) == 0
    block = readme.read_text().split("<!-- reproduce:begin -->")[1].split("<!-- reproduce:end -->")[0]
    body = [x for x in block.splitlines() if x.startswith("| [")]
    assert [x.split("|")[1].strip() for x in body] == [
        "[gpp-toy](benchmarks/RESULTS.md#gpp-toy)",
        "[gpp-toy-2](benchmarks/RESULTS.md#gpp-toy-2)",
    ]
    assert "a toy figure" not in block and "a second, different cause" not in block
    first = lines[0]
    paper = first.paper[next(iter(first.paper))]
    mine = first.at_paper[next(iter(first.paper))].mean
    assert f"{paper} → {mine:.3f}" in body[0]  # the row's first figure: the paper's value, then Veil's
    assert max(len(x) for x in body) <= 200


def test_quick_flag_on_a_regression_suite_is_refused(capsys):
    from veil.cli import main

    assert main(["nightly", "--quick", "--check"]) == 2  # the shipped regression suite
    assert "kind: reproduce" in capsys.readouterr().err


# -- a real run ------------------------------------------------------------------------------------
@pytest.mark.ray
@pytest.mark.slow  # a whole quick suite run: ~1 min alone, several beside another Ray test
def test_run_then_rebuild_the_table_from_mlflow(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    out = tmp_path / "out"
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- reproduce:begin -->\nold\n<!-- reproduce:end -->\nrest\n")
    cmd = [sys.executable, "-m", "veil.cli", "nightly", "--suite", str(TOY / "suite.yaml"), "--tracking-uri", uri]
    cmd += ["--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=1200)
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
    assert results[0]["verdict"] == "not reproduced" and "a toy figure" in results[0]["cause"]  # 0.9 is out of reach

    table = (out / "RESULTS.md").read_text()
    assert (out / "fronts" / "gpp-toy.png").stat().st_size > 5000
    assert reproduce_readme.main(["--results", str(out), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("intro\n<!-- reproduce:begin -->\n| row |") and text.endswith(
        "<!-- reproduce:end -->\nrest\n"
    )
    assert "old" not in text
    assert "[RESULTS.md](out/RESULTS.md)" in text  # relative to the README
    assert "(out/RESULTS.md#gpp-toy)" in text and "a toy figure" not in text and "### gpp-toy" in table

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

    import veil.reproduce.runs as runs
    import veil.sweeps.driver as driver
    from veil.reproduce.suite import variants

    suite = load_repro_suite(TOY / "suite.yaml")
    todo = variants(suite, ())
    assert len(todo) >= 2
    started = []

    def fake_run_sweep(spec, name, **kw):
        started.append(name)
        return types.SimpleNamespace(incomplete=True, name=name)

    monkeypatch.setattr(driver, "run_sweep", fake_run_sweep)
    with pytest.raises(KeyboardInterrupt, match=f"{len(todo) - 1} later sweep"):
        runs._run_all(suite, "quick", "sqlite:///unused.db", None, todo)
    assert len(started) == 1


def test_only_selects_rows_and_entries():
    """--only ROW keeps every entry (and preset) of the row; ROW/ENTRY keeps one entry; ROW/ENTRY/PRESET one preset
    of it; unknown names are errors that list the valid ones."""
    from veil.errors import UnknownNameError
    from veil.reproduce.suite import variants

    suite = load_repro_suite(TOY / "suite.yaml")

    def picked(only):
        return [(r.id, e.label, p) for r, e, p in variants(suite, only)]

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
    assert picked(["gpp-toy/GPP/default"]) == [("gpp-toy", "GPP", "default")]
    assert picked(["gpp-toy/GPP/default", "gpp-toy/PCA"]) == [("gpp-toy", "GPP", "default"), ("gpp-toy", "PCA", "")]
    with pytest.raises(
        UnknownNameError, match=r"--only gpp-toy/GPP/: unknown preset 'best'; valid presets: default, paper"
    ):
        variants(suite, ["gpp-toy/GPP/best"])
    with pytest.raises(UnknownNameError, match=r"--only gpp-toy/: unknown entry label ''"):
        variants(suite, ["gpp-toy//default"])
    with pytest.raises(
        UnknownNameError, match=r"--only gpp-toy/: unknown entry label 'pca'; valid entry labels: GPP, PCA"
    ):
        variants(suite, ["gpp-toy/pca"])
    with pytest.raises(UnknownNameError, match=r"--only: unknown row 'nope'; valid rows: gpp-toy"):
        variants(suite, ["nope/GPP"])


def test_importing_the_package_loads_no_torch_ray_or_mlflow():
    """Every module of veil.reproduce keeps torch, Ray and MLflow function-local (checked in a fresh interpreter)."""
    code = (
        "import json, sys\nimport veil.cli.reproduce, veil.reproduce.render, veil.reproduce.runs\n"
        "print(json.dumps([m for m in ('torch', 'ray', 'mlflow') if m in sys.modules]))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("started", [True, False])
def test_ray_session_shuts_down_only_the_ray_it_started(monkeypatch, started):
    """ray_session shuts Ray down when its block ends (an exception included) only when ensure_ray started or
    joined it; a Ray already up is left running (unit test: ensure_ray and ray are replaced)."""
    import types

    import veil.platform.cluster as cluster

    calls: list[str] = []
    ray = types.SimpleNamespace(up=not started, shutdown=lambda: calls.append("shutdown"))  # up already: not started
    ray.is_initialized = lambda: ray.up

    def ensure_ray(address=None, **kw):
        calls.append(f"ensure {address}")
        ray.up = True
        return started

    monkeypatch.setattr(cluster, "ensure_ray", ensure_ray)
    monkeypatch.setitem(sys.modules, "ray", ray)
    with pytest.raises(RuntimeError, match="inside"):
        with cluster.ray_session("auto") as got:
            assert got is started and calls == ["ensure auto"]
            raise RuntimeError("inside")
    assert calls == ["ensure auto", "shutdown"] if started else ["ensure auto"]


def test_the_readmes_block_is_current():
    """README.md's reproduction block is what tools/reproduce_readme.py renders from the committed results.json
    (re-render with `make docs` after a reproduction run)."""
    assert reproduce_readme.main(["--check"]) == 0
