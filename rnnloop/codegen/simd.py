"""Products of a few rows by a weight matrix packed once: the register-blocked kernel of RNN steps.

At batch 16 to 64 the per-step product h · R (16 x 256 x 1024 for an LSTM of hidden size 256) is
most of a step, and OpenBLAS is slow on so few rows. Measured on this project's 2-core AMD EPYC
(Zen 5, AVX-512; one thread, float32, µs per product, medians of products in a loop as a kernel
makes them; OpenBLAS as configured here, OPENBLAS_CORETYPE=Haswell):

    (rows x inner x cols)    OpenBLAS    this module, 64-byte vectors (32-byte)
    1 x 128 x 512            2.4         1.5   (2.1)
    16 x 256 x 1024          98          43    (78)
    64 x 512 x 2048          1170        690   (1230)
    200 x 64 x 512           105         84    (153)
    3200 x 128 x 1024        6800        5100  (9500)

The method is BLIS's. The weights b [k, n] are packed once (at load for a model's constant
weights, else once per run) into panels of P columns, [ceil(n / P), k, P], contiguous and
zero-padded; per product, a is copied CHUNK rows at a time into blocks of ROWS rows (four where
seven or eight are left: _block_rows), [blocks, DEPTH, ROWS], so that each block is one stream. For
each panel and block, a ROWS x P block of out accumulates in twelve vector registers over DEPTH steps
of the inner dimension and is stored once. Numba has no vector types, and LLVM's loop vectorizer does
not keep such a block in registers: it reloads and stores out at every k, behind runtime alias checks
that fail for some row counts (8 GFLOP/s). So this module defines a vector type with six operations:
zero, load, store, splat, broadcast of an element and multiply-add (`llvm.fmuladd`: an FMA where the CPU has one, as
in BLAS); a clamp, for the activation a convolution applies as it stores (conv_rt.py); and a
prefetch, with which a block asks for the next panel while it works on one. A
vector is 64 bytes (16 float32) where the CPU has AVX-512, else 32 (8 float32, AVX2): the width is
read from the CPU Numba compiles for, so a kernel cached on one machine is not reused on another
(Numba's cache is keyed by the CPU and its features).

A single row (batch 1) is a matrix-vector product, bound by reading the weights: it reads the same
panels eight or four at a time (_row). With 32-byte vectors, OpenBLAS's blocking for large matrices wins
above MAX_ROWS rows (the scan-hoisted input product of a whole sequence): those stay with BLAS.
With 64-byte vectors this module is faster at every size measured, so MAX_ROWS has no limit.

Kernels reach the product through a symbol, compiled once per dtype (see _external): linked into each kernel,
the same code took 0.7 s more to compile per kernel and ran slower there (interleaved in one process:
an LSTM step at batch 16, hidden 256, 71 against 66 µs; a GRU's at batch 64, hidden 512, 765 against 707).
"""

from __future__ import annotations

import functools

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
from numba import cfunc, njit, types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model

from . import blas, pool



def _vector_bytes() -> int:
    """64 when the CPU Numba compiles for has AVX-512 (NUMBA_CPU_FEATURES, else the host's), else 32."""
    from numba import config
    from numba.core.codegen import get_host_cpu_features
    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else get_host_cpu_features()
    return 64 if "+avx512f" in features.split(",") else 32


VECTOR_BYTES = _vector_bytes()
ROWS = 6  # rows of a per block: 12 accumulators + 2 panel vectors + 1 splat (AVX2 has 16 registers)
CHUNK = 16 * ROWS  # rows of a per pass: their copy, [CHUNK, DEPTH], takes 48-96 KiB (L2 is 1 MiB)
DEPTH = 256  # inner dimension per pass: a panel's part then fills 16 KiB (32 with 64-byte vectors) of L1
MAX_ROWS = 128 if VECTOR_BYTES == 32 else np.iinfo(np.int64).max


class Vector(types.Type):
    """An LLVM vector of VECTOR_BYTES bytes of one float dtype, held in a register."""

    def __init__(self, dtype: types.Float):
        self.dtype = dtype
        super().__init__(name=f"vector({dtype})")


