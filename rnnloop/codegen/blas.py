"""Matrix products for generated kernels: BLAS gemm/gemv called directly, with the layout chosen per call.

Why not Numba's np.dot: it always goes through scipy's OpenBLAS with row-major operands turned into
one fixed column-major call, and for the products RNN cells make that is slow. Measured on this
project's 2-core AMD EPYC (one thread, float32, µs per product):

    (rows x inner x cols)    Numba np.dot   NumPy's OpenBLAS   note
    16 x 256 x 1024          284            138                the per-step product of an LSTM, batch 16
    64 x 512 x 2048          2031           1644
    1 x 256 x 1024           19             gemv: about as fast, gemm with one row: 4x slower

So products go to NumPy's own OpenBLAS (an ILP64 build shipped inside the wheel, newer than scipy's)
when it can be found, else to scipy's BLAS, and a single row or column goes to gemv. Operands are
passed with whatever strides they have when BLAS can take them (row- or column-major with a leading
dimension), so transposed weights and column slices are not copied.

The BLAS symbols are registered with LLVM by name (`llvmlite.binding.add_symbol`) at import, so
kernels that call them are cached on disk like any other: the address is looked up again in each
process. Which library serves a kernel is in its source (`matmul_ilp64` or `matmul_lp64`), hence in
its cache key.
"""

from __future__ import annotations

import ctypes
import glob
import os

import llvmlite.binding as llvm
import numpy as np
from numba import njit, types
from numba.extending import get_cython_function_address

# Fortran BLAS takes every argument by address. Pointers travel as intp (same size and calling
# convention on every 64-bit platform Numba supports), so one declaration serves float32 and float64.
_ARGS = {"gemm": 13, "gemv": 11}


def _numpy_openblas() -> dict[str, int] | None:
    """Addresses of NumPy's bundled ILP64 OpenBLAS routines, or None (another build of NumPy)."""
    if os.environ.get("RNNLOOP_BLAS", "") == "scipy":
        return None
    here = os.path.dirname(np.__file__)
    found = sorted(glob.glob(os.path.join(here, "..", "numpy.libs", "*openblas64*"))
                   + glob.glob(os.path.join(here, ".dylibs", "*openblas64*")))
    for path in found:
        try:
            lib = ctypes.CDLL(path)  # already loaded by NumPy: this only finds its handle
            return {f"{p}{r}": ctypes.cast(getattr(lib, f"scipy_{p}{r}_64_"), ctypes.c_void_p).value
                    for p in "sd" for r in _ARGS}
        except (OSError, AttributeError):
            continue
    return None


def _scipy_blas() -> dict[str, int]:
    return {f"{p}{r}": get_cython_function_address("scipy.linalg.cython_blas", f"{p}{r}")
            for p in "sd" for r in _ARGS}


_ilp64 = _numpy_openblas()
ILP64 = _ilp64 is not None
_lp64 = None if ILP64 else _scipy_blas()  # (importing scipy.linalg costs half a second of every load)
PROVIDER = "numpy-openblas64" if ILP64 else "scipy"
MATMUL = "matmul_ilp64" if ILP64 else "matmul_lp64"  # the function generated kernels call

# Both symbol families are registered so every function below links (the ones that pick a family
# at run time refer to both). Only the family of the provider in use is ever called: generated
# kernels name it in their source (so a kernel cached under the other provider is never loaded),
# and simd passes ILP64. The other family takes the same addresses; it must not be called, which
# is why tests run matmul_lp64 only in a process whose provider is scipy.
_extern = {}
for _family in ("ilp64", "lp64"):
    for _routine, _address in (_ilp64 or _lp64).items():
        _symbol = f"rnnloop_{_routine}_{_family}"
        llvm.add_symbol(_symbol, _address)
        _extern[_routine, _family] = types.ExternalFunction(
            _symbol, types.void(*[types.intp] * _ARGS[_routine[1:]]))

_sgemm_64, _dgemm_64 = _extern["sgemm", "ilp64"], _extern["dgemm", "ilp64"]
_sgemv_64, _dgemv_64 = _extern["sgemv", "ilp64"], _extern["dgemv", "ilp64"]
_sgemm_32, _dgemm_32 = _extern["sgemm", "lp64"], _extern["dgemm", "lp64"]
_sgemv_32, _dgemv_32 = _extern["sgemv", "lp64"], _extern["dgemv", "lp64"]

_N, _T = ord("N"), ord("T")


@njit(cache=True, nogil=True)
def _layout(x, rows, cols):
    """(trans, ld) for reading matrix x as BLAS's column-major x transposed: (N, row stride) when x
    is row-major, (T, column stride) when column-major, (0, 0) when BLAS cannot read it as it is."""
    size = x.itemsize
    s0, s1 = x.strides[0] // size, x.strides[1] // size
    if (cols == 1 or s1 == 1) and (rows == 1 or s0 >= cols):
        return _N, max(s0 if rows > 1 else cols, 1)
    if (rows == 1 or s0 == 1) and (cols == 1 or s1 >= rows):
        return _T, max(s1 if cols > 1 else rows, 1)
    return 0, 0


