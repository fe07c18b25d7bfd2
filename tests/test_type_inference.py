"""Type inference (rnnloop/typeinfer.py): loop bodies declared without shapes get them, and fuse.

Exporters often declare a body's values by element type alone. In ONNX text syntax `float[]` is
such a type (element type, rank unknown); `float` without brackets is a scalar. The pass derives
every body value's type from the loop's inputs and the ops, to a fixed point over carried values;
a declared type is only ever refined, never contradicted.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_same, cumulative_sum, parse, run, run_fused

import rnnloop
from rnnloop.builder import Builder
from rnnloop.frontends.onnx import convert_model
from rnnloop.ir import Graph, Loop, SequenceType, Slice, Stack, TensorType, iter_ops
from rnnloop.typeinfer import infer_types, join, refine

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def inferred(model) -> Graph:
    """The model's IR graph after type inference."""
    return infer_types(convert_model(model))


def loops(graph: Graph) -> list[Loop]:
    return [op for op in iter_ops(graph) if isinstance(op, Loop)]


def types_of(graph: Graph, *names: str) -> list[str]:
    return [str(graph.type_of(n)) for n in names]


def interpreted(model, feeds: dict) -> list:
    return run(model, feeds, backend="interp")


# A loop whose body declares element types only: state s += x, scan output s*s.
ACCUMULATE = """
accumulate (int64 M, float[2, 3] x) => (float[2, 3] fin, float[N, 2, 3] ys) {
    fin, ys = Loop(M, , x) <body = step (int64 i, bool c, float[] s) => (bool c2, float[] s2, float[] y) {
        c2 = Identity(c)
        s2 = Add(s, x)
        y = Mul(s2, s2)
    }>
}
"""


def test_body_values_declared_without_shapes_take_them_from_the_loop_inputs():
    graph = inferred(parse(ACCUMULATE))
    body = loops(graph)[0].body
    assert types_of(body, "i", "c", "s", "x", "s2", "y") == \
        ["int64[]", "bool[]", "float32[2,3]", "float32[2,3]", "float32[2,3]", "float32[2,3]"]
    assert types_of(graph, "fin", "ys") == ["float32[2,3]", "float32[N,2,3]"]


