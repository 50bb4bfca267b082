"""Every command README.md and docs/*.md show runs as written, so the docs cannot drift from the code.

Commands come from fenced shell blocks (```bash / sh / shell / console) and from inline code that starts with
`veil `, `make `, `python ` or `pytest `. Cheap ones run as written; the rest are checked as far as they go
without starting the work they describe:
- `veil run` / `veil sweep` / `veil nightly`: with `--check` (every parameter validated; `run` also loads the data).
- `veil resume` / `report` / `ui` / `sync` / `release`, `veil datasets fetch` / `verify`, and `partition` of a real
  dataset (they need a sweep, a run, a server or the network): their `--help` (`veil release` itself runs end to end in
  tests/test_release_cmd.py). So does a synopsis (`veil sweep SPEC [--name NAME]`).
- `make TARGET`: `make -n TARGET` succeeds, and every `veil` command its recipe runs is checked as above.
- `. .venv/bin/activate`: the environment the Makefile creates is that one.
- `python benchmarks/X.py`: its `--help`; `python tools/X.py`: its `--check` (the page it writes is current);
  `pytest ... FILE`: the file and its markers exist.
The example run files also run end to end (shortened with flags), and the quickstart figures the docs quote are
the recorded ones in benchmarks/quickstart.json."""

from __future__ import annotations

