"""Compiled helpers of Resize kernels (codegen/resize.py): the per-axis tables of source indices and
weights, and one resizing pass along one axis of an array viewed as (outer, axis, inner).

The tables are rnnloop.interp.resize.axis_table's, computed with the same float64 expressions in the
same order, so that kernel and interpreter round alike. Kernels import this module as `_rz` (only
those that resize: see cache.OPTIONAL_MODULES).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# The codes kernels pass for the attribute values, in rnnloop.interp.resize's orders.
MODES = ("nearest", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize", "tf_half_pixel_for_nn")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")

_jit = njit(cache=True, nogil=True, error_model="numpy")


_F = np.float32


@_jit
def _source(y, n_in, n_out, scale, length, ctm, start, end):
    """x_original of output position y, in float32 (see rnnloop.interp.resize.source_coordinates); every
    argument is a float32."""
    one, half = _F(1.0), _F(0.5)
    if ctm == 0:  # half_pixel
        return (y + half) / scale - half
    if ctm == 1:  # half_pixel_symmetric
        offset = n_in / _F(2.0) * (one - n_out / length)
        return offset + (y + half) / scale - half
    if ctm == 2:  # pytorch_half_pixel
        return (y + half) / scale - half if length > one else _F(0.0)
    if ctm == 3:  # align_corners
        return y * (n_in - one) / (length - one) if length != one else _F(0.0)
    if ctm == 4:  # asymmetric
        return y / scale
    if ctm == 6:  # tf_half_pixel_for_nn
        return (y + half) / scale
    if length > one:  # tf_crop_and_resize
        return start * (n_in - one) + y * (end - start) * (n_in - one) / (length - one)
    return half * (start + end) * (n_in - one)


@_jit
def _cubic(t, a):
    t = abs(t)
    if t <= 1:
        return ((a + 2) * t - (a + 3)) * t * t + 1
    if t < 2:
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return 0.0


@_jit
def axis_table(n_in, n_out, scale, length, start, end, mode, ctm, nearest, cubic_a, exclude_outside, antialias):
    """(indices [n_out, taps], weights [n_out, taps], extrapolated [n_out]) of one resized axis: output
    position i is the sum over k of weights[i, k] * source[indices[i, k]]. `length` is length_resized;
    scale, length, start and end are float64 values of float32 numbers. Codes index MODES,
    COORDINATE_MODES and NEAREST_MODES."""
    n_in_f = np.float64(n_in)
    stretch = min(scale, 1.0) if antialias else 1.0
    if mode == 0:
        taps = 1
    else:
        half = 1.0 if mode == 1 else 2.0
        taps = 2 * int(half) if not antialias else 2 - 2 * (int(math.floor(-half / stretch)) + 1)
    index = np.empty((n_out, taps), np.int64)
    weights = np.empty((n_out, taps), np.float64)
    outside = np.zeros(n_out, np.bool_)
    for i in range(n_out):
        x = np.float64(_source(_F(i), _F(n_in), _F(n_out), _F(scale), _F(length), ctm, _F(start), _F(end)))
        if ctm == 5:
            outside[i] = x < 0 or x > n_in_f - 1
        base = math.floor(x)
        if mode == 0:
            ratio = x - base
            if nearest == 0:
                up = ratio > 0.5
            elif nearest == 1:
                up = ratio >= 0.5
            elif nearest == 2:
                up = False
            elif nearest == 3:
                up = ratio > 0
            else:  # simple: the ceiling where the axis shrinks
                up = ratio > 0 and scale < 1
            k = base + 1.0 if up else base
            index[i, 0] = np.int64(min(max(k, 0.0), n_in_f - 1))
            weights[i, 0] = 1.0
            continue
        first = x - taps // 2 if x == base else base + 1 - taps // 2
        for k in range(taps):
            at = first + k
            t = (at - x) * stretch
            if mode == 1:
                w = min(max(1 - abs(t), 0.0), 1.0)
            else:
                w = _cubic(t, cubic_a)
            weights[i, k] = w
            index[i, k] = np.int64(at)
        if antialias:
            total = weights[i, 0]
            for k in range(1, taps):
                total += weights[i, k]
            for k in range(taps):
                weights[i, k] = weights[i, k] / total
        if exclude_outside:
            for k in range(taps):
                if index[i, k] < 0 or index[i, k] >= n_in:
                    weights[i, k] = 0.0
            total = weights[i, 0]
            for k in range(1, taps):
                total += weights[i, k]
            if total == 0:
                total = 1.0
            for k in range(taps):
                weights[i, k] = weights[i, k] / total
        for k in range(taps):
            index[i, k] = min(max(index[i, k], 0), n_in - 1)
    return index, weights, outside


@_jit
def resize_axis(src, index, weights, outside, extrapolation, dst):
    """dst[o, i, j] = sum_k weights[i, k] * src[o, index[i, k], j] in float64, added left to right,
    or the extrapolation value where outside[i]; src (outer, n_in, inner), dst (outer, n_out, inner)."""
    taps = index.shape[1]
    for o in range(dst.shape[0]):
        for i in range(dst.shape[1]):
            if outside[i]:
                for j in range(dst.shape[2]):
                    dst[o, i, j] = extrapolation
                continue
            first, w = index[i, 0], weights[i, 0]
            for j in range(dst.shape[2]):
                dst[o, i, j] = np.float64(src[o, first, j]) * w
            for k in range(1, taps):
                at, w = index[i, k], weights[i, k]
                for j in range(dst.shape[2]):
                    dst[o, i, j] += np.float64(src[o, at, j]) * w


@_jit
def resize_axis_nearest(src, index, outside, extrapolation, dst):
    """dst[o, i, j] = src[o, index[i, 0], j], or the extrapolation value where outside[i]: a selection
    in src's dtype."""
    for o in range(dst.shape[0]):
        for i in range(dst.shape[1]):
            at = index[i, 0]
            for j in range(dst.shape[2]):
                dst[o, i, j] = extrapolation if outside[i] else src[o, at, j]
