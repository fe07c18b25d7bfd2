"""Scalar helpers that generated kernels call: fast float32 math and the interpreter's integer semantics.

Generated code does `from rnnloop.codegen import mathfn as _m` and calls these on one element at a
time inside its loops. LLVM inlines them, so a helper costs what its body costs.

Float32 functions (`tanh_f32`, `exp_f32`, `sigmoid_f32`, ...) are pure arithmetic, clamps and
selects with no branches and no libm calls, so a loop over an array vectorises (AVX2: 8 lanes). They
keep every operation in float32 (a Python float constant would promote to float64) and are accurate
to a few ulp (measured max relative error 8e-8 to 4.1e-7 depending on the function, see
tests/test_codegen_scalar.py); ±inf and NaN give the IEEE answers, except tanh_f32(±inf) = ±(1 - 2**-23).
Float64 users want exactness, so float64 goes through libm (math.exp, ...).

Integer helpers reproduce rnnloop.interp exactly: division truncates toward zero, Mod takes the
divisor's (fmod=0) or the dividend's (fmod=1) sign, and a zero divisor raises ZeroDivisionError.
Numba's own np.mod/np.fmod on integers differ (and np.mod crashes on INT_MIN % -1), so they are
not used.
"""

from __future__ import annotations

import math
import warnings

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

from .lanes import add8, contiguous, lane, load8, max8

_jit = njit(nogil=True, cache=True, error_model="numpy")
# Helpers that call other helpers are inlined by Numba itself: LLVM's inliner refuses a callee that
# has grown past its size threshold, and an opaque call in a loop stops it vectorising.
_jit_inline = njit(nogil=True, cache=True, error_model="numpy", inline="always")
# The float32 functions let LLVM fuse a multiply and the add after it into one FMA (fastmath's
# "contract" alone: no reassociation, no assumption about NaN or inf). Their polynomials are chains
# of those: vectorised, exp took 0.71 against 0.94 ns an element and tanh 0.53 against 0.69 (medians
# of 7 interleaved rounds, znver3), an LSTM step's gates 0.9-1.1 against 1.5 µs at hidden 256. FMA
# rounds once where two operations rounded twice; the errors stay within the bounds stated below
# (tests/test_codegen_scalar.py; 25 million samples: tanh 3.3e-7, exp 8.3e-8, sigmoid 1.8e-7).
_jit_f32 = njit(nogil=True, cache=True, error_model="numpy", fastmath={"contract"})
_jit_inline_f32 = njit(nogil=True, cache=True, error_model="numpy", inline="always", fastmath={"contract"})

_F = np.float32
_I = np.int32

# ---------------------------------------------------------------------------------------------
# float32 elementary functions


# exp: x = n ln2 + r with |r| <= ln2/2 (Cody-Waite: ln2 = _LN2_HI + _LN2_LO, n * _LN2_HI exact),
# e^r = 1 + r + r^2 P(r) with P a degree-4 minimax fit (relative error 3.5e-9 on the interval).
_LOG2E = _F(1.4426950408889634)
_LN2_HI = _F(0.693359375)
_LN2_LO = _F(-2.1219444005469057e-4)
_EXP_P0 = _F(0.4999999403953552)
_EXP_P1 = _F(0.16666509211063385)
_EXP_P2 = _F(0.04166852682828903)
_EXP_P3 = _F(0.00837013591080904)
_EXP_P4 = _F(0.0013811656972393394)
# exp(x) overflows above 88.73 and is below half the smallest subnormal under -103.97.
_EXP_HI = _F(89.0)
_EXP_LO = _F(-104.0)


@_jit_f32
def _pow2_f32(n):
    """2.0**n for an integer-valued float32 n in [-126, 127], by building the exponent bits."""
    return _I((_I(n) + _I(127)) << _I(23)).view(np.float32)


@intrinsic
def _ldexp(typingctx, x, n):
    """x * 2**n, rounded once (LLVM's llvm.ldexp: AVX-512's vscalefps, a vector at a time)."""
    if x != types.float32 or n != types.int32:
        return None

    def codegen(context, builder, sig, args):
        f32, i32 = ir.FloatType(), ir.IntType(32)
        function = builder.module.declare_intrinsic("llvm.ldexp", [f32, i32], ir.FunctionType(f32, [f32, i32]))
        return builder.call(function, list(args))
    return types.float32(x, n), codegen


@_jit_f32
def _scale_by_ldexp(e, n):
    return _ldexp(e, _I(n))


