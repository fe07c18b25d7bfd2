"""Interpreter functions for the quantisation ops: QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear, MatMulInteger and ConvInteger (the executable spec of rnnloop/codegen/quant.py).

Arithmetic as the ONNX spec and onnxruntime have it: x / scale in the scale's dtype (or `precision`),
rounded half to even, plus the zero point, saturated to the output type; integer products accumulate
in int32 after the zero points are subtracted. Scales and zero points are per tensor (a scalar or
one value), per axis (1-D along `axis`) or blocked (x's rank, `axis` cut into blocks of
`block_size`). The 4-bit, 2-bit and 8-/4-bit float types are ml_dtypes' (what onnx reads them as);
those run here only (kernels compute in the usual integer and float dtypes).

One decision the spec leaves open: DynamicQuantizeLinear of an all-zero input. The spec's formula
gives the scale 0 (then x / 0) and onnx's reference 1/255; rnnloop returns 1.0, as onnxruntime's
kernels do (the quantised values are 0 either way).
"""

from __future__ import annotations

import numpy as np

from ..errors import OpError
from .args import as_axis
from .conv_ops import run_conv
from .registry import interprets

# Integer quantised types and their ranges (the 4- and 2-bit ones by ml_dtypes' names).
INT_RANGES: dict[str, tuple[int, int]] = {
    "uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767),
    "uint4": (0, 15), "int4": (-8, 7), "uint2": (0, 3), "int2": (-2, 1),
}
FLOAT8 = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
SMALL_FLOATS = FLOAT8 + ("float4_e2m1fn",)
SCALES = ("float32", "float16", "bfloat16", "float64")


def _name(dtype) -> str:
    return np.dtype(dtype).name


def quantised_dtype(zero_point, output_dtype) -> np.dtype:
    """The output dtype of a QuantizeLinear: the zero point's, else output_dtype, else uint8."""
    if zero_point is not None:
        if output_dtype is not None and np.dtype(output_dtype) != zero_point.dtype:
            raise OpError(f"output_dtype {np.dtype(output_dtype)} differs from the zero point's type "
                          f"{zero_point.dtype}")
        dtype = zero_point.dtype
    else:
        dtype = np.dtype(output_dtype) if output_dtype is not None else np.dtype(np.uint8)
    if _name(dtype) not in INT_RANGES and _name(dtype) not in SMALL_FLOATS:
        raise OpError(f"{dtype} is not a quantised type (types: {', '.join([*INT_RANGES, *SMALL_FLOATS])})")
    return dtype


