"""qmc: Optuna's quasi-Monte Carlo sampler (a scrambled Sobol sequence) as a sweep sampler: a space-filling design
for the first look at a trade-off, where random points clump. `sampler: qmc` in a sweep spec, with
`sampler_options: {scramble: true}` if wanted; the seed comes from the spec's `sampler_seed`. It never looks at
results, so it declares every trial independent: a sweep with `population: P` trains all of them in populations."""

from __future__ import annotations

from typing import Any

from veil.sweeps.samplers import SamplerSpec, every_trial, register_sampler


@register_sampler("qmc", options=("scramble", "qmc_type"), independent=every_trial)
def qmc(spec: SamplerSpec) -> Any:
    import optuna

    return optuna.samplers.QMCSampler(seed=spec.sampler_seed, **dict(spec.sampler_options))
