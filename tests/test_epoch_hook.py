"""Veil's one instrumentation hook ($VEIL_EPOCH_HOOK): every run calls the named factory's callback once per
epoch with the run's tags; a name that does not load is refused naming the variable (the fault tests' pause
plugs in here, so no production function carries a failpoint)."""

from __future__ import annotations

import pytest
import veil_test_hooks
from mlflow.tracking import MlflowClient

from veil.errors import ConfigError
from veil.pipeline.execute import HOOK_ENV, RunSpec, execute

SPEC = RunSpec(
    "gpp",
    "gaussian-correlated",
    params={"epochs": 3, "beta": 1.0},
    dataset_params={"n": 400},
    audit={"epochs": 2},
    tags={"team": "hooks"},
    target="none",
)


def test_the_hook_sees_every_epoch_with_the_runs_tags_and_flushes(in_tmp, monkeypatch):
    monkeypatch.setenv(HOOK_ENV, "veil_test_hooks:record_epochs")
    veil_test_hooks.RECORDED.clear()
    result = execute(SPEC)
    assert [e for e, _ in veil_test_hooks.RECORDED] == [0, 1, 2]
    assert all(tags == {"team": "hooks"} for _, tags in veil_test_hooks.RECORDED)
    history = MlflowClient(result.tracking_uri).get_metric_history(result.run_id, "loss/encoder")
    assert len(history) == 3


@pytest.mark.parametrize("name", ["nosuch_module:f", "veil_test_hooks:nosuch", "veil_test_hooks"])
def test_a_hook_that_does_not_load_is_refused_by_name(in_tmp, monkeypatch, name):
    monkeypatch.setenv(HOOK_ENV, name)
    with pytest.raises(ConfigError, match=f"invalid value for '{HOOK_ENV}': '{name}'"):
        execute(SPEC)
