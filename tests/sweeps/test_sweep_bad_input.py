"""Bad input to `veil sweep`, `veil report` and `veil resume` is refused up front, exit 2, naming the field and what
it allows, and creates nothing: no Tune storage, no MLflow store, no parent run. `--check` refuses what the real start
refuses (the far end of the space, the trial count, the name, the storage, the data). No Ray here."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import optuna
import pytest
import yaml

from veil.cli import main
from veil.sweeps.results import STATE_FILE

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HUGE = 10**12
"""A layer width no machine's memory holds."""

SPEC = {
    "method": "gpp",
    "dataset": "gaussian-correlated",
    "dataset_params": {"n": 400},
    "params": {"epochs": 1},
    "space": {"beta": {"type": "log", "low": 0.1, "high": 2}},
    "objectives": ["utility_auc: max", "privacy_gap: min"],
    "trials": 4,
}


def refused(capsys: pytest.CaptureFixture[str], where: Path, spec: dict, *argv: str) -> str:
    """`veil sweep s.yaml ARGV` exits 2 and leaves only what was there; its stderr."""
    (where / "s.yaml").write_text(yaml.safe_dump(spec))
    before = sorted(where.iterdir())
    assert main(["sweep", "s.yaml", *argv]) == 2
    assert sorted(where.iterdir()) == before  # no .veil, no mlflow.db, no lock file
    err = capsys.readouterr().err
    assert err.startswith("error: ") or "\nerror: " in err, err
    assert "Traceback" not in err
    return err


# --- 1. every end of the space gets the run's validation ------------------------------------------


@pytest.mark.parametrize("check", [["--check"], []])
def test_the_high_end_of_a_range_is_validated_as_a_run(in_tmp, capsys, check):
    """`veil run` refuses a fixed d_z 32 with the ksg estimator (at most 16 columns): so does a space up to 64."""
    spec = {**SPEC, "audit": {"mi": "ksg"}, "space": {"d_z": {"type": "int", "low": 2, "high": 64}}}
    err = refused(capsys, in_tmp, spec, *check)
    assert (
        "s.yaml: invalid value for 'audit.mi': 'ksg' (allowed: variational or mine: the ksg estimator handles z" in err
    )
    assert "(with space.d_z.high = 64)" in err


def test_a_range_end_too_large_for_memory_is_named(in_tmp, capsys):
    spec = {**SPEC, "space": {"beta": SPEC["space"]["beta"], "d_z": {"type": "int", "low": 1, "high": HUGE}}}
    err = refused(capsys, in_tmp, spec, "--check")
    assert f"invalid value for 'space.d_z.high': {HUGE} (allowed: a size that fits in memory" in err


@pytest.mark.parametrize("values", [[[64], [HUGE]], [[64], [HUGE], [32]]])
def test_every_categorical_value_is_validated_as_a_run(in_tmp, capsys, values):
    """Not only the first value: the last, and one in the middle, each with the other parameters at their high end."""
    spec = {**SPEC, "space": {**SPEC["space"], "encoder_hidden": {"type": "categorical", "values": values}}}
    err = refused(capsys, in_tmp, spec, "--check")
    assert f"invalid value for 'space.encoder_hidden.values': [{HUGE}] (allowed: a size that fits in memory" in err


def test_a_space_whose_every_end_validates_passes_the_check(in_tmp, capsys):
    space = {
        "beta": {"type": "log", "low": 0.1, "high": 2},
        "d_z": {"type": "int", "low": 2, "high": 16},
        "encoder_hidden": {"type": "categorical", "values": [[16], [64, 64], [32]]},
    }
    (in_tmp / "s.yaml").write_text(yaml.safe_dump({**SPEC, "audit": {"mi": "ksg"}, "space": space}))
    assert main(["sweep", "s.yaml", "--check"]) == 0
    assert "valid, nothing was run" in capsys.readouterr().out


# --- 2. trial counts, seeds, retries, concurrency and the name ------------------------------------


@pytest.mark.parametrize("trials", ["100000", "-1", "0"])
@pytest.mark.parametrize("check", [["--check"], []])
def test_trials_outside_the_limit_are_refused(in_tmp, capsys, trials, check):
    err = refused(capsys, in_tmp, SPEC, "--trials", trials, *check)
    assert f"invalid value for '--trials': {trials} (allowed: an integer from 1 to 10000 (Veil's limit" in err


def test_trials_given_on_the_command_line_are_what_the_check_reports(in_tmp, capsys):
    (in_tmp / "s.yaml").write_text(yaml.safe_dump(SPEC))
    assert main(["sweep", "s.yaml", "--check", "--trials", "7"]) == 0
    assert "7 trials x 1 seed(s)" in capsys.readouterr().out


