"""Mutual-information estimates I(Z;S) / I(Z;U) in nats, each saying which estimator made it.

Three estimators, each sound for a different case (METHODS.md, "What every run reports"):

* ``variational`` -- the probe bound GPP optimises (seed 001):
  ``I(Z;S) >= H(S) - CE``, where ``H(S)`` is the plug-in entropy of the training labels and
  ``CE`` the held-out cross-entropy (nats) of a classifier probe fitted on the training
  representation. Any probe gives a lower bound (up to sampling error); a better probe a tighter
  one. Labels must be discrete.
* ``ksg`` -- k-nearest-neighbour estimators: Ross (2014) for continuous z and discrete labels
  (the estimator ``sklearn.feature_selection.mutual_info_classif`` applies per column, here over
  all columns of z jointly, max-norm), and Kraskov-Stoegbauer-Grassberger (2004) estimator 1 for
  two continuous variables. Consistent but increasingly biased as the dimension grows, so they
  refuse z wider than ``max_dim`` columns (default 16).
* ``mine`` -- MINE (Belghazi et al. 2018): a statistics network T(z, y) trained on the
  Donsker-Varadhan bound ``E_P[T] - log E_{P_Z x P_Y}[e^T]`` with the moving-average
  correction of the biased gradient; evaluated on held-out data when given.

Estimators are registered by name (`register_estimator`); `estimate_mi` looks the name up in
`MI_ESTIMATORS`, and `AuditConfig.mi` accepts exactly those names plus "none".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np
import torch
from scipy.spatial import cKDTree
from scipy.special import digamma

from veil.audit.train import Standardizer, seeded_torch, sklearn_proba, train_classifier
from veil.audit.vocabulary import DEFAULT_KNN_MAX_DIM, MI_SUMMARIES
from veil.errors import ConfigError
from veil.methods.nets import mlp
from veil.methods.optim import Adam
from veil.registry import Registry

__all__ = [
    "DEFAULT_KNN_MAX_DIM",
    "EstimateFn",
    "MIEstimate",
    "MIEstimator",
    "MI_ESTIMATORS",
    "check_release_width",
    "estimate_mi",
    "get_estimator",
    "ksg_mi",
    "ksg_mi_continuous",
    "label_entropy",
    "mine_mi",
    "register_estimator",
    "variational_mi",
]

PROBES: tuple[str, ...] = ("mlp", "logistic")
_EPS = 1e-12


@dataclass(frozen=True)
class MIEstimate:
    """One mutual-information estimate in nats.

    ``value`` is the reported number (clipped at 0 where the estimator can go negative; the raw
    number is in ``details["raw"]``); ``estimator`` names what produced it ("variational",
    "ksg", "ksg-continuous", "mine"); ``details`` holds the estimator's settings and
    intermediate quantities (JSON-friendly scalars, lists and strings).
    """

    value: float
    estimator: str
    details: dict = field(default_factory=dict)

    @property
    def unit(self) -> str:
        return "nats"

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "estimator": self.estimator, "unit": self.unit, **self.details}


# ----------------------------------------------------------------------------------------------
# validation helpers


def _as_matrix(x: Any, name: str) -> np.ndarray:
    """Rows x columns float64 array; a 1-D array becomes one column. Refuses NaN/inf."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise ConfigError(name, f"array of shape {np.shape(x)}", "a non-empty 1-D or 2-D array (rows = samples)")
    if not np.all(np.isfinite(a)):
        raise ConfigError(name, "array containing NaN or inf", "finite values only")
    return a


def _as_labels(y: Any, name: str, n: int) -> np.ndarray:
    a = np.asarray(y)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise ConfigError(name, f"array of shape {a.shape}", "a 1-D array of discrete labels")
    if a.shape[0] != n:
        raise ConfigError(name, f"{a.shape[0]} labels", f"one label per row of z ({n})")
    if a.dtype.kind == "f":
        if not np.all(np.isfinite(a)):
            raise ConfigError(name, "labels containing NaN or inf", "finite discrete labels")
        if not np.all(a == np.round(a)):
            raise ConfigError(
                name,
                "non-integer float labels",
                "discrete labels (ints, bools or strings); "
                "use discrete=False / ksg_mi_continuous for a continuous target",
            )
    return a


