"""The compiled convolutions kernels call (rnnloop/codegen/conv.py makes the calls): Conv and
ConvTranspose on C-contiguous 5-d arrays, [N, C, D, H, W] (a 1-d or 2-d convolution has leading
spatial axes of size 1), with the strides, dilations, pads and group as a tuple of ints, and the
bounds every output is held to as it is stored: an activation folded into the Conv (activation.py).

A Conv takes one of four paths (entries conv_product, which holds the first and third, conv_winograd
and conv_winograd_1d, conv_direct), chosen by measurement on this project's 2-core AMD EPYC (AVX2, no
AVX-512 on this host; one thread, float32, batch 1; µs per call, medians of runs interleaved with
onnxruntime 1.32 on one thread, whose time is in parentheses; the machine shared, so read the ratios):

- im2col into BLAS (rnnloop.codegen.blas), the general path: per image, group and chunk of CHUNK
  elements, the columns (each kernel tap's shifted input rows, from a zero-padded copy of the group's
  input) times the weights [M / group, C / group * k], whose row-major layout is already the
  product's: nothing laid out at load, and a W computed at run time costs the same. A 1x1
  convolution without strides or pads reads its input as the columns. On the CRNN layer 64 -> 128
  channels, 3x3 on 16x50, columns of 16K elements per product took 2698 µs, 64K 2103, 256K 1986,
  1M 1857, all of them 1805 (1501): BLAS repacks the weights per product. A product of at most
  PANEL_MAX_COLUMNS output positions with a constant W (an STFT as a Conv1d: 258 x 256 by 3
  frames) runs the columns' transposes on W^T packed as panels at load (simd.py), reading W once
  for all columns: [K x M by L columns, µs] 256 x 258 by 3: 9.1 against 27.6 by gemm and 13-18 by
  a gemv per column; by 8: 20 against 27; by 16: 32 against 41; 384 x 128 and 192 x 64 by 8 to 16
  tie. Without panels (a W computed at run time), at most GEMV_MAX_COLUMNS positions are a gemv
  per position.
- Winograd's F(2x2, 3x3) and F(2, 3) for 3x3 and 3-tap convolutions of stride and dilation 1, one
  group and conv.WINOGRAD_MIN_CHANNELS channels each way, the kernels transformed at load: 2.25
  (1.5) times fewer multiplications, in 16 (4) products. The CRNN layers 64 -> 128 on 16x50 and
  128 -> 256 on 8x25: 1805 -> 991 (1295) and 1470 -> 1039 (1227) µs; the 3-tap Conv1d of 128
  channels on 64 steps: products 72 -> 55 µs. With PACKED_MIN_CHANNELS input channels or more, a
  3x3 convolution's products, [tiles, C] x [C, M], run on the kernels packed as panels at load
  (simd.py) instead of BLAS, which packs [M, C] again for every product of only 26-52 tiles: in
  one run of each, BLAS against panels, CRNN 128 -> 256 on 8x25 0.99 -> 0.83 of onnxruntime's
  time, 256 -> 256 on 8x25 1.03 -> 0.89, on 4x25 1.26 -> 0.91; with 64 channels panels were slower
  there (1.09 against 0.89 on 16x50; AVX2), but not with AVX-512 (PACKED_MIN_CHANNELS), and so was
  the 3-tap Conv1d of 128 (65 against 62 µs of products). Panels also share a call's products with
  the pool's workers (pool.py), as BLAS cannot without threads of its own.
- _small_product for inner dimensions up to SMALL_K (the first CRNN layer, 1 -> 64 channels 3x3:
  9): four output rows by two vectors accumulated in registers, the bias added in: 64 x 9 x 3200,
  50 µs against 75 by BLAS, whose blocking costs more than it saves at that depth. (Its weights are
  broadcast from memory without the test for a negative index a plain w[i] carries: with that
  test in its inner loop, at the run-time offsets the entry passes, it took 80-93 µs.)
- direct loops for one output channel per group (depthwise): each tap times the input row it
  meets, added to the output row; a product would have one row per group.

Every path holds its outputs to the bounds (lo, hi) as it stores them, after the bias: the
activation that follows a Conv (Relu, Clip), folded into it by activation.py. As a second pass
that activation reread and rewrote the whole output; the CRNN's first layer with its ReLU took
about 200 µs against onnxruntime's 145, 68-105 after the fold and the broadcast above.

The whole Conv, rnnloop's session.run against onnxruntime's and OpenVINO's (f32) as
benchmarks/bench_conv.py times them (python benchmarks/bench_conv.py 5, on 2026-11-26, after the
activation fold, the STFT's panels and the vectorised Winograd input transform: rnnloop's time over
each peer's, the median and range of 5 rounds of 9 interleaved calls; µs per call; the same shapes
ranged about 0.1 either way between runs):

                                                 rnnloop  onnxruntime  OpenVINO   / onnxruntime      / OpenVINO
    STFT 258 x 256 taps, hop 128, 576 samples    22       36           148        0.62 (0.59-0.64)   0.15 (0.14-0.16)
    Conv1d 3 taps, 128 channels, 64 steps        84       95           236        0.88 (0.79-0.88)   0.36 (0.33-0.38)
    Conv1d 3 taps, 64 channels, 64 steps         30       35           165        0.83 (0.80-0.87)   0.18 (0.17-0.19)
    CRNN 3x3, 1 -> 64 on 32x100                  75       122          456        0.62 (0.56-0.69)   0.16 (0.15-0.17)
    CRNN 3x3, 64 -> 128 on 16x50                 1064     1386         1660       0.80 (0.77-0.87)   0.65 (0.61-0.69)
    CRNN 3x3, 128 -> 256 on 8x25                 1086     1374         1684       0.81 (0.71-0.96)   0.66 (0.60-0.75)
    CRNN 3x3, 256 -> 256 on 8x25                 1881     2608         2998       0.74 (0.69-0.79)   0.63 (0.61-0.69)
    CRNN 3x3, 256 -> 256 on 4x25                 1316     1355         1870       0.94 (0.83-0.97)   0.72 (0.68-0.73)
    depthwise Conv1d, 128 channels, 11 taps      31       58           169        0.55 (0.52-0.62)   0.18 (0.18-0.21)
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
from .simd import MAX_ROWS, multiply, panel_width
from .vectors import VECTOR_BYTES, _lanes, _vbroadcast, _vclamp, _vfma, _vload, _vsplat, _vstore

_MATMUL = blas.matmul_ilp64 if blas.ILP64 else blas.matmul_lp64  # called on views of layout 'A' only (x[a:b, :],
#   not x[a:b]): one compiled product per dtype serves every call
CHUNK = 1 << 20  # elements of columns made per product (4 MiB of float32)
SMALL_K = 16  # inner dimensions (C / group * kernel size) up to which _small_product beats BLAS (64 rows: 9 taps 50
#               against 75 µs, 18: 97 against 121, 27: 153 against 160, 36: 295 against 198)
# Input channels from which Winograd's products run on panels made at load (simd.py): 64 with AVX-512,
# where the CRNN layer 64 -> 128 on 16x50 took 547-631 µs on panels against 695-722 by BLAS (1.08-1.21
# of onnxruntime's time against 1.32-1.36; a 2-core Zen 5, 2026-12-02, ad hoc), else 128 (below).
PACKED_MIN_CHANNELS = 64 if VECTOR_BYTES == 64 else 128
# Multiply-adds of a Winograd convolution's products (transforms x channels x tiles x output channels)
# from which a worker shares its steps (_winograd_shared): a hand-off costs a microsecond or two.
JOB_WORK = 1 << 21
# The words of a Winograd job (_winograd_shared): the arrays' addresses and sizes (0-20), then for each
# step the next unit to take and the units done, and a flag set when a product failed.
JOB_WORDS = 28
NEXT_INPUT, DONE_INPUT, NEXT_PRODUCT, DONE_PRODUCT, NEXT_OUTPUT, FAILED = 21, 22, 23, 24, 25, 26
UNITS = 4  # units of a step's input channels or output rows per participant (the caller and a worker): a
#            worker that starts late takes fewer
GEMV_MAX_COLUMNS = 4  # output positions up to which gemv per position beats gemm (258 x 256 x 3: 13 against 23 µs)
PANEL_MAX_COLUMNS = 16  # output positions up to which a constant W's panels beat BLAS (below)


@njit(nogil=True, inline="always")
def _window(count, stride, offset, size):
    """[lo, hi): the positions o < count whose index o * stride + offset lies in [0, size)."""
    lo = max(0, -(offset // stride))
    hi = min(count, (size - 1 - offset) // stride + 1)
    return lo, max(lo, hi)


@njit(nogil=True, inline="always")
def _agree(x, w, bias, out, geometry):
    """Whether the sizes of a Conv agree: x [N, C, D, H, W], w [M, C / group, kd, kh, kw],
    out [N, M, OD, OH, OW]; bias [M] or empty; geometry (strides, dilations, pads before: three each;
    group). The rule checks them: an entry that finds them wrong returns 1 (a bug of ours)."""
    group = geometry[9]
    M, Cg = w.shape[0], w.shape[1]
    return not (group < 1 or x.shape[1] != Cg * group or M % group or bias.size not in (0, M)
                or out.shape[0] != x.shape[0] or out.shape[1] != M or min(geometry) < 0 or min(geometry[:6]) < 1)


# The paths of out = Conv(x, w) + bias, each the body of an entry of its own (below): the rule knows
# from W's shape which one a Conv takes (or, for a W computed at run time, calls direct or product
# by its group's size), and a process compiles only the paths its models take (all four in one
# function took 53 s to compile cold). Each takes the arguments of an entry (see _arguments) and
# returns 0, or 1 without computing when the sizes do not agree. Every function of this module is
# inlined (inline="always") into the entries that call it: Numba optimises a function again with
# everything it calls, at each level of calls, and the direct path's entry took 9.9 s to compile
# cold in three levels against 3.9 s in one.

@njit(nogil=True, inline="always")
def conv_direct(dtype, xa, wa, ba, oa, ka, sa):
    x, w, bias, out, geometry, kernels, bounds = _arguments(dtype, xa, wa, ba, oa, ka, sa)
    if not _agree(x, w, bias, out, geometry) or w.shape[0] != geometry[9]:
        return 1
    _conv_direct(x, w, bias, out, geometry, bounds)
    return 0


@njit(nogil=True, inline="always")
def conv_product(dtype, xa, wa, ba, oa, ka, sa):
    x, w, bias, out, geometry, kernels, bounds = _arguments(dtype, xa, wa, ba, oa, ka, sa)
    if not _agree(x, w, bias, out, geometry):
        return 1
    return _conv_product(x, w, bias, out, geometry, bounds, kernels)


@njit(nogil=True, inline="always")
def conv_winograd(dtype, xa, wa, ba, oa, ka, sa):
    x, w, bias, out, geometry, kernels, bounds = _arguments(dtype, xa, wa, ba, oa, ka, sa)
    if (not _agree(x, w, bias, out, geometry) or not _kernels_fit(kernels, w)
            or not _winograd_fits(x, w, geometry, 16)):
        return 1
    return _winograd(x, kernels, bias, out, geometry, bounds)


@njit(nogil=True, inline="always")
def conv_winograd_1d(dtype, xa, wa, ba, oa, ka, sa):
    x, w, bias, out, geometry, kernels, bounds = _arguments(dtype, xa, wa, ba, oa, ka, sa)
    if (not _agree(x, w, bias, out, geometry) or kernels.shape[0] != 4 or kernels.shape[1] != w.shape[0]
            or kernels.shape[2] != w.shape[1] or not _winograd_fits(x, w, geometry, 4)):
        return 1
    _winograd_1d(x, kernels, bias, out, geometry, bounds)
    return 0


@njit(nogil=True, inline="always")
def _conv_direct(x, w, bias, out, geometry, bounds):
    """Per output row, each weight times the input row it meets, added to it, then held to the
    bounds (flat unsigned indices, as _run: the rows of a small depthwise convolution are short,
    and a view per row cost more than the row's arithmetic)."""
    sd, sh, sw, dd, dh, dw, pd, ph, pw, group = geometry[:10]
    N = x.shape[0]
    C, D, H, W = x.shape[1], x.shape[2], x.shape[3], x.shape[4]
    M, Cg, kd, kh, kw = w.shape
    Mg = M // group
    OD, OH, OW = out.shape[2], out.shape[3], out.shape[4]
    xf, wf, of = x.reshape(-1), w.reshape(-1), out.reshape(-1)
    clamped = _clamps(bounds)
    for n in range(N):
        for m in range(M):
            base = (m // Mg) * Cg
            b = bias[m] if bias.size else 0.0
            for od in range(OD):
                for oh in range(OH):
                    row = ((n * M + m) * OD + od) * OH * OW + oh * OW
                    _fill(of, row, OW, b)
                    for c in range(Cg):
                        for a in range(kd):
                            i = od * sd + a * dd - pd
                            if i < 0 or i >= D:
                                continue
                            for e in range(kh):
                                j = oh * sh + e * dh - ph
                                if j < 0 or j >= H:
                                    continue
                                src = (((n * C + base + c) * D + i) * H + j) * W
                                for f in range(kw):
                                    offw = f * dw - pw
                                    w0, w1 = _window(OW, sw, offw, W)
                                    if w1 > w0:
                                        v = wf[(((m * Cg + c) * kd + a) * kh + e) * kw + f]
                                        _axpy(of, row + w0, v, xf, src + w0 * sw + offw, w1 - w0, sw)
                    if clamped:
                        _finish(of, row, OW, 0.0, bounds)


@njit(nogil=True, inline="always")
def _fill(y, start, count, b):
    s = np.uint64(start)
    for t in range(np.uint64(count)):
        y[s + t] = b


@njit(nogil=True, inline="always")
def _axpy(y, ys, v, x, xs, count, step):
    """y[ys + t] += v * x[xs + t * step] for t < count, on 1-d arrays (unsigned indices, as _run)."""
    d, s, k = np.uint64(ys), np.uint64(xs), np.uint64(step)
    if step == 1:
        for t in range(np.uint64(count)):
            y[d + t] += v * x[s + t]
    else:
        for t in range(np.uint64(count)):
            y[d + t] += v * x[s + t * k]


@njit(nogil=True, inline="always")
def _clamp(v, bounds):
    """v held to bounds (lo, hi), NaN kept (as vectors._vclamp)."""
    v = bounds[0] if v < bounds[0] else v
    return bounds[1] if v > bounds[1] else v


@njit(nogil=True, inline="always")
def _clamps(bounds):
    """Whether bounds (lo, hi) change any value: an activation to apply."""
    return bounds[0] > -np.inf or bounds[1] < np.inf


@njit(nogil=True, inline="always")
def _finish(y, start, count, b, bounds):
    """y[start + t] = clamp(y[start + t] + b) for t < count, y 1-d (unsigned indices, as _run)."""
    s = np.uint64(start)
    for t in range(np.uint64(count)):
        y[s + t] = _clamp(y[s + t] + b, bounds)


@njit(nogil=True, inline="always")
def _conv_product(x, w, bias, out, geometry, bounds, kernels):
    """Per image, group and chunk of output positions: the columns, then weights x columns by BLAS,
    then the bias and the bounds; or, for at most PANEL_MAX_COLUMNS columns and `kernels` the panels
    of W^T (conv.product_panels, one group), the columns' rows times the panels (_few_columns).
    Returns 0, or 1 when the panels do not serve (a bug of ours)."""
    sd, sh, sw, dd, dh, dw, pd, ph, pw, group = geometry[:10]
    N, C = x.shape[0], x.shape[1]
    M, Cg, kd, kh, kw = w.shape
    Mg = M // group
    K = Cg * kd * kh * kw
    OD, OH, OW = out.shape[2], out.shape[3], out.shape[4]
    L = OD * OH * OW
    weights = w.reshape((M, K))
    flat = out.reshape((N, M, L))
    pointwise = (K == Cg and sd == 1 and sh == 1 and sw == 1 and pd == 0 and ph == 0 and pw == 0
                 and (OD, OH, OW) == (x.shape[2], x.shape[3], x.shape[4]))  # (the input read as the columns)
    inputs = x.reshape((N, C, x.shape[2] * x.shape[3] * x.shape[4]))
    # The group's input with its pads, as far as windows reach: [Cg, Dp, Hp, Wp].
    Dp = max(x.shape[2] + pd, (OD - 1) * sd + (kd - 1) * dd + 1)
    Hp = max(x.shape[3] + ph, (OH - 1) * sh + (kh - 1) * dh + 1)
    Wp = max(x.shape[4] + pw, (OW - 1) * sw + (kw - 1) * dw + 1)
    xp = np.zeros((0 if pointwise else Cg, Dp, Hp, Wp), out.dtype)
    chunk = L if pointwise else max(1, min(L, CHUNK // K))
    cols = np.empty((0 if pointwise else K, chunk), out.dtype)
    ones = bias if bias.size or K > SMALL_K else np.zeros(M, out.dtype)  # the bias _small_product adds
    clamped = _clamps(bounds)
    packed = group == 1 and not pointwise and _panels_fit(kernels, 1, K, M)
    rows = np.empty((PANEL_MAX_COLUMNS if packed else 0, K), out.dtype)
    few = np.empty((PANEL_MAX_COLUMNS if packed else 0, M), out.dtype)
    of = out.reshape(-1)
    for n in range(N):
        for g in range(group):
            a = weights[g * Mg:(g + 1) * Mg, :]
            if not pointwise:
                _pad(x, n, g * Cg, xp, pd, ph, pw)
            for l0 in range(0, L, chunk):
                lc = min(chunk, L - l0)
                if not pointwise:
                    _columns(xp, kd, kh, kw, geometry, OH, OW, l0, lc, cols)
                if K <= SMALL_K:  # the bias added and the bounds applied too
                    if pointwise:
                        _small_product(weights.reshape(-1), g * Mg * K, Mg, K, x.reshape(-1), (n * C + g * Cg) * L, L,
                                       lc, of, (n * M + g * Mg) * L + l0, L, ones, g * Mg, bounds)
                    else:
                        _small_product(weights.reshape(-1), g * Mg * K, Mg, K, cols.reshape(-1), 0, chunk, lc,
                                       of, (n * M + g * Mg) * L + l0, L, ones, g * Mg, bounds)
                    continue
                if packed and lc <= PANEL_MAX_COLUMNS:  # the bias added and the bounds applied too
                    if not _few_columns(cols, lc, kernels, rows, few, of, n * M * L + l0, L, bias, bounds):
                        return 1
                    continue
                target = flat[n, g * Mg:(g + 1) * Mg, l0:l0 + lc]
                if pointwise:
                    _MATMUL(a, inputs[n, g * Cg:(g + 1) * Cg, :], target)
                elif lc <= GEMV_MAX_COLUMNS:  # a matrix-vector product per column
                    for q in range(lc):
                        _MATMUL(a, cols[:, q:q + 1], target[:, q:q + 1])
                else:
                    _MATMUL(a, cols[:, :lc], target)
                if bias.size or clamped:
                    for m in range(Mg):
                        _finish(of, ((n * M + g * Mg + m) * L + l0), lc, bias[g * Mg + m] if bias.size else 0.0, bounds)
    return 0


@njit(nogil=True, inline="always")
def _few_columns(cols, lc, panels, rows, few, out, start, L, bias, bounds):
    """out[start + m * L + q] = clamp(bias[m] + W[m] . cols[:, q]) for q < lc, out flat: the columns'
    transposes [lc, K] (in rows) times W^T's panels, [lc, M] (in few), read once for all columns (a
    gemv per column reads W for each), then scattered with the bias and the bounds. False, writing
    nothing, when the panels do not serve (simd.multiply)."""
    K, M = rows.shape[1], few.shape[1]
    for q in range(lc):
        for r in range(K):
            rows[q, r] = cols[r, q]
    if not multiply(rows[:lc], panels, few[:lc], False):
        return False
    for m in range(M):
        b = bias[m] if bias.size else 0.0
        at = start + m * L
        for q in range(lc):
            out[at + q] = _clamp(few[q, m] + b, bounds)
    return True


@njit(nogil=True, inline="always")
def _small_product(w, wo, M, K, c, co, cs, n, out, oo, os, bias, bo, bounds):
    """out[oo + m * os + l] = bias[bo + m] + sum over r < K of w[wo + m * K + r] * c[co + r * cs + l], for
    m < M and l < n (flat arrays), held to bounds (lo, hi). Four rows by two vectors of columns
    accumulate in registers over r (simd.py's vector operations): for a short inner dimension, where
    BLAS's blocking costs more than it saves (64 x 9 x 3200, the bias added: 50 against 75 µs).
    (Written as plainly as this on purpose: with the ragged rows folded into the same loop, it ran
    at half the speed.)"""
    lanes = _lanes(out)
    whole = n - n % (2 * lanes)
    lo, hi = _vsplat(bounds[0]), _vsplat(bounds[1])
    for m0 in range(0, M - M % 4, 4):
        b0, b1, b2, b3 = bias[bo + m0], bias[bo + m0 + 1], bias[bo + m0 + 2], bias[bo + m0 + 3]
        for l in range(0, whole, 2 * lanes):
            a0 = a1 = _vsplat(b0)
            e0 = e1 = _vsplat(b1)
            f0 = f1 = _vsplat(b2)
            h0 = h1 = _vsplat(b3)
            for r in range(K):
                x0 = _vload(c, co + r * cs + l)
                x1 = _vload(c, co + r * cs + l + lanes)
                s = _vbroadcast(w, wo + m0 * K + r)
                a0, a1 = _vfma(s, x0, a0), _vfma(s, x1, a1)
                s = _vbroadcast(w, wo + (m0 + 1) * K + r)
                e0, e1 = _vfma(s, x0, e0), _vfma(s, x1, e1)
                s = _vbroadcast(w, wo + (m0 + 2) * K + r)
                f0, f1 = _vfma(s, x0, f0), _vfma(s, x1, f1)
                s = _vbroadcast(w, wo + (m0 + 3) * K + r)
                h0, h1 = _vfma(s, x0, h0), _vfma(s, x1, h1)
            o = oo + m0 * os + l
            _vstore(out, o, _vclamp(a0, lo, hi))
            _vstore(out, o + lanes, _vclamp(a1, lo, hi))
            _vstore(out, o + os, _vclamp(e0, lo, hi))
            _vstore(out, o + os + lanes, _vclamp(e1, lo, hi))
            _vstore(out, o + 2 * os, _vclamp(f0, lo, hi))
            _vstore(out, o + 2 * os + lanes, _vclamp(f1, lo, hi))
            _vstore(out, o + 3 * os, _vclamp(h0, lo, hi))
            _vstore(out, o + 3 * os + lanes, _vclamp(h1, lo, hi))
    for m in range(M - M % 4, M):  # the last rows
        _small_row(w, wo + m * K, K, c, co, cs, whole, out, oo + m * os, bias[bo + m], lo, hi)
    for m in range(M):  # the last columns
        for l in range(whole, n):
            total = bias[bo + m]
            for r in range(K):
                total += w[wo + m * K + r] * c[co + r * cs + l]
            out[oo + m * os + l] = _clamp(total, bounds)


@njit(nogil=True, inline="always")
def _small_row(w, wo, K, c, co, cs, n, out, oo, b, lo, hi):
    """One row of _small_product, for n a multiple of two vectors."""
    lanes = _lanes(out)
    for l in range(0, n, 2 * lanes):
        a0 = a1 = _vsplat(b)
        for r in range(K):
            s = _vbroadcast(w, wo + r)
            a0 = _vfma(s, _vload(c, co + r * cs + l), a0)
            a1 = _vfma(s, _vload(c, co + r * cs + l + lanes), a1)
        _vstore(out, oo + l, _vclamp(a0, lo, hi))
        _vstore(out, oo + l + lanes, _vclamp(a1, lo, hi))


@njit(nogil=True, inline="always")
def _pad(x, n, first, xp, pd, ph, pw):
    """xp[c, pd + i, ph + j, pw + k] = x[n, first + c, i, j, k] (xp's pads are zeros already)."""
    for c in range(xp.shape[0]):
        for i in range(x.shape[2]):
            for j in range(x.shape[3]):
                _run(xp[c, pd + i, ph + j], pw, x[n, first + c, i, j], 0, x.shape[4], 1)


@njit(nogil=True, inline="always")
def _run(dst, d0, src, s0, count, step):
    """dst[d0 + t] = src[s0 + t * step] for t < count, on 1-d arrays. (Unsigned indices: Numba wraps
    a negative signed index around, and that test in the loop keeps it from vectorising: 8x slower.)"""
    d, s, k = np.uint64(d0), np.uint64(s0), np.uint64(step)
    if step == 1:
        for t in range(np.uint64(count)):
            dst[d + t] = src[s + t]
    else:
        for t in range(np.uint64(count)):
            dst[d + t] = src[s + t * k]


@njit(nogil=True, inline="always")
def _columns(xp, kd, kh, kw, geometry, OH, OW, l0, lc, cols):
    """cols[r, q] = the element of the padded input xp [Cg, Dp, Hp, Wp] that weight r (channel, then
    kernel offsets) meets at output position l0 + q, for q < lc."""
    sd, sh, sw, dd, dh, dw = geometry[0], geometry[1], geometry[2], geometry[3], geometry[4], geometry[5]
    Dp, Hp, Wp = xp.shape[1], xp.shape[2], xp.shape[3]
    source = xp.reshape(-1)
    target = cols.reshape(-1)
    stride = cols.shape[1]
    first_row, last_row = l0 // OW, (l0 + lc - 1) // OW  # the output rows (od, oh) the chunk meets
    r = 0
    for c in range(xp.shape[0]):
        for a in range(kd):
            for e in range(kh):
                for f in range(kw):
                    at = r * stride - l0
                    for row in range(first_row, last_row + 1):
                        od, oh = divmod(row, OH)
                        start = max(row * OW, l0)
                        end = min(row * OW + OW, l0 + lc)
                        origin = ((c * Dp + od * sd + a * dd) * Hp + oh * sh + e * dh) * Wp + f * dw
                        _run(target, at + start, source, origin + (start - row * OW) * sw, end - start, sw)
                    r += 1


# ---------------------------------------------------------------------------------------------
# Winograd's F(2x2, 3x3): 3x3 kernels, strides and dilations 1, one group. Each 4x4 tile of the
# padded input (at every second row and column) is transformed (B^T d B), the 16 products of its
# elements with the kernels' transforms (G g G^T, made at load) are summed over channels by 16
# products [tiles, C] x [C, M] (_winograd_products), and each tile's 2x2 outputs are A^T p A. 2.25
# times fewer multiplications than the direct product; float32 results differ from it by a few ulps
# of the sums.


@njit(nogil=True, inline="always")
def _winograd_fits(x, w, geometry, transforms):
    """Whether a Conv may take the Winograd path with kernels of `transforms` values (16: 2-d, 4: 1-d)."""
    plain = (x.shape[2] == 1 and w.shape[2] == 1 and geometry[0] == 1 and geometry[6] == 0 and geometry[2] == 1
             and geometry[5] == 1 and geometry[9] == 1 and w.shape[4] == 3)
    if transforms == 16:
        return plain and w.shape[3] == 3 and geometry[1] == 1 and geometry[4] == 1
    return plain and transforms == 4 and x.shape[3] == 1 and w.shape[3] == 1 and geometry[7] == 0


@njit(nogil=True, inline="always")
def _b(d0, d1, d2, d3):
    """B^T [d0, d1, d2, d3]: F(2, 3)'s input transform."""
    return d0 - d2, d1 + d2, d2 - d1, d1 - d3


@njit(nogil=True, inline="always")
def _a(p0, p1, p2, p3):
    """A^T [p0, p1, p2, p3]: F(2, 3)'s output transform."""
    return p0 + p1 + p2, p1 - p2 - p3


@njit(nogil=True, inline="always")
def _kernels_fit(kernels, w):
    """Whether `kernels` holds the 16 kernels in Winograd's domain of w [M, C, 3, 3], [16, M, C], or for
    C of at least PACKED_MIN_CHANNELS their transposes as panels (simd.pack), one after the other."""
    M, C = w.shape[0], w.shape[1]
    if C < PACKED_MIN_CHANNELS:
        return kernels.shape[0] == 16 and kernels.shape[1] == M and kernels.shape[2] == C
    return _panels_fit(kernels, 16, C, M)


@njit(nogil=True, inline="always")
def _panels_fit(panels, count, k, n):
    """Whether `panels` holds `count` matrices [k, n] packed as panels (simd.pack_weights), one after the
    other: [count * ceil(n / P), k, P]."""
    width = panel_width(panels)
    return (panels.shape[0] == count * ((n + width - 1) // width) and panels.shape[1] == k
            and panels.shape[2] == width)


@njit(nogil=True, inline="always")
def _winograd_products(V, kernels, P):
    """P[:, f, :] = V[f]^T @ kernels[f]^T, [T, M], for each transform f of V [F, C, T] and the kernels
    (see _kernels_fit), by BLAS or on the panels; False when the panels do not serve (a bug of ours)."""
    F, C, T = V.shape
    if C < PACKED_MIN_CHANNELS:
        for f in range(F):
            _MATMUL(V[f, :, :].T, kernels[f, :, :].T, P[:, f, :])
        return True
    return _products_of(V, kernels, P, 0, F)


@njit(nogil=True, inline="always")
def _products_of(V, kernels, P, f0, f1):
    """_winograd_products on panels for transforms f0 <= f < f1."""
    F, C, T = V.shape
    count = kernels.shape[0] // F
    for f in range(f0, f1):
        for t0 in range(0, T, MAX_ROWS):
            t1 = min(T, t0 + MAX_ROWS)
            if not multiply(V[f, :, t0:t1].T, kernels[f * count:(f + 1) * count], P[t0:t1, f, :], False):
                return False
    return True


@njit(nogil=True, inline="always")
def _winograd_shared(xp, V, kernels, P, bias, Y, out, bounds, TH, TW, threads, block):
    """One image's Winograd convolution (xp [C, Hp, Wp] padded, to out [M, OH, OW]) by the caller and,
    when one of the pool's workers is idle, that worker: each step's units are taken one at a time by
    both until none is left (_winograd_steps), so a worker that starts late (from a nap, about 120 µs
    here) takes fewer, and the caller waits for one unit at most. The results are one thread's bits.

    The CRNN at batch 1 on two threads took 1.14, 1.04, 1.15 and 1.02 of onnxruntime's time in four runs
    (medians; `python benchmarks/bench_threads.py 3 "crnn b1"`; a 2-core Zen 5, 2026-12-02), and 1.15,
    1.20, 1.19 and 1.16 in runs interleaved with them sharing only the 16 products (the transforms on
    the caller); earlier, 1.15, 1.21 and 1.06 that way. Each product split by columns
    instead (16 hand-offs a call), the CRNN layer 128 -> 256 on 8x25 434 -> 405 µs. Splitting the tiles,
    each core taking rows of tiles from input transform to output, was slower: 1.36 and 1.41 against
    1.16 and 1.14 (two runs each, interleaved), each core then reading all the kernels (4 MiB for
    256 -> 256) for products of fewer rows. Alone, one convolution called again and again rarely finds
    the worker idle (it naps between calls): with the products alone shared, 64 -> 128 on 16x50 took
    492-514 µs on one thread and 533-595 on two (ad hoc)."""
    C, Hp, Wp = xp.shape
    M = P.shape[2]
    words = np.zeros(JOB_WORDS, np.int64)
    words[0], words[1], words[2], words[3] = xp.ctypes.data, C, Hp, Wp
    words[4], words[5], words[6], words[7] = V.ctypes.data, kernels.ctypes.data, kernels.shape[0], kernels.shape[1]
    words[8], words[9], words[10], words[11] = kernels.shape[2], P.ctypes.data, M, bias.ctypes.data
    words[12], words[13], words[14], words[15] = Y.ctypes.data, out.ctypes.data, out.shape[1], out.shape[2]
    words[16], words[17], words[18] = bounds.ctypes.data, TH, TW
    words[19] = max(1, C // (2 * UNITS))  # channels of an input unit
    words[20] = max(1, TH // (2 * UNITS))  # rows of tiles of an output unit
    # (an idle worker only: one in a nap would start after the caller has done most of it)
    w = pool.post_job(threads, block, words, _job_address(P), False)
    start = pool.ticks()
    _winograd_steps(xp, V, kernels, P, bias, Y, out, bounds, words)
    pool.join_job(block, w, pool.ticks() - start)  # (not started, or none: the caller did it all)
    pool.alive(words, xp, V, kernels, P, bias, Y, out, bounds)  # (read by the job: see there)
    return words[FAILED] == 0


@njit(nogil=True, inline="always")
def _winograd_steps(xp, V, kernels, P, bias, Y, out, bounds, words):
    """A participant's part of _winograd_shared: units of input channels (their transforms), then, once
    every channel is done, transforms (their products), then, once every product is done, rows of tiles
    (their output transforms and outputs). A product that did not compute sets words[FAILED]."""
    C, TH, TW = words[1], words[17], words[18]
    while True:
        c0 = _take(words, NEXT_INPUT, C, words[19])
        if c0 < 0:
            break
        c1 = min(C, c0 + words[19])
        _winograd_inputs(xp, V, TH, TW, c0, c1)
        _count(words, DONE_INPUT, c1 - c0)
    _await(words, DONE_INPUT, C)
    F = V.shape[0]
    while True:
        f = _take(words, NEXT_PRODUCT, F, 1)
        if f < 0:
            break
        if not _products_of(V, kernels, P, f, f + 1):
            pool.store_release(words, FAILED, 1)
        _count(words, DONE_PRODUCT, 1)
    _await(words, DONE_PRODUCT, F)
    while True:
        th0 = _take(words, NEXT_OUTPUT, TH, words[20])
        if th0 < 0:
            return
        th1 = min(TH, th0 + words[20])
        _winograd_outputs(P, bias, Y, bounds, th0 * TW, th1 * TW)
        _winograd_scatter(Y, out, TH, TW, th0, th1)


@njit(nogil=True, inline="always")
def _take(words, at, end, unit):
    """The start of the next unit of `unit` counted by words[at] (compare-and-swap), or -1 once it reaches `end`."""
    while True:
        start = pool.load_acquire(words, at)
        if start >= end:
            return -1
        if pool.swap(words, at, start, start + unit):
            return start


@njit(nogil=True, inline="always")
def _count(words, at, done):
    """words[at] += done, atomically, after (release) what was done."""
    while True:
        before = pool.load_acquire(words, at)
        if pool.swap(words, at, before, before + done):
            return


@njit(nogil=True, inline="always")
def _await(words, at, total):
    """Wait until words[at] counts `total` (the other participant finishing the unit it took)."""
    while pool.load_acquire(words, at) < total:
        pool.pause()


@njit(nogil=True, inline="always")
def _winograd_job(dtype, address):
    """A worker's part of _winograd_shared, from the words at `address` (see there). The caller keeps the
    arrays alive: it waits for the job."""
    z = _c_array(address, (JOB_WORDS,), np.int64)
    C, M, T = z[1], z[10], z[17] * z[18]
    xp = _c_array(z[0], (C, z[2], z[3]), dtype)
    V, kernels = _c_array(z[4], (16, C, T), dtype), _c_array(z[5], (z[6], z[7], z[8]), dtype)
    P, Y = _c_array(z[9], (T, 16, M), dtype), _c_array(z[12], (T, 4, M), dtype)
    out = _c_array(z[13], (M, z[14], z[15]), dtype)
    _winograd_steps(xp, V, kernels, P, _c_array(z[11], (M,), dtype), Y, out, _c_array(z[16], (2,), dtype), z)
    return 0


@njit(nogil=True, inline="always")
def _winograd(x, kernels, bias, out, geometry, bounds):
    ph, pw = geometry[7], geometry[8]
    N, C, H, W = x.shape[0], x.shape[1], x.shape[3], x.shape[4]
    M = out.shape[1]
    OH, OW = out.shape[3], out.shape[4]
    TH, TW = (OH + 1) // 2, (OW + 1) // 2
    T = TH * TW
    Hp, Wp = max(H + ph, 2 * TH + 2), max(W + pw, 2 * TW + 2)
    xp = np.zeros((C, 1, Hp, Wp), out.dtype)
    V = np.empty((16, C, T), out.dtype)
    # Per tile, then transform (not [16, T, M]: a tile's 16 rows would lie T x M elements apart, often a
    # multiple of 4 KiB, in one set of L1; the output transform of 200 tiles took 4x longer).
    P = np.empty((T, 16, M), out.dtype)
    Y = np.empty((T, 4, M), out.dtype)
    b = bias if bias.size else np.zeros(M, out.dtype)
    threads, block = geometry[10], geometry[11]
    # Shared on panels only: BLAS has no way to take a share of its work from a worker.
    shared = threads > 1 and block != 0 and C >= PACKED_MIN_CHANNELS and 16 * C * T * M >= JOB_WORK
    if shared:  # a napping worker spins again while the input is padded
        pool.claim(pool.block_at(block), 0)
    limits = np.empty(2, out.dtype)  # (an array for the job's words)
    limits[0], limits[1] = bounds[0], bounds[1]
    for n in range(N):
        _pad(x, n, 0, xp, 0, ph, pw)
        xn, on = xp.reshape((C, Hp, Wp)), out[n].reshape((M, OH, OW))
        if shared:
            if not _winograd_shared(xn, V, kernels, P, b, Y, on, limits, TH, TW, threads, block):
                return 1
            continue
        _winograd_inputs(xn, V, TH, TW, 0, C)
        if not _winograd_products(V, kernels, P):
            return 1
        _winograd_outputs(P, b, Y, bounds, 0, T)
        _winograd_scatter(Y, on, TH, TW, 0, TH)
    return 0


@njit(nogil=True, inline="always")
def _winograd_inputs(xp, V, TH, TW, c0, c1):
    """V[4 k + i, c, th * TW + tw] = (B^T d B)[k, i], d the 4x4 tile of xp [C, Hp, Wp] at (2 th, 2 tw),
    for the channels c0 <= c < c1.
    Per row of tiles, in loops that vectorise: B^T down each column of its four rows (into `rows`), the
    even and odd columns of each result apart (`half`), then B across each tile's four columns from
    those, contiguous in tw. (Tile by tile, 16 scalar loads and stores each: 125 against 68 µs for 64
    channels of 8 x 25 tiles. Flat unsigned indices, as _run.)"""
    C, Hp, Wp = xp.shape
    T = TH * TW
    n, m = 2 * TW + 2, TW + 1  # the columns the tiles cover; the even (odd) ones among them
    rows = np.empty(4 * n, V.dtype)
    half = np.empty(2 * m, V.dtype)
    xf, vf = xp.reshape(-1), V.reshape(-1)
    step, row, one, two = np.uint64(C * T), np.uint64(Wp), np.uint64(1), np.uint64(2)
    un, um = np.uint64(n), np.uint64(m)
    for c in range(c0, c1):
        for th in range(TH):
            x0 = np.uint64((c * Hp + 2 * th) * Wp)
            for j in range(un):
                d0, d1, d2, d3 = xf[x0 + j], xf[x0 + row + j], xf[x0 + two * row + j], xf[x0 + two * row + row + j]
                rows[j], rows[un + j], rows[two * un + j], rows[two * un + un + j] = _b(d0, d1, d2, d3)
            for k in range(4):
                r = np.uint64(k) * un
                for j in range(um):
                    half[j] = rows[r + two * j]
                    half[um + j] = rows[r + two * j + one]
                v = np.uint64(4 * k) * step + np.uint64(c * T + th * TW)
                for tw in range(np.uint64(TW)):
                    e0, o0, e1, o1 = half[tw], half[um + tw], half[tw + one], half[um + tw + one]
                    vf[v + tw] = e0 - e1
                    vf[v + step + tw] = o0 + e1
                    vf[v + two * step + tw] = e1 - o0
                    vf[v + two * step + step + tw] = o0 - o1


@njit(nogil=True, inline="always")
def _va(p0, p1, p2, p3, one, minus):
    """A^T [p0, p1, p2, p3] on vectors (sums as multiply-adds by 1 and -1: exact)."""
    return _vfma(one, p2, _vfma(one, p1, p0)), _vfma(minus, p3, _vfma(minus, p2, p1))


@njit(nogil=True, inline="always")
def _winograd_outputs(P, bias, Y, bounds, t0, t1):
    """Y[t, 2 i + j, m] = (A^T p A)[i, j] + bias[m], p the 16 values P[t, :, m] (P [T, 16, M]), held to
    bounds (lo, hi), for the tiles t0 <= t < t1: along m in vectors of simd.py's width."""
    M = P.shape[2]
    pf, yf = P.reshape(-1), Y.reshape(-1)
    lanes = _lanes(yf)
    whole = M - M % lanes
    unit = np.ones(2, yf.dtype)
    unit[1] = -unit[1]
    one, minus = _vsplat(unit[0]), _vsplat(unit[1])
    lo, hi = _vsplat(bounds[0]), _vsplat(bounds[1])
    for t in range(t0, t1):
        for m in range(0, whole, lanes):
            k, y = 16 * t * M + m, 4 * t * M + m
            bv = _vload(bias, m)
            s00, s10 = _va(_vload(pf, k), _vload(pf, k + 4 * M), _vload(pf, k + 8 * M), _vload(pf, k + 12 * M), one, minus)
            k += M
            s01, s11 = _va(_vload(pf, k), _vload(pf, k + 4 * M), _vload(pf, k + 8 * M), _vload(pf, k + 12 * M), one, minus)
            k += M
            s02, s12 = _va(_vload(pf, k), _vload(pf, k + 4 * M), _vload(pf, k + 8 * M), _vload(pf, k + 12 * M), one, minus)
            k += M
            s03, s13 = _va(_vload(pf, k), _vload(pf, k + 4 * M), _vload(pf, k + 8 * M), _vload(pf, k + 12 * M), one, minus)
            y00, y01 = _va(s00, s01, s02, s03, one, minus)
            y10, y11 = _va(s10, s11, s12, s13, one, minus)
            _vstore(yf, y, _vclamp(_vfma(one, bv, y00), lo, hi))
            _vstore(yf, y + M, _vclamp(_vfma(one, bv, y01), lo, hi))
            _vstore(yf, y + 2 * M, _vclamp(_vfma(one, bv, y10), lo, hi))
            _vstore(yf, y + 3 * M, _vclamp(_vfma(one, bv, y11), lo, hi))
        for m in range(whole, M):  # the last channels
            k, y = 16 * t * M + m, 4 * t * M + m
            s00, s10 = _a(pf[k], pf[k + 4 * M], pf[k + 8 * M], pf[k + 12 * M])
            s01, s11 = _a(pf[k + M], pf[k + 5 * M], pf[k + 9 * M], pf[k + 13 * M])
            s02, s12 = _a(pf[k + 2 * M], pf[k + 6 * M], pf[k + 10 * M], pf[k + 14 * M])
            s03, s13 = _a(pf[k + 3 * M], pf[k + 7 * M], pf[k + 11 * M], pf[k + 15 * M])
            y00, y01 = _a(s00, s01, s02, s03)
            y10, y11 = _a(s10, s11, s12, s13)
            yf[y], yf[y + M] = _clamp(y00 + bias[m], bounds), _clamp(y01 + bias[m], bounds)
            yf[y + 2 * M], yf[y + 3 * M] = _clamp(y10 + bias[m], bounds), _clamp(y11 + bias[m], bounds)


@njit(nogil=True, inline="always")
def _winograd_scatter(Y, out, TH, TW, th0, th1):
    """out[m, 2 th + i, 2 tw + j] = Y[th * TW + tw, 2 i + j, m] for the outputs out [M, OH, OW] has
    (the last tiles' may be cut) of the rows of tiles th0 <= th < th1, 16 channels at a time: each line
    of Y is read once from L2, then from L1. (Flat unsigned indices, as _run.)"""
    M, OH, OW = out.shape
    yf, of = Y.reshape(-1), out.reshape(-1)
    one, two, step, tile = np.uint64(1), np.uint64(2), np.uint64(M), np.uint64(4 * M)
    pairs = np.uint64(OW // 2)
    for m0 in range(0, M, 16):
        for oh in range(2 * th0, min(OH, 2 * th1)):
            for m in range(m0, min(M, m0 + 16)):
                src = np.uint64(((oh // 2) * TW * 4 + 2 * (oh % 2)) * M + m)
                dst = np.uint64((m * OH + oh) * OW)
                for tw in range(pairs):
                    of[dst + two * tw] = yf[src + tw * tile]
                    of[dst + two * tw + one] = yf[src + tw * tile + step]
                if OW % 2:
                    of[dst + two * pairs] = yf[src + pairs * tile]


@njit(nogil=True, inline="always")
def _winograd_1d(x, kernels, bias, out, geometry, bounds):
    """F(2, 3) along the one spatial axis: per pair of outputs, 4 inputs transformed (B^T d), 4 BLAS
    products [M, C] x [C, pairs], and A^T p."""
    pw = geometry[8]
    N, C, W = x.shape[0], x.shape[1], x.shape[4]
    M = kernels.shape[1]
    OW = out.shape[4]
    T = (OW + 1) // 2
    Wp = max(W + pw, 2 * T + 2)
    xp = np.zeros((C, 1, 1, Wp), out.dtype)
    V = np.empty((4, C, T), out.dtype)
    P = np.empty((M, 4, T), out.dtype)
    exact = OW == 2 * T
    y = np.empty((0 if exact else M, 2 * T), out.dtype)
    for n in range(N):
        _pad(x, n, 0, xp, 0, 0, pw)
        source, target = xp.reshape(-1), V.reshape(-1)
        step, one, two = np.uint64(C * T), np.uint64(1), np.uint64(2)
        for c in range(C):
            at, v = np.uint64(c * Wp), np.uint64(c * T)
            for t in range(np.uint64(T)):
                j = at + two * t
                k = v + t
                target[k], target[k + step], target[k + two * step], target[k + (two + one) * step] = _b(
                    source[j], source[j + one], source[j + two], source[j + two + one])
        for f in range(4):
            _MATMUL(kernels[f, :, :], V[f, :, :], P[:, f, :])
        _winograd_outputs_1d(P, bias, out[n].reshape((M, OW)) if exact else y, T, bounds)
        if not exact:
            for m in range(M):
                _run(out[n, m, 0, 0], 0, y[m], 0, OW, 1)


@njit(nogil=True, inline="always")
def _winograd_outputs_1d(P, bias, y, T, bounds):
    """y[m, 2 t + j] = (A^T p)[j] + bias[m], p the 4 values P[m, :, t], held to bounds (lo, hi); y is
    [M, 2 T]."""
    M = P.shape[0]
    pf, yf = P.reshape(-1), y.reshape(-1)
    s, one, two = np.uint64(T), np.uint64(1), np.uint64(2)
    for m in range(M):
        b = bias[m] if bias.size else 0.0
        p, o = np.uint64(4 * m * T), np.uint64(2 * m * T)
        for t in range(np.uint64(T)):
            k = p + t
            y0, y1 = _a(pf[k], pf[k + s], pf[k + two * s], pf[k + (two + one) * s])
            yf[o + two * t], yf[o + two * t + one] = _clamp(y0 + b, bounds), _clamp(y1 + b, bounds)


@njit(nogil=True, inline="always")
def conv_transpose(dtype, xa, wa, ba, oa, ka, sa):
    x, w, bias, out, geometry, _, bounds = _arguments(dtype, xa, wa, ba, oa, ka, sa)
    if _conv_transpose(x, w, bias, out, geometry):
        return 1
    if _clamps(bounds):
        of = out.reshape(-1)
        _finish(of, 0, of.size, 0.0, bounds)
    return 0


@njit(nogil=True, inline="always")
def _conv_transpose(x, w, bias, out, geometry):
    """out = ConvTranspose(x, w) + bias on 5-d C-contiguous arrays: x [N, C, D, H, W],
    w [C, M / group, kd, kh, kw], out [N, M, OD, OH, OW]; bias [M] or empty; geometry (strides,
    dilations, elements cut from the beginning of the full result: three each; group). Per image
    and group, the columns are W^T x by BLAS; each column element is then added where it lands.
    Returns 0, or 1 when the sizes do not agree (as conv)."""
    sd, sh, sw, dd, dh, dw, cd, ch, cw, group = geometry[:10]
    N, C = x.shape[0], x.shape[1]
    D, H, W = x.shape[2], x.shape[3], x.shape[4]
    Mg, kd, kh, kw = w.shape[1], w.shape[2], w.shape[3], w.shape[4]
    if (group < 1 or w.shape[0] != C or C % group or bias.size not in (0, Mg * group) or out.shape[0] != N
            or out.shape[1] != Mg * group or min(geometry[:6]) < 1):
        return 1
    Cg = C // group
    K = kd * kh * kw
    OD, OH, OW = out.shape[2], out.shape[3], out.shape[4]
    inputs = x.reshape((N, C, D * H * W))
    weights = w.reshape((C, Mg * K))
    cols = np.empty((Mg * K, D * H * W), out.dtype)
    for n in range(N):
        for m in range(Mg * group):
            b = bias[m] if bias.size else 0.0
            for od in range(OD):
                for oh in range(OH):
                    for ow in range(OW):
                        out[n, m, od, oh, ow] = b
        for g in range(group):
            _MATMUL(weights[g * Cg:(g + 1) * Cg, :].T, inputs[n, g * Cg:(g + 1) * Cg, :], cols[:, :])
            r = 0
            for m in range(Mg):
                for a in range(kd):
                    for e in range(kh):
                        for f in range(kw):
                            offd, offh, offw = a * dd - cd, e * dh - ch, f * dw - cw
                            d0, d1 = _window(D, sd, offd, OD)
                            h0, h1 = _window(H, sh, offh, OH)
                            w0, w1 = _window(W, sw, offw, OW)
                            for i in range(d0, d1):
                                for j in range(h0, h1):
                                    at = (i * H + j) * W
                                    for t in range(w0, w1):
                                        out[n, g * Mg + m, i * sd + offd, j * sh + offh, t * sw + offw] += cols[r, at + t]
                            r += 1
    return 0


# ---------------------------------------------------------------------------------------------
# Kernels call the paths above and conv_transpose through a symbol each, compiled once per dtype (as
# simd.py's product): called as Numba functions, their code was linked into every kernel calling them, and
# compiling such a kernel took 5-6 s more (a kernel of one Conv, numba 0.68). A kernel module
# calls require(name) for each entry it uses (kernel.py writes those lines), so that a kernel
# loaded from Numba's cache finds the symbol.

_ENTRIES = {f"{kind}_{dtype}": dtype for kind in ("conv_direct", "conv_product", "conv_winograd", "conv_winograd_1d",
                                                   "conv_transpose") for dtype in ("float32", "float64")}
_SIZES = 5 + 5 + 1 + 5 + 3 + 14  # the sizes of x, w, bias, out and kernels, and the geometry: one int64 array


@intrinsic
def _c_array(typingctx, address, shape, dtype):
    """The C-contiguous array of `dtype` (a NumPy scalar type) at `address`, of `shape` (a tuple of
    ints): a view of memory the kernel calling the entry keeps alive, so without reference counting."""
    array = types.Array(dtype.instance_type, len(shape), "C")

    def codegen(context, builder, sig, args):
        from numba.np.arrayobj import populate_array
        address, shape, _ = args
        out = context.make_array(array)(context, builder)
        element = context.get_data_type(array.dtype)
        itemsize = context.get_constant(types.intp, context.get_abi_sizeof(element))
        strides, step = [], itemsize
        for size in reversed(cgutils.unpack_tuple(builder, shape)):
            strides.insert(0, step)
            step = builder.mul(step, size)
        populate_array(out, data=builder.inttoptr(address, element.as_pointer()), shape=shape,
                       strides=cgutils.pack_array(builder, strides), itemsize=itemsize, meminfo=None)
        return out._getvalue()
    return array(address, shape, dtype), codegen


@intrinsic
def _float64_of(typingctx, bits):
    """The float64 whose bits are the int64 `bits`."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@njit(nogil=True, inline="always")
def _arguments(dtype, xa, wa, ba, oa, ka, sa):
    """(x, w, bias, out, geometry, kernels, bounds) of an entry: the arrays at these addresses, their
    sizes, the geometry (twelve ints: strides, dilations and pads before, three each, the group, then
    the threads the call may use and the pool's block, as a kernel passes them to products) and the
    bounds (lo, hi) the outputs are held to, as `dtype` values (their float64 bits:
    conv._bounds_bits), read from the int64 array at sa."""
    z = _c_array(sa, (_SIZES,), np.int64)
    x = _c_array(xa, (z[0], z[1], z[2], z[3], z[4]), dtype)
    w = _c_array(wa, (z[5], z[6], z[7], z[8], z[9]), dtype)
    bias = _c_array(ba, (z[10],), dtype)
    out = _c_array(oa, (z[11], z[12], z[13], z[14], z[15]), dtype)
    kernels = _c_array(ka, (z[16], z[17], z[18]), dtype)
    bounds = (dtype(_float64_of(z[29])), dtype(_float64_of(z[30])))
    geometry = (z[19], z[20], z[21], z[22], z[23], z[24], z[25], z[26], z[27], z[28], z[31], z[32])
    return x, w, bias, out, geometry, kernels, bounds


# One function per entry for cfunc (and Numba's cache) to compile on its own, written out: Numba's
# cache keys a function by its name and line, so functions made in a loop would share one entry.
def _conv_direct_float32(x, w, bias, out, kernels, sizes):
    return conv_direct(np.float32, x, w, bias, out, kernels, sizes)


def _conv_direct_float64(x, w, bias, out, kernels, sizes):
    return conv_direct(np.float64, x, w, bias, out, kernels, sizes)


def _conv_product_float32(x, w, bias, out, kernels, sizes):
    return conv_product(np.float32, x, w, bias, out, kernels, sizes)


def _conv_product_float64(x, w, bias, out, kernels, sizes):
    return conv_product(np.float64, x, w, bias, out, kernels, sizes)


def _conv_winograd_float32(x, w, bias, out, kernels, sizes):
    return conv_winograd(np.float32, x, w, bias, out, kernels, sizes)


def _conv_winograd_float64(x, w, bias, out, kernels, sizes):
    return conv_winograd(np.float64, x, w, bias, out, kernels, sizes)


def _conv_winograd_1d_float32(x, w, bias, out, kernels, sizes):
    return conv_winograd_1d(np.float32, x, w, bias, out, kernels, sizes)


def _conv_winograd_1d_float64(x, w, bias, out, kernels, sizes):
    return conv_winograd_1d(np.float64, x, w, bias, out, kernels, sizes)


# The job a worker runs (pool.call_job passes the pool's ARITY arguments; the last ones are unused).
def _winograd_job_float32(words, u1, u2, u3, u4, u5, u6, u7, u8, u9, u10, u11, u12, u13, u14, u15, u16, u17, u18,
                          u19, u20, u21, u22, u23, u24, u25, u26, u27):
    return _winograd_job(np.float32, words)


def _winograd_job_float64(words, u1, u2, u3, u4, u5, u6, u7, u8, u9, u10, u11, u12, u13, u14, u15, u16, u17, u18,
                          u19, u20, u21, u22, u23, u24, u25, u26, u27):
    return _winograd_job(np.float64, words)


assert pool.ARITY == 28


def _conv_transpose_float32(x, w, bias, out, kernels, sizes):
    return conv_transpose(np.float32, x, w, bias, out, kernels, sizes)


def _conv_transpose_float64(x, w, bias, out, kernels, sizes):
    return conv_transpose(np.float64, x, w, bias, out, kernels, sizes)


@functools.cache
def _external(name: str, arity: int = 6) -> types.ExternalFunction:
    """Entry `name` (conv_direct_float32, ...; or a job, winograd_job_float32, of the pool's arity)
    compiled as a C function and registered with LLVM by its symbol; compiled once per machine
    (Numba's cache), loaded from it by later processes."""
    signature = types.intp(*[types.intp] * arity)
    compiled = cfunc(signature, nopython=True, nogil=True, cache=True)(globals()[f"_{name}"])
    symbol = f"rnnloop_{name}"
    llvm.add_symbol(symbol, compiled.address)
    return types.ExternalFunction(symbol, signature)


def require(name: str) -> None:
    """Make entry `name` callable by kernels (a generated module calls this when it is imported), and
    the Winograd job it hands to workers by symbol."""
    if name.startswith("conv_winograd_float"):
        _external(f"winograd_job_{_ENTRIES[name]}", pool.ARITY)
    _external(name)


@intrinsic
def _job_address(typingctx, like):
    """The address of the Winograd job (_winograd_job) for arrays of `like`'s dtype, by its symbol."""
    name = f"winograd_job_{like.dtype}"
    _external(name, pool.ARITY)

    def codegen(context, builder, sig, args):
        i64 = ir.IntType(64)
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64] * pool.ARITY),
                                                  f"rnnloop_{name}")
        return builder.ptrtoint(function, i64)
    return types.int64(like), codegen


def _caller(name: str):
    """The intrinsic kernels call entry `name` by, on arrays (x, w, bias, out, kernels: x, w and out of
    one rank from 3 to 5, read as 5-d with leading spatial axes of size 1; bias 1-d; kernels 3-d; all
    C-contiguous, of the entry's dtype) and the geometry (a tuple of 14 ints: see _arguments and conv.py); it returns the entry's
    status. Typing it registers the symbol."""
    dtype = _ENTRIES[name]

    @intrinsic
    def call(typingctx, x, w, bias, out, kernels, geometry):
        arrays = (x, w, bias, out, kernels)
        if (not all(isinstance(a, types.Array) for a in arrays) or x.ndim not in (3, 4, 5)
                or [a.ndim for a in arrays] != [x.ndim, x.ndim, 1, x.ndim, 3]
                or any(a.layout != "C" or str(a.dtype) != dtype for a in arrays)
                or not isinstance(geometry, types.UniTuple) or geometry.count != 14
                or not isinstance(geometry.dtype, types.Integer)):
            return None  # a typing error: the rule passes nothing else
        external = _external(name)

        def codegen(context, builder, signature, args):
            intp = context.get_value_type(types.intp)
            addresses, sizes = [], []
            for k, (ty, value) in enumerate(zip(arrays, args[:5])):
                array = context.make_array(ty)(context, builder, value)
                addresses.append(builder.ptrtoint(array.data, intp))
                shape = cgutils.unpack_tuple(builder, array.shape)
                if k in (0, 1, 3):  # x, w, out: [N, C, spatial...] as [N, C, D, H, W]
                    shape = shape[:2] + [ir.Constant(intp, 1)] * (5 - ty.ndim) + shape[2:]
                sizes += shape
            sizes += [context.cast(builder, v, geometry.dtype, types.intp)
                      for v in cgutils.unpack_tuple(builder, args[5])]
            block = cgutils.alloca_once(builder, intp, size=len(sizes))
            for k, v in enumerate(sizes):
                builder.store(v, builder.gep(block, [ir.Constant(intp, k)]))
            function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(intp, [intp] * 6),
                                                      external.symbol)
            return builder.call(function, addresses + [builder.ptrtoint(block, intp)])
        return types.intp(x, w, bias, out, kernels, geometry), codegen
    return call


# The intrinsics, by their entries' names: conv_direct_float32, ..., conv_transpose_float64.
globals().update({name: _caller(name) for name in _ENTRIES})