def test_trials_times_seeds_beyond_the_limit_are_refused_on_the_command_line(in_tmp, capsys):
    err = refused(capsys, in_tmp, {**SPEC, "seeds": 3}, "--trials", "5000", "--check")
    assert "invalid value for '--trials': 5000 (allowed: at most 10000 runs in all" in err
    assert "5000 trials x 3 seed(s) is 15000 runs" in err


@pytest.mark.parametrize(
    "changes,needle",
    [
        ({"seeds": 100000}, "invalid value for 'seeds': 100000 (allowed: a count from 1 to 10000"),
        ({"seeds": 10**12}, f"invalid value for 'seeds': {10**12} (allowed: a count from 1 to 10000"),
        ({"seeds": 3, "trials": 5000}, "invalid value for 'seeds': 3 (allowed: at most 10000 runs in all"),
        ({"retries": 101}, "invalid value for 'retries': 101 (allowed: an integer from 0 to 100"),
        ({"concurrency": 10001}, "invalid value for 'concurrency': 10001 (allowed: an integer from 1 to 10000"),
    ],
)
def test_settings_beyond_their_stated_limits_are_refused(in_tmp, capsys, changes, needle):
    assert needle in refused(capsys, in_tmp, {**SPEC, **changes}, "--check")


def test_the_largest_settings_within_the_limits_pass(in_tmp, capsys):
    (in_tmp / "s.yaml").write_text(yaml.safe_dump({**SPEC, "trials": 2500, "seeds": 4, "retries": 100}))
    assert main(["sweep", "s.yaml", "--check", "--name", "ok-1.b"]) == 0


def test_a_bad_or_taken_name_is_refused_by_the_check(in_tmp, capsys):
    err = refused(capsys, in_tmp, SPEC, "--check", "--name", "a/b")
    assert "invalid value for '--name': 'a/b' (allowed: letters, digits, '_', '-', '.'" in err
    (in_tmp / ".veil" / "sweeps" / "taken").mkdir(parents=True)
    err = refused(capsys, in_tmp, SPEC, "--check", "--name", "taken")
    assert "invalid value for '--name': 'taken' (allowed: a new sweep name" in err and "veil resume taken" in err


# --- 3. the storage ----------------------------------------------------------------------------


@pytest.mark.parametrize("storage", ["afile", "afile/sweeps"])
@pytest.mark.parametrize("check", [["--check"], []])
def test_a_file_in_the_storages_way_is_refused_before_anything_starts(in_tmp, capsys, storage, check):
    (in_tmp / "afile").write_text("not a directory\n")
    err = refused(capsys, in_tmp, SPEC, "--storage", storage, *check)
    assert f"invalid value for '--storage': '{storage}' (allowed: a directory, or a path one can be made at" in err
    assert (in_tmp / "afile").read_text() == "not a directory\n"


@pytest.mark.parametrize("check", [["--check"], []])
def test_a_key_directory_the_trials_cannot_use_is_refused_before_they_train(in_tmp, capsys, monkeypatch, check):
    """Every trial keeps its release key after training, as `veil run` does: refused up front, not in each trial."""
    (in_tmp / "afile").write_text("")
    monkeypatch.setenv("VEIL_KEY_DIR", str(in_tmp / "afile" / "keys"))
    err = refused(capsys, in_tmp, SPEC, *check)
    assert f"the release key directory {in_tmp}/afile/keys cannot be used: {in_tmp}/afile is a file" in err


def test_a_set_release_seed_keeps_no_key_so_the_key_directory_is_not_checked(in_tmp, capsys, monkeypatch):
    (in_tmp / "afile").write_text("")
    monkeypatch.setenv("VEIL_KEY_DIR", str(in_tmp / "afile" / "keys"))
    spec = {**SPEC, "params": {**SPEC["params"], "release_seed": 3}}
    (in_tmp / "s.yaml").write_text(yaml.safe_dump(spec))
    assert main(["sweep", "s.yaml", "--check"]) == 0


# --- 4, 5, 7. report and resume ----------------------------------------------------------------


@pytest.mark.parametrize("command", ["report", "resume"])
def test_report_and_resume_without_a_store_create_none(in_tmp, capsys, command):
    assert main([command, "NOPE"]) == 2
    err = capsys.readouterr().err
    assert f"veil {command}: there is no MLflow store at {in_tmp.resolve() / 'mlflow.db'}" in err
    assert "(nothing was created)" in err and list(in_tmp.iterdir()) == []


