"""Deviation texts that several methods record, written once: they live with the methods' cards, torch-free, in
`veil.methods.configs.deviations`, and are re-exported here (their earlier home)."""

from __future__ import annotations

from veil.methods.configs.deviations import MEAN_RELEASE as MEAN_RELEASE
from veil.methods.configs.deviations import REPRODUCIBLE_RELEASE as REPRODUCIBLE_RELEASE
from veil.methods.configs.deviations import UNIFORM_PRIVACY_LOSS as UNIFORM_PRIVACY_LOSS
from veil.methods.configs.deviations import WHY_ADAM as WHY_ADAM
from veil.methods.configs.deviations import WHY_UNIFORM as WHY_UNIFORM
from veil.methods.configs.deviations import fraction_deviation as fraction_deviation
from veil.methods.configs.deviations import optimizer_deviation as optimizer_deviation
from veil.methods.configs.deviations import privacy_loss_deviation as privacy_loss_deviation
from veil.methods.configs.deviations import release_deviation as release_deviation
from veil.methods.configs.deviations import release_seed_deviation as release_seed_deviation