@_jit_f32
def _scale_by_factors(e, n):
    h = np.floor(n * _F(0.5))
    return (e * _pow2_f32(h)) * _pow2_f32(n - h)


def _scaling():
    """exp_f32's e * 2**n (n in [-151, 129], an integer-valued float32; e in [0.7, 1.5]), rounded once
    either way: by llvm.ldexp where the CPU has AVX-512 (one vscalefps, for the subnormal and the
    infinite results too) and LLVM knows it (LLVM 16 and later); elsewhere, where llvm.ldexp is a
    call of libm's ldexpf per element, in two factors of 2**(n/2), each made from its exponent bits
    (n reaches -150 and 129, beyond one factor's range). The first is exact, the second rounds: the
    same bits (every n, checked ad hoc). On the 2-core Xeon (2026-12-02, three runs of
    `benchmarks/readme_table.py elementwise_chain:10x2048x64`, each version in turn), a chain of 10 ops
    on [64, 2048], two of them Sigmoid, took 417-425 µs a call against 500-535 in two factors."""
    from numba import config
    from numba.core.codegen import get_host_cpu_features

    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else get_host_cpu_features()
    return _scale_by_ldexp if llvm.llvm_version_info >= (16,) and "+avx512f" in features.split(",") else _scale_by_factors


_scale2_f32 = _scaling()


@_jit_f32
def exp_f32(x):
    """e**x in float32, max relative error ~1.5e-7; exp(inf) = inf, exp(-inf) = 0, NaN stays NaN."""
    xc = max(_EXP_LO, min(_EXP_HI, x))  # this order turns NaN into a bound, so n stays finite
    n = np.floor(xc * _LOG2E + _F(0.5))
    r = (xc - n * _LN2_HI) - n * _LN2_LO
    p = _EXP_P4
    p = p * r + _EXP_P3
    p = p * r + _EXP_P2
    p = p * r + _EXP_P1
    p = p * r + _EXP_P0
    e = _F(1.0) + (r + (r * r) * p)
    y = _scale2_f32(e, n)  # (n reaches -150, subnormal results, and 129, overflow to inf)
    return y if x == x else x


# tanh(x) = x (1 + x^2 A(x^2)) / (1 + x^2 B(x^2)), a [9/8] rational minimax fit of relative error
# 4.9e-8 on [0, 9] with these float32 coefficients in exact arithmetic (evaluated in float32, up to
# 4.1e-7, see tanh_f32); float32 tanh(x) rounds to 1 a little beyond 9. All the
# coefficients are positive, so Horner's rule has no cancellation; the leading 1s keep tanh(x) = x
# exactly for tiny x.
_TANH_CLAMP = _F(9.0)
_TANH_A1 = _F(0.13383977115154266)
_TANH_A2 = _F(0.0034989919513463974)
_TANH_A3 = _F(2.0661194866988808e-05)
_TANH_A4 = _F(1.3419726663244091e-08)
_TANH_B1 = _F(0.4671729803085327)
_TANH_B2 = _F(0.02589019201695919)
_TANH_B3 = _F(0.0003291031753178686)
_TANH_B4 = _F(7.804690653756552e-07)


@_jit_f32
def tanh_f32(x):
    """tanh(x) in float32; NaN stays NaN.

    Max error 4.1e-7, absolute and relative (about 7 ulp of 1.0), measured over every float32 in
    [-10, 10] against float64 np.tanh: 4.07e-7 at x = ±8.5827 (4.17e-7 against float32 np.tanh,
    itself off by up to an ulp). For |x| >= 9, ±inf included, it is ±(1 - 2**-23), not ±1.
    """
    xc = max(min(x, _TANH_CLAMP), -_TANH_CLAMP)  # this order keeps NaN
    x2 = xc * xc
    p = x2 * (_TANH_A1 + x2 * (_TANH_A2 + x2 * (_TANH_A3 + x2 * _TANH_A4)))
    q = _F(1.0) + x2 * (_TANH_B1 + x2 * (_TANH_B2 + x2 * (_TANH_B3 + x2 * _TANH_B4)))
    y = (xc + xc * p) / q
    return max(min(y, _F(1.0)), _F(-1.0))


@_jit_f32
def sigmoid_f32(x):
    """1 / (1 + exp(-x)) in float32 with a few ulp of relative error everywhere, tails included."""
    e = exp_f32(-abs(x))  # in (0, 1]: never overflows
    return (e if x < _F(0.0) else _F(1.0)) / (_F(1.0) + e)


