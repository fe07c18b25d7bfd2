"""The fused path is as dependable as the interpreter: loops that exporters write, each a class of
failure the fused kernels once had, under both backends; and a kernel that cannot be generated or
compiled is a fallback at load, never a failed run."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import IR_VERSION, assert_same, parse, run_fused, run_onnxruntime
from onnx import TensorProto, helper, numpy_helper

import rnnloop
from rnnloop.codegen import kernel

DTYPES = [np.float32, np.float64, np.int32, np.int64]


def counter_loop(dtype, op: str, init: str) -> "onnx.ModelProto":  # noqa: F821
    """A rank-0 loop counter as exporters write it: its initial value an initializer (raw data, as
    numpy_helper writes it: NumPy reads it back read-only) or a Constant node, updated by `op`."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    zero = numpy_helper.from_array(np.array(3, dtype), "zero")
    one = numpy_helper.from_array(np.array(1, dtype), "one_value")
    body = helper.make_graph(
        [helper.make_node("Constant", [], ["one"], value=one),
         helper.make_node(op, ["k", "one"], ["k_next"]),
         helper.make_node("Identity", ["cond"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("k", elem, [])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("k_next", elem, [])])
    nodes = [helper.make_node("Loop", ["M", "", "zero"], ["k_final"], body=body)]
    initializers = [zero]
    if init == "constant":
        nodes.insert(0, helper.make_node("Constant", [], ["zero"], value=zero))
        initializers = []
    graph = helper.make_graph(nodes, "counter", [helper.make_tensor_value_info("M", TensorProto.INT64, [])],
                              [helper.make_tensor_value_info("k_final", elem, [])], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)


@pytest.mark.parametrize("init", ["initializer", "constant"])
@pytest.mark.parametrize("dtype, op", [(np.int64, "Add"), (np.float32, "Sub"), (np.int32, "Max"), (np.float64, "Mul")])
def test_a_rank0_counter_initialised_by_a_constant_fuses(backend, dtype, op, init):
    model = counter_loop(dtype, op, init)
    feeds = {"M": np.array(4, np.int64)}
    assert_same(run_fused(model, feeds, backend), run_onnxruntime(model, feeds))


def test_a_boolean_state_initialised_by_a_constant_fuses(backend):
    model = parse("""
        agraph (int64 M) => (bool b)
        <bool f = {0}>
        {
          b = Loop(M, "", f) <body = body (int64 i, bool c, bool s) => (bool c_out, bool s_next) {
            c_out = Identity(c)
            s_next = Not(s)
          }>
        }""")
    assert run_fused(model, {"M": np.array(3, np.int64)}, backend)[0] == np.array(True)


def test_a_body_whose_only_invariant_op_is_an_identity_of_a_constant_compiles(backend):
    model = parse("""
        agraph (int64 M, float[2] x) => (float[2] y)
        {
          y = Loop(M, "", x) <body = body (int64 i, bool c, float[2] h) => (bool c_out, float[2] h_next) {
            yes = Constant<value = bool {1}>()
            c_out = Identity(yes)
            h_next = Add(h, h)
          }>
        }""")
    feeds = {"M": np.array(3, np.int64), "x": np.ones(2, np.float32)}
    assert_same(run_fused(model, feeds, backend), [np.full(2, 8, np.float32)])


@pytest.mark.parametrize("wrapped", [True, False], ids=["identity", "direct"])
def test_the_incoming_condition_as_a_scan_output_is_the_one_each_iteration_began_with(backend, wrapped):
    """The body's condition output stops the loop after iteration 2; the stacked incoming condition
    is true in all three iterations that ran (onnxruntime agrees when the output is an Identity;
    a body input returned directly as a scan output is one of its known bugs)."""
    out = "c_copy" if wrapped else "c"
    model = parse(f"""
        agraph (int64 M, float[2] x) => (float[2] y, bool[N] conds)
        {{
          yes = Constant<value = bool {{1}}>()
          y, conds = Loop(M, yes, x) <body = body (int64 i, bool c, float[2] h) => (bool c_out, float[2] h_next, bool {out}) {{
            two = Constant<value = int64 {{2}}>()
            c_out = Less(i, two)
            h_next = Add(h, h)
            {"c_copy = Identity(c)" if wrapped else ""}
          }}>
        }}""")
    feeds = {"M": np.array(5, np.int64), "x": np.ones(2, np.float32)}
    got = run_fused(model, feeds, backend)
    assert_same(got, [np.full(2, 8, np.float32), np.array([True, True, True])])
    if wrapped:
        assert_same(got, run_onnxruntime(model, feeds))


def test_the_condition_as_a_carried_value_is_the_one_the_iteration_began_with(backend):
    model = parse("""
        agraph (int64 M, bool b0) => (bool b)
        {
          yes = Constant<value = bool {1}>()
          b = Loop(M, yes, b0) <body = body (int64 i, bool c, bool s) => (bool c_out, bool c) {
            one = Constant<value = int64 {1}>()
            c_out = Less(i, one)
          }>
        }""")
    # Iteration 0 carries its incoming condition (true), iteration 1 too; then the loop stops.
    assert run_fused(model, {"M": np.array(5, np.int64), "b0": np.array(False)}, backend)[0] == np.array(True)


@pytest.mark.parametrize("layout", ["vector", "matrix"])
def test_a_scan_input_sliced_on_axis_1_then_gathered_at_minus_1(backend, layout):
    """x[:, t] is a strided view: Gather(x_t, -1) of it must not need a contiguous array."""
    if layout == "vector":
        text = """
        agraph (float s, float[4,5] x) => (float sf, float[5] ys)
        {
          sf, ys = Scan(s, x) <num_scan_inputs = 1, scan_input_axes = [1], body = body (float h, float[4] xt) => (float h_next, float y) {
            last = Constant<value = int64 {-1}>()
            y = Gather(xt, last)
            h_next = Add(h, y)
          }>
        }"""
        feeds = {"s": np.array(0, np.float32), "x": np.arange(20, dtype=np.float32).reshape(4, 5)}
    else:
        text = """
        agraph (float[4] s, float[4,3,5] x) => (float[4] sf, float[5,4] ys)
        {
          sf, ys = Scan(s, x) <num_scan_inputs = 1, scan_input_axes = [2], body = body (float[4] h, float[4,3] xt) => (float[4] h_next, float[4] y) {
            last = Constant<value = int64 {-1}>()
            y = Gather<axis = 1>(xt, last)
            h_next = Add(h, y)
          }>
        }"""
        feeds = {"s": np.zeros(4, np.float32), "x": np.arange(60, dtype=np.float32).reshape(4, 3, 5)}
    model = parse(text)
    assert_same(run_fused(model, feeds, backend), run_onnxruntime(model, feeds))


def test_zero_iterations_keep_the_per_iteration_shape_of_a_stacked_output(backend):
    model = parse("""
        agraph (int64 M, float[2,3] x) => (float[2,3] y, float[N,2,3] ys)
        {
          y, ys = Loop(M, "", x) <body = body (int64 i, bool c, float[2,3] h) => (bool c_out, float[2,3] h_next, float[2,3] o) {
            c_out = Identity(c)
            h_next = Add(h, h)
            o = Identity(h_next)
          }>
        }""")
    feeds = {"M": np.array(0, np.int64), "x": np.ones((2, 3), np.float32)}
    y, ys = run_fused(model, feeds, backend)
    assert ys.shape == (0, 2, 3) and ys.dtype == np.float32
    assert_same([y, ys], run_onnxruntime(model, feeds))


def test_a_scan_may_return_its_0d_slice_directly_as_a_scan_output(backend):
    model = parse("""
        agraph (float s, float[4] x) => (float sf, float[4] ys)
        {
          sf, ys = Scan(s, x) <num_scan_inputs = 1, body = body (float h, float xt) => (float h_next, float xt) {
            h_next = Add(h, xt)
          }>
        }""")
    x = np.arange(4, dtype=np.float32)
    assert_same(run_fused(model, {"s": np.array(0, np.float32), "x": x}, backend), [np.array(6, np.float32), x])


# ---------------------------------------------------------------------------------------------
# A kernel that cannot be generated or compiled falls back at load

DOUBLING = """
    agraph (int64 M, float[2] x) => (float[2] y)
    {
      y = Loop(M, "", x) <body = body (int64 i, bool c, float[2] h) => (bool c_out, float[2] h_next) {
        c_out = Identity(c)
        h_next = Neg(h)
      }>
    }"""


@pytest.fixture
def broken_neg(monkeypatch, request):
    """The elementwise rule emits code that is not Python, or that Numba cannot type, for Neg."""
    from rnnloop.codegen import rules  # noqa: F401  (registers the rules)
    original = kernel.RULES["<elementwise>"]
    line = {"syntax": "def (", "typing": "math.sqrt('a text')"}[request.param]

    def rule(g, op, ins):
        if op.op_type == "Neg":
            g.body(line)
        return original(g, op, ins)

    monkeypatch.setitem(kernel.RULES, "<elementwise>", rule)
    return request.param


@pytest.mark.parametrize("broken_neg", ["syntax", "typing"], indirect=True)
def test_a_kernel_that_does_not_compile_falls_back_at_load_with_a_warning(broken_neg):
    model = parse(DOUBLING)
    with pytest.warns(rnnloop.FallbackWarning, match=r"Loop 'Loop_0'.*did not compile.*Neg"):
        session = rnnloop.load(model)
    assert "did not compile" in session.explain()
    feeds = {"M": np.array(3, np.int64), "x": np.ones(2, np.float32)}
    assert_same(session.run(None, feeds), [-np.ones(2, np.float32)])


@pytest.mark.parametrize("broken_neg", ["typing"], indirect=True)
def test_strict_makes_a_kernel_that_does_not_compile_an_error(broken_neg):
    with pytest.raises(rnnloop.UnsupportedModelError, match="did not compile"):
        rnnloop.load(parse(DOUBLING), strict=True)


def test_a_code_generator_crash_falls_back_with_a_warning(monkeypatch):
    from rnnloop.codegen import rules  # noqa: F401

    def rule(g, op, ins):
        raise KeyError("a bug")

    monkeypatch.setitem(kernel.RULES, "<elementwise>", rule)
    with pytest.warns(rnnloop.FallbackWarning, match="the code generator failed"):
        session = rnnloop.load(parse(DOUBLING))
    assert_same(session.run(None, {"M": np.array(1, np.int64), "x": np.ones(2, np.float32)}),
                [-np.ones(2, np.float32)])


def test_kernels_compile_at_load_for_one_signature_that_every_call_uses():
    """Read-only, strided and contiguous feeds all reach the one signature compiled at load."""
    model = parse(DOUBLING)
    with warnings.catch_warnings():
        warnings.simplefilter("error", rnnloop.FallbackWarning)
        session = rnnloop.load(model, strict=True)
    [plan] = session.plans
    dispatcher = plan.fused.compile()
    assert len(dispatcher.signatures) == 1  # compiled before any run
    readonly = np.ones(2, np.float32)
    readonly.setflags(write=False)
    for x in (np.ones(2, np.float32), np.ones(4, np.float32)[::2], readonly):
        assert_same(session.run(None, {"M": np.array(3, np.int64), "x": x}), [-np.ones(2, np.float32)])
    assert len(dispatcher.signatures) == 1


def test_a_split_of_a_concatenated_axis_into_equal_parts(backend):
    """The axis size is a sum (2 + n); the part size once printed as -(-2 + n // 2) (fuzz seed 6)."""
    model = parse("""
        agraph (int64 M, float[2,4] x, float[N,4] extra) => (float[2,4] y)
        {
          y = Loop(M, "", x) <body = body (int64 i, bool c, float[2,4] h) => (bool c_out, float[2,4] h_next) {
            c_out = Identity(c)
            both = Concat<axis = 0>(h, extra)
            first, second = Split<axis = 0>(both)
            h_next = Add(first, second)
          }>
        }""")
    feeds = {"M": np.array(2, np.int64), "x": np.ones((2, 4), np.float32),
             "extra": np.arange(8, dtype=np.float32).reshape(2, 4)}
    assert_same(run_fused(model, feeds, backend), run_onnxruntime(model, feeds))


def test_reshape_of_a_scalar_and_to_a_computed_shape(backend):
    model = parse("""
        agraph (int64 M, float[2,3] x, float[3,2] like) => (float[3,2] y, float[N,6] flat, float[N,1] counts)
        {
          y, flat, counts = Loop(M, "", x) <body = body (int64 i, bool c, float[2,3] h) => (bool c_out, float[3,2] h_next, float[6] f, float[1] n) {
            c_out = Identity(c)
            target = Shape(like)
            h_next = Reshape(h, target)
            minus_one = Constant<value = int64[1] {-1}>()
            f = Reshape(h_next, minus_one)
            i_float = Cast<to = 1>(i)
            one = Constant<value = int64[1] {1}>()
            n = Reshape(i_float, one)
          }>
        }""")
    feeds = {"M": np.array(3, np.int64), "x": np.arange(6, dtype=np.float32).reshape(2, 3),
             "like": np.zeros((3, 2), np.float32)}
    assert_same(run_fused(model, feeds, backend), run_onnxruntime(model, feeds))


def test_reshape_to_a_computed_shape_that_does_not_fit_names_the_op(backend):
    model = parse("""
        agraph (int64 M, float[2,3] x, int64[2] target) => (float[2,3] y, float[N,A,B] rs)
        {
          y, rs = Loop(M, "", x) <body = body (int64 i, bool c, float[2,3] h) => (bool c_out, float[2,3] h_next, float[A,B] r) {
            c_out = Identity(c)
            r = Reshape(h, target)
            h_next = Identity(h)
          }>
        }""")
    session = rnnloop.load(model, backend=backend, strict=backend == "numba")
    feeds = {"M": np.array(1, np.int64), "x": np.ones((2, 3), np.float32), "target": np.array([4, 2], np.int64)}
    with pytest.raises(rnnloop.RunError, match="Reshape 'Reshape_1'"):
        session.run(None, feeds)
    feeds["target"] = np.array([-1, 2], np.int64)
    assert_same(session.run(None, feeds), [np.ones((2, 3), np.float32), np.ones((1, 3, 2), np.float32)])


def test_a_carried_sequence_inserted_into_at_0_fuses(backend):
    model = parse("""
        agraph (int64 M, float[2] x) => (float[N,2] joined)
        {
          empty = SequenceEmpty<dtype = 1>()
          s = Loop(M, "", empty) <body = body (int64 i, bool c, seq(float[]) q) => (bool c_out, seq(float[]) q_next) {
            c_out = Identity(c)
            i_float = Cast<to = 1>(i)
            v = Add(x, i_float)
            zero = Constant<value = int64 {0}>()
            q_next = SequenceInsert(q, v, zero)
          }>
          joined = ConcatFromSequence<axis = 0, new_axis = 1>(s)
        }""")
    feeds = {"M": np.array(3, np.int64), "x": np.array([10, 20], np.float32)}
    want = np.array([[12, 22], [11, 21], [10, 20]], np.float32)
    assert_same(run_fused(model, feeds, backend), [want])


def test_a_copy_between_arrays_of_different_sizes_is_refused():
    """The kernels' copy (runtime.put) stops instead of writing past its destination, or leaving
    part of it uninitialised, when a code generator bug hands it arrays of different sizes."""
    from rnnloop.codegen import runtime
    with pytest.raises(ValueError, match="internal error"):
        runtime.put(np.empty(3), np.ones(4))
    with pytest.raises(ValueError, match="internal error"):
        runtime.put(np.empty(4), np.ones(3))


def test_a_kernel_that_stops_on_an_internal_error_runs_that_call_in_the_interpreter(monkeypatch):
    from rnnloop.codegen import rules  # noqa: F401
    original = kernel.RULES["<elementwise>"]

    def rule(g, op, ins):
        if op.op_type == "Neg":
            g.body("_r.put(np.empty(3), np.ones(4))")
        return original(g, op, ins)

    monkeypatch.setitem(kernel.RULES, "<elementwise>", rule)
    session = rnnloop.load(parse(DOUBLING), strict=True)
    with pytest.warns(rnnloop.FallbackWarning, match="internal error"):
        result = session.run(None, {"M": np.array(1, np.int64), "x": np.ones(2, np.float32)})
    assert_same(result, [-np.ones(2, np.float32)])


@pytest.mark.parametrize("elem", [(0,), (3, 0)], ids=["float[0]", "float[3,0]"])
@pytest.mark.parametrize("initial", [0, 2])
def test_a_carried_sequence_of_empty_tensors_leaves_the_other_outputs_whole(backend, elem, initial):
    """Elements with no values beside a scan output: every row of the scan output is written."""
    dims = ",".join(map(str, elem))
    model = parse(f"""
        agraph (int64 M, float[{dims}] e, float[2] x, seq(float[{dims}]) s0) => (float[2] y, float[N,2] ys, seq(float[{dims}]) s)
        {{
          y, s, ys = Loop(M, "", x, s0) <body = body (int64 i, bool c, float[2] h, seq(float[{dims}]) q) => (bool c_out, float[2] h_next, seq(float[{dims}]) q_next, float[2] o) {{
            c_out = Identity(c)
            h_next = Add(h, h)
            q_next = SequenceInsert(q, e)
            o = Identity(h_next)
          }}>
        }}""")
    feeds = {"M": np.array(20, np.int64), "e": np.zeros(elem, np.float32), "x": np.ones(2, np.float32),
             "s0": [np.zeros(elem, np.float32)] * initial}
    session = rnnloop.load(model, backend=backend, strict=backend == "numba")
    for _ in range(3):
        y, ys, s = session.run(None, feeds)
        np.testing.assert_array_equal(ys, np.repeat(2.0 ** np.arange(1, 21), 2).reshape(20, 2))
        assert len(s) == 20 + initial and all(v.shape == elem for v in s)


def test_a_fused_value_broadcast_into_an_empty_result_is_still_computed(backend):
    # The nest of {Add, Neg, Mul} runs over Mul's elements, none here: Neg's result, carried to the
    # next iteration, would never be written (found by the fuzz campaign, seed 2262). The kernel
    # hands such a call to the interpreter.
    model = parse("""
        agraph (int64 M, float s0, float[0] z) => (float s, float[N, 0] e)
        <float one = {1}>
        {
          s, e = Loop(M, "", s0) <body = body (int64 i, bool c, float s_in) => (bool c_out, float s_next, float[0] e_t) {
            c_out = Identity(c)
            m = Add(s_in, one)
            s_next = Neg(m)
            e_t = Mul(s_next, z)
          }>
        }""")
    feeds = {"M": np.array(3, np.int64), "s0": np.array(-1, np.float32), "z": np.zeros(0, np.float32)}
    expected = [np.array(0, np.float32), np.zeros((3, 0), np.float32)]  # s: -1, 0, -1, 0
    session = rnnloop.load(model, backend=backend)
    if backend == "numba":
        with pytest.warns(rnnloop.FallbackWarning, match="broadcast into an empty result"):
            got = session.run(None, feeds)
    else:
        got = session.run(None, feeds)
    assert_same(got, expected)
