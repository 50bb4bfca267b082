"""What every method's card shares, without torch: the fields every config has (`MethodConfig`), the paper values
behind `preset: paper` (`PaperValue`), the privacy knob calibration searches (`PrivacyKnob`) and `MethodCard`, the
class that says what a method is (name, config, description, paper, knob, deviations) and that every `Method`
inherits from (`veil.methods.method`). `veil methods` and the spec checks read cards only, so they load no torch."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Mapping

from veil.config import MAX_EPOCHS, param
from veil.methods.configs.deviations import release_seed_deviation

if TYPE_CHECKING:
    from veil.datasets.dataset import TaskSpec

#: the values of every method's `preset` field
PRESETS = ("default", "paper")
UNSTATED = " (the paper gives no value: Veil's earlier choice)"


@dataclass(frozen=True)
class MethodConfig:
    """Fields every method shares."""

    d_z: int = param(8, "width of the released representation z", ge=1)
    epochs: int = param(20, "passes over the training data", ge=0, le=MAX_EPOCHS)
    batch_size: int = param(64, "minibatch size", ge=1)
    seed: int = param(0, "seed of initialisation, minibatch order and training noise (not of releases)", ge=0)
    release_seed: int | None = param(
        None,
        "seed the release key is derived from; unset = a secret key per run (OS entropy, kept outside MLflow). "
        "Setting it makes releases reproducible from the run's params and voids their privacy guarantee "
        "(recorded as a deviation)",
        ge=0,
    )
    preset: str = param(
        "default",
        "what fills the fields you do not set: Veil's protective defaults ('default', measured to hide the "
        "sensitive label) or the letter of the method's paper ('paper'; see `veil methods NAME`)",
        choices=PRESETS,
    )


@dataclass(frozen=True)
class ClosedFormConfig(MethodConfig):
    """Fields of a method fitted in closed form (no training loop): `epochs` and `batch_size` stay, so every
    method takes the same keys, but say that they are unused."""

    epochs: int = param(
        20, "unused: the method is fitted in closed form, with no passes over the data", ge=0, le=MAX_EPOCHS
    )
    batch_size: int = param(64, "unused: the closed-form fit uses every training row at once", ge=1)


@dataclass(frozen=True)
class PaperValue:
    """A field whose Veil default differs from its `preset: paper` value: that value and why the default differs."""

    value: Any
    why: str
    stated: bool = True
    """False where the paper gives no value and `preset: paper` keeps Veil's earlier choice: not a deviation."""


@dataclass(frozen=True)
class PrivacyKnob:
    """The config field that trades utility for privacy, and the range calibration searches it over (`veil.certify.calibrate`):
    GPP's beta, EIGAN's alpha, LDP's eps, the adjustable AE's noise. Positions run from 0 (the private end) to 1
    (the useful end) in the knob's scale, so one search serves knobs that hide more when they grow and when they
    shrink."""

    field: str
    """the method's config field"""
    low: float
    """smallest value searched"""
    high: float
    """largest value searched"""
    scale: Literal["log", "logit", "linear"] = "log"
    """how values are spaced between low and high ('logit' for weights in (0, 1))"""
    private_end: Literal["low", "high"] = "low"
    """which end of the range hides more ('low': beta, alpha, eps; 'high': noise)"""

    def __post_init__(self) -> None:
        if not self.low < self.high:
            raise ValueError(f"knob {self.field}: low {self.low} must be below high {self.high}")
        if self.scale == "log" and self.low <= 0:
            raise ValueError(f"knob {self.field}: a log scale needs low > 0")
        if self.scale == "logit" and not 0 < self.low < self.high < 1:
            raise ValueError(f"knob {self.field}: a logit scale needs 0 < low < high < 1")

    def _warp(self, v: float) -> float:
        if self.scale == "log":
            return math.log(v)
        if self.scale == "logit":
            return math.log(v / (1 - v))
        return v

    def _unwarp(self, w: float) -> float:
        if self.scale == "log":
            return math.exp(w)
        if self.scale == "logit":
            return 1 / (1 + math.exp(-w))
        return w

    def value_at(self, position: float) -> float:
        """The knob value at `position` in [0, 1] (0: the private end, 1: the useful end)."""
        t = position if self.private_end == "low" else 1 - position
        lo, hi = self._warp(self.low), self._warp(self.high)
        return float(self._unwarp(lo + min(max(t, 0.0), 1.0) * (hi - lo)))

    def position_of(self, value: float) -> float:
        """Inverse of `value_at` (clipped to [0, 1])."""
        lo, hi = self._warp(self.low), self._warp(self.high)
        t = (self._warp(min(max(value, self.low), self.high)) - lo) / (hi - lo)
        return t if self.private_end == "low" else 1 - t

    def read(self, config: "MethodConfig") -> float:
        """The knob's value in `config` (the first client's for a per-client tuple)."""
        v = getattr(config, self.field)
        return float(v[0] if isinstance(v, tuple) else v)

    def apply(self, config: "MethodConfig", value: float) -> "MethodConfig":
        """`config` with the knob set to `value` (every client's, for a per-client tuple)."""
        current = getattr(config, self.field)
        new: Any = (float(value),) if isinstance(current, tuple) else value
        return dataclasses.replace(config, **{self.field: new})


