"""Benchmarks run by hand: `python -m benchmarks.throughput` (the trainers' real loops and
their peers, `measure`, `keras_peer`; its rows, `results`), `python -m
benchmarks.input_pipeline` (the train stream alone, per host core) and `python -m
benchmarks.profile_ops` (where a profiled step's time goes). Each measurement runs in a
process of its own that ends with its parent, and says on stderr as it ends how far the run
is (`children`). The suite only checks that they run and what they print."""
