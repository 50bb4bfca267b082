"""Paper reproductions: `veil nightly --suite benchmarks/reproduce/suite.yaml [--quick] [--only ROW[/ENTRY]]`.

A reproduction suite (`kind: reproduce`) lists rows, one per published result. Each row names sweep specs
(its entries: the method at `preset: paper` and at its defaults, and the paper's baselines) and the paper's
figures. Running the suite runs every entry as an ordinary Veil sweep, tagged with its row, entry, variant and
mode; the results table is then built from those MLflow records alone (`--table` rebuilds it without running
anything), so no number in it is ever typed in by hand. Verdicts compare Veil's mean over seeds at
`preset: paper` with the paper's figure: within the row's tolerance it is reproduced, within 2.5x close,
otherwise not reproduced. A match that says nothing about hiding is not counted as reproduced: "matches, but
neither hides" when both sides leak what the row's unencoded data (its `reference` entry) leaks, and
"accuracy matches, but AUC leaks" when an adversary accuracy sits at the majority rate (it cannot tell hiding
from leaking) while the same probe's AUC is off chance by more than the tolerance. The cause the row states
after investigation (`why`) is written once per row in RESULTS.md.

Modules: `suite` (the suite model, loading and validation), `runs` (running the suite's sweeps), `render`
(records, verdicts, the table, fronts and the README block) and `commands` (`cmd_reproduce`, for the CLI).
Nothing is imported here: importing `veil.reproduce` loads neither torch, Ray nor MLflow."""