def _check_pos_int(name: str, value: Any, lo: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ConfigError(name, value, f"an integer >= {lo}")
    return int(value)


def label_entropy(labels: Any) -> float:
    """Plug-in (maximum-likelihood) entropy of discrete labels, in nats."""
    a = np.asarray(labels)
    if a.size == 0:
        raise ConfigError("labels", "empty array", "at least one label")
    _, counts = np.unique(a, return_counts=True)
    p = counts / counts.sum()
    return float(-(p * np.log(p)).sum())


# ----------------------------------------------------------------------------------------------
# variational (probe) lower bound


def _fit_predict_logistic(
    z_train: np.ndarray, y_train: np.ndarray, z_test: np.ndarray, n_classes: int, *, C: float, seed: int
) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(StandardScaler(), LogisticRegression(C=C, max_iter=2000, random_state=seed))
    clf.fit(z_train, y_train)
    return np.log(np.clip(sklearn_proba(clf, z_test, n_classes), _EPS, 1.0))


def variational_mi(
    z_train: Any,
    labels_train: Any,
    z_test: Any,
    labels_test: Any,
    *,
    probe: str = "mlp",
    hidden: Sequence[int] = (64,),
    epochs: int = 30,
    batch_size: int = 128,
    lr: float = 1e-3,
    weight_decay: float = 0.0,
    C: float = 1.0,
    seed: int = 0,
    num_threads: int | None = 1,
) -> MIEstimate:
    """Probe-based variational lower bound ``I(Z;S) >= H(S) - CE`` in nats.

    ``H(S)``: plug-in entropy of ``labels_train``. ``CE``: mean held-out cross-entropy
    ``-log q(s|z)`` over ``(z_test, labels_test)`` of a probe ``q`` trained on
    ``(z_train, labels_train)``; predicted probabilities are floored at 1e-12. The bound is
    clipped at 0 (``details["raw"]`` keeps the unclipped number).

    ``probe="mlp"``: seeded torch MLP (``hidden`` widths, ReLU, Adam, ``epochs`` over minibatches of
    ``batch_size``), on standardised z. ``probe="logistic"``: sklearn LogisticRegression (L2, ``C``)
    on standardised z -- Bayes-optimal when the class log-odds are linear in z.
    ``num_threads``: torch intra-op threads while the MLP trains (restored afterwards; None =
    leave torch's setting).
    """
    zt = _as_matrix(z_train, "z_train")
    zs = _as_matrix(z_test, "z_test")
    if zt.shape[1] != zs.shape[1]:
        raise ConfigError("z_test", f"{zs.shape[1]} columns", f"the same number of columns as z_train ({zt.shape[1]})")
    yt = _as_labels(labels_train, "labels_train", zt.shape[0])
    ys = _as_labels(labels_test, "labels_test", zs.shape[0])
    if probe not in PROBES:
        raise ConfigError("probe", probe, " | ".join(PROBES))
    classes = np.unique(yt)
    if classes.size < 2:
        raise ConfigError(
            "labels_train",
            f"a single class {classes.tolist()!r}",
            "at least two classes (a constant label has I(Z;S) = 0 by definition)",
        )
    unseen = np.setdiff1d(np.unique(ys), classes)
    if unseen.size:
        raise ConfigError(
            "labels_test", f"classes {unseen.tolist()!r} absent from labels_train", "only classes seen in training"
        )
    ct = np.searchsorted(classes, yt)
    cs = np.searchsorted(classes, ys)
    k = int(classes.size)
    if probe == "mlp":
        epochs = _check_pos_int("epochs", epochs)
        batch_size = _check_pos_int("batch_size", batch_size)
        probe_net = train_classifier(
            zt,
            ct,
            k,
            hidden=hidden,
            epochs=epochs,
            lr=float(lr),
            batch_size=batch_size,
            seed=int(seed),
            weight_decay=float(weight_decay),
            standardize=True,
            drop_last=False,
            num_threads=num_threads,
        )
        logp = probe_net.predict_log_proba(zs)
    else:
        logp = _fit_predict_logistic(zt, ct, zs, k, C=float(C), seed=int(seed))
    logp = np.maximum(logp, math.log(_EPS))
    ce = float(-logp[np.arange(zs.shape[0]), cs].mean())
    h = label_entropy(yt)
    raw = h - ce
    details: dict[str, Any] = {
        "h_s": h,
        "cross_entropy": ce,
        "raw": raw,
        "probe": probe,
        "n_train": int(zt.shape[0]),
        "n_test": int(zs.shape[0]),
        "n_classes": k,
        "seed": int(seed),
    }
    if probe == "mlp":
        details.update(
            hidden=[int(h_) for h_ in hidden],
            epochs=epochs,
            batch_size=batch_size,
            lr=float(lr),
            weight_decay=float(weight_decay),
        )
    else:
        details.update(C=float(C))
    return MIEstimate(max(0.0, raw), "variational", details)


# ----------------------------------------------------------------------------------------------
# kNN estimators


def _knn_prepare(a: np.ndarray, *, standardize: bool, jitter: float, rng: np.random.Generator) -> np.ndarray:
    if standardize:
        a = Standardizer.fit_transform(a)
    if jitter > 0:
        # Tiny noise breaks ties between duplicate rows (kNN estimators assume continuous data);
        # same device as sklearn's mutual_info_* (1e-10 relative to the column scale).
        scale = np.maximum(1.0, np.abs(a).mean(axis=0))
        a = a + jitter * scale * rng.standard_normal(a.shape)
    return a


def _check_knn_dim(dim: int, max_dim: int, what: str) -> None:
    if dim > max_dim:
        raise ConfigError(
            "z",
            f"{dim} columns",
            f"at most {max_dim} columns for the kNN estimator ({what}); "
            "use estimator='variational' or 'mine' for wider representations",
        )


def ksg_mi(
    z: Any,
    labels: Any,
    k: int = 3,
    *,
    max_dim: int = DEFAULT_KNN_MAX_DIM,
    standardize: bool = True,
    jitter: float = 1e-10,
    seed: int = 0,
) -> MIEstimate:
    """kNN estimate of I(Z;S) for continuous z (all columns jointly) and discrete labels (Ross 2014).

    For sample i with label c (N_c samples of that label): d_i is the max-norm distance to its
    k-th nearest neighbour among the other label-c samples; m_i counts the samples of ANY label
    strictly closer than d_i, plus i itself (the convention of sklearn's per-column
    implementation). Then ``I = psi(N) - <psi(N_c)> + psi(k) - <psi(m_i)>``.

    Columns are standardised (``standardize``) and a seeded 1e-10-relative jitter breaks ties.
    Refuses (ConfigError) z with more than ``max_dim`` columns, a single class, or a class with
    fewer than k+1 samples. The value is clipped at 0; ``details["raw"]`` keeps the estimate.
    """
    k = _check_pos_int("k", k)
    a = _as_matrix(z, "z")
    y = _as_labels(labels, "labels", a.shape[0])
    _check_knn_dim(a.shape[1], _check_pos_int("max_dim", max_dim), "Ross 2014, mixed continuous/discrete")
    n = a.shape[0]
    if n < k + 1:
        raise ConfigError("z", f"{n} samples", f"at least k+1 = {k + 1} samples for the kNN estimator")
    classes, codes, counts = np.unique(y, return_inverse=True, return_counts=True)
    if classes.size < 2:
        raise ConfigError(
            "labels",
            f"a single class {classes.tolist()!r}",
            "at least two classes for estimator 'ksg' (a constant label has I(Z;S) = 0)",
        )
    small = classes[counts < k + 1]
    if small.size:
        raise ConfigError(
            "labels",
            f"classes {small.tolist()!r} with fewer than k+1 = {k + 1} samples",
            f"every class with at least k+1 samples for the kNN estimator (k={k})",
        )
    a = _knn_prepare(a, standardize=standardize, jitter=float(jitter), rng=np.random.default_rng(seed))
    radius = np.empty(n)
    for c in range(classes.size):
        idx = np.flatnonzero(codes == c)
        dist, _ = cKDTree(a[idx]).query(a[idx], k=k + 1, p=np.inf)
        radius[idx] = dist[:, k]
    # strictly closer than d_i: shrink the radius by one ulp (query_ball_point counts <= r)
    r = np.nextafter(radius, 0.0)
    m = np.asarray(cKDTree(a).query_ball_point(a, r=r, p=np.inf, return_length=True), dtype=np.float64)
    m = np.maximum(m, 1.0)
    raw = float(digamma(n) - np.mean(digamma(counts[codes])) + digamma(k) - np.mean(digamma(m)))
    details = {
        "raw": raw,
        "k": k,
        "n": int(n),
        "dim": int(a.shape[1]),
        "n_classes": int(classes.size),
        "standardize": bool(standardize),
        "norm": "max",
        "method": "Ross 2014",
    }
    return MIEstimate(max(0.0, raw), "ksg", details)


def ksg_mi_continuous(
    x: Any,
    y: Any,
    k: int = 3,
    *,
    max_dim: int = DEFAULT_KNN_MAX_DIM,
    standardize: bool = True,
    jitter: float = 1e-10,
    seed: int = 0,
) -> MIEstimate:
    """KSG estimator 1 (Kraskov, Stoegbauer & Grassberger 2004) of I(X;Y), both continuous.

    eps_i: max-norm distance (joint space, max over the x and y max-norms) to the k-th neighbour;
    n_x(i), n_y(i): samples other than i strictly within eps_i in the x and y marginal spaces.
    ``I = psi(k) + psi(N) - <psi(n_x + 1) + psi(n_y + 1)>``. Refuses a joint dimension above
    ``max_dim`` or fewer than k+1 samples. Clipped at 0 (``details["raw"]`` keeps the estimate).
    """
    k = _check_pos_int("k", k)
    xa = _as_matrix(x, "x")
    ya = _as_matrix(y, "y")
    if xa.shape[0] != ya.shape[0]:
        raise ConfigError("y", f"{ya.shape[0]} rows", f"as many rows as x ({xa.shape[0]})")
    _check_knn_dim(xa.shape[1] + ya.shape[1], _check_pos_int("max_dim", max_dim), "KSG, joint dimension of x and y")
    n = xa.shape[0]
    if n < k + 1:
        raise ConfigError("z", f"{n} samples", f"at least k+1 = {k + 1} samples for the kNN estimator")
    rng = np.random.default_rng(seed)
    xa = _knn_prepare(xa, standardize=standardize, jitter=float(jitter), rng=rng)
    ya = _knn_prepare(ya, standardize=standardize, jitter=float(jitter), rng=rng)
    joint = np.hstack([xa, ya])
    dist, _ = cKDTree(joint).query(joint, k=k + 1, p=np.inf)
    r = np.nextafter(dist[:, k], 0.0)
    nx = np.asarray(cKDTree(xa).query_ball_point(xa, r=r, p=np.inf, return_length=True), dtype=np.float64) - 1
    ny = np.asarray(cKDTree(ya).query_ball_point(ya, r=r, p=np.inf, return_length=True), dtype=np.float64) - 1
    raw = float(digamma(k) + digamma(n) - np.mean(digamma(nx + 1) + digamma(ny + 1)))
    details = {
        "raw": raw,
        "k": k,
        "n": int(n),
        "dim_x": int(xa.shape[1]),
        "dim_y": int(ya.shape[1]),
        "standardize": bool(standardize),
        "norm": "max",
        "method": "KSG 2004 estimator 1",
    }
    return MIEstimate(max(0.0, raw), "ksg-continuous", details)


# ----------------------------------------------------------------------------------------------
# MINE


def _one_hot(codes: np.ndarray, n_classes: int) -> np.ndarray:
    out = np.zeros((codes.shape[0], n_classes))
    out[np.arange(codes.shape[0]), codes] = 1.0
    return out


def _dv_bound(net: torch.nn.Module, z: torch.Tensor, y: torch.Tensor, gen: torch.Generator, shuffles: int) -> float:
    """Donsker-Varadhan bound on (z, y): mean T(joint) - log mean exp T(product of marginals).

    The product-of-marginals sample pairs every z with y from ``shuffles`` random permutations."""
    with torch.no_grad():
        t_joint = net(torch.cat([z, y], dim=1)).mean()
        t_marg = torch.cat(
            [net(torch.cat([z, y[torch.randperm(y.shape[0], generator=gen)]], dim=1)) for _ in range(shuffles)]
        ).flatten()
        log_mean_exp = torch.logsumexp(t_marg, dim=0) - math.log(t_marg.numel())
        return float(t_joint - log_mean_exp)


def mine_mi(
    z: Any,
    labels_or_y: Any,
    *,
    z_eval: Any = None,
    y_eval: Any = None,
    discrete: bool = False,
    hidden: Sequence[int] = (64, 64),
    steps: int = 500,
    batch_size: int = 256,
    lr: float = 1e-3,
    ma_rate: float = 0.01,
    eval_shuffles: int = 10,
    seed: int = 0,
    num_threads: int | None = 1,
) -> MIEstimate:
    """MINE (Belghazi et al. 2018) estimate of I(Z;Y) in nats with the Donsker-Varadhan bound.

    A statistics network T(z, y) (MLP, ReLU) is trained with Adam on minibatches; the marginal
    sample pairs each z with y from a random permutation of the batch. The biased gradient of
    ``log E[e^T]`` is corrected with a moving average ``ma <- (1-ma_rate) ma + ma_rate E_batch[e^T]``
    (the surrogate loss ``-(E[T_joint] - E[e^T_marg] / ma)``). The final DV bound is evaluated on
    ``(z_eval, y_eval)`` when given (held out: an honest lower bound up to sampling error),
    otherwise on the training data (biased upwards by overfitting; ``details["evaluated_on"]``
    says which), with ``eval_shuffles`` permutations for the marginal term. ``discrete=True``
    one-hot encodes the labels. Clipped at 0 (``details["raw"]``). Seeded; leaves torch's global
    RNG untouched. ``num_threads``: torch intra-op threads while training (restored afterwards).
    """
    za = _as_matrix(z, "z")
    steps = _check_pos_int("steps", steps)
    batch_size = _check_pos_int("batch_size", batch_size, lo=2)
    eval_shuffles = _check_pos_int("eval_shuffles", eval_shuffles)
    if not 0.0 < float(ma_rate) <= 1.0:
        raise ConfigError("ma_rate", ma_rate, "a float in (0, 1]")
    has_eval = z_eval is not None or y_eval is not None
    if has_eval and (z_eval is None or y_eval is None):
        raise ConfigError("z_eval", "only one of z_eval / y_eval", "both or neither")
    ze = _as_matrix(z_eval, "z_eval") if has_eval else za
    if ze.shape[1] != za.shape[1]:
        raise ConfigError("z_eval", f"{ze.shape[1]} columns", f"the same number of columns as z ({za.shape[1]})")
    if discrete:
        lab = _as_labels(labels_or_y, "labels_or_y", za.shape[0])
        classes = np.unique(lab)
        if classes.size < 2:
            raise ConfigError("labels_or_y", f"a single class {classes.tolist()!r}", "at least two classes")
        ya = _one_hot(np.searchsorted(classes, lab), classes.size)
        if has_eval:
            lab_e = _as_labels(y_eval, "y_eval", ze.shape[0])
            unseen = np.setdiff1d(np.unique(lab_e), classes)
            if unseen.size:
                raise ConfigError(
                    "y_eval",
                    f"classes {unseen.tolist()!r} absent from training labels",
                    "only classes seen in training",
                )
            ye = _one_hot(np.searchsorted(classes, lab_e), classes.size)
        else:
            ye = ya
    else:
        ya = _as_matrix(labels_or_y, "labels_or_y")
        if ya.shape[0] != za.shape[0]:
            raise ConfigError("labels_or_y", f"{ya.shape[0]} rows", f"as many rows as z ({za.shape[0]})")
        ye = _as_matrix(y_eval, "y_eval") if has_eval else ya
        if ye.shape[1] != ya.shape[1] or ye.shape[0] != ze.shape[0]:
            raise ConfigError("y_eval", f"shape {ye.shape}", f"{ze.shape[0]} rows and {ya.shape[1]} columns")
    # standardise with training statistics (one-hot labels are left as they are)
    zscore = Standardizer.fit(za)
    za_s, ze_s = zscore(za), zscore(ze)
    if not discrete:
        yscore = Standardizer.fit(ya)
        ya, ye = yscore(ya), yscore(ye)

    with seeded_torch(int(seed), num_threads) as gen:
        zt = torch.as_tensor(za_s, dtype=torch.float32)
        yt = torch.as_tensor(ya, dtype=torch.float32)
        net = mlp(zt.shape[1] + yt.shape[1], [int(h) for h in hidden], 1)
        opt = Adam(list(net.parameters()), lr)
        n = zt.shape[0]
        bs = min(batch_size, n)
        ma: float | None = None
        for _ in range(steps):
            idx = torch.randint(0, n, (bs,), generator=gen)
            zb, yb = zt[idx], yt[idx]
            yb_marg = yb[torch.randperm(bs, generator=gen)]
            t_joint = net(torch.cat([zb, yb], dim=1))
            t_marg = net(torch.cat([zb, yb_marg], dim=1))
            e_marg = torch.exp(t_marg).mean()
            batch_e = float(e_marg.detach())
            ma = batch_e if ma is None else (1.0 - ma_rate) * ma + ma_rate * batch_e
            loss = -(t_joint.mean() - e_marg / ma)
            opt.zero_grad()
            loss.backward()
            opt.step()
        raw = _dv_bound(
            net,
            torch.as_tensor(ze_s, dtype=torch.float32),
            torch.as_tensor(ye, dtype=torch.float32),
            gen,
            eval_shuffles,
        )
    details = {
        "raw": raw,
        "bound": "Donsker-Varadhan",
        "evaluated_on": "eval" if has_eval else "train",
        "n_train": int(n),
        "n_eval": int(ze.shape[0]),
        "discrete": bool(discrete),
        "hidden": [int(h) for h in hidden],
        "steps": steps,
        "batch_size": batch_size,
        "lr": float(lr),
        "ma_rate": float(ma_rate),
        "eval_shuffles": eval_shuffles,
        "seed": int(seed),
    }
    return MIEstimate(max(0.0, raw), "mine", details)


# ----------------------------------------------------------------------------------------------
# registry


class EstimateFn(Protocol):
    """How a registered estimator is called: train and test representations and labels; ``discrete``
    says whether the labels are classes; further keywords are the estimator's own settings."""

    def __call__(
        self, z_train: Any, y_train: Any, z_test: Any, y_test: Any, *, discrete: bool, **kw: Any
    ) -> MIEstimate: ...


@dataclass(frozen=True)
class MIEstimator:
    """A registered MI estimator: its name, how to call it, a one-line summary (shown in `AuditConfig.mi`'s
    doc), and the widest representation it copes with (None = any)."""

    name: str
    estimate: EstimateFn
    summary: str
    max_dim: int | None = None


#: registered MI estimators by name
MI_ESTIMATORS: Registry[MIEstimator] = Registry("MI estimator")


def register_estimator(name: str, summary: str, *, max_dim: int | None = None) -> Callable[[EstimateFn], EstimateFn]:
    """Function decorator adding an `EstimateFn` to `MI_ESTIMATORS` under `name`.

    `AuditConfig.mi` accepts the name once it is registered (a plugin's: once plugins load, at the first lookup)."""

    if name == "none":
        raise ValueError("MI estimator 'none' is reserved (AuditConfig.mi = 'none': no estimate)")
    return MI_ESTIMATORS.decorator(name, lambda fn: MIEstimator(name, fn, summary, max_dim))


def get_estimator(name: str) -> MIEstimator:
    """The estimator registered as `name` (plugins included), or UnknownNameError listing the valid names."""
    return MI_ESTIMATORS.lookup(name)


def check_release_width(name: str, width: int, field: str = "audit.mi") -> None:
    """Refuse (ConfigError on `field`), before anything is trained, an estimator that cannot cope with a
    representation of `width` columns."""
    est = get_estimator(name)
    if est.max_dim is not None and width > est.max_dim:
        others = [e.name for e in MI_ESTIMATORS.values() if e.max_dim is None or width <= e.max_dim]
        raise ConfigError(
            field,
            name,
            f"{' or '.join(others) or 'none'}: the {name} estimator handles z of at "
            f"most {est.max_dim} columns and this run releases {width}",
        )


@register_estimator("variational", MI_SUMMARIES["variational"])
def _variational(z_train: Any, y_train: Any, z_test: Any, y_test: Any, *, discrete: bool, **kw: Any) -> MIEstimate:
    """`variational_mi`: probe trained on train, cross-entropy on test (discrete labels only)."""
    if not discrete:
        raise ConfigError(
            "estimator",
            "variational with discrete=False",
            "variational needs discrete labels; use 'ksg' or 'mine' for a continuous target",
        )
    return variational_mi(z_train, y_train, z_test, y_test, **kw)


@register_estimator("ksg", MI_SUMMARIES["ksg"], max_dim=DEFAULT_KNN_MAX_DIM)
def _ksg(z_train: Any, y_train: Any, z_test: Any, y_test: Any, *, discrete: bool, **kw: Any) -> MIEstimate:
    """kNN estimate on the TEST split (the released test representation the audit inspects; kNN
    estimators need no fitting): `ksg_mi` (Ross 2014) when discrete, else `ksg_mi_continuous`."""
    return ksg_mi(z_test, y_test, **kw) if discrete else ksg_mi_continuous(z_test, y_test, **kw)


@register_estimator("mine", MI_SUMMARIES["mine"])
def _mine(z_train: Any, y_train: Any, z_test: Any, y_test: Any, *, discrete: bool, **kw: Any) -> MIEstimate:
    """`mine_mi`: statistics network trained on train, DV bound evaluated on test."""
    return mine_mi(z_train, y_train, z_eval=z_test, y_eval=y_test, discrete=discrete, **kw)


def estimate_mi(
    z_train: Any,
    y_train: Any,
    z_test: Any,
    y_test: Any,
    estimator: str = "variational",
    discrete: bool = True,
    **kw: Any,
) -> MIEstimate:
    """Estimate I(Z;Y) in nats with the estimator registered as `estimator` (see `MI_ESTIMATORS`);
    extra keywords go to that estimator.

    Unknown names raise ``UnknownNameError("MI estimator", name, valid names)``; a case the
    estimator cannot handle raises ConfigError naming the field.
    """
    return get_estimator(estimator).estimate(z_train, y_train, z_test, y_test, discrete=discrete, **kw)
