"""Names and texts of the audit that its settings (`veil.audit.settings`) and its torch code share, written once and
torch-free: the certificate's suite of adversaries, the built-in probe families' names and the built-in MI
estimators' summaries (a test checks these against the registries)."""

from __future__ import annotations

#: the certificate's adversaries besides the audit's own probe (`veil.certify.certificate`): a linear model, MLPs
#: narrower and wider than the probe, and gradient boosting
CERTIFICATE_SUITE: tuple[str, ...] = ("logistic", "mlp-32", "mlp-512-256-128", "hist-gradient-boosting")

DEFAULT_KNN_MAX_DIM = 16
"""The widest z the kNN (KSG) estimator accepts by default."""

MI_SUMMARIES: dict[str, str] = {
    "variational": "H(S) - CE bound of a probe trained on train, CE on test",
    "ksg": f"kNN on the test split, z of at most {DEFAULT_KNN_MAX_DIM} columns",
    "mine": "Donsker-Varadhan bound of a statistics network trained on train, evaluated on test",
}
"""Each built-in MI estimator's one-line summary (`veil.audit.mi` registers them with these; `AuditConfig.mi`'s
doc lists them)."""

PROBE_FAMILY_NAMES: tuple[str, ...] = (
    "logistic",
    "mlp-32",
    "mlp-256-128",
    "mlp-512-256-128",
    "mlp-256x4",
    "random-forest",
    "hist-gradient-boosting",
)
"""The built-in probe families, in the order `veil.audit.families` registers them."""

#: where the audit's MLP probes may train (`veil.audit.train.probe_device`): "auto" is a CUDA GPU when the process
#: sees one, else the CPU
PROBE_DEVICES = ("auto", "cpu", "cuda")
