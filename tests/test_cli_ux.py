"""What a newcomer reads on the console: `veil methods` lines up and says what each field does, errors name
the flag that was typed, and the user's own data take one label syntax everywhere."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from veil.cli import main
from veil.config import field_table
from veil.methods import METHODS
from veil.methods.configs.method_card import ClosedFormConfig
from veil.methods.method import Method

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
FIELD_ROW = re.compile(r"^    (\S+)\s+default (.+?)\s{2,}(\S)")


def test_methods_listing_lines_up_across_methods(capsys):
    assert main(["methods"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [m for m in map(FIELD_ROW.match, lines) if m]
    longest = max(len(f.name) for cls in METHODS.values() for f in dataclasses.fields(cls.Config))
    assert longest == len("classifier_hidden")  # adjustable-ae's; the case the misalignment was seen on
    assert len(rows) == sum(len(dataclasses.fields(cls.Config)) for cls in METHODS.values())
    assert {m.start(2) for m in rows} == {4 + longest + 2 + len("default ")}  # one default column for all
    assert len({m.start(3) for m in rows}) == 1  # and one doc column
    headers = [ln for ln in lines if not ln.startswith(" ") and "  —  " in ln]
    assert len(headers) == len(METHODS)
    gpp = next(h for h in headers if h.startswith("gpp "))
    assert gpp.endswith("[source: GPP paper (seed 001), Alg. 1, eq. 39]")
    assert not any(re.search(r"\[seeds? 00\d", h) for h in headers)  # a paper never reads like the seed field


def test_field_docs_say_what_unused_fields_are():
    docs = {name: {r["name"]: r["doc"] for r in field_table(cls.Config)} for name, cls in METHODS.items()}
    closed_form = sorted(name for name, cls in METHODS.items() if issubclass(cls.Config, ClosedFormConfig))
    assert closed_form == ["dp-input", "linear-arl", "pca", "random-projection"]
    assert all(METHODS[name].train_step is Method.train_step for name in closed_form)  # none has a training step
    for name in closed_form:
        assert docs[name]["epochs"].startswith("unused: the method is fitted in closed form"), name
        assert docs[name]["batch_size"].startswith("unused:"), name
    for name in ("gpp", "eigan", "autoencoder"):
        assert docs[name]["epochs"] == "passes over the training data", name
    assert docs["adjustable-ae"]["d_z"].startswith("unused: this method releases x'")
    assert docs["dp-input"]["d_z"].startswith("unused: this method releases the noisy input")
    assert "width d_in" in docs["adjustable-ae"]["d_z"] and "ignored" not in docs["adjustable-ae"]["d_z"]


def test_methods_name_aligns_its_departures(capsys):
    assert main(["methods", "eigan"]) == 0
    out = capsys.readouterr().out
    block = out.split("(why):\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [ln.split(":")[0].strip() for ln in block] == list(METHODS["eigan"].paper_values)
    # every value starts in one column, after the longest key ('adversary_steps:')
    assert {len(ln) - len(ln[4:].split(":", 1)[1].lstrip()) for ln in block} == {4 + len("adversary_steps:") + 1}


def _allowed(err: str) -> str:
    """The '(allowed: ...)' part of an error line."""
    return err.split("(allowed: ", 1)[1].rstrip().removesuffix(")")


def test_bad_partition_names_the_flag_before_anything_starts(in_tmp, capsys):
    argv = ["run", "-m", "d-eigan", "-d", "gaussian-nodes", "--partition", "dirichlet:abc"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: invalid value for '--partition': 'dirichlet:abc' (allowed: dirichlet:ALPHA with ALPHA a number > 0 "
        "(e.g. dirichlet:0.3), or dirichlet:alpha=ALPHA,label=LABEL)\n"
    )  # one line: no progress bar, no 'alpha' field to confuse with EIGAN's alpha
    assert not (in_tmp / "mlflow.db").exists()
    assert main(["run", "-m", "d-eigan", "-d", "gaussian-nodes", "--partition", "quantity:0"]) == 2
    assert "'--partition': 'quantity:0' (allowed: quantity:ALPHA with ALPHA a number > 0" in capsys.readouterr().err
    # a sweep spec with the same scheme gets the same words, naming its key
    (in_tmp / "s.yaml").write_text(
        "method: d-eigan\ndataset: gaussian-nodes\npartition: dirichlet:abc\nspace: {phi: {type: float, low: 0.1, "
        "high: 1}}\nobjectives: [{metric: utility_auc, direction: max}, {metric: privacy_gap, direction: min}]\n"
    )
    assert main(["sweep", "s.yaml", "--check"]) == 2
    sweep_err = capsys.readouterr().err
    assert "s.yaml: invalid value for 'partition': 'dirichlet:abc'" in sweep_err
    assert _allowed(sweep_err) == _allowed(err)


def test_federation_options_on_a_centralized_method_are_refused_alike(in_tmp, capsys):
    assert main(["run", "-m", "gpp", "-d", "gaussian-correlated", "--partition", "iid"]) == 2
    flag_err = capsys.readouterr().err
    assert flag_err.startswith("error: invalid value for '--partition': 'iid'")
    (in_tmp / "r.yaml").write_text("method: gpp\ndataset: gaussian-correlated\npartition: iid\n")
    assert main(["run", "r.yaml"]) == 2
    file_err = capsys.readouterr().err
    assert file_err.startswith("error: invalid value for 'partition': 'iid'")
    (in_tmp / "s.yaml").write_text(
        "method: gpp\ndataset: gaussian-correlated\npartition: iid\nspace: {beta: {type: log, low: 0.1, high: 2}}\n"
        "objectives: [{metric: utility_auc, direction: max}, {metric: privacy_gap, direction: min}]\n"
    )
    assert main(["sweep", "s.yaml", "--check"]) == 2
    sweep_err = capsys.readouterr().err
    expected = "nothing: method 'gpp' is centralized (partition is for federated methods)"
    assert _allowed(flag_err) == _allowed(file_err) == _allowed(sweep_err) == expected
    assert main(["run", "-m", "gpp", "-d", "gaussian-correlated", "--runtime", "virtual"]) == 2
    assert "'--runtime': 'virtual' (allowed: nothing: method 'gpp' is centralized" in capsys.readouterr().err
    assert not (in_tmp / "mlflow.db").exists()


def test_own_data_labels_take_one_syntax(in_tmp, capsys):
    csv = str(EXAMPLES / "applicants.csv")
    ok = "ok: gpp on {} (6000 train / 2000 test rows, 7 features; utility approved; sensitive group)"
    assert main(["run", "-m", "gpp", "-d", csv, "-p", "utility=approved", "-p", "sensitive=group", "--check"]) == 0
    assert capsys.readouterr().out.startswith(ok.format(csv))
    (in_tmp / "r.yaml").write_text(f"method: gpp\ndataset: {csv}\ndataset_params: {{utility: approved}}\n")
    assert main(["run", "r.yaml", "--dataset-param", "sensitive=group", "--check"]) == 0  # file + flag merge
    assert capsys.readouterr().out.startswith(ok.format(csv))
    assert main(["datasets", "partition", csv, "-p", "utility=approved", "-p", "sensitive=group", "--nodes", "2"]) == 0
    table = capsys.readouterr().out
    assert table.startswith(f"{csv} (train, 6000 rows) -> 2 nodes, scheme iid, seed 0\nnode  rows  approved")
    counts = [line.split()[2:] for line in table.splitlines()[2:]]  # the file's class names, not codes 0 and 1
    assert [[c.split(":")[0] for c in row] for row in counts] == [["no", "yes", "A", "B"]] * 2
    assert sum(int(row[0].split(":")[1]) + int(row[1].split(":")[1]) for row in counts) == 6000
    # leaving a label out: the error says what to type, in the syntax of where it is typed
    assert main(["run", "-m", "gpp", "-d", csv, "-p", "utility=approved", "--check"]) == 2
    err = capsys.readouterr().err
    assert f"error: {csv}: no sensitive label column named: add -p sensitive=COLUMN on the command line" in err
    assert "dataset_params: {sensitive: COLUMN} in a run file or sweep spec" in err and "{'" not in err
    assert "columns: age, income, debt_ratio, region, group, approved" in err
    assert main(["run", "-m", "gpp", "-d", csv, "-p", "colour=group", "--check"]) == 2
    assert "error: -p: unknown parameter 'colour'; valid parameters: card, categorical" in capsys.readouterr().err


def test_progress_bar_names_the_audit_and_reads_honest_rates(in_tmp, capsys):
    """The bar counts the first epoch without a made-up rate (it once read 11428 epoch/s), shows the losses under
    their full names, and closes when the audit and the certificate start, each named on its own line (the bar
    used to sit at 100% through a longer audit with no word)."""
    argv = ["run", "-m", "eigan", "-d", "gaussian-correlated", "--set", "epochs=3", "--set", "alpha=0.5"]
    argv += ["-p", "n=400", "--set", "audit.epochs=2", "--target", "privacy_gap=0.3"]
    assert main(argv) == 0  # a run's own knob: certified, met or not, exit 0
    err = capsys.readouterr().err
    frames = [f.strip() for f in err.replace("\r", "\n").splitlines() if f.strip()]
    bars = [f for f in frames if f.startswith("eigan on gaussian-correlated")]
    assert "1/3 [00:00<?, ?epoch/s" in bars[0]  # no rate from one epoch
    assert "3/3" in bars[-1] and "adversary/s=" in bars[-1] and "ally/u=" in bars[-1] and "encoder=" in bars[-1]
    audit = frames.index("[veil] auditing the release: 2 fresh probes (256-128, 2 epochs) on 300 train / 100 test rows")
    assert audit > frames.index(bars[-1])
    assert frames[audit + 1].startswith("[veil] certifying the release against privacy_gap <= 0.3: adversary suite")


def test_a_reader_that_leaves_the_pipe_ends_the_command_quietly():
    """`veil methods | head -1`: once the reader has gone, the command stops with the shell's SIGPIPE status and
    no traceback (before: a BrokenPipeError traceback on the console)."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "veil"), "methods"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader leaves before the first write: that write fails, deterministically
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