def broadcast_parameter(value: np.ndarray, shape: tuple[int, ...], axis: int, block_size: int,
                        what: str) -> np.ndarray:
    """A scale or zero point shaped to broadcast against x of `shape`: per tensor, per axis or blocked."""
    rank = len(shape)
    if value.ndim == 0 or (value.ndim == 1 and value.size == 1 and not block_size):
        return value.reshape(())
    axis = as_axis(axis, rank)
    if not block_size:
        if value.ndim != 1 or value.shape[0] != shape[axis]:
            raise OpError(f"{what} has shape {list(value.shape)}; per-axis quantisation along axis {axis} needs "
                          f"[{shape[axis]}] (or one value, per tensor)")
        return value.reshape([shape[axis] if a == axis else 1 for a in range(rank)])
    if block_size < 0:
        raise OpError(f"block_size {block_size} must be positive")
    blocks = -(-shape[axis] // block_size)
    expected = [blocks if a == axis else shape[a] for a in range(rank)]
    if list(value.shape) != expected:
        raise OpError(f"{what} has shape {list(value.shape)}; blocks of {block_size} along axis {axis} of x "
                      f"{list(shape)} need {expected}")
    return np.repeat(value, block_size, axis=axis).take(range(shape[axis]), axis=axis)


def _float_zero(zero_point, what: str) -> None:
    if zero_point is not None and np.any(zero_point.astype(np.float32) != 0):
        raise OpError(f"the zero point of {what} must be 0 (a float type has no zero point)")


@interprets("QuantizeLinear")
def run_quantizelinear(x: np.ndarray, y_scale: np.ndarray, y_zero_point: np.ndarray | None = None, *,
                       axis: int = 1, saturate: int = 1, block_size: int = 0, output_dtype=None,
                       precision=None) -> np.ndarray:
    """y = saturate(round_half_even(x / y_scale) + y_zero_point), per tensor, axis or block"""
    dtype = quantised_dtype(y_zero_point, output_dtype)
    if _name(y_scale.dtype) not in SCALES:
        raise OpError(f"y_scale is {y_scale.dtype}; it must be a float type")
    work = np.dtype(precision) if precision is not None else y_scale.dtype
    scale = broadcast_parameter(y_scale, x.shape, axis, block_size, "y_scale")
    if work == np.float16 or _name(work) == "bfloat16":  # (computed in float32, rounded to the precision)
        q = (x.astype(np.float32) / scale.astype(np.float32)).astype(work).astype(np.float32)
    else:
        q = x.astype(work, copy=False) / scale.astype(work, copy=False)
    if _name(dtype) in INT_RANGES:
        lo, hi = INT_RANGES[_name(dtype)]
        q = np.rint(q)
        if y_zero_point is not None:
            q = q + broadcast_parameter(y_zero_point, x.shape, axis, block_size, "y_zero_point").astype(q.dtype)
        return np.clip(q, lo, hi).astype(dtype)
    _float_zero(y_zero_point, "a float quantisation")
    q = q.astype(np.float32, copy=False)
    if saturate and _name(dtype) in FLOAT8:
        import ml_dtypes  # (onnx's dependency: the float8 types are its)
        big = float(ml_dtypes.finfo(dtype).max)
        q = np.where(np.isinf(q), np.sign(q) * big, np.clip(q, -big, big))  # (NaN stays NaN)
    return q.astype(dtype)


@interprets("DequantizeLinear")
def run_dequantizelinear(x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray | None = None, *,
                         axis: int = 1, block_size: int = 0, output_dtype=None) -> np.ndarray:
    """y = (x - x_zero_point) * x_scale, computed in float32, in the scale's dtype (or output_dtype)"""
    if _name(x_scale.dtype) not in SCALES:
        raise OpError(f"x_scale is {x_scale.dtype}; it must be a float type")
    kind = _name(x.dtype)
    if kind not in INT_RANGES and kind not in SMALL_FLOATS and kind != "int32":
        raise OpError(f"x is {x.dtype}, not a quantised type")
    scale = broadcast_parameter(x_scale, x.shape, axis, block_size, "x_scale")
    if kind in INT_RANGES or kind == "int32":
        if x_zero_point is not None and x_zero_point.dtype != x.dtype:
            raise OpError(f"x_zero_point is {x_zero_point.dtype} but x is {x.dtype}; they must be one type")
        # (x - zero point) is exact in float64; rounded once to float32 as onnxruntime's int32 difference is
        dx = x.astype(np.float64) if kind == "int32" else x.astype(np.float32)
        if x_zero_point is not None:
            dx = dx - broadcast_parameter(x_zero_point, x.shape, axis, block_size, "x_zero_point").astype(dx.dtype)
        dx = dx.astype(np.float32)
    else:
        _float_zero(x_zero_point, f"{x.dtype} input")
        dx = x.astype(np.float32)
    y = dx * (scale.astype(np.float32) if _name(scale.dtype) in ("float16", "bfloat16") else scale)
    out = np.dtype(output_dtype) if output_dtype is not None else x_scale.dtype
    return y.astype(out)


def dynamic_parameters(x: np.ndarray) -> tuple[np.float32, int]:
    """(scale, zero point) of onnxruntime's dynamic uint8 quantisation of x: the range [min, max]
    widened to hold 0, over 255 steps; the zero point rounded half to even, inside [0, 255]."""
    if x.size == 0:
        lo = hi = np.float32(0)
    else:
        lo, hi = np.float32(min(np.min(x), 0)), np.float32(max(np.max(x), 0))
    scale = np.float32(1.0) if lo == hi else np.float32((hi - lo) / np.float32(255))
    zero = np.float32(0) - lo / scale
    return scale, int(np.rint(np.float32(min(max(zero, np.float32(0)), np.float32(255)))))


@interprets("DynamicQuantizeLinear")
def run_dynamicquantizelinear(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y uint8, y_scale, y_zero_point): x quantised by the scale and zero point of its range"""
    if x.dtype != np.float32:
        raise OpError(f"x is {x.dtype}; DynamicQuantizeLinear takes float32")
    if x.size and not np.isfinite(x).all():
        raise OpError("x holds NaN or infinity, which have no quantised range")
    scale, zero = dynamic_parameters(x)
    y = np.clip(np.rint(x / scale) + np.float32(zero), 0, 255).astype(np.uint8)
    return y, np.asarray(scale, np.float32), np.asarray(zero, np.uint8)


def _integer(x: np.ndarray, what: str) -> None:
    if x.dtype not in (np.uint8, np.int8):
        raise OpError(f"{what} is {x.dtype}; it must be uint8 or int8")


def _zero_point(zp: np.ndarray | None, x: np.ndarray, what: str) -> np.ndarray | int:
    if zp is None:
        return 0
    if zp.dtype != x.dtype:
        raise OpError(f"{what} is {zp.dtype} but its tensor is {x.dtype}; they must be one type")
    return zp.astype(np.int32)


@interprets("MatMulInteger")
def run_matmulinteger(A: np.ndarray, B: np.ndarray, a_zero_point: np.ndarray | None = None,
                      b_zero_point: np.ndarray | None = None) -> np.ndarray:
    """Y = (A - a_zero_point) @ (B - b_zero_point) in int32 (NumPy matmul broadcasting); a_zero_point
    per tensor or per row of A, b_zero_point per tensor or per column of B"""
    _integer(A, "A")
    _integer(B, "B")
    if A.ndim < 1 or B.ndim < 1:
        raise OpError("A and B must have rank 1 or more")
    za, zb = _zero_point(a_zero_point, A, "a_zero_point"), _zero_point(b_zero_point, B, "b_zero_point")
    a, b = A.astype(np.int32), B.astype(np.int32)
    if np.ndim(za) and np.size(za) > 1:
        if za.ndim != 1 or A.ndim < 2 or za.shape[0] != A.shape[-2]:
            raise OpError(f"a_zero_point has shape {list(za.shape)}; per row it needs [{A.shape[-2]}]")
        za = za.reshape(-1, 1)
    if np.ndim(zb) and np.size(zb) > 1:
        if zb.ndim != 1 or B.ndim < 2 or zb.shape[0] != B.shape[-1]:
            raise OpError(f"b_zero_point has shape {list(zb.shape)}; per column it needs [{B.shape[-1]}]")
    elif np.ndim(zb):
        zb = zb.reshape(())
    if np.ndim(za) and np.size(za) == 1:
        za = za.reshape(())
    try:
        return np.matmul(a - za, b - zb).astype(np.int32)
    except ValueError as e:
        raise OpError(f"A {list(A.shape)} and B {list(B.shape)} do not multiply: {e}") from None


@interprets("ConvInteger")
def run_convinteger(x: np.ndarray, w: np.ndarray, x_zero_point: np.ndarray | None = None,
                    w_zero_point: np.ndarray | None = None, *, auto_pad: str = "NOTSET", dilations=None,
                    group: int = 1, kernel_shape=None, pads=None, strides=None) -> np.ndarray:
    """y = Conv(x - x_zero_point, w - w_zero_point) in int32 (padding reads the zero point: 0 after
    it is subtracted); w_zero_point per tensor or per output channel"""
    _integer(x, "x")
    _integer(w, "w")
    zx = _zero_point(x_zero_point, x, "x_zero_point")
    zw = _zero_point(w_zero_point, w, "w_zero_point")
    if np.size(zx) != 1:
        raise OpError(f"x_zero_point has {np.size(zx)} values; it must be one (per tensor)")
    zx = np.reshape(zx, ())
    if np.size(zw) > 1:
        if np.ndim(zw) != 1 or zw.shape[0] != w.shape[0]:
            raise OpError(f"w_zero_point has shape {list(np.shape(zw))}; per output channel it needs [{w.shape[0]}]")
        zw = zw.reshape((-1,) + (1,) * (w.ndim - 1))
    else:
        zw = np.reshape(zw, ())
    # Exact in float64 (|products| < 2^16, sums of far fewer than 2^37 of them); then int32.
    y = run_conv((x.astype(np.int32) - zx).astype(np.float64), (w.astype(np.int32) - zw).astype(np.float64),
                 auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape, pads=pads,
                 strides=strides)
    return np.rint(y).astype(np.int32)


