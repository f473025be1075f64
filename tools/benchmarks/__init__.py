"""The benchmarks `tools/bench.py <name>` runs: one module each, with `add_arguments(parser)`
and `main(args) -> dict`, and the alternating-pairs timing they share (`pairs`)."""
