"""Who shuts Ray down: a run that started a Ray for itself stops it when it ends; a Ray that was up before (a
sweep's, the caller's) is left running. Unit test of the rule (`ray` replaced by a stub); the suite's
`pytest_runtest_teardown` (tests/conftest.py) checks the real thing after every in-process run."""

from __future__ import annotations

import sys
import types

import pytest

from veil.platform.cluster import ray_started_here_stops


class StubRay(types.SimpleNamespace):
    def __init__(self, up: bool) -> None:
        super().__init__(up=up, shutdowns=0)

    def is_initialized(self) -> bool:
        return self.up

    def shutdown(self) -> None:
        self.shutdowns += 1
        self.up = False


@pytest.mark.parametrize(("before", "starts", "shutdowns"), [(False, True, 1), (True, False, 0), (False, False, 0)])
def test_a_run_stops_only_the_ray_it_started(monkeypatch, before, starts, shutdowns):
    ray = StubRay(before)
    monkeypatch.setitem(sys.modules, "ray", ray)
    with pytest.raises(RuntimeError, match="inside"):  # an error inside stops it too
        with ray_started_here_stops():
            ray.up = ray.up or starts
            raise RuntimeError("inside")
    assert ray.shutdowns == shutdowns and ray.up == before


def test_no_ray_imported_means_nothing_to_stop(monkeypatch):
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    with ray_started_here_stops():
        pass
    assert "ray" not in sys.modules  # asking whether Ray is up did not import it