@_jit_f32
def _expm1_low_f32(x):
    """exp(x) - 1 for x below ~1, without cancellation: 2t / (1 - t) with t = tanh(x/2)."""
    t = tanh_f32(x * _F(0.5))
    return (t + t) / (_F(1.0) - t)


@_jit_inline_f32
def expm1_f32(x):
    """exp(x) - 1 in float32, accurate relative to the result also near 0."""
    low = _expm1_low_f32(x)
    high = exp_f32(x) - _F(1.0)
    return low if x < _F(0.75) else high


@_jit_f32
def elu_f32(x, alpha):
    """x if x > 0 else alpha * (exp(x) - 1), float32."""
    return x if x > _F(0.0) else alpha * _expm1_low_f32(x)


@_jit_f32
def selu_f32(x, alpha, gamma):
    """gamma * (x if x > 0 else alpha * (exp(x) - 1)), float32."""
    return gamma * (x if x > _F(0.0) else alpha * _expm1_low_f32(x))


# log: x = 2^e m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact),
# log(1 + f) = f - f^2/2 + f^3 P(f) with P a degree-7 minimax fit (relative error 5.8e-9).
_LOG_P = (_F(0.3333333134651184), _F(-0.250008225440979), _F(0.20001226663589478), _F(-0.16623355448246002),
          _F(0.14201751351356506), _F(-0.1316019594669342), _F(0.12761634588241577), _F(-0.07634533941745758))
_LOG_P0, _LOG_P1, _LOG_P2, _LOG_P3, _LOG_P4, _LOG_P5, _LOG_P6, _LOG_P7 = _LOG_P
_SQRT2 = _F(1.4142135623730951)
_FLT_MIN = _F(1.1754943508222875e-38)
_TWO23 = _F(8388608.0)


@_jit_f32
def log_f32(x):
    """ln(x) in float32, max relative error ~2e-7; -inf at 0, NaN below 0, inf at inf."""
    tiny = x < _FLT_MIN  # subnormals (and everything invalid) are scaled into the normal range
    xs = x * _TWO23 if tiny else x
    bits = np.float32(xs).view(np.int32)
    e = _F(((bits >> _I(23)) & _I(0xFF)) - _I(127)) - (_F(23.0) if tiny else _F(0.0))
    m = _I((bits & _I(0x007FFFFF)) | _I(0x3F800000)).view(np.float32)  # in [1, 2)
    big = m > _SQRT2
    m = m * _F(0.5) if big else m
    e = e + _F(1.0) if big else e
    f = m - _F(1.0)
    p = _LOG_P7
    p = p * f + _LOG_P6
    p = p * f + _LOG_P5
    p = p * f + _LOG_P4
    p = p * f + _LOG_P3
    p = p * f + _LOG_P2
    p = p * f + _LOG_P1
    p = p * f + _LOG_P0
    f2 = f * f
    z = f2 * f * p + e * _LN2_LO - _F(0.5) * f2
    y = (f + z) + e * _LN2_HI
    special = -np.inf if x == _F(0.0) else (x if x > _F(0.0) else np.nan)  # inf, NaN, 0, negatives
    return y if (x > _F(0.0)) & (x < np.inf) else _F(special)


@_jit_inline_f32
def log1p_f32(x):
    """ln(1 + x) in float32, accurate relative to the result also near 0."""
    w = _F(1.0) + x
    d = w - _F(1.0)
    # log(w) * x / (w - 1) cancels the rounding error of 1 + x (Goldberg's trick).
    y = log_f32(w) * (x / d)
    return x if (d == _F(0.0)) | (x == np.inf) else y


@_jit_inline_f32
def softplus_f32(x):
    """ln(1 + exp(x)) in float32, without overflow: max(x, 0) + ln(1 + exp(-|x|))."""
    return max(x, _F(0.0)) + log1p_f32(exp_f32(-abs(x)))


# ---------------------------------------------------------------------------------------------
# float64 counterparts (libm, exact to an ulp or two)


@_jit
def sigmoid_f64(x):
    """1 / (1 + exp(-x)) in float64 without overflow."""
    e = math.exp(-abs(x))
    return (e if x < 0.0 else 1.0) / (1.0 + e)


@_jit
def elu_f64(x, alpha):
    """x if x > 0 else alpha * (exp(x) - 1), float64."""
    return x if x > 0.0 else alpha * math.expm1(x)


