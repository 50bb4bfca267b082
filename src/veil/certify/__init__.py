"""Leakage targets, calibration and certificates: what a release may reveal, how the privacy knob is set to meet
it, and the certificate that says whether it did.

The public API, one module per concept:

- `parse_target` / `Target` (`target`): a target from flags, a run file or a sweep spec.
- `check_resolution` (`resolution`): refuse, before anything trains, a target the test split cannot certify.
- `CalibrationConfig` (`knob_search`): how calibration searches the knob.
- `calibrate` (`calibrate`): the most useful knob value expected to meet the target, from the training rows.
- `certify` / `Certificate` (`certificate`): the release's certificate on the test split; `wire` adds the
  aggregator's view of a federation. `intervals` holds the statistics both use.

Names are imported from their submodule when first asked for (PEP 562), so parsing a target loads no torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from veil.lazy import lazy_exports

if TYPE_CHECKING:
    from veil.certify.calibrate import Calibration, calibrate
    from veil.certify.certificate import Certificate, certify
    from veil.certify.knob_search import CalibrationConfig
    from veil.certify.resolution import check_resolution
    from veil.certify.target import Target, parse_target

__all__ = [
    "CalibrationConfig",
    "Calibration",
    "Certificate",
    "Target",
    "calibrate",
    "certify",
    "check_resolution",
    "parse_target",
]

_SUBMODULE = {
    "Calibration": "calibrate",
    "calibrate": "calibrate",
    "Certificate": "certificate",
    "certify": "certificate",
    "check_resolution": "resolution",
    "CalibrationConfig": "knob_search",
    "Target": "target",
    "parse_target": "target",
}
"""Each name of `__all__` -> the submodule that defines it."""

__getattr__ = lazy_exports(__name__, _SUBMODULE)