@njit(cache=True, nogil=True)
def _copy(src, dst):
    for i in range(dst.shape[0]):
        for j in range(dst.shape[1]):
            dst[i, j] = src[i, j]


@njit(cache=True, nogil=True)
def _matmul(a, b, out, ints):
    """out[m, n] = a[m, k] @ b[k, n] for float matrices of one dtype and any strides. `ints` is
    scratch for BLAS's integer arguments: int64 for the ILP64 library, int32 for scipy's."""
    m, n = out.shape
    size = out.itemsize
    s0, s1 = out.strides[0] // size, out.strides[1] // size
    if m > 1 and n > 1 and not (s1 == 1 and s0 >= n) or m == 1 and s1 <= 0 or n == 1 and s0 <= 0:
        c = np.empty((m, n), out.dtype)[:, :]  # BLAS writes row-major with unit stride, vectors forwards
        #                                       (a view of layout 'A', as out's: one _product to compile)
        _product(a, b, c, ints)
        _copy(c, out)
    else:
        _product(a, b, out, ints)


@njit(cache=True, nogil=True)
def _product(a, b, out, ints):
    m, k = a.shape
    n = b.shape[1]
    if m == 0 or n == 0:
        return
    if k == 0:
        out[:, :] = 0
        return
    ta, lda = _layout(a, m, k)
    if ta == 0:
        a = np.ascontiguousarray(a)
        ta, lda = _N, k
    tb, ldb = _layout(b, k, n)
    if tb == 0:
        b = np.ascontiguousarray(b)
        tb, ldb = _N, n
    size = out.itemsize
    s0, s1 = out.strides[0] // size, out.strides[1] // size
    ilp64 = ints.itemsize == 8
    chars = np.empty(2, np.uint8)
    scale = np.empty(2, out.dtype)
    scale[0], scale[1] = 1, 0
    p, w = ints.ctypes.data, ints.itemsize
    alpha, beta = scale.ctypes.data, scale.ctypes.data + size
    if m == 1 or n == 1:
        # One output row or column is a matrix-vector product (gemv): out[0] = b^T a[0] or
        # out[:, 0] = a b[:, 0], the matrix read in the layout it has.
        if m == 1:
            x = a[0]
            mat, ld, y, incy = b, ldb, out.ctypes.data, s1
            chars[0] = _N if tb == _N else _T
            rows, cols = (n, k) if tb == _N else (k, n)
        else:
            x = b[:, 0]
            mat, ld, y, incy = a, lda, out.ctypes.data, s0
            chars[0] = _T if ta == _N else _N
            rows, cols = (k, m) if ta == _N else (m, k)
        if x.strides[0] <= 0:  # BLAS reads a negative increment backwards from the far end
            x = np.ascontiguousarray(x)
        ints[0], ints[1], ints[2] = rows, cols, ld
        ints[3], ints[4] = x.strides[0] // x.itemsize, incy
        args = (chars.ctypes.data, p, p + w, alpha, mat.ctypes.data, p + 2 * w,
                x.ctypes.data, p + 3 * w, beta, y, p + 4 * w)
        _call_gemv(ilp64, size, args)
        return
    # Row-major out is column-major out^T = b^T a^T, BLAS's (n x m) product; _layout's trans
    # flags say how to read b^T and a^T from the memory of b and a.
    chars[0], chars[1] = tb, ta
    ints[0], ints[1], ints[2] = n, m, k
    ints[3], ints[4], ints[5] = ldb, lda, s0
    args = (chars.ctypes.data, chars.ctypes.data + 1, p, p + w, p + 2 * w, alpha,
            b.ctypes.data, p + 3 * w, a.ctypes.data, p + 4 * w, beta, out.ctypes.data, p + 5 * w)
    _call_gemm(ilp64, size, args)


@njit(cache=True, nogil=True)
def _call_gemm(ilp64, size, args):
    if ilp64:
        _sgemm_64(*args) if size == 4 else _dgemm_64(*args)
    else:
        _sgemm_32(*args) if size == 4 else _dgemm_32(*args)


@njit(cache=True, nogil=True)
def _call_gemv(ilp64, size, args):
    if ilp64:
        _sgemv_64(*args) if size == 4 else _dgemv_64(*args)
    else:
        _sgemv_32(*args) if size == 4 else _dgemv_32(*args)


@njit(cache=True, nogil=True)
def matmul_ilp64(a, b, out):
    """out[...] = a @ b through NumPy's ILP64 OpenBLAS (see the module docstring)."""
    _matmul(a, b, out, np.empty(6, np.int64))


@njit(cache=True, nogil=True)
def matmul_lp64(a, b, out):
    """out[...] = a @ b through scipy's BLAS."""
    _matmul(a, b, out, np.empty(6, np.int32))
