"""The packed product of simd.py (the kernel of RNN steps and hoisted input products) alone, one thread,
float32, its weights packed once and in cache: GFLOP/s for each shape, the median (range) of several
rounds, beside NumPy's BLAS on the same operands. What the whole-model figures of the README compare
with (the LSTM encoder's products against its time per call).

    python benchmarks/bench_products.py                # the encoder's shapes and a large one
    python benchmarks/bench_products.py 12x256x1024 --rounds 9
"""

from __future__ import annotations

import os

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import argparse
import statistics
import time

import numpy as np
from numba import njit

from rnnloop.codegen import simd

# rows x inner x columns: an LSTM(256) step at batch 12, a chunk of its hoisted input product (layers 2
# and 3 of the encoder: 10 steps of 12 rows by 512), and a large product
SHAPES = ("12x256x1024", "120x512x1024", "64x512x2048")
_product = getattr(simd, simd.MATMUL_PACKED)


@njit(nogil=True)
def _products(a, b, panels, out, count):
    for _ in range(count):
        _product(a, b, panels, out, False, 1, 0)


def _rate(seconds: list[float], flops: int) -> str:
    rates = [flops / s / 1e9 for s in seconds]
    return f"{statistics.median(rates):.0f} ({min(rates):.0f}-{max(rates):.0f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("shapes", nargs="*", default=list(SHAPES), help="MxKxN (rows x inner x columns)")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print("GFLOP/s, median (range) of", args.rounds, "rounds; one thread, float32")
    print(f"{'shape':>16} {'rnnloop':>16} {'numpy (BLAS)':>16}")
    for shape in args.shapes:
        m, k, n = (int(v) for v in shape.split("x"))
        a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
        panels, out = simd.pack_weights(b), np.empty((m, n), np.float32)
        _products(a, b, panels, out, 1)
        np.testing.assert_allclose(out, a @ b, rtol=1e-3, atol=1e-3)
        flops = 2 * m * k * n
        count = max(3, int(5e8 / flops))  # about 0.5 GFLOP a round
        ours, blas = [], []
        for _ in range(args.rounds):  # interleaved, so that a drifting machine moves both alike
            _products(a, b, panels, out, 1)  # (untimed: the weights back in cache after the other's round)
            start = time.perf_counter()
            _products(a, b, panels, out, count)
            ours.append((time.perf_counter() - start) / count)
            np.matmul(a, b, out=out)
            start = time.perf_counter()
            for _ in range(count):
                np.matmul(a, b, out=out)
            blas.append((time.perf_counter() - start) / count)
        print(f"{shape:>16} {_rate(ours, flops):>16} {_rate(blas, flops):>16}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
