"""Interpreter functions for the activations and small data movers of recurrent models' front ends:
Gelu, HardSwish, Mish, Celu, Shrink, Hardmax, DepthToSpace, SpaceToDepth, ReverseSequence."""

from __future__ import annotations

import math

import numpy as np

from ..errors import OpError
from .args import as_axis, as_ints
from .registry import interprets


def _work(x: np.ndarray) -> np.ndarray:
    """x in the dtype the activations compute in: float16 and bfloat16 in float32 (rounded once at
    the end, as onnxruntime does), float32 and float64 as they are."""
    if x.dtype.kind not in "fV" and x.dtype.name != "bfloat16":
        raise OpError(f"the input is {x.dtype}; this activation takes floating-point tensors")
    return x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)


def _special():
    import scipy.special  # imported when first needed: it takes longer than the rest of `import rnnloop`
    return scipy.special


# ---------------------------------------------------------------------------------------------
# activations


@interprets("Gelu")
def run_gelu(X: np.ndarray, *, approximate: str = "none") -> np.ndarray:
    """Y = 0.5 X (1 + erf(X / sqrt 2)); with approximate="tanh",
    0.5 X (1 + tanh(sqrt(2 / pi) (X + 0.044715 X^3)))"""
    x = _work(X)
    t = x.dtype.type
    # 1 + erf(u) is erfc(-u) and 1 + tanh(z) is 2 sigmoid(2 z): forms without cancellation where x < 0
    if approximate == "none":
        y = t(0.5) * x * _special().erfc(-(x * t(1 / math.sqrt(2))))
    elif approximate == "tanh":
        z = t(math.sqrt(2 / math.pi)) * (x + t(0.044715) * x * x * x)
        y = x * _special().expit(z + z)
    else:
        raise OpError(f"approximate '{approximate}' is not one of 'none', 'tanh'")
    return np.asarray(y).astype(X.dtype, copy=False)


@interprets("HardSwish")
def run_hardswish(X: np.ndarray) -> np.ndarray:
    """Y = X * max(0, min(1, X / 6 + 0.5))"""
    x = _work(X)
    t = x.dtype.type
    gate = np.minimum(np.maximum(x * t(1 / 6) + t(0.5), t(0)), t(1))
    return np.asarray(x * gate).astype(X.dtype, copy=False)


@interprets("Mish")
def run_mish(X: np.ndarray) -> np.ndarray:
    """Y = X * tanh(ln(1 + exp(X)))"""
    x = _work(X)
    softplus = np.logaddexp(x, x.dtype.type(0))  # no overflow for large X
    return np.asarray(x * np.tanh(softplus)).astype(X.dtype, copy=False)


