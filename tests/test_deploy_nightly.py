"""The scheduled-nightly files in deploy/nightly/ agree with each other and with `veil nightly`: each one's
command line is accepted by `veil nightly --check` (same flags, the suite it names exists and is valid)."""

from __future__ import annotations

import configparser
import re
import shlex
import subprocess
from pathlib import Path

import yaml

from veil.cli import main

DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "nightly"
ROOT = DEPLOY.parents[1]


def nightly_argv(command: str) -> list[str]:
    """The `veil nightly ...` arguments of a shell command line (up to a redirection)."""
    words = shlex.split(command.replace("\\\n", " "), comments=True)
    start = next(i for i, w in enumerate(words) if w.endswith("veil") and words[i + 1] == "nightly")
    argv = []
    for w in words[start + 1 :]:
        if w.startswith((">", "2>", "|")):
            break
        argv.append(w)
    return argv


def check_accepts(argv: list[str], capsys) -> None:
    argv = [re.sub(r"\$\{?\w+(:-([^}]*))?\}?", lambda m: m.group(2) or "http://127.0.0.1:5000", w) for w in argv]
    assert main([*argv, "--check"]) == 0, capsys.readouterr().err
    assert "valid, nothing was run" in capsys.readouterr().out


def test_systemd_service_and_timer(capsys, monkeypatch):
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.read(DEPLOY / "veil-nightly.service")
    timer = configparser.ConfigParser(strict=False, interpolation=None)
    timer.read(DEPLOY / "veil-nightly.timer")
    assert unit["Service"]["Type"] == "oneshot"
    assert timer["Timer"]["OnCalendar"] == "*-*-* 02:30:00" and timer["Install"]["WantedBy"] == "timers.target"
    monkeypatch.chdir(ROOT)  # the service's WorkingDirectory is the checkout
    check_accepts(nightly_argv(unit["Service"]["ExecStart"]), capsys)


def test_crontab_and_ci_schedule_run_at_the_same_time(capsys, monkeypatch):
    nightly, reproduce = [x for x in (DEPLOY / "crontab").read_text().splitlines() if x and not x.startswith("#")]
    fields = nightly.split(maxsplit=5)
    assert fields[:5] == ["30", "2", "*", "*", "*"]
    assert reproduce.split(maxsplit=5)[:5] == ["30", "3", "*", "*", "*"]  # the reproductions' quick form after it
    ci = yaml.safe_load((DEPLOY / "github-actions-nightly.yml").read_text())
    assert ci[True]["schedule"] == [{"cron": "30 2 * * *"}]  # YAML 1.1 reads the key `on` as True
    monkeypatch.chdir(ROOT)
    for line in (fields[5], reproduce.split(maxsplit=5)[5]):
        check_accepts(nightly_argv(line), capsys)
    steps = [s["run"] for s in ci["jobs"]["nightly"]["steps"] if "veil nightly" in s.get("run", "")]
    assert len(steps) == 2 and "--quick" in steps[1]
    for step in steps:
        check_accepts(nightly_argv(step), capsys)


def test_ray_job_form_submits_a_valid_nightly(capsys, monkeypatch):
    script = DEPLOY / "ray-job-nightly.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    assert "ray job submit" in text and "--working-dir ." in text
    monkeypatch.chdir(ROOT)  # the job's working directory is the uploaded checkout
    check_accepts(nightly_argv(text.split("exec ", 1)[1]), capsys)
