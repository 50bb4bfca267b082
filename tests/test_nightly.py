"""`veil nightly`: regression rules (pure logic) and two real nightlies against one MLflow store."""

import json
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from veil.cli import main
from veil.errors import ConfigError, UnknownNameError
from veil.nightly_suite import DEFAULT_SUITE, Tolerances, compare, format_checks, load_suite

ROOT = Path(__file__).resolve().parents[1]
TOL = Tolerances(utility=0.02, leakage=0.02, throughput=0.5, hypervolume=0.05)


def statuses(current, previous):
    return {c.name: c.ok for c in compare(current, previous, TOL)}


def test_first_nightly_has_nothing_to_regress_against():
    assert all(statuses({"a/utility_auc": 0.9, "a/privacy_gap": 0.1, "a/adversary_auc": 0.6}, None).values())


def test_utility_drop_and_leakage_rise_at_equal_utility_are_regressions():
    prev = {
        "a/utility_auc": 0.90,
        "a/privacy_gap": 0.10,
        "a/adversary_auc": 0.60,
        "a/rows_per_second": 1000.0,
        "s/hypervolume": 0.40,
    }
    assert all(statuses(prev, prev).values())
    s = statuses({**prev, "a/utility_auc": 0.85}, prev)
    assert s["a/utility_auc"] is False
    s = statuses({**prev, "a/privacy_gap": 0.15, "a/adversary_auc": 0.65}, prev)
    assert s["a/privacy_gap"] is False
    # more leakage bought with as much more utility is a trade-off move, not a regression
    s = statuses({**prev, "a/privacy_gap": 0.15, "a/utility_auc": 0.95}, prev)
    assert s["a/privacy_gap"] is True
    assert statuses({**prev, "a/rows_per_second": 400.0}, prev)["a/rows_per_second"] is False
    assert statuses({**prev, "a/rows_per_second": 600.0}, prev)["a/rows_per_second"] is True
    assert statuses({**prev, "s/hypervolume": 0.37}, prev)["s/hypervolume"] is False


def test_leakage_is_the_gap_so_an_inverted_adversary_is_a_regression_and_raw_auc_only_information():
    prev = {"a/utility_auc": 0.90, "a/privacy_gap": 0.10, "a/adversary_auc": 0.60}
    # the adversary now ranks s backwards: its AUC FELL to 0.2, but it leaks more (gap 0.3)
    checks = {c.name: c for c in compare({**prev, "a/privacy_gap": 0.30, "a/adversary_auc": 0.20}, prev, TOL)}
    assert (
        checks["a/privacy_gap"].ok is False and checks["a/privacy_gap"].note == "rose 0.200 with utility change +0.000"
    )
    raw = checks["a/adversary_auc"]
    assert (raw.checked, raw.ok, raw.current, raw.previous) == (False, True, 0.20, 0.60)
    table = format_checks(list(checks.values()))
    assert "| a/adversary_auc | 0.2 | 0.6 | information (not checked) |" in table
    assert "| a/privacy_gap | 0.3 | 0.1 | REGRESSION: rose 0.200" in table
    # a raw AUC that rises is not a regression on its own either (the gap decides)
    assert statuses({**prev, "a/adversary_auc": 0.90}, prev)["a/adversary_auc"] is True


def test_suite_digest_follows_a_sweep_specs_content_not_its_comments(tmp_path):
    spec = tmp_path / "s.yaml"
    text = (ROOT / "sweeps" / "quickstart.yaml").read_text()
    spec.write_text(text)
    suite = tmp_path / "suite.yaml"
    suite.write_text("sweeps: {q: s.yaml}\n")
    before = load_suite(suite).digest
    spec.write_text("# another comment\n" + text)
    assert load_suite(suite).digest == before
    # the hypervolume of other objectives is another figure: the next nightly starts a new baseline
    spec.write_text(
        text.replace("metric: privacy_gap", "metric: adversary_auc").replace("privacy_gap: 0.5", "adversary_auc: 1.0")
    )
    assert load_suite(suite).digest != before


