"""Per-element code of fused kernels: mathfn's helpers against NumPy, every elementwise op against the interpreter.

Part one calls rnnloop.codegen.mathfn directly: the float32 functions against a float64 reference on
a dense sweep (every binade, tails, ±inf, NaN, subnormals), the integer helpers against the
interpreter's NumPy semantics at the edges (INT_MIN / -1, zero divisors, out-of-range casts).

Part two compiles every op of scalar.ELEMENTWISE, for every dtype its rule compiles, into one region
(nothing interpreted, strict=True) and compares the kernel with backend="interp": values, NaN
positions, signs of zeros; float32 transcendental functions to 1e-6 relative. Integer division by
zero must be a RunError naming the node under both backends.
"""

from __future__ import annotations

import functools
import warnings

import llvmlite.binding as llvm
import numpy as np
import onnx
import pytest
import scipy.special
from helpers import IR_VERSION
from numba import njit
from onnx import TensorProto, helper

import rnnloop
from rnnloop.builder import Builder
from rnnloop.codegen import mathfn, scalar
from rnnloop.interp.math_ops import run_div, run_mod, run_pow
from rnnloop.ir import Stack, TensorType

F32 = np.float32
NAN, INF = np.nan, np.inf
TINY = float(np.finfo(F32).tiny)

# ---------------------------------------------------------------------------------------------
# mathfn: float32 functions


@njit(error_model="numpy")  # as in kernels: inlined helpers divide by zero quietly (IEEE) with it
def _apply(f, xs):
    out = np.empty_like(xs)
    for i in range(xs.size):
        out[i] = f(xs[i])
    return out


def _sweep() -> np.ndarray:
    """About 1.4 million float32 values: every binade of both signs densely, the tails, the edges."""
    every = np.arange(0, 2**32, 4099, dtype=np.uint64).astype(np.uint32).view(F32)  # all exponents
    dense = np.linspace(-20, 20, 400_001, dtype=F32)
    near_zero = np.linspace(-1e-3, 1e-3, 20_001, dtype=F32)
    tails = np.concatenate([np.linspace(a, b, 20_001, dtype=F32) for a, b in
                            [(80, 90), (-110, -80), (-1.0001, -0.9999), (0.5, 1.0), (5, 10), (-10, -5)]])
    subnormal = np.array([1e-45, 3e-45, 1e-42, 1e-40, 5e-39, TINY * 0.999, TINY, TINY * 1.001], F32)
    # The worst cases an exhaustive search over all float32 found (see the bounds below).
    worst = np.array([8.582685470581055, -10.391359329223633, -87.33735656738281, 2.7205564975738525,
                      0.742436945438385, 511.4911193847656, -3.871386766433716], F32)
    edges = np.array([0.0, -0.0, 88.72283, 88.72284, -87.33654, -103.97, -103.98, -104.0, 9.0, -9.0,
                      0.75, 0.7499999, np.finfo(F32).max, -np.finfo(F32).max, np.sqrt(2), 0.5, 2.0], F32)
    xs = np.concatenate([every, dense, near_zero, tails, subnormal, -subnormal, worst, edges])
    return xs[np.isfinite(xs)]


SWEEP = _sweep()

# name: (float64 reference, bound on the error): the worst case of an exhaustive search over all
# float32 x (in the comments; those x are in the sweep) plus ~10%.
# The error is |y - ref| / max(|ref|, FLT_MIN): relative, and absolute in units of FLT_MIN for
# results in the subnormal range. For tanh, whose values near ±1 dominate, relative = absolute there.
FLOAT32_FUNCTIONS = {
    "tanh_f32": (np.tanh, 4.5e-7),  # 4.07e-7 at x = 8.5827: 7 ulp of 1.0
    "sigmoid_f32": (scipy.special.expit, 2.0e-7),  # 1.77e-7 at x = -10.39
    "exp_f32": (np.exp, 1.0e-7),  # 8.9e-8 at x = -87.34
    "log_f32": (np.log, 1.0e-7),  # 8.2e-8 at x = 2.72
    "expm1_f32": (np.expm1, 3.6e-7),  # 3.24e-7 at x = 0.742
    "log1p_f32": (np.log1p, 2.0e-7),  # 1.82e-7 at x = 511.5
    "softplus_f32": (lambda x: np.logaddexp(0.0, x), 2.5e-7),  # 2.29e-7 at x = -3.87
}

# (x, expected) for each function: the IEEE answers at infinities, NaN and the domain's edges.
SPECIALS = {
    "tanh_f32": [(INF, 1.0), (-INF, -1.0), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (1e-45, 1e-45), (-1e-45, -1e-45)],
    "sigmoid_f32": [(INF, 1.0), (-INF, 0.0), (NAN, NAN), (0.0, 0.5)],
    "exp_f32": [(INF, INF), (-INF, 0.0), (NAN, NAN), (0.0, 1.0), (89.0, INF), (-104.0, 0.0)],
    "log_f32": [(INF, INF), (-INF, NAN), (NAN, NAN), (0.0, -INF), (-0.0, -INF), (-1.0, NAN), (1.0, 0.0),
                (1e-45, np.log(np.float64(F32(1e-45))))],
    # (expm1 of a subnormal x may lose x's last bits: x/2 underflows inside; 1e-45 gives 0)
    "expm1_f32": [(INF, INF), (-INF, -1.0), (NAN, NAN), (0.0, 0.0), (-0.0, -0.0), (1e-30, 1e-30), (-1e-30, -1e-30)],
    "log1p_f32": [(INF, INF), (NAN, NAN), (-1.0, -INF), (-2.0, NAN), (0.0, 0.0), (-0.0, -0.0), (1e-45, 1e-45)],
    "softplus_f32": [(INF, INF), (-INF, 0.0), (NAN, NAN), (0.0, np.log(2.0))],
}


