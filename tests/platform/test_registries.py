"""Executors and federation runtimes are chosen by registered name; an unknown name is refused listing the
valid ones, and `veil run` refuses it before anything starts."""

from __future__ import annotations

import pytest

from veil.cli import main
from veil.errors import UnknownNameError
from veil.pipeline.runspec import choose_executor
from veil.platform.executors import EXECUTORS, get_executor
from veil.platform.federation import RUNTIME_NAMES, get_runtime


def test_executors_by_name():
    assert set(EXECUTORS) == {"inline", "ray-train", "federated"}
    with pytest.raises(UnknownNameError) as e:
        get_executor("spark")
    assert e.value.valid == ["federated", "inline", "ray-train"]


@pytest.mark.parametrize(
    ("asked", "workers", "gpu", "federated", "chosen"),
    [
        ("auto", 1, False, False, "inline"),
        ("auto", 2, False, False, "ray-train"),
        ("auto", 1, True, False, "ray-train"),
        ("inline", 1, False, False, "inline"),
        ("ray-train", 1, False, False, "ray-train"),
        ("auto", 1, False, True, "federated"),
    ],
)
def test_auto_executor_rule(asked, workers, gpu, federated, chosen):
    assert choose_executor(asked, workers, gpu, federated) == chosen


def test_runtimes_by_name():
    assert RUNTIME_NAMES == ("auto", "in-process", "ray-actors", "virtual")
    assert get_runtime("auto").name == "virtual" and get_runtime("in-process").name == "in-process"
    with pytest.raises(UnknownNameError) as e:
        get_runtime("threads")
    assert e.value.valid == sorted(RUNTIME_NAMES)


def test_cli_refuses_unknown_runtime_before_anything_starts(in_tmp, capsys):
    assert main(["run", "-m", "d-eigan", "-d", "gaussian-nodes", "--runtime", "threads", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "'--runtime'" in err and "in-process" in err and "virtual" in err
    assert not (in_tmp / "mlflow.db").exists()
