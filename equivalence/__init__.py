"""Cross-implementation checks: the TF2 trainer and the tf.compat.v1 towers, side by side.

`python -m equivalence --num_gpus=2` prints per-variable tables and exits non-zero when any row
is outside its tolerance; tests/test_equivalence.py calls the same library functions. This is
the only package besides tests/ that imports both `strategies` and `compat_v1`.
"""
