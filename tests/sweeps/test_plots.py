"""The front plot drawn from a synthetic results table (pure logic: no Ray, no MLflow): one panel for two
objectives, a pairwise scatter matrix for three, a 'better' arrow towards each panel's ideal corner, a title that
fits the figure, labels and panels that do not overlap, the hypervolume with its units and reference point."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from veil.sweeps.pareto import hypervolume
from veil.sweeps.plots import BETTER, POINT_LABEL, front_figure, front_png
from veil.sweeps.results import SweepResults, analyze
from veil.sweeps.sweepspec import sweep_from_mapping

TWO = {
    "method": "gpp",
    "dataset": "gaussian-correlated",
    "space": {"beta": {"type": "log", "low": 0.04, "high": 4}},
    "objectives": [{"metric": "utility_auc", "direction": "max"}, {"metric": "privacy_gap", "direction": "min"}],
    "trials": 8,
}
THREE = {
    "method": "d-eigan",
    "dataset": "gaussian-nodes",
    "partition": "silo:node",
    "space": {"K": {"type": "int", "low": 2, "high": 10}, "phi": {"type": "float", "low": 0.1, "high": 1.0}},
    "objectives": [
        {"metric": "utility_auc", "direction": "max"},
        {"metric": "privacy_gap", "direction": "min"},
        {"metric": "bytes_up_total", "direction": "min"},
    ],
    "reference": {"utility_auc": 0.5, "privacy_gap": 0.5, "bytes_up_total": 1.0e8},
    "trials": 8,
}
# (beta or (K, phi), utility_auc, privacy_gap, bytes_up_total): two front points close together (labels would touch)
ROWS = [
    (0.05, 2, 0.10, 0.575, 0.000, 2.0e6),
    (0.08, 3, 0.20, 0.603, 0.022, 3.0e6),
    (0.30, 4, 0.30, 0.715, 0.119, 9.0e7),
    (0.60, 5, 0.40, 0.830, 0.211, 5.0e7),
    (1.00, 6, 0.50, 0.860, 0.288, 4.0e7),
    (2.00, 7, 0.60, 0.952, 0.336, 8.0e7),
    (3.00, 8, 0.70, 0.690, 0.178, 6.0e7),
    (3.50, 9, 0.80, 0.666, 0.130, 7.0e7),
]
LONG_NAME = "a-sweep-whose-name-is-long-enough-to-overflow-any-single-line-title-" + "x" * 60


def results(mapping: dict, name: str, met: list[float] | None = None) -> SweepResults:
    spec = sweep_from_mapping(mapping, where="test.yaml")
    rows = []
    for i, (beta, k, phi, u, gap, b) in enumerate(ROWS, 1):
        params = {"beta": beta} if "beta" in mapping["space"] else {"K": k, "phi": phi}
        rows.append(
            {
                "trial": i,
                "trial_id": f"t{i}",
                "run_id": f"{i:032x}",
                "status": "FINISHED",
                **params,
                "utility_auc": u,
                "privacy_gap": gap,
                "bytes_up_total": b,
                **({"certificate/met": met[i - 1]} if met else {}),
            }
        )
    return analyze(pd.DataFrame(rows), spec, name=name)


def title_text(fig) -> object:
    (title,) = [t for t in fig.texts if t.get_gid() == "veil-title"]
    return title


def better_arrows(ax) -> list:
    return [t for t in ax.texts if t.get_text() == BETTER]


def test_two_objectives_one_panel_better_corner_title_and_labels(tmp_path):
    res = results(TWO, LONG_NAME)
    fig = front_figure(res)
    r = fig.canvas.get_renderer()
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    assert ax.get_xlabel() == "privacy_gap = |AUC − 0.5| (min)" and ax.get_ylabel() == "utility_auc (max)"
    (arrow,) = better_arrows(ax)
    assert arrow.xy == (0.04, 0.96)  # low gap, high utility: top left

    title = title_text(fig)
    box = title.get_window_extent(r)
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width  # wrapped to fit: the long name alone is wider than the figure
    assert title.get_text().count("\n") >= 2 and LONG_NAME[:40] in title.get_text()
    hv = hypervolume([[u, g] for *_, u, g, _ in ROWS], ["max", "min"], [0.5, 0.5])
    assert res.hypervolume == pytest.approx(hv)
    flat = " ".join(title.get_text().split())
    assert f"hypervolume {hv:.4f} [utility_auc × privacy_gap], ref = (0.5, 0.5)" in flat

    labels = [t for t in ax.texts if t.get_gid() == POINT_LABEL]
    assert sorted(t.get_text() for t in labels) == sorted(
        f"beta={b:.4g}" for b, *_ in [ROWS[i] for i in np.flatnonzero(res.trials["pareto"])]
    )
    boxes = [t.get_window_extent(r) for t in labels]
    assert not any(a.overlaps(b) for a, b in itertools.combinations(boxes, 2))
    axes_box = ax.get_window_extent(r)
    assert all(axes_box.x0 <= b.x0 and b.x1 <= axes_box.x1 for b in boxes)
    assert not box.overlaps(ax.get_tightbbox(r))

    import matplotlib
    import matplotlib.image

    backend = matplotlib.get_backend()
    path = front_png(res, tmp_path / "front.png")
    img = matplotlib.image.imread(path)
    assert img.shape[:2] == (round(5.8 * 120), round(8.0 * 120))
    assert matplotlib.get_backend() == backend  # a notebook user's backend is left as it was


def test_three_objectives_pairwise_panels_each_with_its_better_corner():
    res = results(THREE, "deigan_k_phi_delta-20260101-000000")
    fig = front_figure(res)
    r = fig.canvas.get_renderer()
    assert len(fig.axes) == 3
    pairs = [(ax.get_xlabel().split(" ")[0], ax.get_ylabel().split(" ")[0]) for ax in fig.axes]
    assert pairs == [
        ("privacy_gap", "utility_auc"),
        ("bytes_up_total", "utility_auc"),
        ("privacy_gap", "bytes_up_total"),
    ]
    corners = [better_arrows(ax)[0].xy for ax in fig.axes]
    assert [len(better_arrows(ax)) for ax in fig.axes] == [1, 1, 1]
    assert corners == [(0.04, 0.96), (0.04, 0.96), (0.04, 0.04)]  # min-max, min-max, min-min
    # the front is over all three objectives: points that are dominated in the first projection still count
    pts = [[u, g, b] for *_, u, g, b in ROWS]
    assert res.hypervolume == pytest.approx(hypervolume(pts, ["max", "min", "min"], [0.5, 0.5, 1e8]))
    assert res.hypervolume > 1e4  # shown in scientific notation, with its units and reference
    title = title_text(fig)
    flat = " ".join(title.get_text().split())
    assert (
        f"hypervolume {res.hypervolume:.4g} [utility_auc × privacy_gap × bytes_up_total], ref = (0.5, 0.5, 1e+08)"
        in flat
    )
    assert "e+0" in f"{res.hypervolume:.4g}"
    box = title.get_window_extent(r)
    assert 0 <= box.x0 and box.x1 <= fig.bbox.width
    panels = [ax.get_tightbbox(r) for ax in fig.axes]  # tick labels, axis labels and offset text included
    assert not any(a.overlaps(b) for a, b in itertools.combinations(panels, 2))
    assert not any(box.overlaps(p) for p in panels)
    assert not [t for ax in fig.axes for t in ax.texts if t.get_gid() == POINT_LABEL]  # no labels in projections


def test_trials_that_meet_the_target_are_ringed_and_counted(tmp_path):
    """A certified sweep (its spec's target) rings, in the PNG and the HTML, exactly the trials whose certificate
    met the target on every seed; the HTML's summary and the console report count them."""
    from veil.sweeps.plots import MET_COLOR, front_html
    from veil.sweeps.results import format_report

    met = [1.0 if gap <= 0.05 else 0.0 for *_, gap, _ in ROWS]  # trials 1 and 2
    res = results({**TWO, "target": {"privacy_gap": 0.1}}, "certified", met)
    ax = front_figure(res).axes[0]
    rings = [c for c in ax.collections if c.get_label().startswith("meets the target (privacy_gap <= 0.1)")]
    assert len(rings) == 1 and len(rings[0].get_offsets()) == 2
    assert np.allclose(sorted(rings[0].get_offsets()[:, 0]), [0.0, 0.022])
    page = front_html(res, tmp_path / "front.html").read_text()
    svg = ET.fromstring(page[page.index("<svg") : page.index("</svg>") + 6])
    ns = "{http://www.w3.org/2000/svg}"
    ringed = [a.get("{http://www.w3.org/1999/xlink}href") for a in svg.findall(f".//{ns}g[@id='met-0']//{ns}a")]
    assert sorted(ringed) == ["#trial-t1", "#trial-t2"] and MET_COLOR.lower() in page.lower()
    assert "privacy_gap &lt;= 0.1: 2 of 8 finished trials meet it" in page
    assert "seeds per trial</td><td>1 (seed 0)" in page  # not the seed's value read as a count
    assert "leakage target privacy_gap <= 0.1: 2 of 8 finished trials meet it" in format_report(res)
    uncertified = results({**TWO, "target": "none"}, "plain")
    assert (
        "leakage target" not in format_report(uncertified)
        and "trials are not certified" in front_html(uncertified, tmp_path / "plain.html").read_text()
    )