@interprets("Celu")
def run_celu(X: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    """Y = max(0, X) + min(0, alpha * (exp(X / alpha) - 1))"""
    if alpha == 0:
        raise OpError("alpha must not be 0 (Celu divides by it)")
    x = _work(X)
    t = x.dtype.type
    with np.errstate(over="ignore"):  # exp of a large X: +inf, which min(0, .) discards
        negative = np.minimum(t(0), t(alpha) * np.expm1(x / t(alpha)))
    return np.asarray(np.maximum(t(0), x) + negative).astype(X.dtype, copy=False)


@interprets("Shrink")
def run_shrink(input: np.ndarray, *, bias: float = 0.0, lambd: float = 0.5) -> np.ndarray:
    """output = input + bias where input < -lambd, input - bias where input > lambd, else 0
    (integers are computed in float64 and truncated back, as the ONNX reference does)"""
    x = input
    if x.dtype.kind in "iu":
        wide = x.astype(np.float64)
        y = np.where(wide < -lambd, wide + bias, np.where(wide > lambd, wide - bias, 0.0))
        with np.errstate(invalid="ignore"):
            return y.astype(x.dtype)
    w = _work(x)
    t = w.dtype.type
    y = np.where(w < t(-lambd), w + t(bias), np.where(w > t(lambd), w - t(bias), t(0)))
    return np.asarray(y).astype(x.dtype, copy=False)


@interprets("Hardmax")
def run_hardmax(input: np.ndarray, *, axis: int = -1) -> np.ndarray:
    """output = 1 at the first maximum along axis (a NaN counts as the maximum), 0 elsewhere"""
    axis = as_axis(axis, input.ndim)
    out = np.zeros_like(input)
    if input.size:
        first = np.expand_dims(np.argmax(input, axis=axis), axis)
        np.put_along_axis(out, first, input.dtype.type(1), axis=axis)
    return out


# ---------------------------------------------------------------------------------------------
# data movement


def _blocks(x: np.ndarray, blocksize: int, mode: str, what: str) -> None:
    if x.ndim != 4:
        raise OpError(f"{what} takes a tensor of rank 4 (N, C, H, W), got shape {x.shape}")
    if blocksize < 1:
        raise OpError(f"blocksize must be at least 1, got {blocksize}")
    if mode not in ("DCR", "CRD"):
        raise OpError(f"mode '{mode}' is not one of 'DCR', 'CRD'")


@interprets("DepthToSpace")
def run_depthtospace(input: np.ndarray, *, blocksize: int, mode: str = "DCR") -> np.ndarray:
    """output[n, c, h*b + i, w*b + j] = input[n, (i*b + j)*C' + c (DCR) or c*b*b + i*b + j (CRD), h, w]"""
    _blocks(input, blocksize, mode, "DepthToSpace")
    n, c, h, w = input.shape
    b = blocksize
    if c % (b * b):
        raise OpError(f"the {c} channels do not divide into blocks of {b}x{b}")
    if mode == "DCR":
        tmp = input.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        tmp = input.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return tmp.reshape(n, c // (b * b), h * b, w * b)


@interprets("SpaceToDepth")
def run_spacetodepth(input: np.ndarray, *, blocksize: int, mode: str = "DCR") -> np.ndarray:
    """The inverse of DepthToSpace: each b x b block of H and W becomes b*b channels"""
    _blocks(input, blocksize, mode, "SpaceToDepth")
    n, c, h, w = input.shape
    b = blocksize
    if h % b or w % b:
        raise OpError(f"height {h} and width {w} must both be multiples of the blocksize {b}")
    tmp = input.reshape(n, c, h // b, b, w // b, b)
    tmp = tmp.transpose(0, 3, 5, 1, 2, 4) if mode == "DCR" else tmp.transpose(0, 1, 3, 5, 2, 4)
    return tmp.reshape(n, c * b * b, h // b, w // b)


@interprets("ReverseSequence")
def run_reversesequence(input: np.ndarray, sequence_lens: np.ndarray, *, batch_axis: int = 1,
                        time_axis: int = 0) -> np.ndarray:
    """output = input with, for each batch entry i, its first sequence_lens[i] steps along
    time_axis reversed (the rest copied)"""
    if input.ndim < 2:
        raise OpError(f"the input must have rank >= 2, got shape {input.shape}")
    if {batch_axis, time_axis} != {0, 1}:
        raise OpError(f"batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1, one each")
    lengths = as_ints(sequence_lens, "sequence_lens")
    batch, steps = input.shape[batch_axis], input.shape[time_axis]
    if len(lengths) != batch:
        raise OpError(f"sequence_lens has {len(lengths)} values for a batch of {batch}")
    out = input.copy()
    for i, length in enumerate(lengths):
        if not 0 <= length <= steps:
            raise OpError(f"sequence_lens[{i}] = {length} is outside [0, {steps}], the time axis' size")
        at = [slice(None)] * input.ndim
        src = [slice(None)] * input.ndim
        at[batch_axis] = src[batch_axis] = i
        at[time_axis] = slice(0, length)
        src[time_axis] = slice(length - 1, None, -1) if length else slice(0, 0)
        out[tuple(at)] = input[tuple(src)]
    return out
