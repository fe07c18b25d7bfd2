"""Code generation: one Numba kernel per fusable loop, compiled and cached on disk."""