@_jit
def selu_f64(x, alpha, gamma):
    """gamma * (x if x > 0 else alpha * (exp(x) - 1)), float64."""
    return gamma * (x if x > 0.0 else alpha * math.expm1(x))


@_jit
def softplus_f64(x):
    """ln(1 + exp(x)) in float64, without overflow."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


# ---------------------------------------------------------------------------------------------
# NumPy semantics for any dtype (each argument is used once by the caller, so these also
# evaluate an expensive argument expression only once)


# As np.maximum/np.minimum (NumPy 2 on x86-64, whose loops use maxps/minps): `a` where a is NaN or
# strictly wins, else `b`. So a NaN propagates (a's if both are), and of two operands that compare
# equal, -0.0 and +0.0, the second is returned: Relu(-0.0) = maximum(-0.0, 0.0) = +0.0. (Python's
# max/min return the first.) One compare-or-unordered and a select: it vectorises.
@_jit
def maximum(a, b):
    """np.maximum, bit for bit: the larger value; NaN if either is NaN; b when they compare equal."""
    return a if (a > b) | (a != a) else b


@_jit
def minimum(a, b):
    """np.minimum, bit for bit: the smaller value; NaN if either is NaN; b when they compare equal."""
    return a if (a < b) | (a != a) else b


@_jit
def max_of(a, lo, n):
    """The largest of a[lo:lo + n] (n >= 1) as np.max gives it: NaN if any is NaN. Eight running
    maxima, as NumPy's SIMD loop keeps: one running maximum is a chain of a compare and a select
    per element. A LogSoftmax over 12 rows of 2000 took 53 µs with one, 46 with eight scalars and
    35 with eight lanes of one vector (lanes.py), which a contiguous float32 or float64 a gets.
    Which of -0.0 and +0.0 wins a tie depends on the order (the NumPy 2.4 of this project's machine
    can pick the other one); from 32 elements on, four vectors find the largest in any order first,
    and only a zero or NaN takes the eight maxima (12 rows of 2000: 2.2 against 5.1 µs)."""
    if n < 16:
        m = a[lo]
        for i in range(lo + 1, lo + n):
            m = maximum(m, a[i])
        return m
    # Any order gives the same largest value unless it is a zero (-0.0 or +0.0 by the order) or NaN
    # (which NaN): then the order counts. Four running vectors first; NumPy's order only for those.
    m = _max_any_order(a, lo, n)
    if m == m and m != 0:
        return m
    end = lo + n - n % 8
    m0, m1, m2, m3, m4, m5, m6, m7 = _eight(a, lo, end, True)
    m = maximum(maximum(maximum(m0, m1), maximum(m2, m3)), maximum(maximum(m4, m5), maximum(m6, m7)))
    for i in range(end, lo + n):
        m = maximum(m, a[i])
    return m


@_jit
def sum_run(a, lo, n):
    """The sum of a[lo:lo + n] (n <= 128) as NumPy adds a run of floats: one by one under eight
    elements, else in eight interleaved partial sums combined pairwise, then the rest one by one
    (the leaf of reductions.py's pairwise sums)."""
    r = a.dtype.type(0.0)
    if n < 8:
        for i in range(lo, lo + n):
            r += a[i]
        return r
    end = lo + n - n % 8
    r0, r1, r2, r3, r4, r5, r6, r7 = _eight(a, lo, end, False)
    r = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(end, lo + n):
        r += a[i]
    return r


def _max_any_order(a, lo, n):
    """The largest of a[lo:lo + n] in four running vectors (n >= 32, a contiguous float32 or float64),
    else 0 (for max_of: "take NumPy's order"). Eight running maxima in one vector wait on each other's
    compare and select: 12 rows of 2000 (a decoder's LogSoftmax) took 5.1 against 2.2 µs."""


@overload(_max_any_order, jit_options={"cache": True})
def _max_any_order_typed(a, lo, n):
    if a.dtype not in (types.float32, types.float64):
        return lambda a, lo, n: a.dtype.type(0)

    def vectors(a, lo, n):
        if n < 32 or not (contiguous(a) and 0 <= lo and lo + n <= a.shape[0]):
            return a.dtype.type(0)
        v0, v1, v2, v3 = load8(a, lo), load8(a, lo + 8), load8(a, lo + 16), load8(a, lo + 24)
        end = lo + n - n % 32
        for b in range(lo + 32, end, 32):
            v0, v1 = max8(v0, load8(a, b)), max8(v1, load8(a, b + 8))
            v2, v3 = max8(v2, load8(a, b + 16)), max8(v3, load8(a, b + 24))
        v = max8(max8(v0, v1), max8(v2, v3))
        m = lane(v, 0)
        for t in range(1, 8):
            m = maximum(m, lane(v, t))
        for i in range(end, lo + n):
            m = maximum(m, a[i])
        return m
    return vectors


def _eight(a, lo, end, maxima):
    """Eight running maxima (`maxima`) or sums of a[lo:end] (end - lo a multiple of 8, at least 8):
    lane k takes a[lo + k], a[lo + k + 8], ... One vector (lanes.py) for a contiguous float32 or
    float64 a, else eight scalars; the same operations in the same order either way."""


@_jit
def _eight_scalars(a, lo, end, maxima):
    """_eight as eight scalars."""
    r0, r1, r2, r3, r4, r5, r6, r7 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3], a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    for b in range(lo + 8, end, 8):
        if maxima:
            r0, r1, r2, r3 = maximum(r0, a[b]), maximum(r1, a[b + 1]), maximum(r2, a[b + 2]), maximum(r3, a[b + 3])
            r4, r5, r6, r7 = maximum(r4, a[b + 4]), maximum(r5, a[b + 5]), maximum(r6, a[b + 6]), maximum(r7, a[b + 7])
        else:
            r0, r1, r2, r3 = r0 + a[b], r1 + a[b + 1], r2 + a[b + 2], r3 + a[b + 3]
            r4, r5, r6, r7 = r4 + a[b + 4], r5 + a[b + 5], r6 + a[b + 6], r7 + a[b + 7]
    return r0, r1, r2, r3, r4, r5, r6, r7


