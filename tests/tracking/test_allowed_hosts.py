"""A tracking server reached by an address MLflow's host check does not admit by default (issue 28): MLflow 3
answers /health but refuses every API call with 403 'Invalid Host header' for a Host other than localhost or a
private address. Served on a second loopback address, 127.0.0.2, and reached by that address: started plainly, Veil
refuses it up front naming the fix; started by mlflow/start-server.sh (which admits its own address), a run logs."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from own_server import OwnServer
from veil.cli import main
from veil.errors import TrackingUnavailable
from veil.tracking.mlflow_run import check_tracking

pytestmark = pytest.mark.slow  # two `mlflow server` starts


def test_a_server_that_refuses_its_address_is_refused_up_front_with_the_fix(tmp_path, capsys):
    server = OwnServer(tmp_path, host="127.0.0.2")
    server.start()
    try:
        with pytest.raises(TrackingUnavailable) as e:
            check_tracking(server.uri)
        host = f"127.0.0.2:{server.port}"
        assert "answers /health but refuses API calls" in str(e.value) and f"--allowed-hosts {host}" in str(e.value)
        argv = ["run", "-m", "pca", "-d", "gaussian-quadrant", "-p", "n=400", "--tracking-uri", server.uri]
        assert main(argv) == 2  # before any data load or MLflow run, not a traceback at the first log call
        assert f"Start it with `--allowed-hosts {host}`" in capsys.readouterr().err
    finally:
        server.stop()


def test_start_server_script_admits_its_own_address(tmp_path, in_tmp, capsys):
    server = OwnServer(tmp_path, host="127.0.0.2", script=True)
    server.start()
    try:
        assert check_tracking(server.uri) == server.uri
        argv = ["run", "-m", "pca", "-d", "gaussian-quadrant", "-p", "n=400", "--set", "audit.epochs=2"]
        assert main([*argv, "--tracking-uri", server.uri, "--quiet"]) == 0
        runs = MlflowClient(server.uri).search_runs(experiment_ids=["0", "1"])
        assert [r.info.status for r in runs] == ["FINISHED"]
    finally:
        server.stop()
