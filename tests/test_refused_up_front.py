"""Bad input that used to pass validation and crash late (or retry for minutes) is refused by `veil run` before
any data load or MLflow run: non-finite floats, sizes that cannot fit in memory, broken run-file YAML, unknown
tracking-URI schemes and unreachable or unwritable tracking stores. Exit 2, the field named, nothing recorded."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from veil.cli import main
from veil.config import build
from veil.methods.ldp_frl import LDPFRLConfig
from veil.sizing import check_memory, dataset_terms, model_terms
from veil.tracking import check_tracking

ROOT = Path(__file__).resolve().parents[1]
RUN = ["run", "--method", "gpp", "--dataset", "gaussian-correlated", "--quiet"]


def refused(capsys, *argv: str) -> str:
    assert main([*RUN, *argv]) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    "assignment,needle",
    [
        ("beta=inf", "method 'gpp': invalid value for 'beta': inf (allowed: float >= 0; a finite number"),
        ("lr=inf", "invalid value for 'lr': inf (allowed: float > 0; a finite number"),
        ("lambda_kl=inf", "invalid value for 'lambda_kl': inf"),
        ("beta=-inf", "invalid value for 'beta': -inf"),
        ("beta=nan", "invalid value for 'beta': nan"),
        ("audit.lr=inf", "audit: invalid value for 'lr': inf"),
        ("rho=inf", "dataset 'gaussian-correlated': invalid value for 'rho': inf"),
        ("d_z=1000000000", "invalid value for 'd_z': 1000000000 (allowed: a size that fits in memory"),
        ("n=10000000000", "invalid value for 'dataset.n': 10000000000 (allowed: a size that fits in memory"),
        ("dim=100000000", "invalid value for 'dim': 100000000 (allowed: int >= 4 and <= 4096)"),
        ("audit.suite=[]", "audit: invalid value for 'suite': [] (allowed: one or more of logistic | mlp-32"),
        ("beta=", "invalid value for 'beta': '' (allowed: a number)"),
    ],
)
def test_values_that_crashed_late_are_refused(in_tmp, capsys, assignment, needle):
    assert needle in refused(capsys, "--set", assignment)
    assert not (in_tmp / "mlflow.db").exists()


def test_eps_inf_keeps_its_meaning_no_noise():
    assert build(LDPFRLConfig, {"eps": "inf"}).eps == float("inf")
    with pytest.raises(ValueError, match="'eps': nan .*nan is refused"):
        build(LDPFRLConfig, {"eps": "nan"})


def test_memory_estimate_names_the_largest_field():
    from veil.datasets.synthetic import CorrelatedParams
    from veil.methods.gpp import GPPConfig

    data = CorrelatedParams(n=1000, dim=10)
    d_in, terms = dataset_terms(data)
    assert (d_in, terms) == (10, {"n": 1000 * 10 * 8})
    model = model_terms(GPPConfig(d_z=4, encoder_hidden=(32,), head_hidden=(16,)), d_in, False)
    # weights, grads and Adam's two moments, float32: 10x32 + 32x4 + 4x16
    assert model == {"encoder_hidden": (10 * 32 + 32 * 4) * 16, "head_hidden": 4 * 16 * 16}
    check_memory(GPPConfig(), data, "gaussian-correlated", False, budget=2**30)
    # (256 x 1e7 + 1e7 x 128) x 16 bytes = 57.2 GiB at GPP's default widths (512, 256) and head (128,)
    with pytest.raises(ValueError, match=r"'d_z': 10000000 .*about 57\.2 GiB .* and 1\.0 GiB are available"):
        check_memory(GPPConfig(d_z=10_000_000), data, "gaussian-correlated", False, budget=2**30)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--set", "beta=1", "--set", "beta=2"], "'--set': 'beta=2' (allowed: one value per key (beta is set twice))"),
        (["-p", "n=900", "--set", "n=2000"], "'-p': 'n=900' (allowed: one value per key (n is also given by --set))"),
        (["-p", "n=900", "-p", "n=2000"], "'-p': 'n=2000' (allowed: one value per key (n is given twice))"),
        (["--target", "privacy_gap=0.1", "--target", "privacy_gap=0.2"], "(privacy_gap is given twice)"),
        (["--target", "none", "--target", "privacy_gap=0.2"], "'none' alone, or METRIC=BOUND flags without it"),
    ],
)
def test_a_value_given_twice_is_refused_not_overwritten(in_tmp, capsys, argv, needle):
    """Two values for one key used to keep one of them silently (the last, or -p's over --set's)."""
    assert needle in refused(capsys, *argv)


def test_repeated_keys_and_an_empty_target_in_a_run_file_are_refused(in_tmp, capsys):
    """A second `method:` used to replace the first without a word; `target: {}` used to mean no target."""
    (in_tmp / "twice.yaml").write_text("method: gpp\ndataset: gaussian-correlated\nmethod: eigan\n")
    assert main(["run", "twice.yaml", "--check"]) == 2
    assert "valid YAML: the key 'method' appears twice at line 3, column 1" in capsys.readouterr().err
    (in_tmp / "empty.yaml").write_text("method: gpp\ndataset: gaussian-correlated\ntarget: {}\n")
    assert main(["run", "empty.yaml", "--check"]) == 2
    assert "invalid value for 'target': {} (allowed: a mapping of bounds" in capsys.readouterr().err
    (in_tmp / "off.yaml").write_text("method: gpp\ndataset: gaussian-correlated\ntarget: off\n")  # YAML: false
    assert main(["run", "off.yaml", "-p", "n=900", "--check"]) == 0
    assert "no leakage target" in capsys.readouterr().out


def test_check_refuses_what_the_run_would(in_tmp, capsys):
    """`--check` makes the store's and the federation's checks too, and creates nothing."""
    assert main([*RUN, "--tracking-uri", "foo://bar", "--check"]) == 2
    assert "invalid value for '--tracking-uri': 'foo://bar'" in capsys.readouterr().err
    fed = ["run", "-m", "d-eigan", "-d", "gaussian-nodes", "-p", "n=900", "--target", "none", "--check"]
    assert main([*fed, "--partition", "silo:nope"]) == 2
    assert "partition: unknown column 'nope'" in capsys.readouterr().err
    assert main([*fed, "--set", "K=2000"]) == 2
    assert "'K': 2000 (allowed: at most the 675 training rows" in capsys.readouterr().err
    assert sorted(p.name for p in in_tmp.iterdir() if p.name != ".veil") == []


def test_the_advice_of_an_uncertifiable_target_stays_in_range(in_tmp, capsys):
    """On 5 test rows no bound calibration can use fits under 0.5: the advice says so instead of naming 1.58."""
    err = refused(capsys, "-p", "n=20", "--check")
    assert "(no bound up to 0.5 leaves calibration room on these rows), or say --target none" in err
    assert "RuntimeWarning" not in err and "excess_gap=1" not in err


def test_broken_yaml_run_file_names_file_and_line(in_tmp, capsys):
    (in_tmp / "broken.yaml").write_text("method: gpp\ndataset: gaussian-correlated\nparams: {beta: 1\n  d_z: [2\n")
    assert main(["run", "broken.yaml"]) == 2
    err = capsys.readouterr().err
    assert "'run file': 'broken.yaml'" in err and "valid YAML: expected ',' or '}'" in err and "line 4" in err
    assert "Traceback" not in err


def test_unknown_tracking_scheme_names_the_flag_and_the_schemes(in_tmp, capsys):
    err = refused(capsys, "--tracking-uri", "bogus://x")
    assert "invalid value for '--tracking-uri': 'bogus://x'" in err
    assert "http, https, sqlite, file, postgresql, mysql, mssql" in err


def test_filesystem_store_is_refused_with_the_sqlite_alternative(in_tmp, capsys, monkeypatch):
    """MLflow 3 keeps its filesystem store in maintenance mode and raises deep in the first client call."""
    err = refused(capsys, "--tracking-uri", "mlruns")
    assert f"invalid value for '--tracking-uri': '{in_tmp}/mlruns'" in err
    assert f"use sqlite:///{in_tmp}/mlruns/mlflow.db (or set MLFLOW_ALLOW_FILE_STORE=true)" in err
    assert "Traceback" not in err and not (in_tmp / "mlruns").exists()
    err = refused(capsys, "--tracking-uri", "mlflow.db")  # a bare database path: sqlite on that file
    assert f"use sqlite:///{in_tmp}/mlflow.db (or set" in err
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow's own opt-out is honoured
    assert check_tracking("mlruns") == str(in_tmp / "mlruns")


def test_unreachable_server_is_refused_in_seconds(in_tmp, capsys, monkeypatch, unused_port):
    uri = f"http://127.0.0.1:{unused_port}"  # nothing listens there
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    t0 = time.time()
    err = refused(capsys)
    seconds = time.time() - t0
    assert f"MLFLOW_TRACKING_URI: the MLflow tracking store {uri} is not usable" in err
    assert "Connection refused" in err and "nothing was started" in err
    assert seconds < 10, seconds  # MLflow's own retries took 249 s
    assert not (in_tmp / "mlflow.db").exists() and not (in_tmp / ".veil").exists()


def test_an_unusable_key_directory_is_refused_before_anything_runs(in_tmp, capsys, monkeypatch):
    """The run keeps its release key after training: a key directory that cannot be made is refused up front."""
    (in_tmp / "afile").write_text("")
    monkeypatch.setenv("VEIL_KEY_DIR", str(in_tmp / "afile" / "keys"))
    err = refused(capsys)
    assert f"the release key directory {in_tmp}/afile/keys cannot be used: {in_tmp}/afile is a file" in err
    assert "Traceback" not in err and not (in_tmp / "mlflow.db").exists()


def test_unwritable_sqlite_directory_is_refused(in_tmp, capsys):
    err = refused(capsys, "--tracking-uri", f"sqlite:///{in_tmp}/missing/dir/mlflow.db")
    assert f"the directory {in_tmp}/missing/dir does not exist" in err


def test_a_live_server_passes_the_check(mlflow_server):
    t0 = time.time()
    assert check_tracking(mlflow_server) == mlflow_server
    assert time.time() - t0 < 3


def test_memory_estimate_counts_federated_nodes_and_user_files(tmp_path):
    """A federation holds one model per node (named by K); a user's table is sized from the file without loading
    it (CSV: size over mean line length; parquet: its footer)."""
    import numpy as np
    import pandas as pd

    from veil.datasets.files import FileParams
    from veil.datasets.synthetic import CorrelatedParams
    from veil.methods.d_gpp import DGPPConfig
    from veil.methods.gpp import GPPConfig
    from veil.sizing import file_terms

    data = CorrelatedParams(n=1000, dim=10)
    one = sum(model_terms(DGPPConfig(K=1), 10, False).values())
    check_memory(DGPPConfig(K=5), data, "gaussian-correlated", False, budget=one * 7 + 80_000)
    with pytest.raises(ValueError, match=r"invalid value for 'K': 100000 \(allowed: a size that fits in memory"):
        check_memory(DGPPConfig(K=100_000), data, "gaussian-correlated", False, budget=2**30)

    frame = pd.DataFrame(np.arange(3000 * 5).reshape(3000, 5) % 97, columns=list("abcde"))
    csv, parquet = tmp_path / "t.csv", tmp_path / "t.parquet"
    frame.to_csv(csv, index=False)
    frame.to_parquet(parquet)
    table = 3000 * 5 * 8 * 3  # float64 cells, held three times (frame, features, tensors)
    assert file_terms(parquet) == (5, {"dataset": table})
    cols, csv_terms = file_terms(csv)
    assert cols == 5 and csv_terms["dataset"] == pytest.approx(table, rel=0.01)
    with pytest.raises(ValueError, match=rf"invalid value for 'dataset': '{csv}' \(allowed: a size that fits"):
        check_memory(
            GPPConfig(encoder_hidden=(4,), d_z=2, head_hidden=(2,)), FileParams(), str(csv), False, budget=table // 2
        )


def test_a_node_local_store_is_refused_for_work_on_a_cluster(in_tmp, capsys, monkeypatch):
    """Trials on a Ray cluster log from the node they run on: a sqlite store there is another file. Refused
    (exit 2, how to start the server) before Ray is joined; a server URI passes; plain local runs keep sqlite."""
    from veil.platform.cluster import joins_cluster
    from veil.tracking.mlflow_run import require_shared_store

    (in_tmp / "s.yaml").write_text((ROOT / "sweeps" / "quickstart.yaml").read_text())
    assert main(["sweep", "s.yaml", "--address", "127.0.0.1:1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"invalid value for 'the default tracking store': 'sqlite:///{in_tmp}/mlflow.db'" in err
    assert "bash mlflow/start-server.sh" in err and not (in_tmp / ".veil").exists()
    assert main([*RUN, "--executor", "ray-train", "--address", "auto"]) == 2
    assert "a tracking server every node reaches" in capsys.readouterr().err
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    with pytest.raises(ValueError, match="node-local|a different file on each node"):
        require_shared_store(f"sqlite:///{in_tmp}/mlflow.db", joins_cluster(None))  # $RAY_ADDRESS: a cluster
    require_shared_store("http://127.0.0.1:5000", joins_cluster(None))
    require_shared_store(f"sqlite:///{in_tmp}/mlflow.db", joins_cluster("local"))


# Names MLflow refuses mid-run (issue 28's reliability re-test: tracebacks at exit 1) are refused up front.
LONG = "x" * 600


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--experiment", ""], "invalid value for 'experiment': ''"),
        (["--experiment", "   "], "invalid value for 'experiment': '   '"),
        (
            ["--experiment", LONG],
            "invalid value for 'experiment': 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx... (600 chars)'",
        ),
        (["--run-name", "x" * 251], "invalid value for 'run_name'"),
        (["--experiment", "tab\there"], "invalid value for 'experiment'"),
    ],
)
def test_names_mlflow_would_refuse_are_refused_by_run_and_check(in_tmp, capsys, argv, needle):
    err = refused(capsys, *argv)
    assert needle in err and "MLflow's limit" in err
    assert main([*RUN, *argv, "--check"]) == 2 and needle in capsys.readouterr().err
    assert not (in_tmp / "mlflow.db").exists()


def test_name_limits_are_mlflows():
    from mlflow.store.tracking.dbmodels.models import SqlRun
    from mlflow.utils.validation import MAX_EXPERIMENT_NAME_LENGTH

    from veil.names import MLFLOW_NAME_LIMITS, check_mlflow_name

    assert MLFLOW_NAME_LIMITS == {
        "experiment": MAX_EXPERIMENT_NAME_LENGTH,
        "run_name": SqlRun.__table__.c.name.type.length,
    }
    assert check_mlflow_name("experiment", "x" * 500) == "x" * 500
    with pytest.raises(ValueError, match="at most 500"):
        check_mlflow_name("experiment", "x" * 501)


def test_names_are_refused_in_run_files_and_sweep_specs(in_tmp, capsys):
    from veil.sweeps.sweepspec import sweep_from_mapping

    (in_tmp / "run.yaml").write_text(f"method: gpp\ndataset: gaussian-correlated\nexperiment: '{LONG}'\n")
    assert main(["run", str(in_tmp / "run.yaml"), "--check"]) == 2
    assert "invalid value for 'experiment'" in capsys.readouterr().err
    spec = {
        "method": "gpp",
        "dataset": "gaussian-correlated",
        "space": {"beta": {"type": "float", "low": 0, "high": 1}},
        "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "privacy_gap", "direction": "min"}],
    }
    for bad in ("", LONG):
        with pytest.raises(ValueError, match="'experiment'.*MLflow's limit"):
            sweep_from_mapping({**spec, "experiment": bad})


# Sizes of time (issue 28): a typo of a dozen zeros is refused before anything trains.
@pytest.mark.parametrize(
    "method,assignment",
    [("gpp", "epochs=1000000000000"), ("gpp", "audit.epochs=20000"), ("d-eigan", "delta=100000")],
)
def test_epochs_beyond_the_documented_limit_are_refused(in_tmp, capsys, method, assignment):
    argv = ["run", "-m", method, "-d", "gaussian-correlated", "--set", assignment, "--check"]
    assert main(argv) == 2
    assert "<= 10000" in capsys.readouterr().err


def test_sweep_trials_beyond_the_limit_are_refused():
    from veil.sweeps.spec_keys import MAX_TRIALS
    from veil.sweeps.sweepspec import sweep_from_mapping

    spec = {
        "method": "gpp",
        "dataset": "gaussian-correlated",
        "space": {"beta": {"type": "float", "low": 0, "high": 1}},
        "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "privacy_gap", "direction": "min"}],
    }
    assert sweep_from_mapping({**spec, "trials": MAX_TRIALS}).trials == MAX_TRIALS
    with pytest.raises(ValueError, match=r"'trials': 1000000000000 \(allowed: an integer from 1 to 10000"):
        sweep_from_mapping({**spec, "trials": 1_000_000_000_000})


# A mistyped key (issue 28): the nearest names suggested, each valid key listed once, only keys that apply.
def test_unknown_key_suggests_the_near_name_and_lists_only_what_applies(in_tmp, capsys):
    err = refused(capsys, "--set", "rhoo=0.5")
    assert "unknown parameter 'rhoo' (did you mean 'rho'?)" in err
    listed = err.split("valid parameters: ")[1].strip().split(", ")
    assert len(listed) == len(set(listed)) and listed.count("seed") == 1
    assert not [k for k in listed if k.startswith("fed.")]  # gpp is centralized
    assert {"beta", "rho", "audit.epochs", "calibration.validation"} <= set(listed)
    assert main(["run", "-m", "d-eigan", "-d", "gaussian-correlated", "--set", "alph=1", "--check"]) == 2
    err = capsys.readouterr().err
    assert "(did you mean 'alpha'?)" in err and "fed.hosts" in err
    assert "did you mean" not in refused(capsys, "--set", "qqqq=1")
