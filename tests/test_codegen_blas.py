"""rnnloop.codegen.blas: products of every layout BLAS can read (and some it cannot) against NumPy."""

import itertools
import os
import subprocess
import sys

import numba
import numpy as np
import pytest

from rnnloop.codegen import blas


def _strided(fn, dtype):
    """fn compiled once for matrices of any strides (Numba layout 'A'), so that every layout below
    runs the same machine code: each layout would otherwise be a compile of its own (minutes on a
    fresh checkout, where these functions have no cache yet)."""
    matrix = numba.from_dtype(np.dtype(dtype))[:, :]
    return numba.njit(numba.void(matrix, matrix, matrix))(lambda a, b, out: fn(a, b, out))


def _layouts(x):
    """x as C-order, F-order, a strided window, a column-reversed view and a transposed copy."""
    yield x
    yield np.asfortranarray(x)
    big = np.zeros((2 * x.shape[0] + 1, 3 * x.shape[1] + 2), x.dtype)
    big[1::2, 2::3] = x
    yield big[1::2, 2::3]
    yield np.ascontiguousarray(x[:, ::-1])[:, ::-1]
    yield np.ascontiguousarray(x.T).T


def _outs(m, n, dtype):
    yield np.full((m, n), np.nan, dtype)
    yield np.full((n, m), np.nan, dtype).T
    yield np.full((m, 2 * n), np.nan, dtype)[:, ::2]
    yield np.full((m, n), np.nan, dtype)[::-1]


@pytest.mark.parametrize("name", ["matmul_ilp64", "matmul_lp64"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_layout(name, dtype):
    if name == "matmul_ilp64" and not blas.ILP64:
        pytest.skip("NumPy has no bundled ILP64 OpenBLAS here")
    matmul = _strided(getattr(blas, name), dtype)
    rng = np.random.default_rng(0)
    for m, k, n in [(1, 1, 1), (1, 5, 7), (4, 1, 3), (5, 6, 1), (3, 4, 5), (0, 3, 2), (3, 0, 2), (16, 32, 8)]:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
        want = a.astype(np.float64) @ b.astype(np.float64)
        for av, bv in itertools.product(_layouts(a), _layouts(b)):
            for out in _outs(m, n, dtype):
                matmul(av, bv, out)
                np.testing.assert_allclose(out, want, atol=1e-5, err_msg=f"{m}x{k}x{n} {av.strides} {bv.strides} {out.strides}")


def test_scipy_blas_can_be_forced():
    code = "from rnnloop.codegen import blas; print(blas.PROVIDER, blas.MATMUL)"
    env = dict(os.environ, RNNLOOP_BLAS="scipy")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["scipy", "matmul_lp64"]