CYCLE = """
import gc, sys
from veil.cli import {fn}
gc.disable()  # nothing collects the cycle before the exit does, or not at all
class Noisy:
    def __del__(self):
        print("collected at exit")
cycle = Noisy()
cycle.me = cycle
del cycle
sys.argv = ["veil", "--version"]
sys.exit({fn}())
"""


def test_the_script_skips_pythons_last_collection_and_main_alone_keeps_it():
    """The `veil` script (`entry`) leaves what is left at exit to the operating system instead of walking it
    once more; `main`, which a caller's process (a test session) goes on from, changes nothing."""
    import subprocess
    import sys
    from importlib.metadata import entry_points

    (script,) = [ep for ep in entry_points(group="console_scripts") if ep.name == "veil"]
    assert script.value == "veil.cli:entry"
    assert "entry()" in (Path(__file__).resolve().parents[1] / "src/veil/cli/__main__.py").read_text()
    outs = {
        fn: subprocess.run([sys.executable, "-c", CYCLE.format(fn=fn)], capture_output=True, text=True, timeout=60)
        for fn in ("entry", "main")
    }
    assert [o.returncode for o in outs.values()] == [0, 0]
    assert "collected at exit" not in outs["entry"].stdout
    assert "collected at exit" in outs["main"].stdout
