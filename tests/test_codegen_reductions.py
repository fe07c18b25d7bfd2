"""Reductions, Softmax/LogSoftmax, ArgMax/ArgMin and batched MatMul fuse into the loop kernel and match
the interpreter: every axes/keepdims form, every compiled dtype, NaN, infinities, ties and empty sets.

Each test builds one Loop whose body applies a group of ops to a carried value (so they run every
iteration) or to an outer-scope value (so they are hoisted before the loop), loads it with
strict=True (an error unless the loop fuses) and compares every output with backend="interp", the
specification. A kernel costs seconds to compile, so each group is one kernel fed many ways.
"""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from helpers import parse, thin

import rnnloop

ONNX_TYPES = {"float32": "float", "float64": "double", "int32": "int32", "int64": "int64"}
TOLERANCE = {"float32": {"rtol": 1e-6, "atol": 1e-6}, "float64": {"rtol": 1e-12, "atol": 1e-12},
             "int32": {"rtol": 0, "atol": 0}, "int64": {"rtol": 0, "atol": 0}}

# Axes as constant inputs (ReduceSum since opset 13, the other reductions since 18).
AXES = """
        ax1 = Constant <value = int64[1] {1}> ()
        ax02 = Constant <value = int64[2] {0, 2}> ()
        ax_last = Constant <value = int64[1] {-1}> ()
        ax0 = Constant <value = int64[1] {0}> ()
        ax20 = Constant <value = int64[2] {2, 0}> ()
        no_axes = Constant <value = int64[0] {}> ()
"""

# Each group of ops is the body of one loop, so one kernel: (output, type in the body, op), where
# x is [A, B, C] and xt is x transposed to [C, A, B] (a strided view).
GROUPS = {
    "sums": [
        ("sum1", "D[A, C]", "ReduceSum <keepdims = 0> (x, ax1)"),
        ("sum_noop", "D[A, B, C]", "ReduceSum <noop_with_empty_axes = 1> (x, no_axes)"),
        ("sum_all", "D[1, 1, 1]", "ReduceSum (x)"),
        ("mean02", "D[1, B, 1]", "ReduceMean (x, ax02)"),
        ("mean_noop", "D[A, B, C]", "ReduceMean <noop_with_empty_axes = 1, keepdims = 0> (x)"),
        ("l2_20", "D[B]", "ReduceL2 <keepdims = 0> (x, ax20)"),
        ("l2_1", "D[A, 1, C]", "ReduceL2 (x, ax1)"),
        ("l2_noop", "D[A, B, C]", "ReduceL2 <noop_with_empty_axes = 1> (x)"),
        ("w_sum", "D[B]", "ReduceSum <keepdims = 0> (w, ax02)"),  # invariant: hoisted before the loop
    ],
    "extremes": [
        ("max_all", "D", "ReduceMax <keepdims = 0> (x)"),
        ("max0", "D[1, B, C]", "ReduceMax (x, ax0)"),
        ("min_last", "D[A, B, 1]", "ReduceMin (x, ax_last)"),
        ("min02", "D[B]", "ReduceMin <keepdims = 0> (x, ax02)"),
        ("prod0", "D[B, C]", "ReduceProd <keepdims = 0> (x, ax0)"),
        ("prod_last", "D[A, B, 1]", "ReduceProd (x, ax_last)"),
        ("sum_t2", "D[C, A]", "ReduceSum <keepdims = 0> (xt, ax_last)"),
        ("max_t1", "D[C, 1, B]", "ReduceMax (xt, ax1)"),
    ],
    "arg": [
        ("amax1", "int64[A, C]", "ArgMax <axis = 1, keepdims = 0> (x)"),
        ("amax_last", "int64[A, B, 1]", "ArgMax <axis = -1, select_last_index = 1> (x)"),
        ("amin0", "int64[1, B, C]", "ArgMin <axis = 0, select_last_index = 1> (x)"),
        ("amin_last", "int64[A, B]", "ArgMin <axis = 2, keepdims = 0> (x)"),
        ("amax_t0", "int64[1, A, B]", "ArgMax (xt)"),
        ("amin_t1", "int64[C, B]", "ArgMin <axis = 1, keepdims = 0, select_last_index = 1> (xt)"),
    ],
    "logsumexp": [
        ("lse1", "D[A, 1, C]", "ReduceLogSumExp (x, ax1)"),
        ("lse_all", "D", "ReduceLogSumExp <keepdims = 0> (x)"),
        ("lse_t02", "D[A]", "ReduceLogSumExp <keepdims = 0> (xt, ax20)"),
        ("lse_noop", "D[A, B, C]", "ReduceLogSumExp <noop_with_empty_axes = 1> (x)"),
        ("mean_all", "D", "ReduceMean <keepdims = 0> (x)"),
    ],
    "softmax": [
        ("softmax_last", "D[A, B, C]", "Softmax (x)"),
        ("softmax0", "D[A, B, C]", "Softmax <axis = 0> (x)"),
        ("softmax_t1", "D[C, A, B]", "Softmax <axis = 1> (xt)"),
        ("logsoftmax1", "D[A, B, C]", "LogSoftmax <axis = 1> (x)"),
        ("logsoftmax_last", "D[A, B, C]", "LogSoftmax <axis = -1> (x)"),
        ("logsoftmax_w", "D[A, B, C]", "LogSoftmax <axis = 0> (w)"),
    ],
    "one_of_each": [
        ("sum_all", "D", "ReduceSum <keepdims = 0> (x)"),
        ("mean02", "D[1, B, 1]", "ReduceMean (x, ax02)"),
        ("max0", "D[1, B, C]", "ReduceMax (x, ax0)"),
        ("min_last", "D[A, B, 1]", "ReduceMin (x, ax_last)"),
        ("prod_t1", "D[C, B]", "ReduceProd <keepdims = 0> (xt, ax1)"),
        ("l2_20", "D[B]", "ReduceL2 <keepdims = 0> (x, ax20)"),
        ("amax_last", "int64[A, B, 1]", "ArgMax <axis = -1, select_last_index = 1> (x)"),
        ("amin_t0", "int64[A, B]", "ArgMin <axis = 0, keepdims = 0> (xt)"),
    ],
    "one_of_each_float": [
        ("lse1", "D[A, 1, C]", "ReduceLogSumExp (x, ax1)"),
        ("lse_all", "D", "ReduceLogSumExp <keepdims = 0> (x)"),
        ("softmax0", "D[A, B, C]", "Softmax <axis = 0> (x)"),
        ("softmax_last", "D[A, B, C]", "Softmax (x)"),
        ("logsoftmax1", "D[A, B, C]", "LogSoftmax <axis = 1> (x)"),
        ("logsoftmax_last", "D[A, B, C]", "LogSoftmax <axis = -1> (x)"),
    ],
}
# Every group for one dtype of each kind, a few for the other.
CASES = [("float32", g) for g in ("sums", "extremes", "arg", "logsumexp", "softmax")] + \
        [("float64", "one_of_each"), ("float64", "one_of_each_float")] + \
        [("int32", g) for g in ("sums", "extremes")] + [("int64", "one_of_each")]


