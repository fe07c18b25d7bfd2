"""Interpreter functions for the convolutions, Conv and ConvTranspose, on any spatial rank.

Both read their attributes through `conv_geometry` / `transpose_geometry`, which the code generator
(rnnloop/codegen/conv.py) mirrors as generated expressions: one statement of the padding rules.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..errors import OpError
from .registry import interprets

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
FLOATS = ("float16", "float32", "float64")


def same_pads(total: int, auto_pad: str) -> tuple[int, int]:
    """(begin, end) of a SAME padding of `total` elements: the odd one at the end for SAME_UPPER, at
    the beginning for SAME_LOWER (floor division, so that a negative total, which ConvTranspose's
    output_shape can ask for, extends the end for SAME_LOWER and NOTSET as the spec's formula does)."""
    if auto_pad == "SAME_UPPER":
        return total // 2, total - total // 2
    return total - total // 2, total // 2


def _ints(value, rank: int, default: int, what: str, minimum: int) -> list[int]:
    """A per-axis attribute (strides, dilations, output_padding) of `rank` values, checked."""
    values = [default] * rank if value is None else [int(v) for v in value]
    if len(values) != rank:
        raise OpError(f"{what} has {len(values)} values for {rank} spatial axes")
    if any(v < minimum for v in values):
        raise OpError(f"{what} {values} must all be >= {minimum}")
    return values


def _check_common(X: np.ndarray, W: np.ndarray, B, *, auto_pad: str, group: int, kernel_shape) -> int:
    """Checks shared by Conv and ConvTranspose; returns the spatial rank."""
    if X.ndim < 3:
        raise OpError(f"X has rank {X.ndim}; a convolution needs [N, C, spatial...] with at least one spatial axis")
    if W.ndim != X.ndim:
        raise OpError(f"W has rank {W.ndim} but X has rank {X.ndim}; they must be equal")
    if X.dtype.name not in FLOATS or W.dtype != X.dtype:
        raise OpError(f"X is {X.dtype} and W is {W.dtype}; both must be one of {', '.join(FLOATS)}")
    if auto_pad not in AUTO_PADS:
        raise OpError(f"auto_pad '{auto_pad}' is not one of {', '.join(AUTO_PADS)}")
    if group < 1:
        raise OpError(f"group {group} must be >= 1")
    rank = X.ndim - 2
    if kernel_shape is not None and [int(k) for k in kernel_shape] != list(W.shape[2:]):
        raise OpError(f"kernel_shape {[int(k) for k in kernel_shape]} does not match W's spatial shape "
                      f"{list(W.shape[2:])}")
    if B is not None and B.dtype != X.dtype:
        raise OpError(f"B is {B.dtype} but X is {X.dtype}")
    return rank


def _pads(pads, rank: int) -> tuple[list[int], list[int]]:
    values = _ints(pads, 2 * rank, 0, "pads", 0)
    return values[:rank], values[rank:]


def conv_geometry(sizes, kernel, strides, dilations, pads, auto_pad: str) -> tuple[list[int], list[int]]:
    """(padding before each spatial axis, output size of each) of a Conv; OpError when the kernel
    does not fit the padded input."""
    rank = len(sizes)
    begin, end = _pads(pads, rank) if auto_pad == "NOTSET" else ([0] * rank, [0] * rank)
    out = []
    for a in range(rank):
        span = (kernel[a] - 1) * dilations[a] + 1
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            total = max(0, (-(-sizes[a] // strides[a]) - 1) * strides[a] + span - sizes[a])
            begin[a], end[a] = same_pads(total, auto_pad)
        padded = sizes[a] + begin[a] + end[a]
        if padded < span:
            raise OpError(f"the kernel spans {span} elements of spatial axis {a}, more than the {padded} of the "
                          f"padded input ({sizes[a]} + pads {begin[a]}, {end[a]})")
        out.append((padded - span) // strides[a] + 1)
    return begin, out


def transpose_geometry(sizes, kernel, strides, dilations, pads, output_padding, output_shape,
                       auto_pad: str) -> tuple[list[int], list[int]]:
    """(elements cut from the beginning of each spatial axis of the full result, output size of each) of
    a ConvTranspose. The full result has s * (in - 1) + output_padding + (k - 1) * d + 1 elements; a
    negative cut or an output past its end reads zeros (an output_shape larger than it)."""
    rank = len(sizes)
    full = [strides[a] * (sizes[a] - 1) + output_padding[a] + (kernel[a] - 1) * dilations[a] + 1
            for a in range(rank)]
    if output_shape is not None:
        return [same_pads(full[a] - output_shape[a], auto_pad)[0] for a in range(rank)], list(output_shape)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        # in * strides elements, as far as pads (never negative) reach: a kernel narrower than the
        # stride leaves fewer, as ONNX's shape inference and onnxruntime have it
        cut = [max(0, full[a] - sizes[a] * strides[a]) for a in range(rank)]
        return [same_pads(c, auto_pad)[0] for c in cut], [full[a] - c for a, c in enumerate(cut)]
    begin, end = _pads(pads, rank) if auto_pad == "NOTSET" else ([0] * rank, [0] * rank)
    out = [full[a] - begin[a] - end[a] for a in range(rank)]
    if any(o < 0 for o in out):
        raise OpError(f"pads {begin + end} remove more than the {full} elements of the full result")
    return begin, out


def _bias(y: np.ndarray, B, M: int) -> np.ndarray:
    if B is None:
        return y
    if B.shape != (M,):
        raise OpError(f"B has shape {list(B.shape)}; it must be [{M}], one value per output channel")
    return y + B.astype(y.dtype).reshape((M,) + (1,) * (y.ndim - 2))


def _work_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype == np.float16 else dtype  # float16 accumulates in float32


@interprets("Conv")
def run_conv(X: np.ndarray, W: np.ndarray, B: np.ndarray | None = None, *, auto_pad: str = "NOTSET",
             dilations=None, group: int = 1, kernel_shape=None, pads=None, strides=None) -> np.ndarray:
    """y[n, m] = B[m] + sum over the group's channels c and kernel offsets j of
    W[m, c, j] * x_padded[n, c, o * strides + j * dilations]"""
    rank = _check_common(X, W, B, auto_pad=auto_pad, group=group, kernel_shape=kernel_shape)
    N, C = X.shape[:2]
    M, Cg = W.shape[:2]
    if C != Cg * group:
        raise OpError(f"X has {C} channels but W expects {Cg * group} ({Cg} per group x group {group}); "
                      f"W's shape is {list(W.shape)}")
    if M % group:
        raise OpError(f"W has {M} output channels, which group {group} does not divide")
    strides = _ints(strides, rank, 1, "strides", 1)
    dilations = _ints(dilations, rank, 1, "dilations", 1)
    kernel = list(W.shape[2:])
    begin, out = conv_geometry(list(X.shape[2:]), kernel, strides, dilations, pads, auto_pad)
    work = _work_dtype(X.dtype)
    ends = [(out[a] - 1) * strides[a] + (kernel[a] - 1) * dilations[a] + 1 - X.shape[2 + a] - begin[a]
            for a in range(rank)]
    xp = np.pad(X.astype(work, copy=False), [(0, 0), (0, 0)] + [(b, max(e, 0)) for b, e in zip(begin, ends)])
    # The columns: for each kernel offset, the strided window of the padded input it meets.
    K = math.prod(kernel)
    cols = np.empty((N, C, K) + tuple(out), work)
    for k, offset in enumerate(itertools.product(*(range(s) for s in kernel))):
        window = tuple(slice(j * d, j * d + (o - 1) * s + 1, s) for j, d, o, s in zip(offset, dilations, out, strides))
        cols[:, :, k] = xp[(slice(None), slice(None)) + window]
    L = math.prod(out)
    cols = cols.reshape(N, group, Cg * K, L)
    weights = W.astype(work, copy=False).reshape(group, M // group, Cg * K)
    y = np.matmul(weights[None], cols).reshape((N, M) + tuple(out))
    return _bias(y, B, M).astype(X.dtype, copy=False)


@interprets("ConvTranspose")
def run_conv_transpose(X: np.ndarray, W: np.ndarray, B: np.ndarray | None = None, *, auto_pad: str = "NOTSET",
                       dilations=None, group: int = 1, kernel_shape=None, output_padding=None,
                       output_shape=None, pads=None, strides=None) -> np.ndarray:
    """The gradient of Conv by its input: each x[n, c, i] adds x * W[c, m, j] to
    full[n, m, i * strides + j * dilations]; y is full cut by the pads (or to output_shape), plus B"""
    rank = _check_common(X, W, B, auto_pad=auto_pad, group=group, kernel_shape=kernel_shape)
    N, C = X.shape[:2]
    if W.shape[0] != C:
        raise OpError(f"X has {C} channels but W has {W.shape[0]} (W is [C, M / group, kernel...]: "
                      f"{list(W.shape)})")
    if C % group:
        raise OpError(f"X has {C} channels, which group {group} does not divide")
    strides = _ints(strides, rank, 1, "strides", 1)
    dilations = _ints(dilations, rank, 1, "dilations", 1)
    output_padding = _ints(output_padding, rank, 0, "output_padding", 0)
    if output_shape is not None:
        output_shape = [int(v) for v in output_shape]
        if len(output_shape) == rank + 2:  # some exporters give the whole shape: its spatial part counts
            output_shape = output_shape[2:]
        output_shape = _ints(output_shape, rank, 0, "output_shape", 0)
    Mg = W.shape[1]
    M, Cg = Mg * group, C // group
    kernel = list(W.shape[2:])
    sizes = list(X.shape[2:])
    begin, out = transpose_geometry(sizes, kernel, strides, dilations, pads, output_padding, output_shape, auto_pad)
    work = _work_dtype(X.dtype)
    K, L = math.prod(kernel), math.prod(sizes)
    weights = W.astype(work, copy=False).reshape(group, Cg, Mg * K).transpose(0, 2, 1)
    cols = np.matmul(weights[None], X.astype(work, copy=False).reshape(N, group, Cg, L))
    cols = cols.reshape((N, M, K) + tuple(sizes))
    # The full result, only as far as the output reads it: [lo, hi) of each axis, by its index in full.
    lo = [max(b, 0) for b in begin]
    hi = [max(min(b + o, strides[a] * (sizes[a] - 1) + (kernel[a] - 1) * dilations[a] + 1), lo[a])
          for a, (b, o) in enumerate(zip(begin, out))]
    full = np.zeros((N, M) + tuple(h - l for l, h in zip(lo, hi)), work)
    for k, offset in enumerate(itertools.product(*(range(s) for s in kernel))):
        src, dst = [slice(None)] * 2, [slice(None)] * 2
        for a in range(rank):
            first = offset[a] * dilations[a]  # full index of input 0
            i0 = max(0, -(-(lo[a] - first) // strides[a]))  # the inputs landing in [lo, hi)
            i1 = min(sizes[a], -(-(hi[a] - first) // strides[a]))
            i1 = max(i0, i1)
            src.append(slice(i0, i1))
            start = first + i0 * strides[a] - lo[a]
            dst.append(slice(start, start + (i1 - i0 - 1) * strides[a] + 1 if i1 > i0 else start, strides[a]))
        full[tuple(dst)] += cols[(slice(None), slice(None), k) + tuple(src[2:])]
    y = np.zeros((N, M) + tuple(out), work)
    at = tuple(slice(l - b, h - b) for l, h, b in zip(lo, hi, begin))
    y[(slice(None), slice(None)) + at] = full
    return _bias(y, B, M).astype(X.dtype, copy=False)