@overload(_eight, jit_options={"cache": True})
def _eight_typed(a, lo, end, maxima):
    if a.dtype not in (types.float32, types.float64):
        return lambda a, lo, end, maxima: _eight_scalars(a, lo, end, maxima)

    def vector(a, lo, end, maxima):
        if not (contiguous(a) and 0 <= lo and end <= a.shape[0]):
            return _eight_scalars(a, lo, end, maxima)
        v = load8(a, lo)
        for b in range(lo + 8, end, 8):
            v = max8(v, load8(a, b)) if maxima else add8(v, load8(a, b))
        return lane(v, 0), lane(v, 1), lane(v, 2), lane(v, 3), lane(v, 4), lane(v, 5), lane(v, 6), lane(v, 7)
    return vector


@_jit
def leaky(x, slope):
    """x * slope where x < 0, else x (LeakyRelu, PRelu)."""
    return x * slope if x < 0 else x


@_jit
def thresholded(x, alpha, zero):
    """x where x > alpha, else zero (ThresholdedRelu)."""
    return x if x > alpha else zero


@_jit
def sign_int(x):
    """np.sign of an integer: -1, 0 or 1 (int64)."""
    return (x > 0) - (x < 0)


@_jit
def sign_float(x):
    """np.sign of a float as float64: -1.0, 0.0 or 1.0; NaN stays NaN."""
    return 1.0 if x > 0 else (-1.0 if x < 0 else (0.0 if x == 0 else np.nan))


@_jit
def mod_float(a, b):
    """np.mod of floats: the remainder with the sign of the divisor (NaN for b = 0)."""
    m = np.fmod(a, b)
    if b == 0:
        return m
    if m == 0:
        return np.copysign(m - m, b)
    return m + b if (b < 0) != (m < 0) else m


# ---------------------------------------------------------------------------------------------
# integers (int64 arithmetic; the caller wraps to int32 where the dtype says so)


@_jit
def div_int(a, b):
    """a / b truncated toward zero; INT_MIN / -1 wraps to INT_MIN as in NumPy."""
    if b == 0:
        raise ZeroDivisionError("integer division by zero")
    if b == -1:
        return -a  # Numba's // returns 0 for INT_MIN // -1 instead of wrapping
    q = a // b  # floor
    return q + 1 if (a - q * b != 0) and ((a < 0) != (b < 0)) else q


@_jit
def mod_int(a, b):
    """np.mod of integers: the remainder with the sign of the divisor."""
    if b == 0:
        raise ZeroDivisionError("integer division by zero")
    if b == -1:
        return a - a
    return a % b


@_jit
def fmod_int(a, b):
    """np.fmod of integers: the remainder with the sign of the dividend."""
    if b == 0:
        raise ZeroDivisionError("integer division by zero")
    if b == -1:
        return a - a
    r = a % b
    return r - b if r != 0 and (r < 0) != (a < 0) else r