class MethodCard:
    """A method as `veil methods` and the spec checks know it, torch-free: its name, config class, one-line
    description, source, whether it federates, its privacy knob, its paper values and the deviations a config
    records. Each built-in method's card lives in `veil.methods.configs.<module>` and its `Method` class inherits
    it (`class GPP(GPPCard, Method)`), so the two cannot drift apart; a plugin's Method class is its own card."""

    name: ClassVar[str]
    Config: ClassVar[type[MethodConfig]] = MethodConfig
    description: ClassVar[str] = ""
    paper: ClassVar[str] = ""
    federated: ClassVar[bool] = False
    """whether the method trains by federation (`veil.methods.federated`)"""
    releases_input_format: ClassVar[bool] = False  # z is an obfuscated record in x's format (adds seed 003's audit)
    #: the paper's value of every field whose default departs from it; `preset: paper` restores them all
    paper_values: ClassVar[Mapping[str, PaperValue]] = {}
    #: the field that trades utility for privacy, which calibration sets to meet a leakage target (None: the
    #: method has no privacy knob, e.g. the no-privacy autoencoder)
    privacy_knob: ClassVar[PrivacyKnob | None] = None
    eps_ldp: ClassVar[bool] = False
    """whether the release is an eps-LDP mechanism (the method's `ldp_release`), so a target may bound eps"""

    @classmethod
    def release_width_for(cls, config: MethodConfig, task: TaskSpec | None) -> int | None:
        """Width of the z that `config` releases on `task` (d_z, unless the method derives it); None when it
        depends on a task not given."""
        return config.d_z

    @classmethod
    def deviations(cls, config: MethodConfig) -> dict[str, Any]:
        """Choices in `config` that depart from the paper, in the method's own words (empty = faithful)."""
        return {}

    @classmethod
    def preset_values(cls, preset: str) -> dict[str, Any]:
        """The field values preset `preset` sets before the user's own ('default': none, the fields' defaults)."""
        return {k: p.value for k, p in cls.paper_values.items()} if preset == "paper" else {}

    @classmethod
    def preset_differences(cls, defaults: MethodConfig) -> list[tuple[str, str, str, str]]:
        """(field, default, paper value, why) for every field `preset: paper` changes, as a user writes them;
        the paper value notes when the paper gives none (`veil methods NAME` and docs/methods.md show these)."""
        return [
            (key, show(getattr(defaults, key)), show(p.value) + ("" if p.stated else UNSTATED), p.why)
            for key, p in cls.paper_values.items()
        ]

    @classmethod
    def recorded_deviations(cls, config: MethodConfig) -> dict[str, Any]:
        """Every departure from the paper a run records as `method.deviation.<key>`: the method's own texts, each
        field of `paper_values` set otherwise (with the paper's value and why Veil's default differs), and an
        explicit release_seed."""
        out = dict(cls.deviations(config))
        for name, p in cls.paper_values.items():
            value = getattr(config, name)
            if p.stated and name not in out and value != p.value:
                out[name] = f"{show(value)} instead of the paper's {show(p.value)}: {p.why}"
        return {**out, **release_seed_deviation(config.release_seed)}


def show(value: Any) -> str:
    """A config value as a user writes it (tuples as lists, no quotes around strings)."""
    if isinstance(value, tuple):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return str(value)
