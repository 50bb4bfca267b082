"""The sweep at a glance in the real MLflow UI, read by headless Chromium: a tiny sweep (3 trials on a real local
Ray) logs to a real MLflow server on 127.0.0.1; the pages `veil ui` links to are rendered (--dump-dom after a
virtual-time budget: the UI is a React app fetching through MLflow's REST API) and their DOM must show the parent
run in the model-training runs table, the child runs with the searched parameter and the objectives as columns,
and the parent's description with the front as a table linking each front trial's run, and the front plot.
Screenshots are kept under the test's tmp dir, or in $VEIL_TEST_ARTIFACTS (.ci/run: ./test-artifacts); their paths are printed.

Chromium is Debian's `chromium` package (.ci/run installs it); without it the test is skipped, except under CI
(CI=true), where it fails."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest

from veil.sweeps.overview import NOTE_TAG
from veil.sweeps.sweepspec import sweep_from_mapping
from veil.tracking.server import run_path, runs_path

pytestmark = [pytest.mark.ray, pytest.mark.browser]

SWEEP = {
    "method": "gpp",
    "dataset": "gaussian-correlated",
    "dataset_params": {"n": 300},
    "params": {"epochs": 2, "lr": 1.0e-3, "encoder_hidden": [16], "head_hidden": [8], "d_z": 4},
    "audit": {"epochs": 2, "hidden": [16]},
    "space": {"beta": {"type": "categorical", "values": [0.05, 1.0, 4.0]}},
    "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "privacy_gap", "direction": "min"}],
    "sampler": "grid",
    "seeds": 1,
    "concurrency": 2,
    "resources": {"cpus": 1},
    "experiment": "ui-browser",
}
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=20000",
]


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe:
        return exe
    hint = "install Debian's `chromium` package (apt-get install -y chromium; .ci/run does it)"
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"headless Chromium is missing on CI: {hint}")
    pytest.skip(f"headless Chromium is missing: {hint}")


def render(exe: str, url: str, tmp: Path, *, screenshot: Path | None = None, size: str = "1400,900") -> str:
    """The page's DOM after the UI has rendered (or, with `screenshot`, a PNG of it); stops what it starts."""
    profile = tmp / f"chromium-profile-{len(list(tmp.glob('chromium-profile-*')))}"
    args = [exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={size}"]
    args += [f"--screenshot={screenshot}"] if screenshot else ["--dump-dom"]
    proc = subprocess.Popen([*args, url], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, f"chromium exited with {proc.returncode} on {url}"
    return out.decode("utf-8", errors="replace")


class Page(HTMLParser):
    """Links (href, text), images, table rows (cell texts, cell links) and grid column ids of a DOM dump."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self.images: list[str] = []
        self.rows: list[tuple[list[str], list[str]]] = []
        self.columns: list[str] = []
        self._href: str | None = None
        self._text: list[str] = []
        self._cell: list[str] | None = None
        self._row: tuple[list[str], list[str]] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("role") == "columnheader" and a.get("col-id"):
            self.columns.append(a["col-id"] or "")
        if tag == "a":
            self._href, self._text = a.get("href") or "", []
        elif tag == "img":
            self.images.append(a.get("src") or "")
        elif tag == "tr":
            self._row = ([], [])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            if self._row is not None:
                self._row[1].append(self._href)
            self._href = None
        elif tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row[0].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.rows.append(self._row)
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def description_of(dom: str) -> Page:
    """The run page's rendered description (MLflow's note preview), parsed."""
    start = dom.find('data-testid="note-editor-preview-content"')
    assert start >= 0, "the run page shows no description"
    return Page(dom[start : dom.find('data-testid="truncation-gradient"', start)])


def test_the_ui_shows_the_sweep_parent_children_and_the_front(ray_local, mlflow_server, tmp_path):
    from mlflow.tracking import MlflowClient

    from veil.sweeps.driver import run_sweep

    exe = chromium()
    spec = sweep_from_mapping(SWEEP, where=str(tmp_path / "ui-browser.yaml"))
    outcome = run_sweep(
        spec, name="ui-browser", tracking_uri=mlflow_server, storage_root=tmp_path / "sweeps", quiet=True
    )
    res = outcome.results
    assert res.counts["finished"] == 3
    eid, pid = res.experiment_id, outcome.parent_run_id
    c = MlflowClient(mlflow_server)
    children = {r["run_id"]: c.get_run(r["run_id"]) for _, r in res.trials.iterrows()}
    for _, r in res.trials.iterrows():  # child runs carry the searched value and the objectives
        run = children[r["run_id"]]
        assert float(run.data.params["method.beta"]) == r["beta"]
        assert (
            run.data.metrics["utility_auc"] == r["utility_auc"] and run.data.metrics["privacy_gap"] == r["privacy_gap"]
        )
    front_ids = list(res.front["run_id"])
    assert 1 <= len(front_ids) <= 3

    # the experiment's runs table, model-training view: the parent run is listed (its children fold under it)
    experiment = Page(render(exe, f"{mlflow_server}/{runs_path(eid)}", tmp_path))
    assert (f"#/experiments/{eid}/runs/{pid}", "ui-browser") in experiment.links

    # the sweep's trials table (the saved view): every child run listed, parameter and objectives as columns
    view = Page(render(exe, f"{mlflow_server}/{runs_path(eid, 'veil-ui-browser')}", tmp_path))
    listed = {href.rsplit("/", 1)[1]: text for href, text in view.links if f"#/experiments/{eid}/runs/" in href}
    assert {rid: run.info.run_name for rid, run in children.items()} == {rid: listed.get(rid) for rid in children}
    assert pid not in listed  # the view holds the trials only
    wanted = ["params.`method.beta`", "metrics.`utility_auc`", "metrics.`privacy_gap`", "tags.`veil.pareto`"]
    assert set(wanted) <= set(view.columns)

    # the parent run's page: its description holds the front table, each trial linked to its run, and the plot
    run_dom = render(exe, f"{mlflow_server}/{run_path(eid, pid)}", tmp_path)
    note = description_of(run_dom)
    table = [cells for cells, _ in note.rows]
    assert table[0] == ["trial", "beta", "utility_auc", "privacy_gap"]
    linked = [hrefs[0] for cells, hrefs in note.rows[1:]]
    assert linked == [run_path(eid, rid) for rid in front_ids]
    for (cells, _), (_, row) in zip(note.rows[1:], res.front.iterrows()):
        assert cells == [
            str(row["trial"]),
            f"{row['beta']:.4g}",
            f"{row['utility_auc']:.4f}",
            f"{row['privacy_gap']:.4f}",
        ]
    image = f"get-artifact?path=plots/front.png&run_uuid={pid}"
    assert image in note.images
    with urllib.request.urlopen(f"{mlflow_server}/{image}", timeout=30) as r:  # relative to the UI's root
        assert r.read()[:8] == b"\x89PNG\r\n\x1a\n"
    assert any(href == runs_path(eid, "veil-ui-browser") for href, _ in note.links)
    assert c.get_run(pid).data.tags[NOTE_TAG].count("](#/experiments/") == len(front_ids) + 1

    shots = [tmp_path / "ui-trials-view.png", tmp_path / "ui-parent-run.png"]
    render(exe, f"{mlflow_server}/{runs_path(eid, 'veil-ui-browser')}", tmp_path, screenshot=shots[0])
    render(exe, f"{mlflow_server}/{run_path(eid, pid)}", tmp_path, screenshot=shots[1], size="1400,2000")
    keep = Path(os.environ.get("VEIL_TEST_ARTIFACTS", tmp_path))  # .ci/run keeps them in ./test-artifacts
    keep.mkdir(parents=True, exist_ok=True)
    for shot in shots:
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        if keep != tmp_path:
            shutil.copy(shot, keep / shot.name)
        print(f"screenshot: {keep / shot.name}")