@_jit
def pow_int(x, y):
    """x ** y for integers, wrapping in 64 bits; a negative y truncates toward zero (only ±1 survive)."""
    x, y = np.int64(x), np.int64(y)
    if y < 0:
        if x == 0:
            raise ZeroDivisionError("0 raised to a negative integer power")
        if x == 1 or x == -1:
            return x if y & 1 else np.int64(1)
        return np.int64(0)
    result = np.int64(1)
    while y:
        if y & 1:
            result *= x
        x *= x
        y >>= 1
    return result


# Float -> integer conversion of NaN and out-of-range values is left to the platform by C and
# LLVM; NumPy's astype gives x86's "integer indefinite" (INT_MIN) here and saturates on ARM.
# The interpreter is NumPy, so ask NumPy once and reproduce its answers.
def _probe(dtype) -> tuple[int, int, int]:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        nan, pos, neg = np.array([np.nan, np.inf, -np.inf]).astype(dtype).tolist()
    return nan, pos, neg


_I32_NAN, _I32_POS, _I32_NEG = (np.int32(v) for v in _probe(np.int32))
_I64_NAN, _I64_POS, _I64_NEG = (np.int64(v) for v in _probe(np.int64))


@_jit
def float_to_int32(x):
    """x truncated toward zero to int32, with NumPy's astype result for NaN and out-of-range x."""
    if x != x:
        return _I32_NAN
    if x >= 2147483648.0:
        return _I32_POS
    if x <= -2147483649.0:
        return _I32_NEG
    return np.int32(x)


@_jit
def float_to_int64(x):
    """x truncated toward zero to int64, with NumPy's astype result for NaN and out-of-range x."""
    if x != x:
        return _I64_NAN
    if x >= 9223372036854775808.0:
        return _I64_POS
    if x < -9223372036854775808.0:
        return _I64_NEG
    return np.int64(x)


# ---------------------------------------------------------------------------------------------
# front-end activations (Gelu, Mish, Celu, HardSwish, Shrink), the forms rnnloop.interp.small_ops
# computes: 1 + erf(u) as erfc(-u) and 1 + tanh(z) as 2 sigmoid(2z), which do not cancel where x < 0


_INV_SQRT2_F = _F(1 / math.sqrt(2))
_GELU_C_F = _F(math.sqrt(2 / math.pi))
_GELU_K_F = _F(0.044715)


@_jit_f32
def gelu_f32(x):
    """0.5 x (1 + erf(x / sqrt 2)) in float32 (erfc in float64, rounded once)."""
    return _F(0.5) * x * _F(math.erfc(-(x * _INV_SQRT2_F)))


@_jit
def gelu_f64(x):
    """0.5 x (1 + erf(x / sqrt 2)) in float64."""
    return 0.5 * x * math.erfc(-(x * (1 / math.sqrt(2))))


@_jit_inline_f32
def gelu_tanh_f32(x):
    """0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) = x sigmoid(2 z), float32."""
    z = _GELU_C_F * (x + _GELU_K_F * x * x * x)
    return x * sigmoid_f32(z + z)


@_jit
def gelu_tanh_f64(x):
    """0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) = x sigmoid(2 z), float64."""
    z = math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)
    return x * sigmoid_f64(z + z)


@_jit_inline_f32
def mish_f32(x):
    """x tanh(ln(1 + exp(x))), float32."""
    return x * tanh_f32(softplus_f32(x))


@_jit
def mish_f64(x):
    """x tanh(ln(1 + exp(x))), float64."""
    return x * math.tanh(softplus_f64(x))


@_jit_inline_f32
def celu_f32(x, alpha):
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1)) in float32, NaN propagating as in NumPy."""
    return maximum(_F(0.0), x) + minimum(_F(0.0), alpha * expm1_f32(x / alpha))


@_jit_inline
def celu_f64(x, alpha):
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1)) in float64."""
    return maximum(0.0, x) + minimum(0.0, alpha * math.expm1(x / alpha))


@_jit_inline
def hard_swish(x, alpha, beta, zero, one):
    """x max(0, min(1, alpha x + beta)) in x's dtype (the constants given in it)."""
    return x * minimum(maximum(x * alpha + beta, zero), one)


@_jit
def shrink(x, low, high, bias, zero):
    """x + bias where x < low, x - bias where x > high, else zero (NaN gives zero)."""
    return x + bias if x < low else (x - bias if x > high else zero)
