"""Transport only: where a validated run trains. Executors by name (`executors`: `inline`, `ray-train`,
`federated`), the federation's Ray runtimes (`federation`), and the one place Veil starts or joins Ray (`cluster`).
Import the module you need: the package itself imports nothing, so starting Ray (`cluster`) never loads torch."""