def test_loop_declared_without_shapes_fuses_and_agrees_with_the_interpreter(backend):
    model = parse(ACCUMULATE)
    feeds = {"M": np.array(4, np.int64), "x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    assert_same(run_fused(model, feeds, backend), interpreted(model, feeds))


def test_zero_iterations_keep_the_per_iteration_shape_of_a_stacked_output(backend):
    model = parse(ACCUMULATE)
    x = np.ones((2, 3), np.float32)
    fin, ys = run_fused(model, {"M": np.array(0, np.int64), "x": x}, backend)
    assert ys.shape == (0, 2, 3) and ys.dtype == np.float32
    assert_same([fin], [x])


GROWING = """
growing (int64 M) => (float[N] v) {
    v0 = Constant <value = float[1] {1}> ()
    v = Loop(M, , v0) <body = grow (int64 i, bool c, float[] v_in) => (bool c2, float[] v_out) {
        c2 = Identity(c)
        v_out = Concat <axis = 0> (v_in, v_in)
    }>
}
"""


def test_a_carried_value_that_grows_keeps_its_rank_and_loses_the_size_that_changes():
    graph = inferred(parse(GROWING))
    body = loops(graph)[0].body
    # The first round sees [1] -> [2]; their merge [?] is stable.
    assert types_of(body, "v_in", "v_out") == ["float32[?]", "float32[?]"]
    assert types_of(graph, "v") == ["float32[N]"]  # the declared name says more than "?"


def test_a_carried_value_that_grows_fuses(backend):
    v, = run_fused(parse(GROWING), {"M": np.array(5, np.int64)}, backend)
    assert_same([v], [np.ones(32, np.float32)])


SEQUENCE = """
appends (int64 M, float[4] x) => (float[N] y) {
    empty = SequenceEmpty <dtype = 1> ()
    s = Loop(M, , empty) <body = step (int64 i, bool c, seq(float[]) s_in) => (bool c2, seq(float[]) s_out) {
        c2 = Identity(c)
        s_out = SequenceInsert(s_in, x)
    }>
    y = ConcatFromSequence <axis = 0> (s)
}
"""


def test_a_sequence_grown_from_empty_gets_the_shape_of_what_is_appended():
    graph = inferred(parse(SEQUENCE))
    body = loops(graph)[0].body
    assert types_of(body, "s_in", "s_out") == ["seq(float32[4])", "seq(float32[4])"]
    assert types_of(graph, "s") == ["seq(float32[4])"]


def test_a_sequence_of_unknown_element_shape_appended_8000_times_fuses(backend):
    model = parse(SEQUENCE)
    feeds = {"M": np.array(8000, np.int64), "x": np.arange(4, dtype=np.float32)}
    y, = run_fused(model, feeds, backend)
    assert_same([y], [np.tile(feeds["x"], 8000)])
    assert_same([y], interpreted(model, feeds))


SCAN = """
scan (float[2, 3] s0, float[2, 5, 3] x) => (float[2, 3] s, float[2, 3, 5] y) {
    s, y = Scan <num_scan_inputs = 1, scan_input_axes = [-2], scan_output_axes = [-1],
                 body = step (float[] s_in, float[] x_t) => (float[] s_out, float[] y_t) {
        s_out = Add(s_in, x_t)
        y_t = Mul(s_out, x_t)
    }> (s0, x)
}
"""


def test_a_scan_part_drops_the_sliced_axis_counted_from_the_end():
    graph = inferred(parse(SCAN))
    body = loops(graph)[0].body
    assert types_of(body, "s_in", "x_t", "s_out", "y_t") == ["float32[2,3]"] * 4


def test_a_scan_declared_without_shapes_fuses(backend):
    model = parse(SCAN)
    rng = np.random.default_rng(0)
    feeds = {"s0": rng.standard_normal((2, 3)).astype(np.float32),
             "x": rng.standard_normal((2, 5, 3)).astype(np.float32)}
    s, y = run_fused(model, feeds, backend)
    steps, state, ys = np.moveaxis(feeds["x"], 1, 0), feeds["s0"], []
    for x_t in steps:
        state = state + x_t
        ys.append(state * x_t)
    assert_same([s, y], [state, np.stack(ys, axis=-1)])
    assert_same([s, y], interpreted(model, feeds))


NESTED = """
nested (int64 M, float[3] a) => (float[3] out, float[M, 3] trace) {
    out, trace = Loop(M, , a) <body = outer (int64 i, bool c, float[] acc) => (bool c2, float[] acc2, float[] seen) {
        c2 = Identity(c)
        two = Constant <value = int64 {2}> ()
        inner = Loop(two, , acc) <body = twice (int64 j, bool d, float[] v) => (bool d2, float[] v2) {
            d2 = Identity(d)
            v2 = Add(v, a)
        }>
        acc2 = Mul(inner, a)
        seen = Identity(acc2)
    }>
}
"""


def test_an_inner_loop_gets_its_types_from_the_outer_body():
    graph = inferred(parse(NESTED))
    outer, inner = loops(graph)
    assert types_of(inner.body, "j", "v", "a", "v2") == ["int64[]", "float32[3]", "float32[3]", "float32[3]"]
    assert types_of(outer.body, "acc", "inner", "acc2", "seen") == ["float32[3]"] * 4


def test_nested_loops_declared_without_shapes_fuse(backend):
    model = parse(NESTED)
    a = np.array([0.5, -1.0, 2.0], np.float32)
    out, trace = run_fused(model, {"M": np.array(3, np.int64), "a": a}, backend)
    acc, seen = a.copy(), []
    for _ in range(3):
        acc = (acc + a + a) * a
        seen.append(acc)
    assert_same([out, trace], [acc, np.array(seen)])


BRANCHES = """
branches (bool flag, float[2, 3] x) => (float[A, B] y) {
    y = If(flag) <then_branch = yes () => (float[] r) { r = Add(x, x) },
                  else_branch = no () => (float[] r2) { r2 = Sub(x, x) }>
}
"""


def test_an_if_output_has_what_both_branches_give():
    graph = inferred(parse(BRANCHES))
    assert types_of(graph, "y") == ["float32[2,3]"]


@pytest.mark.parametrize("slice_, stack, part, stacked", [
    (Slice(axis=0), Stack(axis=0), "float32[4]", "float32[?,4]"),
    (Slice(axis=-2, reverse=True), Stack(axis=-1), "float32[4]", "float32[4,?]"),
    (Slice(axis=1), Stack(axis=1), "float32[6]", None),  # a part of 6 added to a carry of 4: unknown
    (Slice(axis=0, part=2, stride=2, keep_axis=True), Stack(concat=True), "float32[2,4]", "float32[?,4]"),
    (Slice(axis=0), Stack(axis=0, length=8), "float32[4]", "float32[8,4]"),
    (Slice(axis=0, part=2, stride=2, keep_axis=True), Stack(concat=True, length=5), "float32[2,4]", "float32[10,4]"),
])
def test_slices_and_stacks_follow_their_axes_parts_and_lengths(slice_, stack, part, stacked):
    graph = infer_types(cumulative_sum(slice_, stack, ["s", "y"]))
    body = loops(graph)[0].body
    assert types_of(body, "part") == [part]
    if stacked is not None:
        assert types_of(graph, "y") == [stacked]


def test_an_ir_loop_without_any_body_types_fuses(backend):
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    graph = cumulative_sum(Slice(axis=0, reverse=True), Stack(axis=-1), ["s", "y"])
    session = rnnloop.Session(graph, backend=backend, strict=True)
    if backend == "numba":
        assert all(p.fused is not None for p in session.plans), session.explain()
    s, y = session.run(None, {"x": x})
    assert_same([s, y], [x.sum(axis=0), np.cumsum(x[::-1], axis=0).T])


def test_a_declared_type_that_contradicts_what_the_body_computes_stays():
    # The body declares the state a scalar while the loop passes [2, 3]: the declaration stays,
    # for the kernel to refuse and the interpreter to run.
    graph = inferred(parse(ACCUMULATE.replace("float[] s)", "float s)").replace("float[] s2,", "float s2,")))
    body = loops(graph)[0].body
    assert types_of(body, "s", "s2") == ["float32[]", "float32[]"]


def test_refining_keeps_fixed_declared_sizes_and_fills_in_unknowns():
    assert refine(TensorType(F32, (2, None, "N")), TensorType(F32, (None, 3, 4))) == TensorType(F32, (2, 3, 4))
    assert refine(TensorType(None, None), TensorType(F32, (1,))) == TensorType(F32, (1,))
    assert refine(TensorType(F32, (2,)), TensorType(None, None)) == TensorType(F32, (2,))
    assert refine(TensorType(F32, ("N",)), TensorType(F32, ("M",))) == TensorType(F32, ("N",))
    assert refine(SequenceType(TensorType(F32, None)), SequenceType(TensorType(F32, (4,)))) == \
        SequenceType(TensorType(F32, (4,)))


@pytest.mark.parametrize("inferred_type", [
    TensorType(F64, (2,)),   # another dtype
    TensorType(F32, (2, 1)),  # another rank
    TensorType(F32, (3,)),   # another fixed size
    SequenceType(TensorType(F32, (2,))),  # not a tensor
])
def test_refining_keeps_the_declared_type_when_inference_contradicts_it(inferred_type):
    declared = TensorType(F32, (2,))
    assert refine(declared, inferred_type) is declared


def test_joining_keeps_what_both_types_share():
    assert join(TensorType(F32, (2, 3)), TensorType(F32, (2, 4))) == TensorType(F32, (2, None))
    assert join(TensorType(F32, (2, 3)), TensorType(F32, (2,))) == TensorType(F32, None)
    assert join(TensorType(F32, (2,)), None) is None
    # NumPy compares np.dtype("float64") == None as True; the join must not take that for agreement.
    assert join(TensorType(F64, (2,)), TensorType(None, (2,))) == TensorType(None, (2,))


def test_inference_never_raises_on_ops_it_cannot_type_or_on_loops_whose_ports_do_not_fit():
    b = Builder("main")
    x = b.input("x", TensorType(F32, (2,)))
    y = b.op1("NoSuchOp", x)
    b.set_type(y, TensorType(F32, (7,)))
    body = b.sub("body")
    body.output(body.input("only"))
    b.loop(body.graph, carried=[y, x], outputs=["a", "b"])  # two carried values, a body of one
    graph = infer_types(b.graph)
    assert types_of(graph, y) == ["float32[7]"]  # an op inference does not know keeps its declared type