def loop_model(dtype: str, ops: list[tuple[str, str, str]], opset: int = 18, setup: str = AXES) -> str:
    """A Loop over T iterations whose carried x grows by w each time; every op's result is scanned."""
    d = ONNX_TYPES[dtype]

    def typed(t: str, scan: bool) -> str:
        t = t.replace("D", d, 1) if t.startswith("D") else t
        if not scan:
            return t
        return t.replace("[", "[T, ") if "[" in t else f"{t}[T]"

    body_outs = ", ".join(f"{typed(t, False)} {name}_t" for name, t, _ in ops)
    outer_outs = ", ".join(f"{typed(t, True)} {name}" for name, t, _ in ops)
    lines = "\n".join(f"        {name}_t = {op}" for name, _, op in ops)
    names = ", ".join(name for name, _, _ in ops)
    return f"""
reduce (int64 T, {d}[A, B, C] x0, {d}[A, B, C] w) => ({d}[A, B, C] x_final, {outer_outs}) {{
    x_final, {names} = Loop(T, , x0) <body = step (int64 i, bool c, {d}[A, B, C] x_in)
                                      => (bool c_out, {d}[A, B, C] x_out, {body_outs}) {{
        c_out = Identity(c)
        x = Add(x_in, w)
        x_out = Identity(x)
        xt = Transpose <perm = [2, 0, 1]> (x)
{setup}
{lines}
    }}>
}}
"""


