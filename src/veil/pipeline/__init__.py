"""The one pipeline of every `veil run` and sweep trial, in its stages: `spec` (a `RunSpec` from flags, a run
file or a sweep trial; `KeyRouter`), `validation` (torch-free: `validate` once into a `ValidatedRun`, then the
checks only the loaded data can answer) and `run` (`execute`: calibrate, train, audit, certify, log).
Import from the stage's module; this package exports nothing, so `--check` never loads torch."""
