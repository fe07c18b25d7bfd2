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
zero-padded; per product, a is copied CHUNK rows at a time into blocks of up to ROWS rows
(_block_rows), each [DEPTH, R] for the R rows of the tile that computes it (_tile_rows), so that
each block is one stream. For each panel and block, an R x P block of out accumulates in 2R vector
registers (vectors.py) over DEPTH steps of the inner dimension and is stored once (_tile): LLVM's
loop vectoriser does not keep such a block in registers (it reloads and stores out at every k,
behind runtime alias checks that fail for some row counts: 8 GFLOP/s), so the tile is generated as
LLVM IR, row by row, with a prefetch with which a block asks for the next panel while it works on
one. AVX-512's 32 vector registers hold a tile of 12 rows (24 accumulators), AVX2's 16 one of six.
Tiles of six rows where twelve fit ran at 0.74-0.94 of their speed on a 2-core Xeon with AVX-512
(2026-11-28, medians of 9 interleaved rounds, GMAC/s of six rows against twelve): 12 x 256 x 1024
66.6 against 71.9, 12 x 512 x 2000 48.9 against 65.7, 128 x 512 x 1024 65.1 against 77.2,
8 x 128 x 512 48.8 against 60.7, where onnxruntime's MLAS ran at 53-62, 46-49, 76-80 and 32-35
(the peak of its FMA units is 110).

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
from numba.extending import intrinsic

from . import blas, pool
from .vectors import (VECTOR_BYTES, Vector, _address, _lanes, _splat, _vbroadcast, _vclamp,  # noqa: F401
                      _vfma, _vload, _vsplat, _vstore, _vzero)

# Rows of a per block, the largest tile: 2 ROWS accumulators + 2 panel vectors + 1 splat in registers,
# of which AVX-512 has 32 and AVX2 16.
ROWS = 12 if VECTOR_BYTES == 64 else 6
CHUNK = 96  # rows of a per pass: their copy, [CHUNK, DEPTH], takes 96 KiB of float32 (L2 is 1-2 MiB)
DEPTH = 256  # inner dimension per pass: a panel's part then fills 16 KiB (32 with 64-byte vectors) of L1
MAX_ROWS = 128 if VECTOR_BYTES == 32 else np.iinfo(np.int64).max
PAIRED = 6 if VECTOR_BYTES == 64 else 0  # blocks of up to this many rows take two panels a tile (_pairs)


def _prefetch_address(builder, address):
    """x86's prefetcht1 of the cache line at `address` (which cache it lands in is the CPU's choice)."""
    i8p = ir.IntType(8).as_pointer()
    signature = ir.FunctionType(ir.VoidType(), [i8p] + [ir.IntType(32)] * 3)
    fn = cgutils.get_or_insert_function(builder.module, signature, "llvm.prefetch.p0")
    read, locality, data = (ir.Constant(ir.IntType(32), v) for v in (0, 2, 1))
    builder.call(fn, [builder.bitcast(address, i8p), read, locality, data])


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
    rows_data = np.empty((CHUNK + ROWS) * min(k, DEPTH), out.dtype)  # (+ the last block's padding)
    for m0 in range(0, m, CHUNK):  # CHUNK rows of a at a time, so that their copy stays in cache
        mc = min(CHUNK, m - m0)
        for k0 in range(0, k, DEPTH):
            k1 = min(k, k0 + DEPTH)
            depth = k1 - k0
            add = k0 > 0
            # a[m0:m0 + mc, k0:k1] in blocks of up to ROWS rows (_block_rows), each [depth, R] for its
            # tile's R rows (_tile_rows): a stream of splats; a block's last row repeats where it has fewer.
            i, start = 0, 0
            while i < mc:
                rows = _block_rows(mc - i)
                tile = _tile_rows(rows)
                for kk in range(depth):
                    for r in range(tile):
                        rows_data[start + kk * tile + r] = a[m0 + i + min(r, rows - 1), k0 + kk]
                i += rows
                start += depth * tile
            if PAIRED and direct and mc <= PAIRED and panels >= 2:  # one block: two panels a tile
                _pairs(rows_data, mc, panel_data, k, k0, depth, out, m0 * stride, stride, n, add, backwards)
                continue
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
                i, start = m0, 0
                while i < m0 + mc:
                    rows = _block_rows(m0 + mc - i)
                    fetch = depth if i == m0 else 0
                    if whole:
                        _block(rows_data, start, rows, panel_data, offset, depth, out, i * stride + j, stride, add,
                               ahead, fetch)
                    else:  # the last columns, or an out that vector stores cannot reach: through `edge`
                        _block(rows_data, start, rows, panel_data, offset, depth, edge, 0, width, False, ahead, fetch)
                        for r in range(rows):
                            for c in range(min(width, n - j)):
                                out[i + r, j + c] = out[i + r, j + c] + edge[r, c] if add else edge[r, c]
                    i += rows
                    start += depth * _tile_rows(rows)
    return True


