"""`veil run` end to end from the command line (inline executor, embedded MLflow store)."""

import json
from dataclasses import dataclass

import pytest
import torch
from mlflow.tracking import MlflowClient

from veil.cli import main
from veil.config import param
from veil.methods import METHODS
from veil.methods.baselines import Autoencoder, AutoencoderConfig
from veil.methods.table import register_method

# small probes trained long enough to read what z carries (2 epochs of the default probe are 6 Adam steps)
PROBES = ["--set", "audit.epochs=10", "--set", "audit.lr=0.01", "--set", "audit.hidden=[32]"]
FAST = ["--set", "epochs=2", "--set", "n=400", *PROBES, "--quiet"]
# GPP's hyperparameters in full, so a change of defaults does not move the utility asserted below
GPP = ["beta=1.0", "d_z=8", "lambda_kl=0.0", "k=2", "lr=0.01", "encoder_hidden=[32]", "head_hidden=[16]"]
GPP += ["privacy_loss=neg-ce", "release=sample", "batch_size=64", "release_seed=0"]  # pinned release noise


def run_json(capsys, *argv) -> dict:
    assert main(["run", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def sets(values: list[str]) -> list[str]:
    return [arg for v in values for arg in ("--set", v)]


def test_run_from_flags_logs_everything(in_tmp, capsys):
    out = run_json(capsys, "--method", "gpp", "--dataset", "gaussian-correlated", *sets(GPP), *FAST)
    assert out["params"]["method.beta"] == 1.0 and out["params"]["executor"] == "inline"
    # measured at seeds 0, 1, 2: utility AUC 0.886, 0.869, 0.868 (chance 0.5)
    assert out["metrics"]["utility_auc/u"] == out["metrics"]["utility_auc"] >= 0.78
    client = MlflowClient(tracking_uri=f"sqlite:///{in_tmp / 'mlflow.db'}")
    run = client.get_run(out["run_id"])
    assert run.info.status == "FINISHED"
    assert client.get_experiment(run.info.experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"
    assert run.data.params["method.d_z"] == "8" and run.data.params["dataset.rho"] == "0.5"
    assert len(client.get_metric_history(run.info.run_id, "loss/encoder")) == 2  # one row per epoch
    arts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"model", "audit", "training"} <= arts
    model = {a.path for a in client.list_artifacts(run.info.run_id, "model")}
    assert model == {"model/config.json", "model/state.pt", "model/features.json"}


def test_run_from_yaml_file_with_cli_override(in_tmp, capsys):
    (in_tmp / "run.yaml").write_text(
        "method: eigan\ndataset: gaussian-two-allies\nseed: 3\n"
        "params: {alpha: 0.7, epochs: 10, d_z: 2, batch_size: 64, encoder_hidden: [64], head_hidden: [32],\n"
        "  lr_encoder: 0.001, lr_ally: 0.001, lr_adversary: 0.001, privacy_loss: neg-ce, optimizer: adam,\n"
        "  release_noise: 0}\n"
        "dataset_params: {n: 300}\naudit: {epochs: 10, lr: 0.01, hidden: [32]}\n"
    )
    out = run_json(capsys, "run.yaml", "--set", "alpha=0.6", "--quiet")
    assert out["params"]["method.alpha"] == 0.6 and out["params"]["seed"] == 3 and out["params"]["dataset.seed"] == 3
    m = out["metrics"]
    # both allies are probed and averaged; measured at seeds 3, 4, 5: utility AUC 0.898, 0.987, 0.926
    assert m["utility_auc"] == pytest.approx((m["utility_auc/ally_1"] + m["utility_auc/ally_2"]) / 2, abs=1e-9)
    assert m["utility_auc"] >= 0.8 and m["adversary_acc"] == m["adversary_acc/adversary"]


def test_gpu_without_cuda_warns_and_tags_the_device(in_tmp, capsys):
    ae = sets(["epochs=20", "d_z=2", "encoder_hidden=[64]", "lr=0.01", "batch_size=64", "n=400", "seed=0"])
    argv = ["run", "-m", "autoencoder", "-d", "gaussian-quadrant", "--gpu", "--executor", "inline", *ae, *PROBES]
    assert main([*argv, "--json"]) == 0
    captured = capsys.readouterr()
    out, err = json.loads(captured.out.strip().splitlines()[-1]), captured.err
    cuda = torch.cuda.is_available()
    warned = "[veil] warning: --gpu / use_gpu: no CUDA device found" in err and "training runs on CPU" in err
    assert warned != cuda
    client = MlflowClient(tracking_uri=f"sqlite:///{in_tmp / 'mlflow.db'}")
    assert client.get_run(out["run_id"]).data.tags["veil.device"] == ("cuda:0" if cuda else "cpu")
    assert out["params"]["use_gpu"] is True
    # an autoencoder hides nothing: measured adversary accuracy 0.99, 1.0, 1.0 at seeds 0, 1, 2
    assert out["metrics"]["adversary_acc"] >= 0.9


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--method", "nope", "--dataset", "gaussian-quadrant"], "unknown method 'nope'; valid methods:"),
        (
            ["--method", "eigan", "--dataset", "gaussian-quadrant", "--set", "alpha=1.5"],
            "'alpha': 1.5 (allowed: float > 0 and < 1)",
        ),
        (
            ["--method", "gpp", "--dataset", "gaussian-correlated", "--set", "beta=-1"],
            "'beta': -1.0 (allowed: float >= 0)",
        ),
        (["--method", "gpp", "--dataset", "gaussian-correlated", "--set", "d_z=0"], "'d_z': 0 (allowed: int >= 1)"),
        (["--method", "gpp", "--dataset", "gaussian-correlated", "--set", "k=-2"], "'k': -2 (allowed: int >= 0)"),
        (
            ["--method", "gpp", "--dataset", "gaussian-correlated", "--set", "rho=1.2"],
            "'rho': 1.2 (allowed: float >= 0 and <= 1)",
        ),
        (
            ["--method", "gpp", "--dataset", "gaussian-correlated", "--set", "d_z=abc"],
            "'d_z': 'abc' (allowed: an integer)",
        ),
        (["--method", "gpp", "--dataset", "gaussian-correlated", "--set", "betta=1"], "unknown parameter 'betta'"),
        (["--method", "gpp", "--dataset", "no-such-data"], "unknown dataset 'no-such-data'"),
    ],
)
def test_bad_input_fails_before_training(in_tmp, capsys, argv, needle):
    assert main(["run", *argv, "--quiet"]) == 2
    assert needle in capsys.readouterr().err
    assert not (in_tmp / "mlflow.db").exists()  # nothing started, nothing recorded