@register_model(Vector)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        element = ir.FloatType() if fe_type.dtype == types.float32 else ir.DoubleType()
        super().__init__(dmm, fe_type, ir.VectorType(element, VECTOR_BYTES // (fe_type.dtype.bitwidth // 8)))


def _address(context, builder, array_type, array, index):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.gep(data, [index])


@intrinsic
def _vload(typingctx, array, index):
    """The vector at element `index` of array's data (flat, from its first element; unaligned)."""
    vector = Vector(array.dtype)

    def codegen(context, builder, sig, args):
        llty = context.get_value_type(vector)
        return builder.load(builder.bitcast(_address(context, builder, array, *args), llty.as_pointer()),
                            align=array.dtype.bitwidth // 8)
    return vector(array, types.intp), codegen


@intrinsic
def _vstore(typingctx, array, index, value):
    def codegen(context, builder, sig, args):
        llty = context.get_value_type(value)
        address = _address(context, builder, array, args[0], args[1])
        builder.store(args[2], builder.bitcast(address, llty.as_pointer()), align=array.dtype.bitwidth // 8)
        return context.get_dummy_value()
    return types.none(array, types.intp, value), codegen


@intrinsic
def _vsplat(typingctx, x):
    """A vector with every lane x."""
    vector = Vector(x)

    def codegen(context, builder, sig, args):
        llty = context.get_value_type(vector)
        one = builder.insert_element(ir.Constant(llty, ir.Undefined), args[0], ir.Constant(ir.IntType(32), 0))
        return builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(ir.IntType(32), llty.count), None))
    return vector(x), codegen


@intrinsic
def _vbroadcast(typingctx, array, index):
    """A vector with every lane array's element `index` (flat, from its first element). Unlike
    _vsplat(array[index]) it has no code for negative indices, which in _block's loop would cost
    more instructions than its multiply-adds."""
    vector = Vector(array.dtype)

    def codegen(context, builder, sig, args):
        llty = context.get_value_type(vector)
        x = builder.load(_address(context, builder, array, *args))
        one = builder.insert_element(ir.Constant(llty, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
        return builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(ir.IntType(32), llty.count), None))
    return vector(array, types.intp), codegen


@intrinsic
def _vzero(typingctx, array):
    """A vector of zeros of array's dtype."""
    vector = Vector(array.dtype)

    def codegen(context, builder, sig, args):
        return ir.Constant(context.get_value_type(vector), None)
    return vector(array), codegen


@intrinsic
def _vfma(typingctx, a, b, c):
    """a * b + c, lane by lane."""
    def codegen(context, builder, sig, args):
        llty = context.get_value_type(a)
        name = f"llvm.fmuladd.v{llty.count}f{a.dtype.bitwidth}"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(llty, [llty] * 3), name)
        return builder.call(fn, args)
    return a(a, a, a), codegen


@intrinsic
def _vclamp(typingctx, v, lo, hi):
    """v held to [lo, hi] lane by lane (a lane below lo is lo, above hi is hi), NaN kept: np.clip's
    values, as np.minimum(np.maximum(v, lo), hi) gives them. With lo -inf and hi inf, v itself."""
    def codegen(context, builder, sig, args):
        x, low, high = args
        x = builder.select(builder.fcmp_ordered("<", x, low), low, x)
        return builder.select(builder.fcmp_ordered(">", x, high), high, x)
    return v(v, v, v), codegen


@intrinsic
def _prefetch(typingctx, array, index):
    """Ask for the cache line of array's element `index` (flat, as _vload) to be brought in (x86's
    prefetcht1; which cache it lands in is the CPU's choice); a hint that never faults."""
    def codegen(context, builder, sig, args):
        i8p = ir.IntType(8).as_pointer()
        address = builder.bitcast(_address(context, builder, array, *args), i8p)
        signature = ir.FunctionType(ir.VoidType(), [i8p] + [ir.IntType(32)] * 3)
        fn = cgutils.get_or_insert_function(builder.module, signature, "llvm.prefetch.p0")
        read, locality, data = (ir.Constant(ir.IntType(32), v) for v in (0, 2, 1))
        builder.call(fn, [address, read, locality, data])
        return context.get_dummy_value()
    return types.none(array, types.intp), codegen


@intrinsic
def _lanes(typingctx, array):
    """The elements of array's dtype in a vector, as a constant. Numba reads `array.itemsize` from
    the array at run time: offsets computed from it are registers, which in _row_eight's loop cost
    spills and addressing (1.60 against 1.31 µs at 128 x 512)."""
    def codegen(context, builder, sig, args):
        return context.get_constant(types.intp, VECTOR_BYTES // (array.dtype.bitwidth // 8))
    return types.intp(array), codegen


@njit(cache=True, nogil=True)
def panel_width(array):
    """P, the columns of a panel of array's dtype: two vectors."""
    return 2 * _lanes(array)


@njit(cache=True, nogil=True)
def pack(b, packed, rows):
    """b [k, n] (any strides) as panels [ceil(n / P), k, P] for a product of `rows` rows.

    Returns `packed` itself when it already holds b's panels (a kernel packs an invariant once, on
    the first product that uses them), or when a product of that many rows does not use panels.
    """
    k, n = b.shape
    width = panel_width(b)
    panels = (n + width - 1) // width
    if packed.shape[0] == panels and packed.shape[1] == k and packed.shape[2] == width and packed.size > 0:
        return packed
    if rows < 1 or rows > MAX_ROWS or k == 0 or n == 0:
        return packed
    out = np.zeros((panels, k, width), b.dtype)
    for p in range(panels):
        j = p * width
        for kk in range(k):
            for c in range(min(width, n - j)):
                out[p, kk, c] = b[kk, j + c]
    return out


def pack_weights(b: np.ndarray) -> np.ndarray:
    """pack(b, empty, 1) in NumPy: the panels of a model's weights, made at load without compiling."""
    k, n = b.shape
    width = 2 * VECTOR_BYTES // b.itemsize
    if k == 0 or n == 0:
        return np.empty((0, 0, 0), b.dtype)
    panels = -(-n // width)
    padded = np.zeros((k, panels * width), b.dtype)
    padded[:, :n] = b
    out = aligned_empty((panels, k, width), b.dtype)
    out[...] = padded.reshape(k, panels, width).transpose(1, 0, 2)
    return out


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """np.empty(shape, dtype) at a cache line boundary, so that no vector load of panels straddles
    two lines (about 4% of an LSTM step at 256 x 1024)."""
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + 64, np.uint8)
    start = -raw.ctypes.data % 64
    return raw[start:start + nbytes].view(dtype).reshape(shape)


@njit(cache=True, nogil=True)
def multiply(a, packed, out, backwards):
    """out[m, n] = a[m, k] @ b from b's panels (see pack); False, writing nothing, when they do not
    serve this product (too many rows, or panels of another matrix). `backwards` reads the panels
    last to first (see matmul_packed_ilp64); the result is the same."""
    m, k = a.shape
    n = out.shape[1]
    width = panel_width(out)
    panels = (n + width - 1) // width
    if (m < 1 or m > MAX_ROWS or out.shape[0] != m or k == 0 or packed.shape[0] != panels
            or packed.shape[1] != k or packed.shape[2] != width or out.itemsize != packed.itemsize):
        return False
    panel_data = np.ascontiguousarray(packed).reshape(-1)  # a view: pack's result is contiguous
    stride = out.strides[0] // out.itemsize
    direct = out.strides[1] == out.itemsize and stride >= n
    if m == 1:
        _row(a[0], panel_data, k, n, out, direct, backwards)
        return True
    edge = np.empty((ROWS, width), out.dtype)
    rows_data = np.empty(CHUNK * min(k, DEPTH), out.dtype)
    for m0 in range(0, m, CHUNK):  # CHUNK rows of a at a time, so that their copy stays in cache
        mc = min(CHUNK, m - m0)
        for k0 in range(0, k, DEPTH):
            k1 = min(k, k0 + DEPTH)
            depth = k1 - k0
            add = k0 > 0
            # a[m0:m0 + mc, k0:k1] in blocks of up to ROWS rows (_block_rows), [blocks, depth, ROWS]: a
            # stream of splats each; a block's last row repeats where it has fewer.
            i, bl = 0, 0
            while i < mc:
                rows = _block_rows(mc - i)
                for kk in range(depth):
                    for r in range(ROWS):
                        rows_data[(bl * depth + kk) * ROWS + r] = a[m0 + i + min(r, rows - 1), k0 + kk]
                i += rows
                bl += 1
            for q in range(panels):
                p = panels - 1 - q if backwards else q
                j = p * width
                offset = (p * k + k0) * width
                whole = direct and j + width <= n
                # The first block asks for the next panel's part while it uses this one: a 12 x 512 x 2000
                # product (a decoder's output layer) whose weights came from memory took 452-565 µs
                # against 584-689 without; from L3, alike.
                following = p - 1 if backwards else p + 1
                ahead = (following * k + k0) * width if 0 <= following < panels else offset
                i, bl = m0, 0
                while i < m0 + mc:
                    rows = _block_rows(m0 + mc - i)
                    start = bl * depth * ROWS
                    fetch = depth if bl == 0 else 0
                    if whole:
                        _block(rows_data, start, rows, panel_data, offset, depth, out, i * stride + j, stride, add,
                               ahead, fetch)
                    else:  # the last columns, or an out that vector stores cannot reach: through `edge`
                        _block(rows_data, start, rows, panel_data, offset, depth, edge, 0, width, False, ahead, fetch)
                        for r in range(rows):
                            for c in range(min(width, n - j)):
                                out[i + r, j + c] = out[i + r, j + c] + edge[r, c] if add else edge[r, c]
                    i += rows
                    bl += 1
    return True


@njit(nogil=True, inline="always")
def _block_rows(left):
    """The rows of the next block when `left` rows remain: ROWS, but four when seven or eight remain.
    _block's loops take ROWS rows (ROWS cycles a step of the inner dimension: two FMAs a row, two a
    cycle) or four (four cycles, its FMAs' latency); so eight rows as 4 + 4 take eight cycles a step,
    as 6 + 2 ten. An 8 x 128 x 512 product (a VAD's hoisted input product): 15 against 17-23 µs."""
    return 4 if ROWS < left <= 8 else min(ROWS, left)


@njit(nogil=True)
def _row(x, panel_data, k, n, out, direct, backwards):
    """out[0] = x @ b for a single row x [k]: a matrix-vector product, bound by reading the panels.
    With 64-byte vectors, eight panels at a time (_row_eight); then four at a time, which keep
    eight accumulators (FMA latency times throughput) and four streams in flight; measured 1.3-1.5x
    OpenBLAS's sgemv at k x n = 128 x 512 and 256 x 1024. `backwards` takes those groups of panels
    last to first."""
    lanes = _lanes(out)
    width = 2 * lanes
    whole = n // width if direct else 0  # panels stored straight into out
    done = _row_eight(x, panel_data, k, out, whole, backwards) if VECTOR_BYTES == 64 else 0
    fours = (whole - done) // 4
    for q in range(fours):
        p = done + 4 * (fours - 1 - q if backwards else q)
        o0 = p * k * width
        o1, o2, o3 = o0 + k * width, o0 + 2 * k * width, o0 + 3 * k * width
        c0a = c0b = c1a = c1b = c2a = c2b = c3a = c3b = _vzero(out)
        for kk in range(k):
            x_k, o = _vsplat(x[kk]), kk * width
            c0a, c0b = _vfma(x_k, _vload(panel_data, o0 + o), c0a), _vfma(x_k, _vload(panel_data, o0 + o + lanes), c0b)
            c1a, c1b = _vfma(x_k, _vload(panel_data, o1 + o), c1a), _vfma(x_k, _vload(panel_data, o1 + o + lanes), c1b)
            c2a, c2b = _vfma(x_k, _vload(panel_data, o2 + o), c2a), _vfma(x_k, _vload(panel_data, o2 + o + lanes), c2b)
            c3a, c3b = _vfma(x_k, _vload(panel_data, o3 + o), c3a), _vfma(x_k, _vload(panel_data, o3 + o + lanes), c3b)
        j = p * width
        _vstore(out, j, c0a)
        _vstore(out, j + lanes, c0b)
        _vstore(out, j + width, c1a)
        _vstore(out, j + width + lanes, c1b)
        _vstore(out, j + 2 * width, c2a)
        _vstore(out, j + 2 * width + lanes, c2b)
        _vstore(out, j + 3 * width, c3a)
        _vstore(out, j + 3 * width + lanes, c3b)
    done += 4 * fours
    if done * width < n:  # the rest, one panel at a time (no allocation per product when there is none)
        _row_rest(x, panel_data, k, n, out, done)


@njit(nogil=True)
def _row_eight(x, panel_data, k, out, whole, backwards):
    """_row's first panels, eight at a time (the groups last to first if `backwards`); returns how
    many it did. Eight streams of panels keep more reads from L2 in flight than four: 1.46 against
    2.03 µs at 128 x 512 (Zen 5), where the weights fit in L2; alike at 256 x 1024, where they do
    not. Sixteen accumulators: AVX-512 has 32 vector registers (AVX2, 16, would spill)."""
    lanes = _lanes(out)
    width = 2 * lanes
    step = k * width  # from one panel to the next
    groups = whole // 8
    for q in range(groups):
        p = 8 * (groups - 1 - q if backwards else q)
        a0 = b0 = a1 = b1 = a2 = b2 = a3 = b3 = a4 = b4 = a5 = b5 = a6 = b6 = a7 = b7 = _vzero(out)
        for kk in range(k):
            x_k, o = _vsplat(x[kk]), p * step + kk * width
            a0, b0 = _vfma(x_k, _vload(panel_data, o), a0), _vfma(x_k, _vload(panel_data, o + lanes), b0)
            o += step
            a1, b1 = _vfma(x_k, _vload(panel_data, o), a1), _vfma(x_k, _vload(panel_data, o + lanes), b1)
            o += step
            a2, b2 = _vfma(x_k, _vload(panel_data, o), a2), _vfma(x_k, _vload(panel_data, o + lanes), b2)
            o += step
            a3, b3 = _vfma(x_k, _vload(panel_data, o), a3), _vfma(x_k, _vload(panel_data, o + lanes), b3)
            o += step
            a4, b4 = _vfma(x_k, _vload(panel_data, o), a4), _vfma(x_k, _vload(panel_data, o + lanes), b4)
            o += step
            a5, b5 = _vfma(x_k, _vload(panel_data, o), a5), _vfma(x_k, _vload(panel_data, o + lanes), b5)
            o += step
            a6, b6 = _vfma(x_k, _vload(panel_data, o), a6), _vfma(x_k, _vload(panel_data, o + lanes), b6)
            o += step
            a7, b7 = _vfma(x_k, _vload(panel_data, o), a7), _vfma(x_k, _vload(panel_data, o + lanes), b7)
        j = p * width
        _vstore(out, j, a0)
        _vstore(out, j + lanes, b0)
        _vstore(out, j + width, a1)
        _vstore(out, j + width + lanes, b1)
        _vstore(out, j + 2 * width, a2)
        _vstore(out, j + 2 * width + lanes, b2)
        _vstore(out, j + 3 * width, a3)
        _vstore(out, j + 3 * width + lanes, b3)
        _vstore(out, j + 4 * width, a4)
        _vstore(out, j + 4 * width + lanes, b4)
        _vstore(out, j + 5 * width, a5)
        _vstore(out, j + 5 * width + lanes, b5)
        _vstore(out, j + 6 * width, a6)
        _vstore(out, j + 6 * width + lanes, b6)
        _vstore(out, j + 7 * width, a7)
        _vstore(out, j + 7 * width + lanes, b7)
    return 8 * groups


@njit(nogil=True)
def _row_rest(x, panel_data, k, n, out, first):
    """_row's panels from `first` on, with two accumulators, stored through a scratch row."""
    lanes = _lanes(out)
    width = 2 * lanes
    edge = np.empty((1, width), out.dtype)
    for q in range(first, (n + width - 1) // width):
        ca = cb = _vzero(out)
        for kk in range(k):
            x_k, o = _vsplat(x[kk]), (q * k + kk) * width
            ca, cb = _vfma(x_k, _vload(panel_data, o), ca), _vfma(x_k, _vload(panel_data, o + lanes), cb)
        _vstore(edge, 0, ca)
        _vstore(edge, lanes, cb)
        j = q * width
        for c in range(min(width, n - j)):
            out[0, j + c] = edge[0, c]


@njit(nogil=True, inline="always")
def _prefetch_step(panel_data, at, lanes):
    """Ask for one step of a panel from flat element `at`: a line (two with 64-byte vectors)."""
    _prefetch(panel_data, at)
    if VECTOR_BYTES == 64:
        _prefetch(panel_data, at + lanes)


@njit(nogil=True, inline="always")
def _step(rows_data, x0, panel_data, o, lanes, c, rows):
    """One step of the inner dimension for `rows` (4 or 6, a literal) rows: c (twelve accumulators,
    two a row) plus the rows' elements from flat element x0 of rows_data times the panel's step from
    flat element o of panel_data."""
    c0a, c0b, c1a, c1b, c2a, c2b, c3a, c3b, c4a, c4b, c5a, c5b = c
    b0, b1 = _vload(panel_data, o), _vload(panel_data, o + lanes)
    x = _vbroadcast(rows_data, x0)
    c0a, c0b = _vfma(x, b0, c0a), _vfma(x, b1, c0b)
    x = _vbroadcast(rows_data, x0 + 1)
    c1a, c1b = _vfma(x, b0, c1a), _vfma(x, b1, c1b)
    x = _vbroadcast(rows_data, x0 + 2)
    c2a, c2b = _vfma(x, b0, c2a), _vfma(x, b1, c2b)
    x = _vbroadcast(rows_data, x0 + 3)
    c3a, c3b = _vfma(x, b0, c3a), _vfma(x, b1, c3b)
    if rows > 4:
        x = _vbroadcast(rows_data, x0 + 4)
        c4a, c4b = _vfma(x, b0, c4a), _vfma(x, b1, c4b)
        x = _vbroadcast(rows_data, x0 + 5)
        c5a, c5b = _vfma(x, b0, c5a), _vfma(x, b1, c5b)
    return c0a, c0b, c1a, c1b, c2a, c2b, c3a, c3b, c4a, c4b, c5a, c5b


@njit(nogil=True)
def _block(rows_data, start, rows, panel_data, offset, depth, dst, at, stride, add, ahead, fetch):
    """One block of `rows` rows (<= ROWS; from flat element `start` of rows_data, [depth, ROWS])
    times `depth` rows of one panel (from flat element `offset` of panel_data, [depth, P]): into dst
    from flat element `at`, row stride `stride`, added to what dst holds if `add`. Four rows or
    fewer take a loop of four."""
    lanes = _lanes(dst)
    c0a = c0b = c1a = c1b = c2a = c2b = c3a = c3b = c4a = c4b = c5a = c5b = _vzero(dst)
    if add:
        c0a, c0b = _vload(dst, at), _vload(dst, at + lanes)
        if rows > 1:
            c1a, c1b = _vload(dst, at + stride), _vload(dst, at + stride + lanes)
        if rows > 2:
            c2a, c2b = _vload(dst, at + 2 * stride), _vload(dst, at + 2 * stride + lanes)
        if rows > 3:
            c3a, c3b = _vload(dst, at + 3 * stride), _vload(dst, at + 3 * stride + lanes)
        if rows > 4:
            c4a, c4b = _vload(dst, at + 4 * stride), _vload(dst, at + 4 * stride + lanes)
        if rows > 5:
            c5a, c5b = _vload(dst, at + 5 * stride), _vload(dst, at + 5 * stride + lanes)
    c = (c0a, c0b, c1a, c1b, c2a, c2b, c3a, c3b, c4a, c4b, c5a, c5b)
    # The first `fetch` steps also ask for the next panel's (see multiply), in a loop of their own:
    # a test in the loop cost a 12 x 512 x 2000 product 7-8% with its weights in L3 (nothing when they
    # come from memory) and other shapes 3-13%.
    if rows > 4:
        for kk in range(fetch):
            c = _step(rows_data, start + kk * ROWS, panel_data, offset + kk * 2 * lanes, lanes, c, 6)
            _prefetch_step(panel_data, ahead + kk * 2 * lanes, lanes)
        for kk in range(fetch, depth):
            c = _step(rows_data, start + kk * ROWS, panel_data, offset + kk * 2 * lanes, lanes, c, 6)
    else:
        for kk in range(fetch):
            c = _step(rows_data, start + kk * ROWS, panel_data, offset + kk * 2 * lanes, lanes, c, 4)
            _prefetch_step(panel_data, ahead + kk * 2 * lanes, lanes)
        for kk in range(fetch, depth):
            c = _step(rows_data, start + kk * ROWS, panel_data, offset + kk * 2 * lanes, lanes, c, 4)
    c0a, c0b, c1a, c1b, c2a, c2b, c3a, c3b, c4a, c4b, c5a, c5b = c
    _vstore(dst, at, c0a)
    _vstore(dst, at + lanes, c0b)
    if rows > 1:
        _vstore(dst, at + stride, c1a)
        _vstore(dst, at + stride + lanes, c1b)
    if rows > 2:
        _vstore(dst, at + 2 * stride, c2a)
        _vstore(dst, at + 2 * stride + lanes, c2b)
    if rows > 3:
        _vstore(dst, at + 3 * stride, c3a)
        _vstore(dst, at + 3 * stride + lanes, c3b)
    if rows > 4:
        _vstore(dst, at + 4 * stride, c4a)
        _vstore(dst, at + 4 * stride + lanes, c4b)
    if rows > 5:
        _vstore(dst, at + 5 * stride, c5a)
        _vstore(dst, at + 5 * stride + lanes, c5b)


# The product kernels call through a symbol, as blas.py calls BLAS (see the module docstring): it
# takes addresses, shapes and strides, from which `_as_array` rebuilds the arrays.

@intrinsic
def _as_array(typingctx, address, shape, strides, dtype):
    """The array of `dtype` (a NumPy scalar type) at `address`, of `shape` and byte `strides`
    (tuples of ints): a view of memory its caller keeps alive, so without reference counting."""
    array = types.Array(dtype.instance_type, len(shape), "A")

    def codegen(context, builder, sig, args):
        from numba.np.arrayobj import populate_array
        address, shape, strides, _ = args
        out = context.make_array(array)(context, builder)
        element = context.get_data_type(array.dtype)
        populate_array(out, data=builder.inttoptr(address, element.as_pointer()), shape=shape, strides=strides,
                       itemsize=context.get_constant(types.intp, context.get_abi_sizeof(element)), meminfo=None)
        return out._getvalue()
    return array(address, shape, strides, dtype), codegen


# (address, rows, columns, row stride, column stride) of a, b and out, (address, panels, depth, width
# and their three strides) of the panels, all strides in bytes; whether to read the panels backwards;
# the threads the call may use and the address of the pool's block (pool.py: 1 and 0 for one thread);
# the product's own address (for a worker to call); and the panels to do, [first, last) (last < 0: all).
_PRODUCT_ARGS = 5 + 5 + 7 + 5 + 1 + 2 + 1 + 2
assert _PRODUCT_ARGS == pool.ARITY
# A product splits its panels between the caller and idle workers when it has at least this many
# multiply-adds (rows x inner x columns) and two panels. Below, the hand-off (two cache lines passed
# between cores, about a microsecond in all) costs more than a share saves.
SPLIT_WORK = 1 << 16
# The BLAS product of the provider in use (not both: each compiles for seconds). Numba freezes it into
# the compiled product, so rnnloop's cache keeps each provider's helpers apart (cache.py).
_MATMUL = blas.matmul_ilp64 if blas.ILP64 else blas.matmul_lp64


@njit(nogil=True)
def _product(dtype, a, am, ak, as0, as1, b, bk, bn, bs0, bs1, p, pc, pk, pw, ps0, ps1, ps2,
             out, om, on, os0, os1, backwards, threads, block, entry, first, last):
    """out = a @ b on panels p when they serve (shared with idle workers when it pays), else through
    BLAS, for arrays of `dtype`; or, with last >= 0, only the columns of panels [first, last)."""
    a_, b_ = _as_array(a, (am, ak), (as0, as1), dtype), _as_array(b, (bk, bn), (bs0, bs1), dtype)
    p_, out_ = _as_array(p, (pc, pk, pw), (ps0, ps1, ps2), dtype), _as_array(out, (om, on), (os0, os1), dtype)
    if last >= 0:
        _share(a_, p_, out_, backwards != 0, first, last)
        return 0
    if (threads > 1 and block != 0 and pc >= 2 and am * ak * on >= SPLIT_WORK and 1 <= am <= MAX_ROWS
            and pk == ak and pw == panel_width(out_) and pc == (on + pw - 1) // pw and om == am):
        workers = _as_array(block, (pool.HEADER,), (8,), np.int64)[0]
        block_ = _as_array(block, (pool.HEADER + workers * pool.SLOT,), (8,), np.int64)
        claimed = pool.claim(block_, min(threads - 1, pc - 1))
        if claimed:
            block_[pool.SHARED] += 1  # (a count for tests: concurrent callers may lose some)
            parts = 1
            for w in range(62):
                parts += (claimed >> w) & 1
            k = 1
            for w in range(62):
                if (claimed >> w) & 1:
                    job = pool.HEADER + w * pool.SLOT + pool.JOB
                    values = (entry, a, am, ak, as0, as1, b, bk, bn, bs0, bs1, p, pc, pk, pw, ps0, ps1, ps2,
                              out, om, on, os0, os1, backwards, threads, block, entry,
                              pc * k // parts, pc * (k + 1) // parts)
                    for i in range(pool.ARITY + 1):
                        block_[job + i] = values[i]
                    pool.post(block_, w)
                    k += 1
            start = pool.ticks()
            _share(a_, p_, out_, backwards != 0, 0, pc // parts)
            own = pool.ticks() - start
            for w in range(62):
                if (claimed >> w) & 1 and pool.take_back(block_, w, own):  # (not started: done here)
                    job = pool.HEADER + w * pool.SLOT + pool.JOB
                    _share(a_, p_, out_, backwards != 0, block_[job + pool.ARITY - 1], block_[job + pool.ARITY])
            return 0
    if not multiply(a_, p_, out_, backwards != 0):
        _MATMUL(a_, b_, out_)
    return 0


@njit(nogil=True)
def _share(a, packed, out, backwards, first, last):
    """The columns of out that panels [first, last) of a product give."""
    width = packed.shape[2]
    multiply(a, packed[first:last], out[:, first * width:min(last * width, out.shape[1])], backwards)


# One function per dtype for cfunc (and Numba's cache) to compile on its own.
def _product_float32(a, am, ak, as0, as1, b, bk, bn, bs0, bs1, p, pc, pk, pw, ps0, ps1, ps2,
                     out, om, on, os0, os1, backwards, threads, block, entry, first, last):
    return _product(np.float32, a, am, ak, as0, as1, b, bk, bn, bs0, bs1, p, pc, pk, pw, ps0, ps1, ps2,
                    out, om, on, os0, os1, backwards, threads, block, entry, first, last)


def _product_float64(a, am, ak, as0, as1, b, bk, bn, bs0, bs1, p, pc, pk, pw, ps0, ps1, ps2,
                     out, om, on, os0, os1, backwards, threads, block, entry, first, last):
    return _product(np.float64, a, am, ak, as0, as1, b, bk, bn, bs0, bs1, p, pc, pk, pw, ps0, ps1, ps2,
                    out, om, on, os0, os1, backwards, threads, block, entry, first, last)


@functools.cache
def _external(dtype: str) -> types.ExternalFunction:
    """The compiled product of `dtype` ("float32" or "float64"), registered with LLVM by name;
    compiled once per machine (Numba's cache), loaded from it by later processes."""
    signature = types.intp(*[types.intp] * _PRODUCT_ARGS)
    compiled = cfunc(signature, nopython=True, nogil=True, cache=True)(globals()[f"_product_{dtype}"])
    symbol = f"rnnloop_simd_product_{dtype}"
    llvm.add_symbol(symbol, compiled.address)
    return types.ExternalFunction(symbol, signature)


def require(dtype: str) -> None:
    """Make the product of `dtype` callable by kernels. A kernel loaded from Numba's cache calls its
    symbol without compiling anything that would register it, so a generated module that uses
    the product calls this first, when it is imported."""
    _external(dtype)


MATMUL_PACKED = "matmul_packed_ilp64" if blas.ILP64 else "matmul_packed_lp64"  # the one kernels call


def _packed_product():
    """matmul_packed_*: a call of _external(dtype) on the arrays' addresses, shapes and strides,
    written directly where it is called (an intrinsic: nothing of its own to compile). Typing it
    registers the symbol; a caller loaded from Numba's cache (a kernel) has called require()."""
    @intrinsic
    def product(typingctx, a, b, packed, out, backwards, threads, block):
        arrays = (a, b, packed, out)
        if not all(isinstance(x, types.Array) for x in arrays) or [x.ndim for x in arrays] != [2, 2, 3, 2]:
            return None
        if len({x.dtype for x in arrays}) != 1 or out.dtype not in (types.float32, types.float64):
            return None  # no product of mixed or non-float dtypes: a typing error
        external = _external(str(out.dtype))

        def codegen(context, builder, signature, args):
            intp = context.get_value_type(types.intp)
            values = []
            for ty, value in zip(arrays, args):
                array = context.make_array(ty)(context, builder, value)
                values.append(builder.ptrtoint(array.data, intp))
                values += cgutils.unpack_tuple(builder, array.shape) + cgutils.unpack_tuple(builder, array.strides)
            backwards_value = context.cast(builder, args[4], signature.args[4], types.boolean)
            values.append(builder.zext(backwards_value, intp))
            values += [context.cast(builder, v, t, types.intp) for v, t in zip(args[5:], signature.args[5:])]
            function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(intp, [intp] * _PRODUCT_ARGS),
                                                      external.symbol)
            values += [builder.ptrtoint(function, intp), ir.Constant(intp, 0), ir.Constant(intp, -1)]
            builder.call(function, values)
            return context.get_dummy_value()
        return types.void(a, b, packed, out, backwards, threads, block), codegen
    return product


# blas.matmul_*, with b also given as panels (pack): 1 to MAX_ROWS rows run on them. `backwards`
# reads the panels in the opposite order (same result). A loop passes it on every other step: when
# the weights overflow L2, the panels read last, still in cache, are then read first, instead of
# each step evicting the panels the next one needs first. An LSTM step at batch 1 and hidden size
# 256 (1 MiB of recurrent weights): 6.6 against 8.1 µs; 512: 35 against 46. Compiled code only.
# One product under two names: a kernel's source names the BLAS provider it was made for, so a kernel
# cached under the other provider is never loaded (see blas.py).
matmul_packed_ilp64 = matmul_packed_lp64 = _packed_product()