@pytest.mark.parametrize(
    "content,problem",
    [
        (b"\xff\x00garbage", "it is not JSON"),
        (b"[]", "it holds an array, not a JSON object"),
        (
            b'{"tracking_uri": "sqlite:///x.db", "storage": ".", "spec": {}, "source": "s.yaml"}',
            "key 'parent_run_id' is missing",
        ),
        (
            b'{"tracking_uri": "sqlite:///x.db", "parent_run_id": "r", "storage": ".", "spec": [], "source": "s"}',
            "key 'spec' holds an array, not an object",
        ),
    ],
)
@pytest.mark.parametrize("command", ["report", "resume"])
def test_a_damaged_state_file_is_refused_by_name(in_tmp, capsys, command, content, problem):
    state = in_tmp / ".veil" / "sweeps" / "bad" / STATE_FILE
    state.parent.mkdir(parents=True)
    state.write_bytes(content)
    assert main([command, "bad"]) == 2
    err = capsys.readouterr().err
    assert f"error: {Path('.veil/sweeps/bad') / STATE_FILE}: the sweep's state file is damaged: {problem}" in err
    assert "Traceback" not in err and state.read_bytes() == content
    assert sorted(p.name for p in in_tmp.iterdir()) == [".veil"]


def test_report_of_a_run_that_is_no_sweep_says_so_and_lists_the_sweeps(in_tmp, capsys):
    from veil.sweeps.results import TAG_ROLE, TAG_SWEEP
    from veil.tracking import TrackedRun

    uri = f"sqlite:///{in_tmp / 'mlflow.db'}"
    single = TrackedRun.start(uri, "veil", "one-run")
    single.finish()
    sweep = TrackedRun.start(uri, "veil", "s1", tags={TAG_ROLE: "sweep", TAG_SWEEP: "s1"})
    sweep.finish()
    assert main(["report", single.run_id]) == 2
    err = capsys.readouterr().err
    assert f"run {single.run_id} is a single run (as `veil run` logs), not a sweep" in err
    assert "sweeps in the MLflow store at" in err and ": s1 (each the parent run tagged veil.role=sweep)" in err
    assert "None" not in err
    trial = TrackedRun.start(uri, "veil", "t1", parent_run_id=sweep.run_id, tags={TAG_ROLE: "trial", TAG_SWEEP: "s1"})
    trial.finish()
    assert main(["report", trial.run_id]) == 2
    assert "is a trial run of sweep 's1', not a sweep: pass the sweep's name, s1" in capsys.readouterr().err


# --- 6. the check loads the data as the start does ----------------------------------------------


def csv_spec(csv: str, **changes: object) -> dict:
    return {
        **SPEC,
        "dataset": csv,
        "dataset_params": {"utility": "approved", "sensitive": "group"},
        "target": "none",
        **changes,
    }


@pytest.mark.parametrize("check", [["--check"], []])
def test_a_missing_data_file_is_refused_by_the_check_as_by_the_start(in_tmp, capsys, check):
    assert "nope.csv: no such file" in refused(capsys, in_tmp, csv_spec("nope.csv"), *check)


def test_the_check_refuses_what_only_the_data_shows(in_tmp, capsys):
    shutil.copy(EXAMPLES / "applicants.csv", in_tmp / "app.csv")
    err = refused(
        capsys, in_tmp, csv_spec("app.csv", dataset_params={"utility": "nocol", "sensitive": "group"}), "--check"
    )
    assert "utility column 'nocol' not found (columns: age, income, debt_ratio, region, group, approved)" in err
    err = refused(
        capsys, in_tmp, csv_spec("app.csv", objectives=["utility_auc: max", "privacy_gap/approved: min"]), "--check"
    )
    assert "invalid value for 'objectives[1].metric': 'privacy_gap/approved' (allowed: a sensitive label" in err
    lines = (in_tmp / "app.csv").read_text().splitlines()
    head = lines[0].split(",")
    col = head.index("group")
    rows = [",".join("A" if i == col else c for i, c in enumerate(line.split(","))) for line in lines[1:]]
    (in_tmp / "app.csv").write_text("\n".join([lines[0], *rows]) + "\n")
    err = refused(capsys, in_tmp, csv_spec("app.csv"), "--check")
    assert "app.csv: label column 'group' has a single class 'A' in all 8000 rows" in err


class LockedSampler(optuna.samplers.RandomSampler):
    """A plugin's sampler that keeps a lock and no `__getstate__`, as Optuna 5.1's genetic samplers do."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed=seed)
        self.lock = threading.Lock()


def test_a_sampler_that_does_not_pickle_is_refused_before_anything_starts(in_tmp, capsys, monkeypatch) -> None:
    from veil.sweeps import samplers

    entry = samplers.SamplerEntry("locked", lambda spec: LockedSampler(spec.sampler_seed))
    monkeypatch.setitem(samplers._REGISTRY, "locked", entry)
    for argv in (("--check",), ()):
        err = refused(capsys, in_tmp, {**SPEC, "sampler": "locked"}, *argv)
        assert "invalid value for 'sampler': 'locked'" in err and "cannot pickle '_thread.lock' object" in err, err