def test_unknown_yaml_key_is_named(in_tmp, capsys):
    (in_tmp / "bad.yaml").write_text("method: gpp\ndataset: gaussian-correlated\nparms: {beta: 1}\n")
    assert main(["run", "bad.yaml"]) == 2
    err = capsys.readouterr().err
    assert "bad.yaml" in err and "'parms'" in err and "params" in err


@dataclass(frozen=True)
class CrashConfig(AutoencoderConfig):
    crash_at: int = param(1, "epoch at which training raises", ge=0)


class CrashingAutoencoder(Autoencoder):
    """A plug-in method (registered like any other) whose training raises at a chosen epoch."""

    name = "test-crash"
    Config = CrashConfig
    description = "raises mid-training (tests only)"

    def build(self):
        super().build()
        self.steps = 0

    def train_step(self, batch, sampler, ctx):
        self.steps += 1
        if self.steps > self.config.crash_at * sampler.steps_per_epoch:
            raise RuntimeError("boom at epoch %d" % self.config.crash_at)
        return super().train_step(batch, sampler, ctx)


@pytest.fixture
def crashing_method():
    register_method(CrashingAutoencoder)
    yield "test-crash"
    METHODS.pop("test-crash")


def test_crash_mid_training_leaves_a_failed_run_with_what_was_logged(in_tmp, crashing_method):
    with pytest.raises(RuntimeError, match="boom"):
        main(
            [
                "run",
                "-m",
                crashing_method,
                "-d",
                "gaussian-quadrant",
                "--set",
                "epochs=5",
                "--set",
                "crash_at=2",
                "--set",
                "n=300",
                "--quiet",
            ]
        )
    client = MlflowClient(tracking_uri=f"sqlite:///{in_tmp / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("veil").experiment_id])
    assert run.info.status == "FAILED" and "boom" in run.data.tags["error"]
    assert run.data.params["method.crash_at"] == "2"
    assert len(client.get_metric_history(run.info.run_id, "loss/reconstruction")) == 2  # epochs before the crash


def test_methods_and_datasets_listings(capsys):
    assert main(["methods"]) == 0
    out = capsys.readouterr().out
    for name in ("eigan", "gpp", "autoencoder", "pca", "random-projection", "noisy-encoder"):
        assert name in out
    assert "alpha" in out and "lambda_kl" in out
    assert main(["datasets"]) == 0
    out = capsys.readouterr().out
    assert "gaussian-correlated" in out and "rho" in out