@njit(nogil=True)
def _pairs(rows_data, rows, panel_data, k, k0, depth, out, at, stride, n, add, backwards):
    """multiply's pass over the panels for one block of up to PAIRED rows (the block from element 0 of
    rows_data) into out from flat element `at`, out's columns reached by vector stores: two panels a
    tile (_tile2), the last ones, or one alone, through _block. A tile of six rows by four vectors
    holds 24 accumulators, as one of twelve rows by two does: a 6 x 256 x 1024 product (a batch of
    twelve split over two threads) took 0.85-0.92 of the time by single panels, 4 x 256 x 1024 0.86
    (a 2-core Xeon with AVX-512, 2026-11-29, the weights in L2). A function of its own, not inlined
    into multiply: there, its code made the other tiles' products slower (12 x 256 x 1024: 1.05)."""
    width = panel_width(out)
    panels = (n + width - 1) // width
    edge = np.empty((PAIRED, width), out.dtype)
    whole = n // width  # panels whose columns out holds entirely
    pairs = whole // 2
    for q in range(pairs):
        low = 2 * (pairs - 1 - q if backwards else q)
        following = low - 2 if backwards else low + 2
        ahead = ((following if 0 <= following < pairs * 2 else low) * k + k0) * width
        offset = (low * k + k0) * width
        if _tile_rows(rows) == 6:
            _tile2(6, rows_data, 0, rows, panel_data, offset, offset + k * width, depth, out, at + low * width, stride,
                   add, ahead, depth)
        else:
            _tile2(4, rows_data, 0, rows, panel_data, offset, offset + k * width, depth, out, at + low * width, stride,
                   add, ahead, depth)
    for p in range(2 * pairs, panels):  # a panel left of an odd number, and the last columns
        j = p * width
        offset = (p * k + k0) * width
        if j + width <= n:
            _block(rows_data, 0, rows, panel_data, offset, depth, out, at + j, stride, add, offset, 0)
        else:
            _block(rows_data, 0, rows, panel_data, offset, depth, edge, 0, width, False, offset, 0)
            row0 = at // stride
            for r in range(rows):
                for c in range(n - j):
                    out[row0 + r, j + c] = out[row0 + r, j + c] + edge[r, c] if add else edge[r, c]


@njit(nogil=True, inline="always")
def _block_rows(left):
    """The rows of the next block when `left` rows remain: ROWS, but four of a ROWS of six when seven or
    eight remain. A tile of six rows takes six cycles a step of the inner dimension (two FMAs a row,
    two a cycle), one of four four (its FMAs' latency); so eight rows as 4 + 4 take eight cycles a
    step, as 6 + 2 ten. An 8 x 128 x 512 product (a VAD's hoisted input product): 15 against 17-23 µs.
    (With twelve rows, eight is one tile of eight.)"""
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