def assert_fused_matches_interpreter(model, feeds: dict, dtype: str) -> None:
    fused = rnnloop.load(model, backend="numba", strict=True)  # raises unless the loop is one kernel
    actual = fused.run(None, feeds)
    expected = rnnloop.load(model, backend="interp").run(None, feeds)
    names = [o.name for o in model.graph.output]
    for name, a, e in zip(names, actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape, (name, a.dtype, e.dtype, a.shape, e.shape)
        tolerance = TOLERANCE[dtype] if e.dtype.kind == "f" else TOLERANCE["int64"]
        np.testing.assert_allclose(a, e, **tolerance, err_msg=name)


def data(dtype: str, shape: tuple[int, ...], seed: int, kind: str = "ties") -> np.ndarray:
    """Small values: halves from -2 to 2 (many ties, exact in every dtype), or normal floats."""
    rng = np.random.default_rng(seed)
    if kind == "normal":
        return rng.standard_normal(shape).astype(dtype)
    values = rng.integers(-4, 5, shape)
    return (values * 0.5).astype(dtype) if dtype.startswith("float") else values.astype(dtype)


def feeds_for(dtype: str, shape: tuple[int, ...], kind: str = "ties", trips: int = 3) -> dict:
    return {"T": np.array(trips, np.int64), "x0": data(dtype, shape, 0, kind), "w": data(dtype, shape, 1, kind)}


def special_values(dtype: str) -> np.ndarray:
    x = data(dtype, (2, 3, 4), 2)
    x[0, 1, 2] = np.nan
    x[0, 2, 0] = np.nan      # two NaNs in a lane of axis 1 and of axis 0: first or last index
    x[1, 2, 0] = np.nan
    x[1, 0, :] = np.inf      # a lane of infinities: Softmax is NaN, LogSumExp inf
    x[1, 1, 3] = -np.inf
    x[0, 0, :] = -np.inf     # a lane with only -inf: LogSumExp is -inf
    return x


def long_special_values(dtype: str) -> np.ndarray:
    """Rows of 40 (maxima and sums over eight lanes) with a NaN, an inf and a row of -inf."""
    x = data(dtype, (2, 3, 40), 3, "normal")
    x[0, 1, 17] = np.nan
    x[1, 0, 33] = np.inf
    x[1, 2, :] = -np.inf
    return x


def wrapping(dtype: str) -> np.ndarray:
    """Values whose sums, products and squares overflow the integer type."""
    return data(dtype, (2, 3, 4), 0) * (np.iinfo(dtype).max // 3) + 7


# How each case is fed: values, and shapes with an empty axis. Empty sets reduce to the identities
# (sums 0, products 1, maxima -inf, minima +inf, LogSumExp -inf, float means NaN); ArgMax/ArgMin
# along an empty axis is an error (tested below), so the "arg" group has no empty feeds.
FEEDS = {
    "ties": lambda dtype: feeds_for(dtype, (2, 3, 4)),
    "normal": lambda dtype: feeds_for(dtype, (3, 5, 7), "normal"),
    "long rows": lambda dtype: feeds_for(dtype, (2, 3, 300), "normal"),  # pairwise sums of 300
    "special": lambda dtype: {**feeds_for(dtype, (2, 3, 4)), "x0": special_values(dtype)},
    "long special": lambda dtype: {**feeds_for(dtype, (2, 3, 40), "normal"), "x0": long_special_values(dtype)},
    "wrapping": lambda dtype: {**feeds_for(dtype, (2, 3, 4)), "x0": wrapping(dtype)},
    "empty B": lambda dtype: feeds_for(dtype, (2, 0, 4)),
    "empty A": lambda dtype: feeds_for(dtype, (0, 3, 4)),
    "no iterations": lambda dtype: feeds_for(dtype, (2, 3, 4), trips=0),
}


def feeds_of(dtype: str, group: str) -> list[str]:
    kinds = ["ties", "no iterations"]
    if dtype.startswith("float"):
        kinds += ["normal", "long rows", "special", "long special"]
    else:
        kinds += ["wrapping"]
    if group != "arg":
        kinds += ["empty B"]
    if group != "arg" and dtype.startswith("float"):
        kinds += ["empty A"]  # an integer mean over axis A would be an error
    return kinds


# (each group is one kernel of many reductions, most of a minute to compile cold: the default run
# compiles the reductions of the test below)
@pytest.mark.slow
@pytest.mark.parametrize("dtype, group, feeds", [
    pytest.param(dtype, group, feeds, id=f"{dtype}-{group}-{feeds}")
    for dtype, group in CASES for feeds in feeds_of(dtype, group)])
def test_fused_reductions_match_the_interpreter(dtype, group, feeds):
    model = parse(loop_model(dtype, GROUPS[group]), opset=18)
    with np.errstate(all="ignore"):
        assert_fused_matches_interpreter(model, FEEDS[feeds](dtype), dtype)


@pytest.mark.parametrize("feeds", ["normal", "long rows"])
def test_float_sums_add_in_numpys_order_and_equal_the_interpreter_bit_for_bit(feeds):
    # Pairwise along the last axis (in blocks of 8 up to 128, halves above), in order along others.
    model = parse(loop_model("float32", GROUPS["sums"]), opset=18)
    feeds = FEEDS[feeds]("float32")
    actual = rnnloop.load(model, backend="numba", strict=True).run(None, feeds)
    expected = rnnloop.load(model, backend="interp").run(None, feeds)
    for name, a, e in zip([o.name for o in model.graph.output], actual, expected):
        np.testing.assert_array_equal(a, e, err_msg=name)


# Before opset 13 (ReduceSum) and 18 (the others) the axes were an attribute.
ATTRIBUTE_AXES = [
    ("sum1", "D[A, C]", "ReduceSum <axes = [1], keepdims = 0> (x)"),
    ("mean02", "D[1, B, 1]", "ReduceMean <axes = [0, 2]> (x)"),
    ("max_all", "D[1, 1, 1]", "ReduceMax (x)"),
    ("lse_last", "D[A, B]", "ReduceLogSumExp <axes = [-1], keepdims = 0> (x)"),
    ("amax1", "int64[A, 1, C]", "ArgMax <axis = 1> (x)"),
]


@pytest.mark.slow  # (one kernel of five reductions; the default run compiles the sums above)
def test_reductions_with_axes_attributes_of_old_opsets_match_the_interpreter():
    model = parse(loop_model("float32", ATTRIBUTE_AXES, opset=11, setup=""), opset=11)
    assert_fused_matches_interpreter(model, feeds_for("float32", (2, 3, 4), "normal"), "float32")


# ---------------------------------------------------------------------------------------------
# errors and fallbacks


def one_op_model(dtype: str, op: str, out_type: str) -> onnx.ModelProto:
    return parse(loop_model(dtype, [("y", out_type, op)]), opset=18)


@pytest.mark.parametrize("backend", ["numba", "interp"])
def test_argmax_over_an_empty_axis_is_an_error_naming_the_node(backend):
    model = one_op_model("float32", "ArgMax <axis = 1, keepdims = 0> (x)", "int64[A, C]")
    session = rnnloop.load(model, backend=backend, strict=backend == "numba")
    with pytest.raises(rnnloop.RunError, match=r"ArgMax '[^']+' .*axis 1 of the input \(shape \(2, 0, 4\)\) is empty"):
        session.run(None, feeds_for("float32", (2, 0, 4)))


@pytest.mark.parametrize("backend", ["numba", "interp"])
def test_integer_mean_of_an_empty_set_is_an_error_naming_the_node(backend):
    model = one_op_model("int32", "ReduceMean <keepdims = 0> (x, ax1)", "int32[A, C]")
    session = rnnloop.load(model, backend=backend, strict=backend == "numba")
    with pytest.raises(rnnloop.RunError, match=r"ReduceMean '[^']+' .*mean of an empty set of integers"):
        session.run(None, feeds_for("int32", (2, 0, 4)))


def test_axes_that_are_not_constant_are_not_compiled_and_the_loop_is_interpreted():
    # The axes come from a model input: not known when the kernel is generated.
    text = loop_model("float32", [("y", "D[A, 1, C]", "ReduceSum (x, axes)")])
    model = parse(text.replace("(int64 T,", "(int64 T, int64[1] axes,"), opset=18)
    with pytest.raises(rnnloop.UnsupportedModelError, match="ReduceSum .*axes input must be a constant"):
        rnnloop.load(model, backend="numba", strict=True)
    feeds = {**feeds_for("float32", (2, 3, 4)), "axes": np.array([1], np.int64)}
    with pytest.warns(rnnloop.FallbackWarning, match="axes input must be a constant"):
        fallback = rnnloop.load(model, backend="numba")
    expected = rnnloop.load(model, backend="interp").run(None, feeds)
    for a, e in zip(fallback.run(None, feeds), expected):
        np.testing.assert_array_equal(a, e)


# ---------------------------------------------------------------------------------------------
# MatMul: batches that broadcast, vectors, strided operands


# x (carried) and w (invariant) are [B, M, K]; wt = w with its matrices transposed, [B, K, M].
MATMUL_SETUP = """
        zero = Constant <value = int64 {0}> ()
        one = Constant <value = int64 {1}> ()
        axis1 = Constant <value = int64[1] {1}> ()
        wt = Transpose <perm = [0, 2, 1]> (w)
        wk = Gather(wt, zero)
        m2 = Gather(x, zero)
        v = Gather(m2, zero)
        u = Gather(m2, one)
        x4 = Unsqueeze(x, axis1)
        xs = Transpose <perm = [1, 0, 2]> (x)
        ws = Transpose <perm = [1, 2, 0]> (w)
"""
MATMULS = [
    ("batches", "D[B, M, M]", "MatMul(x, wt)"),           # [B, M, K] @ [B, K, M], batch by batch
    ("shared", "D[B, M, M]", "MatMul(x, wk)"),            # [B, M, K] @ [K, M], one matrix for all
    ("broadcast", "D[B, B, M, M]", "MatMul(x4, wt)"),     # [B, 1, M, K] @ [B, K, M]
    ("by_vector", "D[B, M]", "MatMul(x, v)"),             # [B, M, K] @ [K]
    ("vector_by", "D[B, M]", "MatMul(v, wt)"),            # [K] @ [B, K, M]
    ("strided", "D[M, B, B]", "MatMul(xs, ws)"),          # [M, B, K] @ [M, K, B], both strided views
    ("mm", "D[M, M]", "MatMul(m2, wk)"),                  # 2-D by 2-D
    ("mv", "D[M]", "MatMul(m2, v)"),                      # 2-D by 1-D
    ("vm", "D[M]", "MatMul(v, wk)"),                      # 1-D by 2-D
    ("vv", "D", "MatMul(v, u)"),                          # 1-D by 1-D: a scalar
    ("hoisted", "D[B, K, K]", "MatMul(wt, w)"),           # both invariant: computed once, before the loop
]


@pytest.mark.slow
@pytest.mark.parametrize("dtype, kind", [("float32", "ties"), ("int32", "ties"), ("float32", "normal")])
def test_matmul_of_batches_vectors_and_strided_operands_matches_the_interpreter(dtype, kind):
    # BLAS for floats, generated loops for integers; float64 and int64 differ only in the dtype.
    text = loop_model(dtype, MATMULS, setup=MATMUL_SETUP).replace("[A, B, C]", "[B, M, K]")
    # M == K keeps every operand's shape valid whichever of the two a product contracts.
    assert_fused_matches_interpreter(parse(text, opset=18), feeds_for(dtype, (2, 3, 3), kind), dtype)


ATTENTION = """
attend (float[2, 5, 3] keys, float[2, 3, 1] query, float[n] x, int64[3] shape)
        => (float[2, 5, 1] p, float[2, 5, 1] lp, float[2, 5, m] q) {
    scores = MatMul(keys, query)
    p = Softmax <axis = 1> (scores)
    lp = LogSoftmax <axis = -2> (scores)
    r = Reshape(x, shape)
    q = Softmax <axis = 1> (r)
}
"""


def test_softmax_before_axes_declared_of_size_one_walks_without_them_and_falls_back_if_they_are_not():
    # Attention's scores [N, T, 1] along T run as [N, T] along the last axis (lanes that vectorise);
    # a value the model declares [2, 5, 1] that is [2, 5, 2] runs in the interpreter, with a warning.
    model = parse(ATTENTION)
    model.graph.value_info.append(onnx.helper.make_tensor_value_info("r", onnx.TensorProto.FLOAT, [2, 5, 1]))
    rng = np.random.default_rng(0)
    keys = rng.standard_normal((2, 5, 3)).astype(np.float32)
    keys[1, 2, :] = np.inf  # a lane with an infinite score: NaN, as the interpreter gives
    keys[0, 3, 1] = np.nan
    feeds = {"keys": keys, "query": np.abs(rng.standard_normal((2, 3, 1))).astype(np.float32),
             "x": rng.standard_normal(10).astype(np.float32), "shape": np.array([2, 5, 1])}
    fused = rnnloop.load(model, backend="numba", strict=True)
    interp = rnnloop.load(model, backend="interp")
    sources = "\n".join(source for _, source in fused.kernel_sources())
    assert re.search(r"(?<!Log)Softmax of rank 2 along axis 1", sources)
    assert "LogSoftmax of rank 2 along axis 1" in sources and "oftmax of rank 3" not in sources
    for a, e in zip(fused.run(None, feeds), interp.run(None, feeds)):
        np.testing.assert_allclose(a, e, **TOLERANCE["float32"])
    feeds.update(x=np.tile(feeds["x"], 2), shape=np.array([2, 5, 2]))
    with pytest.warns(rnnloop.FallbackWarning, match="axis 2 has 2 entries where the model declares 1"):
        actual = fused.run(None, feeds)
    for a, e in zip(actual, interp.run(None, feeds)):
        np.testing.assert_allclose(a, e, **TOLERANCE["float32"])