def test_the_shipped_suite_is_package_data_and_holds_the_quickstart_sweep(tmp_path, monkeypatch, capsys):
    """An installed Veil runs its nightly from any directory: the suite is inside the package, its sweep inline
    and equal to the README's quickstart spec, and --print-suite hands it over for editing."""
    monkeypatch.chdir(tmp_path)  # no checkout here
    assert DEFAULT_SUITE.parent == Path(__import__("veil").__file__).parent
    suite = load_suite(DEFAULT_SUITE)
    assert set(suite.runs) == {"gpp-correlated", "eigan-quadrant", "ldp-frl-correlated", "gpp-calibrated"}
    shipped = yaml.safe_load(DEFAULT_SUITE.read_text())["sweeps"]["quickstart"]
    assert shipped == yaml.safe_load((ROOT / "sweeps" / "quickstart.yaml").read_text())
    assert suite.sweeps["quickstart"].trials == 14
    assert main(["nightly", "--check"]) == 0
    out = capsys.readouterr().out
    assert "4 runs, 1 sweeps: valid" in out
    # every run faced the target check a real nightly will: the calibrating one on its data
    assert out.count("would certify") == 3 and out.count("would calibrate beta to excess_gap <= 0.05") == 1
    assert main(["nightly", "--print-suite"]) == 0
    mine = tmp_path / "mine.yaml"
    mine.write_text(capsys.readouterr().out)
    assert load_suite(mine).digest == suite.digest


def test_check_refuses_a_run_whose_test_split_cannot_certify_its_target(tmp_path, capsys):
    """The shipped suite once held an EIGAN run that calibrated on 500 test rows: valid YAML, refused (exit 2) by
    the nightly itself. --check now loads each run's data and applies that check."""
    suite = tmp_path / "s.yaml"
    run = {"method": "eigan", "dataset": "gaussian-quadrant", "dataset_params": {"n": 2000}, "params": {"epochs": 1}}
    suite.write_text(yaml.safe_dump({"runs": {"quadrant": run}}))
    assert main(["nightly", "--suite", str(suite), "--check"]) == 2
    err = capsys.readouterr().err
    assert "cannot be certified on 500 test rows" in err and "-p n=" in err


def test_a_sweep_given_inline_or_by_path_is_one_suite(tmp_path):
    spec = yaml.safe_load((ROOT / "sweeps" / "quickstart.yaml").read_text())
    (tmp_path / "q.yaml").write_text(yaml.safe_dump(spec))
    by_path, inline = tmp_path / "a.yaml", tmp_path / "b.yaml"
    by_path.write_text("sweeps: {q: q.yaml}\n")
    inline.write_text(yaml.safe_dump({"sweeps": {"q": spec}}))
    assert load_suite(by_path).digest == load_suite(inline).digest
    inline.write_text(yaml.safe_dump({"sweeps": {"q": {**spec, "trials": -1}}}))
    with pytest.raises(ConfigError, match="trials"):
        load_suite(inline)  # a sweep is validated with the suite, before anything runs
    inline.write_text("sweeps: {q: [1, 2]}\n")
    with pytest.raises(ConfigError, match="sweeps.q"):
        load_suite(inline)


def test_suite_validation_names_the_problem(tmp_path):
    bad = tmp_path / "s.yaml"
    bad.write_text("experiment: x\nrunz: {}\n")
    with pytest.raises(UnknownNameError, match="runz"):
        load_suite(bad)
    bad.write_text("runs:\n  a: {method: gpp, dataset: gaussian-correlated, params: {beta: -1}}\n")
    with pytest.raises(ConfigError, match="'beta'"):
        load_suite(bad)


def write_suite(folder: Path, experiment: str) -> Path:
    """A one-run suite (a tiny autoencoder, throughput never checked) into `experiment`."""
    run = {
        "method": "autoencoder",
        "dataset": "gaussian-quadrant",
        "dataset_params": {"n": 300},
        "params": {"epochs": 2, "d_z": 2},
        "audit": {"epochs": 2},
    }
    suite = folder / "suite.yaml"
    suite.write_text(yaml.safe_dump({"experiment": experiment, "runs": {"ae": run}, "tolerances": {"throughput": 1.0}}))
    return suite


def test_two_nightlies_compare_against_each_other(in_tmp, capsys):
    suite = write_suite(in_tmp, "nightly-test")
    assert main(["nightly", "--suite", str(suite)]) == 0
    first = capsys.readouterr().out
    assert "baseline: none" in first and "ae/utility_auc" in first and "| ae/privacy_gap |" in first
    assert "| ae/adversary_auc |" in first and "information (not checked)" in first
    assert main(["nightly", "--suite", str(suite)]) == 0  # same seeds, same figures
    second = capsys.readouterr().out
    assert "baseline: none" not in second and "REGRESSION" not in second
    client = MlflowClient(tracking_uri=f"sqlite:///{in_tmp / 'mlflow.db'}")
    exp = client.get_experiment_by_name("nightly-test")
    parents = client.search_runs([exp.experiment_id], "tags.`veil.nightly` = 'true'")
    assert len(parents) == 2 and all(p.info.status == "FINISHED" for p in parents)
    assert {p.data.tags["veil.baseline"] for p in parents} - {"none"}  # the second names the first


