"""Interpreter functions for pooling and normalisation: MaxPool, AveragePool, LpPool, the global
pools, BatchNormalization (inference), Instance-, Layer-, Group-, Lp- and MeanVarianceNormalization.

Pools walk their kernel one tap at a time (row-major over the kernel axes), each tap a strided
gather of the whole input, so that a tap outside the input (in the padding, or past the end in
ceil mode) never counts; that order is also what decides MaxPool's ties. The code generator
(rnnloop/codegen/nn.py) follows the same order and formulas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from onnx import helper

from ..errors import OpError
from .args import as_axes, as_axis
from .math_ops import run_reducemax, run_reducemean
from .registry import interprets

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
MVN_EPSILON = 1e-9  # MeanVarianceNormalization's function body adds it to the standard deviation


# ---------------------------------------------------------------------------------------------
# pooling geometry


@dataclass(frozen=True)
class PoolAxis:
    """One spatial axis of a pool: output size, begin padding, and the end of the padded input
    (input size + end padding: taps at or past it are beyond the pads, e.g. in ceil mode)."""

    size: int  # input size
    out: int
    begin: int
    padded_end: int
    kernel: int
    stride: int
    dilation: int

    def taps(self, j: int) -> np.ndarray:
        """The input positions tap j reads, one per output position."""
        return np.arange(self.out) * self.stride - self.begin + j * self.dilation


def pool_axes(shape: tuple[int, ...], kernel_shape, strides, dilations, pads, auto_pad: str,
              ceil_mode: int) -> list[PoolAxis]:
    """The geometry of each spatial axis (input axes 2...) by the ONNX spec's output shape formulas."""
    if kernel_shape is None:
        raise OpError("the kernel_shape attribute is required")
    nd = len(kernel_shape)
    if len(shape) != nd + 2:
        raise OpError(f"kernel_shape {list(kernel_shape)} has {nd} axes; the input of shape {shape} needs "
                      f"{len(shape) - 2} (one per axis after N and C)")
    strides = [1] * nd if strides is None else list(strides)
    dilations = [1] * nd if dilations is None else list(dilations)
    pads = [0] * 2 * nd if pads is None else list(pads)
    if auto_pad not in AUTO_PADS:
        raise OpError(f"auto_pad '{auto_pad}' is not one of {', '.join(AUTO_PADS)}")
    for what, values, count in (("strides", strides, nd), ("dilations", dilations, nd), ("pads", pads, 2 * nd)):
        if len(values) != count:
            raise OpError(f"{what} {values} has {len(values)} values; {count} are needed for {nd} spatial axes")
    if min(kernel_shape) < 1 or min(strides) < 1 or min(dilations) < 1:
        raise OpError(f"kernel_shape {list(kernel_shape)}, strides {strides} and dilations {dilations} "
                      "must all be at least 1")
    if pads and min(pads) < 0:
        raise OpError(f"pads {pads} has a negative value; pads must be >= 0")
    axes = []
    for a in range(nd):
        size, k, s, d = shape[a + 2], int(kernel_shape[a]), int(strides[a]), int(dilations[a])
        extent = (k - 1) * d + 1
        begin, end = int(pads[a]), int(pads[a + nd])
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out = -(-size // s)
            total = max((out - 1) * s + extent - size, 0)
            begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            end = total - begin
        else:
            if auto_pad == "VALID":
                begin = end = 0
            span = size + begin + end - extent
            if span < 0:
                raise OpError(f"the kernel spans {extent} entries of spatial axis {a}, more than its {size} "
                              f"entries and {begin + end} pads")
            out = (-(-span // s) if ceil_mode else span // s) + 1
            if ceil_mode and (out - 1) * s >= size + begin:  # a window starting in the end padding is dropped
                out -= 1
        axes.append(PoolAxis(size, out, begin, size + end, k, s, d))
    return axes


def _taps(x: np.ndarray, axes: list[PoolAxis]):
    """For each kernel tap in row-major order: (its kernel index, the input values it reads as an
    array shaped like the output, a mask of the reads inside the input, the input positions)."""
    for index in np.ndindex(*(a.kernel for a in axes)):
        value, inside, positions = x, None, []
        for k, (a, j) in enumerate(zip(axes, index)):
            pos = a.taps(j)
            valid = (pos >= 0) & (pos < a.size)
            value = np.take(value, np.clip(pos, 0, max(a.size - 1, 0)), axis=k + 2) if a.size else \
                np.zeros(value.shape[:k + 2] + (a.out,) + value.shape[k + 3:], x.dtype)
            shaped = valid.reshape((a.out,) + (1,) * (len(axes) - k - 1))
            inside = shaped if inside is None else inside & shaped
            positions.append(pos)
        yield index, value, inside, positions


def _counts(axes: list[PoolAxis], include_pad: bool) -> np.ndarray:
    """How many taps of each window count: inside the input, or (include_pad) inside the padded input."""
    total = np.ones((), np.int64)
    for a in axes:
        per = np.zeros(a.out, np.int64)
        for j in range(a.kernel):
            pos = a.taps(j)
            per += (pos < a.padded_end) if include_pad else ((pos >= 0) & (pos < a.size))
        total = total[..., None] * per
    return total


def _float_input(x: np.ndarray, op: str) -> None:
    if x.dtype.kind != "f":
        raise OpError(f"{op} computes on floats; the input is {x.dtype}")


# ---------------------------------------------------------------------------------------------
# pools


@interprets("MaxPool")
def run_maxpool(X: np.ndarray, *, kernel_shape=None, auto_pad: str = "NOTSET", pads=None, strides=None,
                dilations=None, ceil_mode: int = 0, storage_order: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Y = the maximum of each window's taps inside X (NaN if any is); Indices = where it is, as a flat
    index of X (row-major, or with storage_order=1 column-major within each N, C plane); the first
    of equal maxima counts. A window of padding alone gives the dtype's lowest value and index -1."""
    if storage_order not in (0, 1):
        raise OpError(f"storage_order {storage_order} is not 0 (row major) or 1 (column major)")
    axes = pool_axes(X.shape, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    out_shape = X.shape[:2] + tuple(a.out for a in axes)
    lowest = -np.inf if X.dtype.kind == "f" else np.iinfo(X.dtype).min
    best = np.full(out_shape, lowest, X.dtype)
    where = np.full(out_shape, -1, np.int64)
    seen = np.zeros(out_shape, bool)
    sizes = [a.size for a in axes]
    place = [math.prod(sizes[k + 1:]) for k in range(len(axes))] if storage_order == 0 else \
        [math.prod(sizes[:k]) for k in range(len(axes))]
    for _, value, inside, positions in _taps(X, axes):
        better = value > best
        if X.dtype.kind == "f":
            better |= np.isnan(value) & ~np.isnan(best)
        update = inside & (better | ~seen)
        best = np.where(update, value, best)
        spatial = sum(p.reshape((-1,) + (1,) * (len(axes) - k - 1)) * place[k] for k, p in enumerate(positions))
        where = np.where(update, spatial, where)
        seen |= inside
    plane = math.prod(sizes)
    first = np.arange(X.shape[0] * X.shape[1], dtype=np.int64).reshape(X.shape[:2] + (1,) * len(axes)) * plane
    return best, np.where(seen, where + first, -1)


@interprets("AveragePool")
def run_averagepool(X: np.ndarray, *, kernel_shape=None, auto_pad: str = "NOTSET", pads=None, strides=None,
                    dilations=None, ceil_mode: int = 0, count_include_pad: int = 0) -> np.ndarray:
    """Y = the sum of each window's taps inside X divided by their count (count_include_pad=1: by the
    count of taps inside X and its pads; taps past the end pads, in ceil mode, never count)."""
    _float_input(X, "AveragePool")
    axes = pool_axes(X.shape, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    total = np.zeros(X.shape[:2] + tuple(a.out for a in axes), X.dtype)
    for _, value, inside, _ in _taps(X, axes):
        total += np.where(inside, value, X.dtype.type(0))
    with np.errstate(invalid="ignore", divide="ignore"):  # a window of padding alone: 0 / 0
        return (total / _counts(axes, bool(count_include_pad)).astype(X.dtype)).astype(X.dtype)


@interprets("LpPool")
def run_lppool(X: np.ndarray, *, kernel_shape=None, auto_pad: str = "NOTSET", pads=None, strides=None,
               dilations=None, ceil_mode: int = 0, p: float = 2) -> np.ndarray:
    """Y = (sum of |x|^p over each window's taps inside X) ^ (1/p) (pads add nothing)"""
    _float_input(X, "LpPool")
    if not p > 0:
        raise OpError(f"p must be positive, got {p}")
    axes = pool_axes(X.shape, kernel_shape, strides, dilations, pads, auto_pad, ceil_mode)
    total = np.zeros(X.shape[:2] + tuple(a.out for a in axes), X.dtype)
    for _, value, inside, _ in _taps(X, axes):
        total += np.where(inside, _abs_power(value, p), X.dtype.type(0))
    return _root(total, p)


def _abs_power(x: np.ndarray, p: float) -> np.ndarray:
    return np.abs(x) if p == 1 else x * x if p == 2 else np.abs(x) ** x.dtype.type(p)


def _root(x: np.ndarray, p: float) -> np.ndarray:
    return x if p == 1 else np.sqrt(x) if p == 2 else x ** x.dtype.type(1.0 / p)


@interprets("GlobalAveragePool")
def run_globalaveragepool(X: np.ndarray) -> np.ndarray:
    """Y = the mean of X over every axis after N and C, kept as size 1"""
    return run_reducemean(X, np.arange(2, X.ndim), keepdims=1, noop_with_empty_axes=1)


@interprets("GlobalMaxPool")
def run_globalmaxpool(X: np.ndarray) -> np.ndarray:
    """Y = the maximum of X over every axis after N and C, kept as size 1"""
    return run_reducemax(X, np.arange(2, X.ndim), keepdims=1, noop_with_empty_axes=1)


# ---------------------------------------------------------------------------------------------
# normalisation


def _per_channel(v: np.ndarray, what: str, channels: int, dtype: np.dtype) -> np.ndarray:
    """A 1-D input of one value per channel (axis 1 of the data), checked, in `dtype`."""
    v = np.asarray(v)
    if v.ndim != 1:
        raise OpError(f"{what} has shape {v.shape}; it must be 1-D, one value per channel (axis 1 of the input): "
                      f"{channels}")
    if v.shape[0] != channels:
        raise OpError(f"{what} has {v.shape[0]} values; it must hold one per channel (axis 1 of the input): "
                      f"{channels}")
    return v.astype(dtype, copy=False)


def _channels(x: np.ndarray, op: str) -> int:
    if x.ndim < 2:
        raise OpError(f"{op} needs an input of rank 2 or more (N, C, ...); it has shape {x.shape}")
    return x.shape[1]


def _along_channels(v: np.ndarray, rank: int) -> np.ndarray:
    return v.reshape((-1,) + (1,) * (rank - 2))


@interprets("BatchNormalization")
def run_batchnormalization(X: np.ndarray, scale: np.ndarray, B: np.ndarray, input_mean: np.ndarray,
                           input_var: np.ndarray, *, epsilon: float = 1e-5, momentum: float = 0.9,
                           training_mode: int = 0) -> np.ndarray:
    """Y = X * a + b per channel (axis 1), a = scale / sqrt(var + epsilon), b = B - mean * a:
    inference with the stored statistics (momentum only matters in training)"""
    if training_mode:
        raise OpError("training_mode=1 is not supported: rnnloop runs inference; export the model in "
                      "eval mode (training_mode=0)")
    _float_input(X, "BatchNormalization")
    c, dtype = _channels(X, "BatchNormalization"), X.dtype
    scale, bias, mean, var = (_per_channel(v, what, c, dtype) for v, what in
                              ((scale, "scale"), (B, "B"), (input_mean, "input_mean"), (input_var, "input_var")))
    a = scale / np.sqrt(var + dtype.type(epsilon))
    b = bias - mean * a
    return X * _along_channels(a, X.ndim) + _along_channels(b, X.ndim)


def _stash(stash_type: int) -> np.dtype:
    try:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(stash_type))
    except (KeyError, ValueError, TypeError):
        dtype = None
    if dtype is None or dtype.kind != "f":
        raise OpError(f"stash_type {stash_type} is not an ONNX float type (1: float, 11: double, 10: float16)")
    return dtype


def _standardized(x: np.ndarray, axes: tuple[int, ...], epsilon: float,
                  dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x - mean) / sqrt(var + epsilon) over axes, in `dtype`; with the mean and 1 / sqrt(var + epsilon)."""
    x = x.astype(dtype, copy=False)
    mean = np.mean(x, axis=axes, keepdims=True, dtype=dtype)
    d = x - mean
    var = np.mean(d * d, axis=axes, keepdims=True, dtype=dtype)
    inv = dtype.type(1) / np.sqrt(var + dtype.type(epsilon))
    return d * inv, mean, inv


@interprets("InstanceNormalization")
def run_instancenormalization(input: np.ndarray, scale: np.ndarray, B: np.ndarray, *,
                              epsilon: float = 1e-5) -> np.ndarray:
    """y = scale * (x - mean) / sqrt(var + epsilon) + B, mean and var per instance and channel over
    the axes after N and C"""
    _float_input(input, "InstanceNormalization")
    c, rank = _channels(input, "InstanceNormalization"), input.ndim
    scale, bias = (_per_channel(v, what, c, input.dtype) for v, what in ((scale, "scale"), (B, "B")))
    normalized, _, _ = _standardized(input, tuple(range(2, rank)), epsilon, input.dtype)
    return normalized * _along_channels(scale, rank) + _along_channels(bias, rank)


def _broadcasts_to(v: np.ndarray, shape: tuple[int, ...], what: str) -> np.ndarray:
    """v checked to broadcast to `shape` one way (ONNX's unidirectional broadcasting)."""
    if v.ndim > len(shape) or any(d not in (1, s) for d, s in zip(v.shape[::-1], shape[::-1])):
        raise OpError(f"{what} of shape {v.shape} does not broadcast to the input's shape {shape}")
    return v


@interprets("LayerNormalization")
def run_layernormalization(X: np.ndarray, Scale: np.ndarray, B: np.ndarray | None = None, *, axis: int = -1,
                           epsilon: float = 1e-5, stash_type: int = 1) -> tuple[np.ndarray, ...]:
    """Y = (X - mean) / sqrt(var + epsilon) * Scale + B over the axes from `axis` on, standardised in
    the stash type and cast back before the scale; Mean and InvStdDev in the stash type, shaped
    like X with those axes of size 1"""
    _float_input(X, "LayerNormalization")
    dtype = _stash(stash_type)
    axis = as_axis(axis, X.ndim)
    normalized, mean, inv = _standardized(X, tuple(range(axis, X.ndim)), epsilon, dtype)
    y = normalized.astype(X.dtype) * _broadcasts_to(Scale, X.shape, "Scale").astype(X.dtype, copy=False)
    if B is not None:
        y = y + _broadcasts_to(B, X.shape, "B").astype(X.dtype, copy=False)
    return y.astype(X.dtype, copy=False), mean, inv


@interprets("GroupNormalization")
def run_groupnormalization(X: np.ndarray, scale: np.ndarray, bias: np.ndarray, *, num_groups: int | None = None,
                           epsilon: float = 1e-5, stash_type: int = 1) -> np.ndarray:
    """y = (x - mean) / sqrt(var + epsilon) * scale[c] + bias[c], mean and var per instance and group
    of C / num_groups consecutive channels (opset 21 form: scale and bias per channel), standardised
    in the stash type"""
    _float_input(X, "GroupNormalization")
    c = _channels(X, "GroupNormalization")
    if num_groups is None or num_groups < 1 or c % num_groups:
        raise OpError(f"num_groups {num_groups} does not divide the {c} channels of the input (axis 1)")
    scale, bias = (_per_channel(v, what, c, X.dtype) for v, what in ((scale, "scale"), (bias, "bias")))
    grouped = X.reshape((X.shape[0], num_groups, -1))
    normalized, _, _ = _standardized(grouped, (2,), epsilon, _stash(stash_type))
    y = normalized.astype(X.dtype).reshape(X.shape)
    return y * _along_channels(scale, X.ndim) + _along_channels(bias, X.ndim)


@interprets("LpNormalization")
def run_lpnormalization(input: np.ndarray, *, axis: int = -1, p: int = 2) -> np.ndarray:
    """y = x / ||x||_p along axis (p 1 or 2); a lane of norm 0 gives 0"""
    _float_input(input, "LpNormalization")
    if p not in (1, 2):
        raise OpError(f"p={p} is not supported: LpNormalization takes p 1 or 2")
    axis = as_axis(axis, input.ndim)
    norm = (np.sum(np.abs(input), axis=axis, keepdims=True) if p == 1
            else np.sqrt(np.sum(input * input, axis=axis, keepdims=True)))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(norm == 0, input.dtype.type(0), input / norm).astype(input.dtype, copy=False)


@interprets("MeanVarianceNormalization")
def run_meanvariancenormalization(X: np.ndarray, *, axes=(0, 2, 3)) -> np.ndarray:
    """Y = (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9), the expectations over axes (the spec's function)"""
    _float_input(X, "MeanVarianceNormalization")
    axes = tuple(as_axes(axes, X.ndim))
    mean = np.mean(X, axis=axes, keepdims=True, dtype=X.dtype)
    mean_of_squares = np.mean(X * X, axis=axes, keepdims=True, dtype=X.dtype)
    std = np.sqrt(mean_of_squares - mean * mean)
    return (X - mean) / (std + X.dtype.type(MVN_EPSILON))
