"""Interpreter functions for ONNX math ops: arithmetic, activations, comparisons, matmul and reductions."""

from __future__ import annotations

import math
from functools import lru_cache, reduce

import ml_dtypes
import numpy as np

from ..errors import OpError
from .args import as_axes, as_axis, as_ints, as_scalar
from .registry import interprets

# ---------------------------------------------------------------------------------------------
# helpers


def _integral(x: np.ndarray) -> bool:
    return x.dtype.kind in "iu"


def _check_divisor(divisor: np.ndarray) -> None:
    # Integer division by zero has no value (hardware traps on it); floats give inf/nan per IEEE.
    if _integral(divisor) and np.any(divisor == 0):
        raise OpError("integer division by zero: the divisor holds 0; mask zeros out before dividing")


def _trunc_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b rounded toward zero, exactly, for integers (numpy's // rounds toward -inf)."""
    # a - fmod(a, b) is an exact multiple of b, so the floor division has nothing left to round.
    return (a - np.fmod(a, b)) // b


def _via_float32(fn, x: np.ndarray) -> np.ndarray:
    """fn (a SciPy ufunc with float32/float64 loops only) applied in x's dtype."""
    if x.dtype in (np.float32, np.float64):
        return np.asarray(fn(x))
    return np.asarray(fn(x.astype(np.float32))).astype(x.dtype)


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype products are accumulated in: float32 for float16 and ml_dtypes' floats (bfloat16), else dtype."""
    if dtype == np.float16 or dtype.kind == "V":
        return np.dtype(np.float32)
    return dtype


def _fold(ufunc: np.ufunc, inputs: tuple[np.ndarray, ...], op_type: str) -> np.ndarray:
    if not inputs:
        raise OpError(f"{op_type} needs at least one input")
    return np.asarray(reduce(ufunc, inputs))


def _broadcasts_to(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether `shape` broadcasts to `target` one way (ONNX's unidirectional broadcasting)."""
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def _scale(x: np.ndarray, factor: float) -> np.ndarray:
    """x * factor in x's dtype (a float factor on integers truncates the product toward zero)."""
    if not _integral(x):
        return x * x.dtype.type(factor)
    if float(factor).is_integer():
        return x * x.dtype.type(int(factor))
    return (x * factor).astype(x.dtype)


# ---------------------------------------------------------------------------------------------
# binary arithmetic


@interprets("Add")
def run_add(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C = A + B (broadcast)"""
    return np.asarray(A + B)


@interprets("Sub")
def run_sub(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C = A - B (broadcast)"""
    return np.asarray(A - B)


@interprets("Mul")
def run_mul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C = A * B (broadcast)"""
    return np.asarray(A * B)


@interprets("Div")
def run_div(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C = A / B (broadcast); integers truncate toward zero"""
    if _integral(A):
        _check_divisor(B)
        return np.asarray(_trunc_divide(A, B))
    return np.asarray(A / B)


@interprets("Pow")
def run_pow(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Z = X ** Y (broadcast), in X's dtype"""
    if _integral(X) and _integral(Y):
        return _integer_power(X, Y)
    # Mixed types compute in numpy's common type (int ** float in float64) and convert back.
    return np.asarray(np.power(X, Y)).astype(X.dtype, copy=False)


def _integer_power(X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    negative = Y < 0
    if np.any(negative & (X == 0)):
        raise OpError("0 raised to a negative integer power has no integer value")
    # x ** -n truncates toward zero: 0 for |x| >= 2, and (+-1) ** -n = (+-1) ** n, which only needs
    # n's parity (y & 1 is that parity also for INT_MIN, whose magnitude does not fit in its type).
    exponent = np.where(negative, Y & 1, Y)
    # Wrap-around in 64 bits, cast down, equals wrap-around in X's width, and the low 64 bits of a
    # product do not depend on signedness: so compute in uint64 (numpy would turn int64 ** uint64
    # into float64) and cast to X's dtype.
    power = np.power(X.astype(np.uint64), exponent.astype(np.uint64)).astype(X.dtype)
    return np.asarray(np.where(negative & (np.abs(X) != 1), X.dtype.type(0), power))


@interprets("Mod")
def run_mod(A: np.ndarray, B: np.ndarray, *, fmod: int = 0) -> np.ndarray:
    """C = A mod B: with fmod=0 the sign of B (A - floor(A/B)*B), with fmod=1 the sign of A"""
    if fmod not in (0, 1):
        raise OpError(f"fmod must be 0 or 1, got {fmod}")
    _check_divisor(B)
    return np.asarray(np.fmod(A, B) if fmod else np.mod(A, B))


# ---------------------------------------------------------------------------------------------
# unary arithmetic


@interprets("Neg")
def run_neg(X: np.ndarray) -> np.ndarray:
    """Y = -X"""
    return np.asarray(np.negative(X))


@interprets("Abs")
def run_abs(X: np.ndarray) -> np.ndarray:
    """Y = |X|"""
    return np.asarray(np.abs(X))


@interprets("Sqrt")
def run_sqrt(X: np.ndarray) -> np.ndarray:
    """Y = sqrt(X) (NaN for negative X)"""
    return np.asarray(np.sqrt(X))


@interprets("Exp")
def run_exp(input: np.ndarray) -> np.ndarray:
    """output = e ** input"""
    return np.asarray(np.exp(input))


@interprets("Log")
def run_log(input: np.ndarray) -> np.ndarray:
    """output = ln(input) (-inf at 0, NaN below)"""
    return np.asarray(np.log(input))


@interprets("Reciprocal")
def run_reciprocal(X: np.ndarray) -> np.ndarray:
    """Y = 1 / X"""
    return np.asarray(np.reciprocal(X))


@interprets("Floor")
def run_floor(X: np.ndarray) -> np.ndarray:
    """Y = floor(X)"""
    return np.asarray(np.floor(X))


@interprets("Ceil")
def run_ceil(X: np.ndarray) -> np.ndarray:
    """Y = ceil(X)"""
    return np.asarray(np.ceil(X))


@interprets("Round")
def run_round(X: np.ndarray) -> np.ndarray:
    """Y = X rounded to the nearest integer, halves to even"""
    return np.asarray(np.round(X))


@interprets("Sign")
def run_sign(input: np.ndarray) -> np.ndarray:
    """output = 1, 0 or -1 as input is positive, zero or negative"""
    return np.asarray(np.sign(input))


@interprets("Sin")
def run_sin(input: np.ndarray) -> np.ndarray:
    """output = sin(input)"""
    return np.asarray(np.sin(input))


@interprets("Cos")
def run_cos(input: np.ndarray) -> np.ndarray:
    """output = cos(input)"""
    return np.asarray(np.cos(input))


@interprets("Erf")
def run_erf(input: np.ndarray) -> np.ndarray:
    """output = erf(input), the Gauss error function"""
    import scipy.special  # imported when first needed: it takes longer than the rest of `import rnnloop`
    return _via_float32(scipy.special.erf, input)


# ---------------------------------------------------------------------------------------------
# variadic and clipping


@interprets("Min")
def run_min(*data: np.ndarray) -> np.ndarray:
    """min = the element-wise minimum of the inputs (broadcast; NaN wins)"""
    return _fold(np.minimum, data, "Min")


@interprets("Max")
def run_max(*data: np.ndarray) -> np.ndarray:
    """max = the element-wise maximum of the inputs (broadcast; NaN wins)"""
    return _fold(np.maximum, data, "Max")


@interprets("Sum")
def run_sum(*data: np.ndarray) -> np.ndarray:
    """sum = the element-wise sum of the inputs (broadcast)"""
    return _fold(np.add, data, "Sum")


@interprets("Mean")
def run_mean(*data: np.ndarray) -> np.ndarray:
    """mean = the element-wise sum of the inputs (broadcast) divided by their count"""
    total = _fold(np.add, data, "Mean")
    return np.asarray(total / total.dtype.type(len(data)))


@interprets("Clip")
def run_clip(input: np.ndarray, min: np.ndarray | None = None, max: np.ndarray | None = None) -> np.ndarray:
    """output = Min(max, Max(input, min)); omitted bounds are the type's lowest and largest finite values"""
    if min is None and max is None and _integral(input):
        return input
    # The spec's defaults are finite (numeric_limits::lowest/max), so infinities clip to them.
    low = finite_limits(input.dtype)[0] if min is None else as_scalar(min, "min")
    high = finite_limits(input.dtype)[1] if max is None else as_scalar(max, "max")
    return np.asarray(np.minimum(np.maximum(input, low), high))


@lru_cache(maxsize=None)
def finite_limits(dtype: np.dtype) -> tuple:
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
    else:
        info = ml_dtypes.finfo(dtype)  # knows numpy's floats and bfloat16 alike
    return dtype.type(info.min), dtype.type(info.max)


# ---------------------------------------------------------------------------------------------
# activations (the float attributes become scalars of the input's dtype, so float32 stays float32)


@interprets("Relu")
def run_relu(X: np.ndarray) -> np.ndarray:
    """Y = max(X, 0)"""
    return np.asarray(np.maximum(X, X.dtype.type(0)))


@interprets("LeakyRelu")
def run_leakyrelu(X: np.ndarray, *, alpha: float = 0.01) -> np.ndarray:
    """Y = X if X >= 0 else alpha * X"""
    return np.asarray(np.where(X < 0, X * X.dtype.type(alpha), X))


@interprets("PRelu")
def run_prelu(X: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """Y = X if X >= 0 else slope * X (slope broadcast to X's shape)"""
    if not _broadcasts_to(slope.shape, X.shape):
        raise OpError(f"slope of shape {slope.shape} does not broadcast to X's shape {X.shape}")
    return np.asarray(np.where(X < 0, X * slope, X))


@interprets("ThresholdedRelu")
def run_thresholdedrelu(X: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    """Y = X if X > alpha else 0"""
    return np.asarray(np.where(X > X.dtype.type(alpha), X, X.dtype.type(0)))


@interprets("Elu")
def run_elu(X: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    """Y = X if X > 0 else alpha * (exp(X) - 1)"""
    # exp of the non-positive part only: the discarded branch must not overflow.
    negative = X.dtype.type(alpha) * np.expm1(np.minimum(X, X.dtype.type(0)))
    return np.asarray(np.where(X > 0, X, negative))


@interprets("Selu")
def run_selu(X: np.ndarray, *, alpha: float = 1.67326319217681884765625,
             gamma: float = 1.05070102214813232421875) -> np.ndarray:
    """Y = gamma * X if X > 0 else gamma * alpha * (exp(X) - 1)"""
    t = X.dtype.type
    negative = t(alpha) * np.expm1(np.minimum(X, t(0)))
    return np.asarray(t(gamma) * np.where(X > 0, X, negative))


@interprets("Sigmoid")
def run_sigmoid(X: np.ndarray) -> np.ndarray:
    """Y = 1 / (1 + exp(-X))"""
    import scipy.special  # imported when first needed (see run_erf)
    return _via_float32(scipy.special.expit, X)  # expit never overflows


@interprets("HardSigmoid")
def run_hardsigmoid(X: np.ndarray, *, alpha: float = 0.2, beta: float = 0.5) -> np.ndarray:
    """Y = max(0, min(1, alpha * X + beta))"""
    t = X.dtype.type
    return np.asarray(np.minimum(np.maximum(X * t(alpha) + t(beta), t(0)), t(1)))


@interprets("Tanh")
def run_tanh(input: np.ndarray) -> np.ndarray:
    """output = tanh(input)"""
    return np.asarray(np.tanh(input))


@interprets("ScaledTanh")
def run_scaledtanh(input: np.ndarray, *, alpha: float = 1.0, beta: float = 1.0) -> np.ndarray:
    """output = alpha * tanh(beta * input)"""
    t = input.dtype.type
    return np.asarray(t(alpha) * np.tanh(t(beta) * input))


@interprets("Affine")
def run_affine(X: np.ndarray, *, alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
    """Y = alpha * X + beta"""
    t = X.dtype.type
    return np.asarray(t(alpha) * X + t(beta))


@interprets("Softplus")
def run_softplus(X: np.ndarray) -> np.ndarray:
    """Y = ln(exp(X) + 1)"""
    return np.asarray(np.logaddexp(X, X.dtype.type(0)))  # no overflow for large X


@interprets("Softsign")
def run_softsign(input: np.ndarray) -> np.ndarray:
    """output = input / (1 + |input|)"""
    return np.asarray(input / (input.dtype.type(1) + np.abs(input)))


@interprets("Softmax")
def run_softmax(input: np.ndarray, *, axis: int = -1) -> np.ndarray:
    """output = exp(input) / sum(exp(input)) along axis"""
    axis = as_axis(axis, input.ndim)
    if input.size == 0:
        return np.empty_like(input)
    # Subtracting the maximum keeps exp from overflowing; the quotient is unchanged.
    shifted = input - np.max(input, axis=axis, keepdims=True)
    e = np.exp(shifted, out=shifted)
    return e / np.sum(e, axis=axis, keepdims=True)


@interprets("LogSoftmax")
def run_logsoftmax(input: np.ndarray, *, axis: int = -1) -> np.ndarray:
    """output = input - ln(sum(exp(input))) along axis"""
    axis = as_axis(axis, input.ndim)
    if input.size == 0:
        return np.empty_like(input)
    shifted = input - np.max(input, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


# ---------------------------------------------------------------------------------------------
# matrix products


# float16 and bfloat16 operands are multiplied in float32 and rounded once, as onnxruntime does;
# numpy would accumulate float16 in float16 and turn bfloat16 into float32.


@interprets("MatMul")
def run_matmul(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Y = A @ B (numpy.matmul semantics: batched, 1-D operands promoted and squeezed)"""
    if A.ndim == 0 or B.ndim == 0:
        raise OpError(f"MatMul needs operands of rank >= 1, got shapes {A.shape} and {B.shape}")
    work = _compute_dtype(A.dtype)
    try:
        Y = np.matmul(A.astype(work, copy=False), B.astype(work, copy=False))
    except ValueError:
        raise OpError(f"cannot multiply shapes {A.shape} and {B.shape}: the inner dimensions must match "
                      "and the batch dimensions broadcast") from None
    return np.asarray(Y).astype(A.dtype, copy=False)


@interprets("Gemm")
def run_gemm(A: np.ndarray, B: np.ndarray, C: np.ndarray | None = None, *, alpha: float = 1.0,
             beta: float = 1.0, transA: int = 0, transB: int = 0) -> np.ndarray:
    """Y = alpha * A' @ B' + beta * C, with A' = A.T if transA, B' = B.T if transB, C broadcast to Y"""
    if A.ndim != 2 or B.ndim != 2:
        raise OpError(f"Gemm needs 2-D A and B, got shapes {A.shape} and {B.shape}")
    work = _compute_dtype(A.dtype)
    a = (A.T if transA else A).astype(work, copy=False)
    b = (B.T if transB else B).astype(work, copy=False)
    if a.shape[1] != b.shape[0]:
        raise OpError(f"cannot multiply A' {a.shape} by B' {b.shape} (transA={transA}, transB={transB})")
    Y = a @ b
    if alpha != 1.0:
        Y = _scale(Y, alpha)
    if C is not None:
        if not _broadcasts_to(C.shape, Y.shape):
            raise OpError(f"C of shape {C.shape} does not broadcast to the product's shape {Y.shape}")
        c = C.astype(work, copy=False)
        Y = Y + (c if beta == 1.0 else _scale(c, beta))
    return Y.astype(A.dtype, copy=False)


@interprets("Einsum")
def run_einsum(*Inputs: np.ndarray, equation: str) -> np.ndarray:
    """Output = the Einstein summation the equation names (explicit with '->', implicit without)"""
    if not Inputs:
        raise OpError("Einsum needs at least one input")
    dtype = Inputs[0].dtype
    work = _compute_dtype(dtype)
    # Planning the contraction order (and BLAS calls) costs ~40 us: worth it for big or many operands only.
    optimize = len(Inputs) > 2 or (len(Inputs) == 2 and sum(x.size for x in Inputs) > 4096)
    try:
        Y = np.einsum(equation, *(x.astype(work, copy=False) for x in Inputs), optimize=optimize)
    except ValueError as e:
        shapes = ", ".join(str(x.shape) for x in Inputs)
        raise OpError(f"equation '{equation}' does not fit inputs of shapes {shapes}: {e}") from None
    return np.asarray(Y).astype(dtype, copy=False)


# ---------------------------------------------------------------------------------------------
# comparisons and logic


@interprets("Equal")
def run_equal(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C = A == B (broadcast; strings too)"""
    return np.asarray(np.equal(A, B), dtype=bool)


@interprets("Less")
def run_less(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C = A < B (broadcast)"""
    return np.asarray(np.less(A, B))


@interprets("LessOrEqual")
def run_lessorequal(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C = A <= B (broadcast)"""
    return np.asarray(np.less_equal(A, B))


@interprets("Greater")
def run_greater(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C = A > B (broadcast)"""
    return np.asarray(np.greater(A, B))


@interprets("GreaterOrEqual")
def run_greaterorequal(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C = A >= B (broadcast)"""
    return np.asarray(np.greater_equal(A, B))


@interprets("Not")
def run_not(X: np.ndarray) -> np.ndarray:
    """Y = not X"""
    return np.asarray(np.logical_not(X))


@interprets("And")
def run_and(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C = A and B (broadcast)"""
    return np.asarray(np.logical_and(A, B))


@interprets("Or")
def run_or(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C = A or B (broadcast)"""
    return np.asarray(np.logical_or(A, B))


@interprets("Xor")
def run_xor(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """C = A xor B (broadcast)"""
    return np.asarray(np.logical_xor(A, B))


@interprets("IsNaN")
def run_isnan(X: np.ndarray) -> np.ndarray:
    """Y = X is NaN"""
    return np.asarray(np.isnan(X))


@interprets("IsInf")
def run_isinf(X: np.ndarray, *, detect_negative: int = 1, detect_positive: int = 1) -> np.ndarray:
    """Y = X is +inf (if detect_positive) or -inf (if detect_negative)"""
    if detect_negative and detect_positive:
        return np.asarray(np.isinf(X))
    if detect_negative:
        return np.asarray(np.isneginf(X))
    if detect_positive:
        return np.asarray(np.isposinf(X))
    return np.zeros(X.shape, dtype=bool)


# ---------------------------------------------------------------------------------------------
# reductions


def _reduce_axes(data: np.ndarray, axes: np.ndarray | None, noop_with_empty_axes: int) -> tuple[int, ...] | None:
    """numpy's `axis` for a Reduce op: None (every axis), () (none: the noop case) or the checked axes."""
    if axes is None or np.size(axes) == 0:
        return () if noop_with_empty_axes else None
    return tuple(as_axes(as_ints(axes, "axes"), data.ndim))


def _reduced_count(data: np.ndarray, axis: tuple[int, ...] | None) -> int:
    return data.size if axis is None else math.prod(data.shape[a] for a in axis)


def _extreme(dtype: np.dtype, low: bool):
    """The identity of max (low) or min (not low): -inf/+inf, or the type's limit without infinities."""
    if dtype == bool:
        return not low
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if low else info.max
    return dtype.type(-np.inf if low else np.inf)


@interprets("ReduceSum")
def run_reducesum(data: np.ndarray, axes: np.ndarray | None = None, *, keepdims: int = 1,
                  noop_with_empty_axes: int = 0) -> np.ndarray:
    """reduced = sum of data over axes (all axes when omitted, none if noop_with_empty_axes); empty sums are 0"""
    axis = _reduce_axes(data, axes, noop_with_empty_axes)
    return np.asarray(np.sum(data, axis=axis, keepdims=bool(keepdims), dtype=data.dtype))


@interprets("ReduceMean")
def run_reducemean(data: np.ndarray, axes: np.ndarray | None = None, *, keepdims: int = 1,
                   noop_with_empty_axes: int = 0) -> np.ndarray:
    """reduced = mean of data over axes (integers truncate toward zero)"""
    axis = _reduce_axes(data, axes, noop_with_empty_axes)
    total = np.asarray(np.sum(data, axis=axis, keepdims=bool(keepdims), dtype=data.dtype))
    count = np.asarray(_reduced_count(data, axis), dtype=data.dtype)
    if _integral(data):
        if count == 0:
            raise OpError(f"the mean of an empty set of integers is undefined (data of shape {data.shape})")
        return np.asarray(_trunc_divide(total, count))
    return np.asarray(total / count)  # an empty set gives NaN: the spec leaves it undefined


@interprets("ReduceMax")
def run_reducemax(data: np.ndarray, axes: np.ndarray | None = None, *, keepdims: int = 1,
                  noop_with_empty_axes: int = 0) -> np.ndarray:
    """reduced = max of data over axes; an empty set gives -inf (the type's minimum for integers, False for bool)"""
    axis = _reduce_axes(data, axes, noop_with_empty_axes)
    return np.asarray(np.max(data, axis=axis, keepdims=bool(keepdims), initial=_extreme(data.dtype, low=True)))


@interprets("ReduceMin")
def run_reducemin(data: np.ndarray, axes: np.ndarray | None = None, *, keepdims: int = 1,
                  noop_with_empty_axes: int = 0) -> np.ndarray:
    """reduced = min of data over axes; an empty set gives +inf (the type's maximum for integers, True for bool)"""
    axis = _reduce_axes(data, axes, noop_with_empty_axes)
    return np.asarray(np.min(data, axis=axis, keepdims=bool(keepdims), initial=_extreme(data.dtype, low=False)))


@interprets("ReduceProd")
def run_reduceprod(data: np.ndarray, axes: np.ndarray | None = None, *, keepdims: int = 1,
                   noop_with_empty_axes: int = 0) -> np.ndarray:
    """reduced = product of data over axes; an empty set gives 1"""
    axis = _reduce_axes(data, axes, noop_with_empty_axes)
    return np.asarray(np.prod(data, axis=axis, keepdims=bool(keepdims), dtype=data.dtype))


@interprets("ReduceL2")
def run_reducel2(data: np.ndarray, axes: np.ndarray | None = None, *, keepdims: int = 1,
                 noop_with_empty_axes: int = 0) -> np.ndarray:
    """reduced = sqrt(sum(data ** 2)) over axes; an empty set gives 0 (|data| when noop)"""
    axis = _reduce_axes(data, axes, noop_with_empty_axes)
    squares = np.sum(np.square(data), axis=axis, keepdims=bool(keepdims), dtype=data.dtype)
    return np.asarray(np.sqrt(squares)).astype(data.dtype, copy=False)  # integers truncate


@interprets("ReduceLogSumExp")
def run_reducelogsumexp(data: np.ndarray, axes: np.ndarray | None = None, *, keepdims: int = 1,
                        noop_with_empty_axes: int = 0) -> np.ndarray:
    """reduced = ln(sum(exp(data))) over axes; an empty set gives -inf (data itself when noop)"""
    axis = _reduce_axes(data, axes, noop_with_empty_axes)
    # Shift by the maximum so exp cannot overflow; an infinite (or empty-set) maximum shifts by 0.
    peak = np.max(data, axis=axis, keepdims=True, initial=_extreme(data.dtype, low=True))
    peak = np.where(np.isfinite(peak), peak, data.dtype.type(0))
    total = np.sum(np.exp(data - peak), axis=axis, keepdims=True, dtype=data.dtype)
    with np.errstate(divide="ignore"):  # ln(0) = -inf is the answer for an empty set
        result = np.log(total) + peak
    return np.asarray(result if keepdims else np.squeeze(result, axis=axis))


@interprets("ArgMax")
def run_argmax(data: np.ndarray, *, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> np.ndarray:
    """reduced = int64 index of the largest entry along axis (the first one, or the last if select_last_index)"""
    return _arg_extreme(np.argmax, data, axis, keepdims, select_last_index)


@interprets("ArgMin")
def run_argmin(data: np.ndarray, *, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> np.ndarray:
    """reduced = int64 index of the smallest entry along axis (the first one, or the last if select_last_index)"""
    return _arg_extreme(np.argmin, data, axis, keepdims, select_last_index)


def _arg_extreme(arg, data: np.ndarray, axis: int, keepdims: int, select_last_index: int) -> np.ndarray:
    axis = as_axis(axis, data.ndim)
    size = data.shape[axis]
    if size == 0:
        raise OpError(f"axis {axis} of the input (shape {data.shape}) is empty: there is no index to return")
    if select_last_index:
        # numpy picks the first of equal entries; in the flipped axis that is the last one.
        index = (size - 1) - arg(np.flip(data, axis), axis=axis, keepdims=bool(keepdims))
    else:
        index = arg(data, axis=axis, keepdims=bool(keepdims))
    return np.asarray(index, dtype=np.int64)