def test_nightly_against_a_server_fails_on_an_injected_regression_and_plots_the_trend(mlflow_server, in_tmp, capsys):
    """Two nightlies into a real MLflow server on 127.0.0.1; before the second, the first's recorded utility is
    raised by 0.2 (a better past: the same suite now does worse). The second exits 1 with the regression in its
    table and report, and each nightly stores its trend across nightlies as `nightly/trend.png` + `trend.json`."""
    experiment = f"nightly-server-{in_tmp.name}"
    suite = write_suite(in_tmp, experiment)
    argv = ["nightly", "--suite", str(suite), "--tracking-uri", mlflow_server]
    assert main(argv) == 0
    capsys.readouterr()
    client = MlflowClient(tracking_uri=mlflow_server)
    exp = client.get_experiment_by_name(experiment)
    (first,) = client.search_runs([exp.experiment_id], "tags.`veil.nightly` = 'true'")
    recorded = first.data.metrics["ae/utility_auc"]
    client.log_metric(first.info.run_id, "ae/utility_auc", recorded + 0.2, step=1)  # the injected regression

    assert main(argv) == 1
    out, err = capsys.readouterr()
    row = next(line for line in out.splitlines() if line.startswith("| ae/utility_auc |"))
    assert f"| {recorded + 0.2:.4g} | REGRESSION" in row and "1 regression(s)" in err
    second = next(
        r
        for r in client.search_runs([exp.experiment_id], "tags.`veil.nightly` = 'true'")
        if r.info.run_id != first.info.run_id
    )
    assert second.data.tags["veil.regressions"] == "1" and second.data.tags["veil.baseline"] == first.info.run_id
    files = {a.path for a in client.list_artifacts(second.info.run_id, "nightly")}
    assert files == {"nightly/report.md", "nightly/trend.png", "nightly/trend.json"}
    local = Path(client.download_artifacts(second.info.run_id, "nightly", str(in_tmp / "dl")))
    assert (local / "trend.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    trend = json.loads((local / "trend.json").read_text())
    assert [round(t["ae/utility_auc"], 6) for t in trend][0] == round(recorded + 0.2, 6) and len(trend) == 2
    assert "REGRESSION" in (local / "report.md").read_text()


@pytest.mark.parametrize(
    "content,needle",
    [
        ("runs: {a: [\n", "(allowed: valid YAML: expected the node content"),
        ("!!python/name:os.system\n", "could not determine a constructor for the tag"),
        ("runs: {}\nruns: {}\n", "the key 'runs' appears twice"),
        (b"runs:\n  a: \xff\n", "(allowed: UTF-8 text (byte 11 is not))"),
        ("42\n", "invalid value for 'suite': 42 (allowed: a mapping with keys experiment, tolerances, runs, sweeps)"),
        ("hello\n", "invalid value for 'suite': 'hello' (allowed: a mapping with keys experiment"),
        ("- a\n", "invalid value for 'suite': ['a'] (allowed: a mapping with keys experiment"),
        ("runs: [a]\n", "invalid value for 'runs': ['a'] (allowed: a mapping of names to run specs)"),
        ("sweeps: {q: missing.yaml}\n", "invalid value for 'sweeps.q': 'missing.yaml'"),
        ("sweeps: {q: broken.yaml}\n", "invalid value for 'sweeps.q'"),
        ("kind: reproduce\nrows: [\n", "(allowed: valid YAML"),
        ("kind: reproduce\nrows: [{id: a, paper: p, data: d, entries: 42, figures: []}]\n", "'entries': 42"),
        (
            "kind: reproduce\nrows: [{id: a, paper: p, data: d, entries: {e: {spec: broken.yaml}}, figures: []}]\n",
            "rows[0]: invalid value for 'entries.e.spec'",
        ),
    ],
)
def test_check_refuses_a_bad_suite_file_by_name(in_tmp, capsys, content, needle):
    """Broken YAML, Python tags, non-UTF-8 bytes and a top level that is no mapping: exit 2 naming the file."""
    (in_tmp / "broken.yaml").write_text("method: [\n")
    suite = in_tmp / "s.yaml"
    suite.write_bytes(content if isinstance(content, bytes) else content.encode())
    assert main(["nightly", "--suite", str(suite), "--check"]) == 2
    err = capsys.readouterr().err
    assert needle in err and "s.yaml" in err and "Traceback" not in err
    assert sorted(p.name for p in in_tmp.iterdir()) == ["broken.yaml", "s.yaml"]  # nothing created


def test_check_refuses_a_directory_as_suite(in_tmp, capsys):
    (in_tmp / "suite").mkdir()
    assert main(["nightly", "--suite", "suite", "--check"]) == 2
    assert "invalid value for 'suite': 'suite' (allowed: a YAML file, not a directory)" in capsys.readouterr().err