def _error(y: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return np.abs(y.astype(np.float64) - ref) / np.maximum(np.abs(ref), TINY)


@pytest.mark.parametrize("name", sorted(FLOAT32_FUNCTIONS))
def test_float32_function_is_within_its_error_bound_on_a_dense_sweep(name):
    reference, bound = FLOAT32_FUNCTIONS[name]
    f = getattr(mathfn, name)
    y = _apply(f, SWEEP)
    assert y.dtype == F32
    with np.errstate(all="ignore"):
        ref = reference(SWEEP.astype(np.float64))
        ref32 = ref.astype(F32)
    finite = np.isfinite(ref32)
    # Where the float32 answer is ±inf, NaN, or overflows: exactly that.
    np.testing.assert_array_equal(y[~finite], ref32[~finite])
    error = _error(y[finite], ref[finite])
    worst = int(np.argmax(error))
    assert error[worst] < bound, f"{name}({SWEEP[finite][worst]!r}) = {y[finite][worst]!r}, " \
                                 f"reference {ref[finite][worst]!r}: error {error[worst]:.3g} >= {bound:.3g}"


@pytest.mark.parametrize("name", sorted(SPECIALS))
def test_float32_function_gives_the_ieee_answers_at_infinities_nan_and_domain_edges(name):
    xs, expected = np.array(SPECIALS[name], F32).T
    y = _apply(getattr(mathfn, name), xs)
    np.testing.assert_allclose(y, expected, rtol=4e-7, atol=0)  # NaN where NaN, inf where inf
    np.testing.assert_array_equal(np.signbit(y[y == 0]), np.signbit(expected[y == 0]))


@pytest.mark.skipif(llvm.llvm_version_info < (16,), reason="llvm.ldexp needs LLVM 16")
def test_exp_f32s_two_ways_of_scaling_by_a_power_of_two_give_the_same_bits():
    """exp_f32's e * 2**n: llvm.ldexp where the CPU has AVX-512, two factors elsewhere (mathfn._scaling);
    for every n it takes (subnormal and infinite results included), the same bits."""

    @njit
    def both(es, ns, ldexp, factors):
        for i in range(es.shape[0]):
            ldexp[i] = mathfn._scale_by_ldexp(es[i], ns[i])
            factors[i] = mathfn._scale_by_factors(es[i], ns[i])

    es = np.repeat(np.array([0.70710677, 0.75, 1.0, 1.2345, 1.4142135], F32), 281)
    ns = np.tile(np.arange(-151, 130, dtype=F32), 5)
    ldexp, factors = np.empty_like(es), np.empty_like(es)
    both(es, ns, ldexp, factors)
    np.testing.assert_array_equal(ldexp.view(np.int32), factors.view(np.int32))
    assert np.isinf(ldexp[ns == 129]).all() and (ldexp[ns == -151] <= 2 ** -149).all()


def test_tanh_f32_is_odd_and_bounded():
    xs = SWEEP[SWEEP >= 0]
    y, y_neg = _apply(mathfn.tanh_f32, xs), _apply(mathfn.tanh_f32, -xs)
    np.testing.assert_array_equal(y_neg, -y)
    assert np.all(np.abs(y) <= 1)


@pytest.mark.parametrize("dtype, bits", [(np.float32, np.uint32), (np.float64, np.uint64)])
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_and_minimum_match_numpy_bit_for_bit(name, dtype, bits):
    other_nan = np.array([np.nan], dtype)
    other_nan.view(bits)[0] |= 1  # another payload: which NaN comes out is NumPy's too
    values = np.concatenate([np.array([0.0, -0.0, 1.0, -1.0, 3.0, 1e-45, -1e-45, INF, -INF, NAN, -NAN], dtype),
                             other_nan, -other_nan])
    a, b = (g.ravel() for g in np.meshgrid(values, values))
    got = _apply2(getattr(mathfn, name), a, b, np.empty_like(a))
    np.testing.assert_array_equal(got.view(bits), getattr(np, name)(a, b).view(bits))


# ---------------------------------------------------------------------------------------------
# mathfn: integer helpers


@njit(error_model="numpy")
def _convert(f, xs, out):
    for i in range(xs.size):
        out[i] = f(xs[i])  # the store converts to out's dtype, as in a kernel
    return out


@njit(error_model="numpy")
def _apply2(f, a, b, out):
    for i in range(a.size):
        out[i] = f(a[i], b[i])  # the store wraps to the output's width, as in a kernel
    return out


def _edge_ints(dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    values = [info.min, info.min + 1, -(2**31), -(2**31) + 1, -1000, -7, -3, -2, -1, 0, 1, 2, 3, 7, 1000,
              2**31 - 1, 2**31, info.max - 1, info.max]
    rng = np.random.default_rng(1)
    wide = [int(v) for v in rng.integers(info.min, info.max, 40, dtype=dtype, endpoint=True)]
    return np.array(sorted({v for v in values + wide if info.min <= v <= info.max}), dtype)


def _pairs(dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of edge values, without a zero divisor."""
    values = _edge_ints(dtype)
    a, b = (g.ravel() for g in np.meshgrid(values, values))
    return a[b != 0], b[b != 0]


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("helper_name, reference", [
    ("div_int", lambda a, b: run_div(a, b)),
    ("mod_int", lambda a, b: run_mod(a, b)),
    ("fmod_int", lambda a, b: run_mod(a, b, fmod=1)),
])
def test_integer_division_helpers_match_the_interpreter_including_int_min_by_minus_one(helper_name, reference,
                                                                                       dtype):
    a, b = _pairs(dtype)
    assert np.any((a == np.iinfo(dtype).min) & (b == -1))
    got = _apply2(getattr(mathfn, helper_name), a, b, np.empty_like(a))
    with np.errstate(all="ignore"):
        expected = reference(a, b)
    np.testing.assert_array_equal(got, expected)


def test_integer_division_helpers_raise_on_a_zero_divisor():
    for name in ("div_int", "mod_int", "fmod_int"):
        for a in (0, 5, -5, np.iinfo(np.int64).min):
            with pytest.raises(ZeroDivisionError):
                getattr(mathfn, name)(np.int64(a), np.int64(0))
    with pytest.raises(ZeroDivisionError):
        mathfn.pow_int(np.int64(0), np.int64(-1))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pow_int_wraps_like_the_interpreter_and_truncates_negative_powers(dtype):
    values = _edge_ints(dtype)
    exponents = np.array([-(2**31) + 1, -3, -2, -1, 0, 1, 2, 3, 5, 31, 32, 63, 64, 2**31 - 1], dtype)
    a, b = (g.ravel() for g in np.meshgrid(values, exponents))
    keep = ~((a == 0) & (b < 0))
    a, b = a[keep], b[keep]
    got = _apply2(mathfn.pow_int, a, b, np.empty_like(a))
    np.testing.assert_array_equal(got, run_pow(a, b))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_pow_int_to_the_most_negative_exponent_truncates_to_zero_or_one(dtype):
    x = np.array([-3, -2, -1, 1, 2, 3], dtype)
    y = np.full(x.shape, np.iinfo(dtype).min, dtype)  # even, and -y overflows
    got = _apply2(mathfn.pow_int, x, y, np.empty_like(x))
    np.testing.assert_array_equal(got, np.array([0, 0, 1, 1, 0, 0], dtype))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_interpreter_pow_to_the_most_negative_exponent_truncates_to_zero_or_one(dtype):
    x = np.array([-3, -2, -1, 1, 2, 3], dtype)
    y = np.full(x.shape, np.iinfo(dtype).min, dtype)
    np.testing.assert_array_equal(run_pow(x, y), np.array([0, 0, 1, 1, 0, 0], dtype))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("source", [np.float32, np.float64])
def test_float_to_int_matches_numpy_astype_for_nan_infinities_and_out_of_range(source, dtype):
    info = np.iinfo(dtype)
    special = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.99, 1e10, -1e10, 1e19, -1e19,
               1e30, -1e30, float(info.max), float(info.min), float(info.min) - 1.0, float(info.min) - 0.5,
               float(info.max) + 1.0, 2.0**31 - 0.5, -(2.0**31) - 0.5, 2.0**31, -(2.0**31), 2.0**63, -(2.0**63),
               2.0**63 - 1024, -(2.0**63) - 2048]
    rng = np.random.default_rng(2)
    xs = np.concatenate([np.array(special), rng.standard_normal(1000) * 10.0 ** rng.integers(0, 21, 1000)])
    xs = xs.astype(source)
    got = _convert(getattr(mathfn, f"float_to_{np.dtype(dtype).name}"), xs, np.empty(xs.shape, dtype))
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        expected = xs.astype(dtype)
    np.testing.assert_array_equal(got, expected)


# ---------------------------------------------------------------------------------------------
# Every elementwise op compiled, against the interpreter
#
# Each case applies one op to graph inputs (or constants); its result is a graph output. Cases are
# grouped into a few regions per dtype. Compile time is what limits this: about 0.3 s per op with a
# cold cache (3.5 s for the first float32 chunk of 12, the helpers already compiled), growing faster
# than linearly with the size of one region (so groups of at most CHUNK ops), and more for
# broadcasting operands. So every (op, dtype) pair the rules compile runs once on 1-D inputs that
# hold the special values (binary ops on the flattened grid of all pairs), and broadcasting ([4, 1]
# with [5], rank 0 with [2, 3]), constant operands and non-default attributes run on a few ops.

DTYPES = {"float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64, "bool": np.bool_}
ONNX_TYPES = {np.dtype(t): helper.np_dtype_to_tensor_dtype(np.dtype(t)) for t in DTYPES.values()}
CHUNK = 12


def _grid(a: list, b: list, dtype) -> tuple[np.ndarray, np.ndarray]:
    """Every pair (a[i], b[j]), as two 1-D arrays."""
    ga, gb = np.meshgrid(np.array(a, dtype), np.array(b, dtype), indexing="ij")
    return ga.ravel(), gb.ravel()


def _inputs(dtype: str) -> dict[str, np.ndarray]:
    """The graph inputs of `dtype`'s cases: special values, grids of pairs, shapes that broadcast."""
    t = DTYPES[dtype]
    if dtype == "bool":
        p, q = _grid([False, True], [False, True], t)
        return {"P": p, "Q": q, "R": np.array([True, False, True, False]), "S": np.array(False),
                "C": np.array([[True, False, True], [False, False, True]]), "W": np.array([[True], [False], [True], [False]]),
                "B": np.array([True, False, False, True, True])}
    if dtype.startswith("float"):
        tiny, big = (1e-40, 1e30) if t == np.float32 else (1e-310, 1e300)
        special = [NAN, INF, -INF, 0.0, -0.0, -2.5, 1.5, 3.0, 1e-3, -7.0]
        ga, gb = _grid(special, special, t)
        return {
            "X": np.array([NAN, INF, -INF, 0.0, -0.0, -1.5, 2.5, 1e-3, -7.0, 0.5, big, -tiny, 88.5, -100.0, 3.0, -0.5,
                           100.0, -2.5, 1.5, 0.75, -0.75, 1e-7, -30.0, 700.0], t),
            "GA": ga, "GB": gb, "GW": (np.arange(ga.size) % 3 == 0),
            "GE": np.tile(np.array([-2, 0, 1, 3, 2, -1, 4, 0, 5, 1], np.int64), len(special)),  # integer exponents
            "A": np.array([[-2.5], [0.0], [INF], [NAN]], t), "B": np.array([1.5, -0.0, -3.0, INF, 2.0], t),
            "S": np.array(-1.25, t), "C": np.array([[0.0, -2.0, 3.5], [INF, NAN, -0.0]], t),
            "W": np.array([[True], [False], [True], [False]])}
    info = np.iinfo(t)
    ga, gb = _grid([info.min, info.min + 1, -7, -2, -1, 0, 1, 2, 7, 13, info.max],
                   [info.min, -7, -3, -1, 1, 2, 5, info.max], t)  # divisors: no zero
    gp, gn = _grid([-3, -2, -1, 1, 2, 3, info.min, info.max], [-3, -2, -1, 0, 1, 2, 31, 62], t)  # no 0 ** -n
    return {
        "X": np.array([info.min, info.max, -1, 0, 1, -7, 7, 100, -100, 3, -3, 2, -2, 5, info.min + 1, info.max - 1], t),
        "GA": ga, "GB": gb, "GW": (np.arange(ga.size) % 3 == 0), "GP": gp, "GN": gn,
        "GF": np.resize(np.array([0.5, -1.0, 2.0, 40.0, NAN, -0.5, 3.0, INF], np.float32), gp.size),
        "A": np.array([[info.min], [-7], [0], [13]], t), "B": np.array([-1, 2, -3, 5, info.max], t),
        "S": np.array(-3, t), "C": np.array([[0, 7, -8], [info.min, info.max, 1]], t),
        "W": np.array([[True], [False], [True], [False]])}


_COMPARE = ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]
_ARITHMETIC = ["Add", "Sub", "Mul", "Div", "Mod", "Max", "Min"]
_FLOAT_UNARY = ["Neg", "Abs", "Sign", "Relu", "Reciprocal", "Sqrt", "Exp", "Log", "Floor", "Ceil", "Round", "Sin",
                "Cos", "Erf", "Tanh", "Sigmoid", "Softplus", "Softsign", "Elu", "Selu", "LeakyRelu",
                "ThresholdedRelu", "HardSigmoid", "IsNaN", "IsInf", "Gelu", "HardSwish", "Mish", "Celu", "Shrink"]
# Non-default attributes, used in float32 (float64 runs the defaults).
_FLOAT_ATTRIBUTES = {"Celu": {"alpha": 0.7}, "Shrink": {"lambd": 1.5, "bias": 0.75}, "Elu": {"alpha": 0.7}, "Selu": {"alpha": 1.5, "gamma": 2.0}, "LeakyRelu": {"alpha": 0.1},
                     "ThresholdedRelu": {"alpha": 0.75}, "HardSigmoid": {"alpha": 0.3, "beta": 0.4}}


def _casts(source: str, x: str) -> list:
    return [(f"Cast_to_{name}", "Cast", [x], {"to": ONNX_TYPES[np.dtype(t)]}) for name, t in DTYPES.items()
            if name != source]


def _cases(dtype: str) -> list[tuple[str, str, list[str], dict]]:
    """(name, op type, inputs, attributes); "lo", "hi", "two" (rank 0) and "vec" ([5]) are constants."""
    if dtype == "bool":
        return ([(f"{op}_PxQ", op, ["P", "Q"], {}) for op in ("And", "Or", "Xor", "Equal")]
                + [("Not_R", "Not", ["R"], {}), ("Where_PxQxP", "Where", ["P", "Q", "P"], {}),
                   ("And_SxC", "And", ["S", "C"], {}), ("Or_WxB", "Or", ["W", "B"], {}),
                   ("Xor_R_true", "Xor", ["R", "true"], {}), ("Not_S", "Not", ["S"], {})]
                + _casts(dtype, "R"))
    floats, main = dtype.startswith("float"), dtype in ("float32", "int32")
    cases = [(f"{op}_grid", op, ["GA", "GB"], {}) for op in _ARITHMETIC + _COMPARE]
    cases += [("Mod_fmod_grid", "Mod", ["GA", "GB"], {"fmod": 1}), ("Where_grid", "Where", ["GW", "GA", "GB"], {}),
              ("Max_3_inputs", "Max", ["GA", "GB", "GA"], {}), ("PRelu_grid", "PRelu", ["GA", "GB"], {}),
              ("Clip_X_lo_hi", "Clip", ["X", "lo", "hi"], {}), ("Add_AxB", "Add", ["A", "B"], {})]
    cases += [(f"{op}_X", op, ["X"], _FLOAT_ATTRIBUTES.get(op, {}) if main else {})
              for op in (_FLOAT_UNARY if floats else ["Neg", "Abs", "Sign", "Relu", "Shrink"])]
    cases += _casts(dtype, "X")
    if floats:
        cases += [("Pow_grid", "Pow", ["GA", "GB"], {}), ("Pow_int_exponent", "Pow", ["GA", "GE"], {}),
                  ("Sum_3_inputs", "Sum", ["GA", "GB", "GA"], {}), ("Mean_3_inputs", "Mean", ["GA", "GB", "GA"], {})]
    else:
        cases += [("Pow_grid", "Pow", ["GP", "GN"], {}), ("Pow_float_exponent", "Pow", ["GP", "GF"], {})]
    if not main:
        return cases
    cases += [("Min_3_inputs", "Min", ["GA", "GB", "GA"], {}), ("Where_WxAxB", "Where", ["W", "A", "B"], {}),
              ("Mul_SxC", "Mul", ["S", "C"], {}), ("Max_AxBxS", "Max", ["A", "B", "S"], {}),
              ("Add_X_two", "Add", ["X", "two"], {}), ("Sub_vec_A", "Sub", ["vec", "A"], {}), ("Neg_S", "Neg", ["S"], {}),
              ("Clip_X", "Clip", ["X"], {}), ("Clip_X_S", "Clip", ["X", "S"], {}), ("Clip_X_hi", "Clip", ["X", "", "hi"], {})]
    if floats:
        cases += [("Pow_SxC", "Pow", ["S", "C"], {}), ("Less_AxB", "Less", ["A", "B"], {}), ("Exp_S", "Exp", ["S"], {}),
                  ("IsInf_positive_only", "IsInf", ["X"], {"detect_negative": 0}),
                  ("Gelu_tanh_X", "Gelu", ["X"], {"approximate": "tanh"}),
                  ("IsInf_negative_only", "IsInf", ["X"], {"detect_positive": 0})]
    else:  # an integer divisor must not be 0: the rank-0 S is the divisor
        cases += [("Div_CxS", "Div", ["C", "S"], {}), ("Mod_CxS", "Mod", ["C", "S"], {}),
                  ("Mod_fmod_AxB", "Mod", ["A", "B"], {"fmod": 1})]
    return cases


def _chunks(dtype: str) -> list[list]:
    cases = _cases(dtype)
    return [cases[k:k + CHUNK] for k in range(0, len(cases), CHUNK)]


# Ops whose kernels call mathfn's fast float32 functions or libm where NumPy has its own (SIMD)
# implementations: float32 within ~4e-7 (plus FLT_MIN: scipy's float32 expit flushes sigmoid(-100)
# = 3.7e-44 to 0, the kernel does not), float64 within an ulp or two. Everything else is exact.
TRANSCENDENTAL = {"Exp", "Log", "Tanh", "Sigmoid", "Softplus", "Elu", "Selu", "Sin", "Cos", "Erf", "Pow", "ScaledTanh",
                  "Gelu", "Mish", "Celu"}
TOLERANCE = {"float32": (1e-6, TINY), "float64": (1e-15, 0.0)}
# Gelu's erfc: libm's (the kernel) and SciPy's (the interpreter) differ by up to ~20 ulp in the far
# tail (4e-15 relative at x = -7, where the result is 9e-12).
OP_TOLERANCE = {("Gelu", "float64"): (2e-14, 0.0)}


def assert_matches(actual: np.ndarray, expected: np.ndarray, dtype: str, op: str, what: str = "") -> None:
    """Equal dtype and shape; values exactly (NaN where NaN), or to TOLERANCE for TRANSCENDENTAL ops."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, what
    if op in TRANSCENDENTAL and dtype in TOLERANCE:
        rtol, atol = OP_TOLERANCE.get((op, dtype), TOLERANCE[dtype])
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)
    else:
        np.testing.assert_array_equal(actual, expected, err_msg=what)


_CONSTANT_SHAPES = {"lo": (), "hi": (), "two": (), "vec": (5,), "true": ()}


def _constant_nodes(dtype: str) -> list[onnx.NodeProto]:
    t = DTYPES[dtype]
    if dtype == "bool":
        return [helper.make_node("Constant", [], ["true"], value=helper.make_tensor("true", TensorProto.BOOL, [], [True]))]
    floats = np.dtype(t).kind == "f"
    values = {"lo": np.array(-1.5 if floats else -7, t), "hi": np.array(2.0 if floats else 100, t),
              "two": np.array(2, t), "vec": np.arange(-2, 3).astype(t)}
    return [helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(v, name))
            for name, v in values.items()]


def _output_dtype(op: str, attrs: dict, in_dtypes: list) -> np.dtype:
    if op in _COMPARE + ["And", "Or", "Xor", "Not", "IsNaN", "IsInf"]:
        return np.dtype(np.bool_)
    if op == "Cast":
        return np.dtype(helper.tensor_dtype_to_np_dtype(attrs["to"]))
    return in_dtypes[1] if op == "Where" else in_dtypes[0]


def elementwise_model(dtype: str, cases: list) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A graph that applies `cases` to its inputs, each result an output; returns the model and its
    feeds. One compiled region holds every case, each case's nest written as it would be in a loop
    body (tests/test_fused_differential.py puts random elementwise ops in loop bodies). It was a Loop
    whose body computed the cases from captured inputs, which the compiler hoisted out of the loop:
    twice the compile time for the same nests."""
    feeds = _inputs(dtype)
    shapes = {**{n: v.shape for n, v in feeds.items()}, **_CONSTANT_SHAPES}
    dtypes = {**{n: v.dtype for n, v in feeds.items()}, **{n: np.dtype(DTYPES[dtype]) for n in _CONSTANT_SHAPES}}
    dtypes["true"] = np.dtype(np.bool_)
    nodes, outs = _constant_nodes(dtype), []
    for name, op, inputs, attrs in cases:
        nodes.append(helper.make_node(op, inputs, [f"y_{name}"], name=name, **attrs))
        out_dtype = _output_dtype(op, attrs, [dtypes.get(i) for i in inputs])
        outs.append((name, out_dtype, np.broadcast_shapes(*(shapes[i] for i in inputs if i))))
    used = {i for _, _, inputs, _ in cases for i in inputs}
    feeds = {n: v for n, v in feeds.items() if n in used}
    graph = helper.make_graph(
        nodes, f"elementwise_{dtype}",
        [helper.make_tensor_value_info(n, ONNX_TYPES[v.dtype], v.shape) for n, v in feeds.items()],
        [helper.make_tensor_value_info(f"y_{n}", ONNX_TYPES[d], s) for n, d, s in outs])
    # (opset 20: Gelu's)
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", 20)]), feeds


@functools.cache
def _results(dtype: str, chunk: int) -> tuple[dict, dict]:
    """(interp, numba) results by case name of one group of cases, computed once per session."""
    cases = _chunks(dtype)[chunk]
    model, feeds = elementwise_model(dtype, cases)
    expected = rnnloop.load(model, backend="interp").run(None, feeds)
    session = rnnloop.load(model, backend="numba", strict=True)  # the region must compile
    assert "interpreted" not in session.explain(), session.explain()  # every op in it
    actual = session.run(None, feeds)
    names = [name for name, *_ in cases]
    return dict(zip(names, expected)), dict(zip(names, actual))


# (dtype, case): why the fused result differs from the interpreter's (code generator bugs to fix).
KNOWN_BUGS: dict[tuple[str, str], str] = {}
# The same for the signs of zero results (assert_array_equal takes -0.0 == 0.0).
ZERO_SIGN_BUGS: dict[tuple[str, str], str] = {}


def _params(bugs: dict):
    for dtype in DTYPES:
        for chunk, cases in enumerate(_chunks(dtype)):
            for name, op, _, _ in cases:
                marks = [pytest.mark.xfail(strict=True, reason=bugs[dtype, name])] if (dtype, name) in bugs else []
                if dtype != "float32":  # one kernel per chunk of a dtype: seconds each
                    marks.append(pytest.mark.slow)
                yield pytest.param(dtype, chunk, name, op, id=f"{dtype}-{name}", marks=marks)


def test_every_elementwise_op_and_compiled_dtype_is_covered():
    covered = {(op, dtype) for dtype in DTYPES for _, op, *_ in _cases(dtype)}
    covered |= {(op, dtype) for op, dtypes in IR_ONLY.items() for dtype in dtypes}
    compiled = {(op, dtype) for op, (_, kinds) in scalar._RULES.items()
                for dtype, t in DTYPES.items() if np.dtype(t).kind in kinds}
    assert sorted(compiled - covered) == []
    assert {op for op, _ in compiled} == set(scalar.ELEMENTWISE)


@pytest.mark.parametrize("dtype, chunk, name, op", list(_params(KNOWN_BUGS)))
def test_fused_elementwise_op_matches_the_interpreter(dtype, chunk, name, op):
    expected, actual = (r[name] for r in _results(dtype, chunk))
    assert_matches(actual, expected, dtype, op, name)


@pytest.mark.parametrize("dtype, chunk, name, op", [p for p in _params(ZERO_SIGN_BUGS) if p.values[0].startswith("float")])
def test_fused_elementwise_op_gives_zeros_the_interpreters_sign(dtype, chunk, name, op):
    expected, actual = (r[name] for r in _results(dtype, chunk))
    if expected.dtype.kind != "f" or op in TRANSCENDENTAL:
        return
    zeros = (expected == 0) & (actual == 0)
    np.testing.assert_array_equal(np.signbit(actual[zeros]), np.signbit(expected[zeros]), err_msg=name)


# ---------------------------------------------------------------------------------------------
# Ops the code generator compiles that ONNX cannot express this way: ScaledTanh and Affine (LSTM
# activation functions, no longer ONNX ops) and Sum of integers. Built as IR with rnnloop.builder.

IR_ONLY = {"ScaledTanh": ("float32", "float64"), "Affine": ("float32", "float64"), "Sum": ("int32", "int64")}


def _ir_session(dtype: str, backend: str) -> tuple[rnnloop.Session, dict[str, np.ndarray], list[str]]:
    """A Loop (trip count 2) over the IR-only ops of `dtype`; returns the session, feeds and case names."""
    feeds = _inputs(dtype)
    b = Builder("ir_only")
    names = [b.input(n, TensorType(v.dtype, v.shape)) for n, v in feeds.items() if n in ("X", "A", "B", "S")]
    trip = b.constant(np.array(2, np.int64), "M")
    body = b.sub("body")
    body.input("i", TensorType(np.dtype(np.int64), ()))
    cond = body.input("cond_in", TensorType(np.dtype(np.bool_), ()))
    inner = {n: body.input(f"{n}_in", TensorType(feeds[n].dtype, feeds[n].shape)) for n in names}
    body.output(body.op1("Identity", cond))
    cases = []
    t = np.dtype(DTYPES[dtype])
    if dtype.startswith("float"):
        for name, op, attrs in [("ScaledTanh_X", "ScaledTanh", {}),
                                ("ScaledTanh_alpha_beta", "ScaledTanh", {"alpha": 1.5, "beta": 0.5}),
                                ("Affine_X", "Affine", {}), ("Affine_alpha_beta", "Affine", {"alpha": -2.0, "beta": 0.25})]:
            cases.append((name, body.op1(op, inner["X"], **attrs)))
    else:
        cases.append(("Sum_ABS", body.op1("Sum", inner["A"], inner["B"], inner["S"])))
        cases.append(("Sum_X", body.op1("Sum", inner["X"])))
    for _, out in cases:
        body.set_type(out, TensorType(t, None))
        body.output(out)
    outs = b.loop(body.graph, trip_count=trip, invariants=names, stacked=[Stack(axis=0)] * len(cases),
                  body_iteration=True, body_cond_in=True, body_cond_out=True)
    for out in outs:
        b.output(out)
    session = rnnloop.Session(b.graph, backend=backend, strict=backend == "numba")
    return session, {n: feeds[n] for n in names}, [name for name, _ in cases]


@pytest.mark.parametrize("dtype", ["float32"] + [pytest.param(d, marks=pytest.mark.slow)  # (a kernel each)
                                   for d in ("float64", "int32", "int64")])
def test_fused_ops_only_the_ir_expresses_match_the_interpreter(dtype):
    (expected_session, feeds, names), (fused, _, _) = (_ir_session(dtype, be) for be in ("interp", "numba"))
    expected, actual = expected_session.run(None, feeds), fused.run(None, feeds)
    for name, e, a in zip(names, expected, actual):
        assert_matches(a, e, dtype, name.split("_")[0], name)


# ---------------------------------------------------------------------------------------------
# Integer division by zero has no value: a RunError naming the node, under both backends.


def zero_divisor_model() -> onnx.ModelProto:
    """A Loop (trip count 2) with one integer Div, Mod, Mod(fmod=1) and Pow each, named after the op."""
    i32, i64 = TensorProto.INT32, TensorProto.INT64
    nodes = [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Div", ["a", "d"], ["q"], name="divide"),
             helper.make_node("Mod", ["b", "e"], ["r"], name="remainder"),
             helper.make_node("Mod", ["a", "f"], ["s"], name="fmod", fmod=1),
             helper.make_node("Pow", ["a", "f"], ["p"], name="power")]
    outputs = [("q", i32), ("r", i64), ("s", i32), ("p", i32)]
    body = helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", i64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, [])]
        + [helper.make_tensor_value_info(n, t, [3]) for n, t in outputs])
    trip = helper.make_node("Constant", [], ["M"], value=helper.make_tensor("M", i64, [], [2]))
    loop = helper.make_node("Loop", ["M", ""], [f"all_{n}" for n, _ in outputs], name="divisions", body=body)
    inputs = [("a", i32), ("d", i32), ("b", i64), ("e", i64), ("f", i32)]
    graph = helper.make_graph([trip, loop], "zero_divisors", [helper.make_tensor_value_info(n, t, [3]) for n, t in inputs],
                              [helper.make_tensor_value_info(f"all_{n}", t, [2, 3]) for n, t in outputs])
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", 17)])


def _divisor_feeds(zero: str) -> dict[str, np.ndarray]:
    feeds = {"a": np.array([7, -7, 0], np.int32), "d": np.array([2, -3, 5], np.int32),
             "b": np.array([7, -7, 9], np.int64), "e": np.array([2, -3, 4], np.int64), "f": np.array([3, 2, 1], np.int32)}
    if zero == "power":  # a[2] ** f[2] = 0 ** -1
        feeds["f"][2] = -1
    elif zero:
        name = {"divide": "d", "remainder": "e", "fmod": "f"}[zero]
        feeds[name][2] = 0
    return feeds


def test_integer_divisions_without_a_zero_divisor_match(backend):
    session = rnnloop.load(zero_divisor_model(), backend=backend, strict=backend == "numba")
    q, r, s, p = session.run(None, _divisor_feeds(""))
    np.testing.assert_array_equal(q, [[3, 2, 0]] * 2)
    np.testing.assert_array_equal(r, [[1, -1, 1]] * 2)
    np.testing.assert_array_equal(s, [[1, -1, 0]] * 2)
    np.testing.assert_array_equal(p, [[343, 49, 0]] * 2)


@pytest.mark.parametrize("node, op", [("divide", "Div"), ("remainder", "Mod"), ("fmod", "Mod"), ("power", "Pow")])
def test_integer_division_by_zero_is_a_run_error_naming_the_node(node, op, backend):
    session = rnnloop.load(zero_divisor_model(), backend=backend, strict=backend == "numba")
    message = r"division by zero" if op != "Pow" else r"0 raised to a negative integer power"
    with pytest.raises(rnnloop.RunError, match=rf"^{op} '{node}' \(ai.onnx opset 17\): .*{message}"):
        session.run(None, _divisor_feeds(node))


@njit
def _max_of(a, lo, n):
    return mathfn.max_of(a, lo, n)


@njit
def _sum_run(a, lo, n):
    return mathfn.sum_run(a, lo, n)


@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.float64, marks=pytest.mark.slow)])
def test_maxima_and_sums_over_eight_lanes_are_numpys_bit_for_bit(dtype):
    """max_of and sum_run keep NumPy's eight running maxima and partial sums in one vector (lanes.py)
    where the array is contiguous, in eight scalars where it is not (float32 here; as for integers):
    the same results either way."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(400).astype(dtype) * 1000
    x[50], x[51], x[90], x[91] = -0.0, 0.0, 0.0, -0.0  # ties of zeros: which one wins depends on the order
    for a in (x, x[::3]) if dtype == np.float32 else (x,):  # contiguous, then strided
        for lo in (0, 5):
            for n in (1, 7, 8, 15, 16, 17, 40, 63, 64, 127, 128):
                expected = np.max(a[lo:lo + n])
                actual = _max_of(a, lo, n)
                assert actual == expected and np.signbit(actual) == np.signbit(expected), (a.strides, lo, n)
                if n >= 8:  # (under eight NumPy's reduce starts from the first element, not 0)
                    assert _sum_run(a, lo, n) == np.add.reduce(a[lo:lo + n]), (a.strides, lo, n)
    for where in (3, 20, 39):  # NaN in a lane, and in the tail
        y = x[:40].copy()
        y[where] = np.nan
        assert np.isnan(_max_of(y, 0, 40)) and np.isnan(_sum_run(y, 0, 40))


def test_long_maxima_take_any_order_only_where_the_order_cannot_show():
    """max_of over 32 or more runs four vectors in any order, and its eight running maxima (the
    order a strided array always takes) where the largest is a zero, whose sign the order picks, or
    NaN: np.max's value, and the sign bit of the eight maxima's order."""
    rng = np.random.default_rng(6)
    for n in (32, 33, 100, 400):
        for lo in (0, 3):
            x = -np.abs(rng.standard_normal(n + lo)).astype(np.float32)
            zeros = rng.choice(np.arange(lo, n + lo), 4, replace=False)
            x[zeros] = [-0.0, 0.0, 0.0, -0.0]  # the largest is a zero: which one depends on the order
            for row in (x, np.abs(x), -np.abs(x) - 1):
                spaced = np.zeros(2 * row.size, row.dtype)
                spaced[::2] = row
                ordered = _max_of(spaced[::2], lo, n)
                actual = _max_of(row, lo, n)
                assert actual == np.max(row[lo:lo + n]) and np.signbit(actual) == np.signbit(ordered), (n, lo)
            for where in (lo, lo + 17, lo + n - 1):  # NaN in the vectors and in the tail
                y = x.copy()
                y[where] = np.nan
                assert np.isnan(_max_of(y, lo, n))
