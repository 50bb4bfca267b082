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
        ("dim=100000000", "invalid value for 'dataset.dim': 100000000 (allowed: a size that fits in memory"),
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
    from veil.platform.cluster import require_shared_store

    (in_tmp / "s.yaml").write_text((ROOT / "sweeps" / "quickstart.yaml").read_text())
    assert main(["sweep", "s.yaml", "--address", "127.0.0.1:1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"invalid value for 'the default tracking store': 'sqlite:///{in_tmp}/mlflow.db'" in err
    assert "bash mlflow/start-server.sh" in err and not (in_tmp / ".veil").exists()
    assert main([*RUN, "--executor", "ray-train", "--address", "auto"]) == 2
    assert "a tracking server every node reaches" in capsys.readouterr().err
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    with pytest.raises(ValueError, match="node-local|a different file on each node"):
        require_shared_store(f"sqlite:///{in_tmp}/mlflow.db", None)
    require_shared_store("http://127.0.0.1:5000", None)
    require_shared_store(f"sqlite:///{in_tmp}/mlflow.db", "local")