def _masked(builder, operation, vector_type, bits, pointer, mask, value):
    """llvm.masked.load (value: what masked-off lanes hold) or llvm.masked.store (value: what to store)
    of a vector at `pointer`, element-aligned: a lane masked off is not touched, so it never faults."""
    name = f"llvm.masked.{operation}.v{vector_type.count}f{bits}.p0"
    align = ir.Constant(ir.IntType(32), bits // 8)
    mask_type = ir.VectorType(ir.IntType(1), vector_type.count)
    pointer_type = vector_type.as_pointer()
    if operation == "load":
        signature = ir.FunctionType(vector_type, [pointer_type, ir.IntType(32), mask_type, vector_type])
        args = [pointer, align, mask, value]
    else:
        signature = ir.FunctionType(ir.VoidType(), [vector_type, pointer_type, ir.IntType(32), mask_type])
        args = [value, pointer, align, mask]
    return builder.call(cgutils.get_or_insert_function(builder.module, signature, name), args)


def _steps(builder, first, last, accumulators, step, unroll=1):
    """A loop over kk in [first, last) that threads the accumulators through `step(kk, accumulators)`
    as phi nodes (registers, at any optimisation level); returns their values after it. With
    `unroll` > 1, a loop body makes that many steps, and a loop of single steps takes the rest."""
    if unroll > 1:
        whole = builder.sub(last, builder.srem(builder.sub(last, first), ir.Constant(last.type, unroll)))

        def steps(kk, values):
            for u in range(unroll):
                values = step(builder.add(kk, ir.Constant(kk.type, u)), values)
            return values
        accumulators = _loop(builder, first, whole, unroll, accumulators, steps)
        first = whole
    return _loop(builder, first, last, 1, accumulators, step)


def _loop(builder, first, last, stride, values, body):
    """for kk in range(first, last, stride): values = body(kk, values), as LLVM blocks with phi nodes."""
    before = builder.block
    header = builder.append_basic_block("tile.steps")
    inside = builder.append_basic_block("tile.step")
    after = builder.append_basic_block("tile.done")
    builder.branch(header)
    builder.position_at_end(header)
    kk = builder.phi(first.type)
    kk.add_incoming(first, before)
    phis = []
    for value in values:
        phi = builder.phi(value.type)
        phi.add_incoming(value, before)
        phis.append(phi)
    builder.cbranch(builder.icmp_signed("<", kk, last), inside, after)
    builder.position_at_end(inside)
    updated = body(kk, phis)
    end = builder.block
    kk.add_incoming(builder.add(kk, ir.Constant(kk.type, stride)), end)
    for phi, value in zip(phis, updated):
        phi.add_incoming(value, end)
    builder.branch(header)
    builder.position_at_end(after)
    return phis


@intrinsic
def _tile(typingctx, tile_rows, rows_data, start, live, panel_data, offset, depth, dst, at, stride, add, ahead,
          fetch):
    return _tile_of(tile_rows, None, rows_data, start, live, panel_data, offset, None, depth, dst, at, stride, add,
                    ahead, fetch)


@intrinsic
def _tile2(typingctx, tile_rows, rows_data, start, live, panel_data, offset, second, depth, dst, at, stride, add,
           ahead, fetch):
    """_tile over two panels at once, from elements `offset` and `second` of panel_data, into four
    vectors of dst a row (the second panel's columns follow the first's)."""
    return _tile_of(tile_rows, second, rows_data, start, live, panel_data, offset, second, depth, dst, at, stride,
                    add, ahead, fetch)


def _tile_of(tile_rows, two, rows_data, start, live, panel_data, offset, second, depth, dst, at, stride, add, ahead,
             fetch):
    """The micro-kernel: a block of R rows (tile_rows, a literal) times `depth` steps of one panel.

    rows_data holds the block from flat element `start` as [depth, R] (its rows' elements of one step
    side by side), panel_data the panel's steps from flat element `offset` as [depth, P]. The R x P
    result accumulates in 2R vector registers, threaded through the loop as phi nodes, over the
    steps: a step loads the panel's two vectors and, row by row, broadcasts the row's element and
    multiply-adds it into the row's two accumulators. The accumulators start from dst (from flat
    element `at`, rows `stride` apart) if `add`, else from zero; the first `live` rows are stored
    back, the others (padding) are not. The first `fetch` steps also ask for the step of the panel
    at `ahead` (prefetch). Generated in Python loops over the rows, since Numba has no way to name
    2R accumulators but as 2R variables."""
    if not isinstance(tile_rows, types.IntegerLiteral):
        return None
    rows = tile_rows.literal_value
    per_row = 2 if two is None else 4  # vectors of a row: one panel's two, or two panels' four
    vector = Vector(dst.dtype)
    bits = dst.dtype.bitwidth
    arguments = (tile_rows, rows_data, start, live, panel_data, offset) + ((second,) if two is not None else ()) + (
        depth, dst, at, stride, add, ahead, fetch)

    def codegen(context, builder, sig, args):
        if two is None:
            _, rows_, start_, live_, panel_, offset_, depth_, dst_, at_, stride_, add_, ahead_, fetch_ = args
            second_ = None
        else:
            _, rows_, start_, live_, panel_, offset_, second_, depth_, dst_, at_, stride_, add_, ahead_, fetch_ = args
        vector_type = context.get_value_type(vector)
        lanes = vector_type.count
        mask_type = ir.VectorType(ir.IntType(1), lanes)  # all lanes or none: whether a row is loaded, stored
        intp = context.get_value_type(types.intp)
        x_data = context.make_array(rows_data)(context, builder, rows_).data
        p_data = context.make_array(panel_data)(context, builder, panel_).data
        d_data = context.make_array(dst)(context, builder, dst_).data

        def number(value):
            return ir.Constant(intp, value)

        def at_vector(data, index):
            return builder.bitcast(builder.gep(data, [index]), vector_type.as_pointer())

        def row_vectors(r):  # where row r's vectors of dst are, and whether the row is stored
            row = builder.add(at_, builder.mul(stride_, number(r)))
            pointers = [at_vector(d_data, builder.add(row, number(v * lanes))) for v in range(per_row)]
            return pointers, builder.icmp_signed("<", number(r), live_)

        add_bit = context.cast(builder, add_, add, types.boolean)
        zero = ir.Constant(vector_type, None)
        accumulators = []
        for r in range(rows):
            pointers, stored = row_vectors(r)
            mask = _splat(builder, mask_type, builder.and_(stored, add_bit))
            accumulators += [_masked(builder, "load", vector_type, bits, p, mask, zero) for p in pointers]
        fmuladd = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vector_type, [vector_type] * 3),
            f"llvm.fmuladd.v{lanes}f{bits}")

        def step(kk, accumulators, prefetch=False):
            b = []
            for first in (offset_,) if second_ is None else (offset_, second_):
                o = builder.add(first, builder.mul(kk, number(2 * lanes)))
                b += [builder.load(at_vector(p_data, o), align=bits // 8),
                      builder.load(at_vector(p_data, builder.add(o, number(lanes))), align=bits // 8)]
            x0 = builder.add(start_, builder.mul(kk, number(rows)))
            updated = []
            for r in range(rows):
                x = _splat(builder, vector_type, builder.load(builder.gep(x_data, [builder.add(x0, number(r))])))
                updated += [builder.call(fmuladd, [x, b[v], accumulators[per_row * r + v]]) for v in range(per_row)]
            if prefetch:  # a step of a panel is 2 * VECTOR_BYTES bytes: one line, or two of 64 bytes
                there = builder.add(ahead_, builder.mul(kk, number(2 * lanes)))
                for far in (there,) if second_ is None else (there, builder.add(there, builder.sub(second_, offset_))):
                    for line in range(0, 2 * VECTOR_BYTES, 64):
                        _prefetch_address(builder, builder.gep(p_data, [builder.add(far, number(line * 8 // bits))]))
            return updated

        first = builder.select(builder.icmp_signed("<", fetch_, depth_), fetch_, depth_)
        # Two steps a loop iteration: in L1, a 12-row tile ran at 101 GMAC/s against 95 one step at a
        # time (four: 96; the FMA units' peak is 110; a 2-core Xeon with AVX-512, ad hoc).
        accumulators = _steps(builder, number(0), first, accumulators, lambda kk, c: step(kk, c, prefetch=True), 2)
        accumulators = _steps(builder, first, depth_, accumulators, step, 2)
        for r in range(rows):
            pointers, stored = row_vectors(r)
            mask = _splat(builder, mask_type, stored)
            for pointer, value in zip(pointers, accumulators[per_row * r:per_row * (r + 1)]):
                _masked(builder, "store", vector_type, bits, pointer, mask, value)
        return context.get_dummy_value()
    return types.none(*arguments), codegen


@njit(nogil=True, inline="always")
def _tile_rows(rows):
    """R, the rows of the tile that computes a block of `rows` rows: `rows` made even, and at least
    four (R up to ROWS). A step of a tile takes max(R, 4) cycles (two FMAs a row, two a cycle; four
    cycles are an FMA's latency), so a tile wastes at most one row's work beyond four. On tiles of 12,
    8 and 4 rows only, products of 5, 6, 9 and 10 rows by 256 x 1024 or 512 x 1024 weights (a batch of
    twelve split over two threads is two of six) took 1.11-1.25 times as long (medians of 9
    interleaved rounds, a 2-core Xeon with AVX-512, 2026-11-28)."""
    return max(4, rows + rows % 2)


@njit(nogil=True, inline="always")
def _block(rows_data, start, rows, panel_data, offset, depth, dst, at, stride, add, ahead, fetch):
    """`rows` rows of a block (from flat element `start` of rows_data, [depth, _tile_rows(rows)]) times
    `depth` steps of one panel into dst (see _tile), on the tile that holds them."""
    tile = _tile_rows(rows)
    if VECTOR_BYTES == 64 and tile == 12:
        _tile(12, rows_data, start, rows, panel_data, offset, depth, dst, at, stride, add, ahead, fetch)
    elif VECTOR_BYTES == 64 and tile == 10:
        _tile(10, rows_data, start, rows, panel_data, offset, depth, dst, at, stride, add, ahead, fetch)
    elif VECTOR_BYTES == 64 and tile == 8:
        _tile(8, rows_data, start, rows, panel_data, offset, depth, dst, at, stride, add, ahead, fetch)
    elif tile == 6:
        _tile(6, rows_data, start, rows, panel_data, offset, depth, dst, at, stride, add, ahead, fetch)
    else:
        _tile(4, rows_data, start, rows, panel_data, offset, depth, dst, at, stride, add, ahead, fetch)


# The product kernels call through a symbol, as blas.py calls BLAS (see the module docstring): it
# takes addresses, shapes and strides, from which `pool.as_array` rebuilds the arrays.

# (address, rows, columns, row stride, column stride) of a, b and out, (address, panels, depth, width
# and their three strides) of the panels, all strides in bytes; whether to read the panels backwards;
# the threads the call may use and the address of the pool's block (pool.py: 1 and 0 for one thread);
# the product's own address (for a worker to call); and the panels to do, [first, last) (last < 0: all).
_PRODUCT_ARGS = 5 + 5 + 7 + 5 + 1 + 2 + 1 + 2
assert _PRODUCT_ARGS == pool.ARITY
# A product splits its panels between the caller and idle workers when it has at least this many
# multiply-adds (rows x inner x columns) and two panels. Below, the hand-off (two cache lines passed
# between cores, about a microsecond in all) costs more than a share saves: with 1 << 16, the
# streaming VAD's 1 x 128 x 512 steps were shared, and a call on two threads took 66.6 µs against
# 57.6 on one (with 1 << 17: 63.2 against 60.7; a 2-core Xeon with AVX-512, 2026-11-28).
SPLIT_WORK = 1 << 17
# The BLAS product of the provider in use (not both: each compiles for seconds). Numba freezes it into
# the compiled product, so rnnloop's cache keeps each provider's helpers apart (cache.py).
_MATMUL = blas.matmul_ilp64 if blas.ILP64 else blas.matmul_lp64


@njit(nogil=True)
def _product(dtype, a, am, ak, as0, as1, b, bk, bn, bs0, bs1, p, pc, pk, pw, ps0, ps1, ps2,
             out, om, on, os0, os1, backwards, threads, block, entry, first, last):
    """out = a @ b on panels p when they serve (shared with idle workers when it pays), else through
    BLAS, for arrays of `dtype`; or, with last >= 0, only the columns of panels [first, last)."""
    a_, b_ = pool.as_array(a, (am, ak), (as0, as1), dtype), pool.as_array(b, (bk, bn), (bs0, bs1), dtype)
    p_, out_ = pool.as_array(p, (pc, pk, pw), (ps0, ps1, ps2), dtype), pool.as_array(out, (om, on), (os0, os1), dtype)
    if last >= 0:
        _share(a_, p_, out_, backwards != 0, first, last)
        return 0
    if (threads > 1 and block != 0 and pc >= 2 and am * ak * on >= SPLIT_WORK and 1 <= am <= MAX_ROWS
            and pk == ak and pw == panel_width(out_) and pc == (on + pw - 1) // pw and om == am):
        block_ = pool.block_at(block)
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