import atexit
import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from veil.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "benchmarks" / "README.md",
    ROOT / "studies" / "README.md",
]
SHELL = ("bash", "sh", "shell", "console")
FENCE = re.compile(r"^```(\S*)\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"(?<!`)`((?:veil|make|python|pytest) [^`]+|veil)`(?!`)")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z_]*$|\.\.\.|[\[\]|{}]")
"""A token that makes a command a synopsis: NAME, SPEC, '...', [optional], a|b, {choices}."""


def documented_commands() -> list[tuple[str, str]]:
    """(where, command) for every command the docs show; a fenced block without a language fails the test."""
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for m in FENCE.finditer(text):
            lang, body = m.group(1), m.group(2)
            line = text[: m.start()].count("\n") + 1
            assert lang, f"{doc.name}:{line}: a fenced block needs a language (bash for commands, text otherwise)"
            if lang in SHELL:
                for cmd in body.replace("\\\n", " ").splitlines():
                    if cmd.strip() and not cmd.lstrip().startswith("#"):
                        out.append((f"{doc.relative_to(ROOT)}:{line}", cmd))
        prose = FENCE.sub("", text)
        out += [(f"{doc.relative_to(ROOT)} (inline)", m.group(1)) for m in INLINE.finditer(prose)]
    first = {}
    for where, cmd in out:  # a command shown twice is checked once, where it first appears
        first.setdefault(" ".join(cmd.split()), where)
    return [(where, cmd) for cmd, where in first.items()]


COMMANDS = documented_commands()


def subcommand(args: list[str]) -> list[str]:
    """The leading words that name the (sub)command: ['datasets', 'show'] of 'datasets show adult'."""
    words = []
    for a in args:
        if a.startswith("-") or (words and words[0] not in ("datasets",)) or len(words) == 2:
            break
        words.append(a)
    return words


def is_synopsis(args: list[str]) -> bool:
    """NAME-style placeholders, a path that is only an example (./mydata.csv), 'show/fetch/partition', or a
    command that needs arguments shown without them (`veil run`)."""
    if any(PLACEHOLDER.search(a) or a.startswith("./") and not (ROOT / a).exists() for a in args):
        return True
    path = subcommand(args)
    return (
        "/" in path[-1]
        or args == path
        and (path[0] in ("run", "sweep", "resume", "report", "release") or len(path) == 2)
    )


def veil_plan(args: list[str]) -> list[str]:
    """The argv `veil` is checked with for the documented `veil ARGS`."""
    path = subcommand(args)
    if not path:  # `veil`, `veil --help`, `veil --version`
        return args or ["--help"]
    if is_synopsis(args):
        return [*(p for p in path if "/" not in p), "--help"]
    if path[0] in ("run", "sweep", "nightly"):
        return [*args, "--check"]
    if path[0] in ("resume", "report", "ui", "sync", "release") or path[:2] in (
        ["datasets", "fetch"],
        ["datasets", "verify"],
    ):
        return [*path, "--help"]
    if path[:2] == ["datasets", "partition"]:
        from veil.datasets.catalog import get_dataset_entry

        if get_dataset_entry(args[2]).kind == "real":
            return [*path, "--help"]
    return args


def run_veil(argv: list[str], capsys, ok: tuple[int, ...] = (0,)) -> str:
    try:
        code = main(argv)
    except SystemExit as e:  # --help
        code = e.code
    out = capsys.readouterr()
    # a real dataset the tests do not hold: the command's flags and spec were checked before its data
    unfetched = code == 2 and "has not been fetched" in out.err
    assert code in ok or unfetched, f"veil {shlex.join(argv)} exited {code}: {out.err[-2000:]}"
    return out.out


PLUGIN_NAMES = {"mean-nulling", "tilted-blobs"}
"""What examples/plugin registers: documented commands naming them run with the plugin installed."""
_plugin_dir: list[Path] = []


def plugin_process(argv: list[str]) -> None:
    """`argv` in a process that has examples/plugin installed (pip, into a folder of its own, once)."""
    from plugin_install import install_plugin, with_plugin

    if not _plugin_dir:
        folder = Path(tempfile.mkdtemp(prefix="veil-plugin-"))
        atexit.register(shutil.rmtree, folder, True)
        _plugin_dir.append(install_plugin(folder))
    env = {**with_plugin(_plugin_dir[0]), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def check(cmd: str, capsys) -> None:
    argv = [a for a in shlex.split(cmd, comments=True) if a != "&"]
    if argv[0] in (".", "source"):
        makefile = (ROOT / "Makefile").read_text()
        assert argv[1] == ".venv/bin/activate" and "VENV ?= .venv" in makefile and "-m venv $(VENV)" in makefile
    elif argv[0] == "make":
        dry = subprocess.run(["make", "-n", *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert dry.returncode == 0, dry.stderr
        for line in dry.stdout.splitlines():
            if "/bin/veil " in line:
                check("veil " + line.split("/bin/veil ", 1)[1], capsys)
    elif argv[:3] == ["python", "-m", "veil.cli"]:
        check(shlex.join(["veil", *argv[3:]]), capsys)
    elif argv[0] == "python" and argv[1].startswith("tools/"):
        proc = subprocess.run(
            [sys.executable, argv[1], "--check"], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0, proc.stderr
    elif argv[:4] == ["python", "-m", "pip", "download"]:
        assert "PKG" in argv  # pip's own synopsis, quoted for fetching data by hand
    elif argv[0] == "python" and argv[1].startswith(("benchmarks/", "studies/")):
        proc = subprocess.run([sys.executable, argv[1], "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
    elif argv[0] == "pytest":
        pyproject = (ROOT / "pyproject.toml").read_text()
        assert all((ROOT / a).is_file() for a in argv if a.endswith(".py"))
        assert all(f'"{m}:' in pyproject for flag, m in zip(argv, argv[1:]) if flag == "-m")
    elif argv[:4] == ["pip", "install", "-e", "examples/plugin"]:
        assert '[project.entry-points."veil.methods"]' in (ROOT / "examples/plugin/pyproject.toml").read_text()
    elif argv[:3] == ["python", "-m", "veil.audit.conformance"]:
        args = ["--help"] if is_synopsis(argv[3:]) else argv[3:]
        plugin_process([sys.executable, "-m", "veil.audit.conformance", *args])
    elif argv[0] == "veil" and PLUGIN_NAMES & set(argv):  # the example plugin's names: run where it is installed
        plugin_process([str(Path(sys.executable).with_name("veil")), *veil_plan(argv[1:])])
    elif argv[0] == "veil":
        run_veil(veil_plan(argv[1:]), capsys)
    elif argv[:3] == ["ray", "job", "submit"]:  # the job's own command is checked as a documented one
        check(shlex.join(argv[argv.index("--") + 1 :]), capsys)
    elif argv[0] == "ray" and argv[1] in ("up", "dashboard", "attach"):
        from ray.autoscaler._private.util import prepare_config, validate_config

        validate_config(prepare_config(yaml.safe_load((ROOT / argv[2]).read_text())))
    elif argv[0] == "export":
        assert re.match(r"^[A-Z_]+=\S+$", argv[1]), argv
    elif argv[0].startswith("deploy/") and argv[0].endswith(".sh"):
        assert subprocess.run(["bash", "-n", str(ROOT / argv[0])]).returncode == 0
    else:
        pytest.fail(f"no rule for the documented command {cmd!r}: teach tests/test_docs_commands.py how to run it")


def test_docs_show_commands():
    where = {w.split(":")[0].split(" ")[0] for w, _ in COMMANDS}
    assert {"README.md", "docs/sweeps.md", "docs/federation.md", "docs/datasets.md"} <= where
    shown = {c for _, c in COMMANDS}
    assert "veil run examples/eigan-quadrant.yaml" in shown and ". .venv/bin/activate" in {
        c.split("#")[0].strip() for c in shown
    }


@pytest.mark.parametrize("where,cmd", COMMANDS, ids=[f"{w} {c}"[:120] for w, c in COMMANDS])
def test_every_documented_command_runs(where, cmd, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the docs' paths (examples/, sweeps/) are relative to the repository root
    check(cmd, capsys)


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "examples").glob("*.yaml")))
def test_example_run_files_run(example, monkeypatch, tmp_path, capsys):
    """Each example end to end (training, calibration where its knob is unset, audit, certificate, MLflow),
    shortened by flags as a user could. A calibrated example may end in exit 3 at two epochs (calibration could
    not meet the target): then, and only then, its certificate is not met."""
    monkeypatch.chdir(ROOT)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    short = ["--set", "epochs=2", "--set", "audit.epochs=2", "--tracking-uri", uri, "--quiet", "--json"]
    spec = __import__("yaml").safe_load((ROOT / "examples" / example).read_text())
    calibrated = "beta" not in spec["params"] and "alpha" not in spec["params"]
    out = run_veil(["run", f"examples/{example}", *short], capsys, ok=(0, 3) if calibrated else (0,))
    result = json.loads(out.strip().splitlines()[-1])
    assert result["params"]["method"] == spec["method"] and result["params"]["dataset"] == spec["dataset"]
    assert 0 <= result["metrics"]["privacy_gap"] <= 0.5 and 0 <= result["metrics"]["utility_auc"] <= 1
    cert = result["certificate"]
    assert cert["target"] == {"excess_gap": 0.05} and cert["knob"]["set_by"] == ("calibration" if calibrated else "run")
    if calibrated:
        assert cert["met"] == (result["metrics"]["certificate/met"] == 1.0)


def _script(path: str, name: str):
    """A script of benchmarks/ or studies/ loaded as a module by its path (tools/ is on the tests' path)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_targets_doc_is_rendered_from_the_recorded_results():
    """tools/targets_doc.py renders docs/targets.md as committed from benchmarks/targets.py's record."""
    doc = importlib.import_module("targets_doc")
    data = doc.load()
    assert doc.render_text(data) == (ROOT / "docs" / "targets.md").read_text(), "rerun python tools/targets_doc.py"
    assert doc.main(["--check"]) == 0
    bench = _script("benchmarks/targets.py", "targets_bench")  # what the page repeats of the benchmark is its own
    assert (doc.RESULTS, doc.METHODS, doc.QUICK, doc.QUICK_TARGET, doc.SWEEP_CASE) == (
        bench.RESULTS,
        bench.METHODS,
        bench.QUICK,
        bench.QUICK_TARGET,
        bench.SWEEP_CASE,
    )
    assert set(data["cases"]) == {f"{m}/{d}" for m in bench.METHODS for d in bench.DATASETS}  # the page has every case


def test_eigan_defaults_doc_is_rendered_from_the_recorded_results():
    """tools/eigan_defaults_doc.py renders docs/eigan-defaults.md as committed from studies/eigan_defaults.py's
    record."""
    doc = importlib.import_module("eigan_defaults_doc")
    data = doc.load()
    assert data["schedule"] and data["noise"]
    expected = (ROOT / "docs" / "eigan-defaults.md").read_text()
    assert doc.render_text(data) == expected, "rerun python tools/eigan_defaults_doc.py"
    assert doc.main(["--check"]) == 0
    study = _script("studies/eigan_defaults.py", "eigan_defaults_study")  # what the page repeats of the study
    assert (doc.RESULTS, doc.SCHEDULE_ALPHAS, doc.SCHEDULE_SEEDS, doc.NOISE_METHODS, doc.NOISE_CASES) == (
        study.RESULTS,
        study.SCHEDULE_ALPHAS,
        study.SCHEDULE_SEEDS,
        study.NOISE_METHODS,
        study.NOISE_CASES,
    )


def test_quoted_quickstart_figures_are_the_recorded_ones():
    """tools/quickstart_quote.py's blocks and durations, made from benchmarks/quickstart.py's record, are the ones
    the docs show."""
    quote = importlib.import_module("quickstart_quote")
    assert quote.RECORD == _script("benchmarks/quickstart.py", "quickstart_bench").RECORD
    record = json.loads(quote.RECORD.read_text())
    assert record["command"] == "veil sweep sweeps/quickstart.yaml"
    for name in quote.QUOTED_IN:
        text = (ROOT / name).read_text()
        assert text.count(quote.BEGIN) == 1, name
        assert quote.block(record) in text, f"{name}: rerun `python tools/quickstart_quote.py`"
    for name in quote.DURATION_IN:  # one duration, the recorded one, wherever the quickstart's time is said
        text = (ROOT / name).read_text()
        assert quote.duration(record) in text and {m.group(0) for m in quote.DURATION.finditer(text)} == {
            quote.duration(record)
        }, f"{name}: rerun `python tools/quickstart_quote.py`"
        lines = [ln for ln in text.splitlines() if "quickstart" in ln.lower() and quote.BEGIN not in ln]
        assert not [ln for ln in lines if re.search(r"\d[\d.-]* ?min", ln) and "(recorded)" not in ln], name
    assert quote.main(["--check"]) == 0
    hv = f"hypervolume {record['hypervolume']:.4f}"
    assert hv in (ROOT / "README.md").read_text() and hv in (ROOT / "docs" / "sweeps.md").read_text()


def test_coverage_tables_are_rendered_from_the_recorded_results():
    """tools/coverage_doc.py writes docs/certificates.md's coverage tables as committed from benchmarks/coverage.py's
    record, with a row for every statistic and cell the record holds."""
    doc = importlib.import_module("coverage_doc")
    data = doc.load()
    assert doc.main(["--check"]) == 0, "rerun python tools/coverage_doc.py"
    bench = _script("benchmarks/coverage.py", "coverage_bench")
    assert doc.RESULTS == bench.RESULTS
    assert {r["statistic"] for r in data["records"]} == set(doc.STATISTICS)
    page = (ROOT / "docs" / "certificates.md").read_text()
    cells = {(r["kind"], r["share"], r["rows"]) for r in data["records"]}
    assert len(cells) == len(bench.KINDS) * len(bench.SHARES) * len(bench.SIZES)  # the full grid, as recorded
    assert page.count("| null (five ") == len(bench.SHARES) * len(bench.SIZES) * len(doc.STATISTICS)


def test_a_generator_checks_or_writes_only_what_is_stale(tmp_path, capsys):
    """tools/doc_file.py, every generator's last step: --check names each stale file with its command and writes
    nothing (exit 1); without it, only the stale files are written."""
    from doc_file import write_or_check

    current, stale = tmp_path / "current.md", tmp_path / "stale.md"
    current.write_text("same\n")
    stale.write_text("old\n")
    texts = {current: "same\n", stale: "new\n"}
    assert write_or_check(texts, check=True, command="python tools/x.py") == 1
    assert stale.read_text() == "old\n"
    assert capsys.readouterr().err == f"{stale} is not current: run python tools/x.py\n"
    before = current.stat().st_mtime_ns
    assert write_or_check(texts, check=False, command="python tools/x.py") == 0
    assert stale.read_text() == "new\n" and current.stat().st_mtime_ns == before
    assert write_or_check(texts, check=True, command="python tools/x.py") == 0
