"""Ahead-of-time compiles of a config's jitted functions for a target it is not running on
(a TPU slice described by libtpu, or N CPU devices): tools/aot_check.py."""
