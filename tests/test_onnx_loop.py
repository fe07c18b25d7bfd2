"""ONNX Loop: the five trip-count/condition modes, zero iterations, captures, nesting, shapes that change.

Every test runs on both backends (the `backend` fixture); under numba, run_fused checks that the loop
runs as one kernel and run_falling_back that it is interpreted for the reason the test names.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import (
    assert_same,
    parse,
    run_fused,
    run_onnxruntime,
)

import rnnloop

# Counts iterations, doubles x, stops when the running sum reaches `limit`; scan output per step.
# Every op of the body has a code generation rule, so under numba the loop is one kernel.
COUNTER = """
counter ({inputs}) => (int64 n, float[2] x, float[N, 2] xs) {{
    zero = Constant <value = int64 {{0}}> ()
    n, x, xs = Loop({trip}, {cond}, zero, x0) <body = step (int64 i, bool c, int64 n_in, float[2] x_in)
                                                => (bool c_out, int64 n_out, float[2] x_out, float[2] x_scan) {{
        one = Constant <value = int64 {{1}}> ()
        n_out = Add(n_in, one)
        two = Constant <value = float {{2}}> ()
        x_out = Mul(x_in, two)
        x_scan = Identity(x_out)
        x_first, x_second = Split <axis = 0> (x_out)
        pair = Add(x_first, x_second)
        axis0 = Constant <value = int64[1] {{0}}> ()
        total = Squeeze(pair, axis0)
        c_out = Less(total, limit)
    }}>
}}
"""


def counter(trip: str, cond: str) -> tuple:
    inputs = ["float[2] x0", "float limit"]
    if trip:
        inputs.insert(0, "int64 M")
    if cond == "c0":
        inputs.insert(0, "bool c0")
    model = parse(COUNTER.format(inputs=", ".join(inputs), trip=trip, cond=cond))
    return model


def expected_counter(trip: int | None, initial: bool, limit: float) -> tuple[int, np.ndarray, np.ndarray]:
    """The reference: a plain Python loop with ONNX Loop's meaning."""
    x, xs, i, cond = np.array([0.5, 1.0], np.float32), [], 0, initial
    while (trip is None or i < trip) and cond:
        x = x * np.float32(2)
        xs.append(x)
        cond = bool(x.sum() < limit)
        i += 1
    return i, x, np.array(xs, np.float32).reshape(-1, 2)


@pytest.mark.parametrize("trip, initial, limit", [
    (5, True, 1e9),     # (M, cond): the trip count ends it
    (50, True, 100.0),  # (M, cond): the condition ends it first
    (3, False, 1e9),    # (M, cond=false): no iteration
])
def test_loop_with_trip_count_and_condition(trip, initial, limit, backend):
    model = counter("M", "c0")
    feeds = {"c0": np.array(initial), "M": np.array(trip, np.int64),
             "x0": np.array([0.5, 1.0], np.float32), "limit": np.array(limit, np.float32)}
    n, x, xs = expected_counter(trip, initial, limit)
    assert_same(run_fused(model, feeds, backend), [np.array(n, np.int64), x, xs])


def test_loop_with_trip_count_only_is_a_for_loop_gated_by_the_body_condition(backend):
    # The body's condition output stops the loop even though the Loop's cond input is omitted:
    # onnxruntime and OpenVINO do this, and exporters (onnxscript `break`) rely on it.
    model = counter("M", "")
    feeds = {"M": np.array(50, np.int64), "x0": np.array([0.5, 1.0], np.float32),
             "limit": np.array(100.0, np.float32)}
    n, x, xs = expected_counter(50, True, 100.0)
    assert n < 50
    result = run_fused(model, feeds, backend)
    assert_same(result, [np.array(n, np.int64), x, xs])
    assert_same(result, run_onnxruntime(model, feeds))


def test_loop_with_trip_count_only_runs_all_iterations_while_the_body_says_go(backend):
    model = counter("M", "")
    feeds = {"M": np.array(7, np.int64), "x0": np.array([0.5, 1.0], np.float32),
             "limit": np.array(1e9, np.float32)}
    n, x, xs = expected_counter(7, True, 1e9)
    assert_same(run_fused(model, feeds, backend), [np.array(n, np.int64), x, xs])


def test_loop_with_condition_only_is_a_while_loop(backend):
    model = counter("", "c0")
    feeds = {"c0": np.array(True), "x0": np.array([0.5, 1.0], np.float32), "limit": np.array(1000.0, np.float32)}
    n, x, xs = expected_counter(None, True, 1000.0)
    result = run_fused(model, feeds, backend)
    assert_same(result, [np.array(n, np.int64), x, xs])
    assert_same(result, run_onnxruntime(model, feeds))


def test_loop_with_condition_false_runs_zero_iterations_and_keeps_initial_values(backend):
    model = counter("", "c0")
    feeds = {"c0": np.array(False), "x0": np.array([0.5, 1.0], np.float32), "limit": np.array(1000.0, np.float32)}
    n, x, xs = run_fused(model, feeds, backend)
    assert n == 0
    assert_same([x], [np.array([0.5, 1.0], np.float32)])
    assert xs.shape == (0, 2) and xs.dtype == np.float32


def test_loop_with_constant_true_condition_is_a_do_while_loop(backend):
    text = COUNTER.format(inputs="float[2] x0, float limit", trip="", cond="yes")
    text = text.replace("zero = Constant", "yes = Constant <value = bool {1}> ()\n    zero = Constant")
    model = parse(text)
    feeds = {"x0": np.array([0.5, 1.0], np.float32), "limit": np.array(20.0, np.float32)}
    n, x, xs = expected_counter(None, True, 20.0)
    assert_same(run_fused(model, feeds, backend), [np.array(n, np.int64), x, xs])


def test_loop_without_trip_count_or_condition_stops_on_the_body_condition(backend):
    model = counter("", "")
    feeds = {"x0": np.array([0.5, 1.0], np.float32), "limit": np.array(300.0, np.float32)}
    n, x, xs = expected_counter(None, True, 300.0)
    assert_same(run_fused(model, feeds, backend), [np.array(n, np.int64), x, xs])


def test_loop_with_zero_trip_count_returns_initial_values_and_empty_scan_outputs(backend):
    model = counter("M", "")
    feeds = {"M": np.array(0, np.int64), "x0": np.array([0.5, 1.0], np.float32),
             "limit": np.array(1e9, np.float32)}
    n, x, xs = run_fused(model, feeds, backend)
    assert n == 0 and xs.shape == (0, 2)
    assert_same([x], [feeds["x0"]])


def test_loop_that_never_ends_stops_at_max_iterations_with_an_error_naming_it(backend):
    model = counter("", "")
    feeds = {"x0": np.array([0.0, 0.0], np.float32), "limit": np.array(1.0, np.float32)}
    with pytest.raises(rnnloop.RunError, match=r"^Loop 'Loop_1' \(ai.onnx opset 17\): .*1000 iterations.*max_iterations"):
        run_fused(model, feeds, backend, max_iterations=1000)


CAPTURES = """
nested (float[3] a, float[3] b, int64 M) => (float[3] out, float[M, 3] outer_scan) {
    out, outer_scan = Loop(M, , a) <body = outer (int64 i, bool c, float[3] acc) => (bool c2, float[3] acc2, float[3] seen) {
        c2 = Identity(c)
        two = Constant <value = int64 {2}> ()
        inner_acc = Loop(two, , acc) <body = inner (int64 j, bool d, float[3] v) => (bool d2, float[3] v2) {
            d2 = Identity(d)
            v2 = Add(v, b)
        }>
        positive = ReduceSum <keepdims = 0> (inner_acc)
        zero = Constant <value = float {0}> ()
        big = Greater(positive, zero)
        acc2 = If(big) <then_branch = yes () => (float[3] r) { r = Mul(inner_acc, b) },
                        else_branch = no () => (float[3] r2) { r2 = Sub(inner_acc, a) }>
        seen = Identity(acc2)
    }>
}
"""


def test_loop_inside_loop_with_if_and_a_capture_from_two_scopes_up(backend):
    model = parse(CAPTURES)  # `b` is read by the inner loop body, two scopes below the graph
    a = np.array([1.0, -2.0, 3.0], np.float32)
    b = np.array([0.5, 1.0, -1.0], np.float32)
    acc, seen = a.copy(), []
    for _ in range(3):
        inner = acc + b + b
        acc = inner * b if inner.sum() > 0 else inner - a
        seen.append(acc)
    feeds = {"a": a, "b": b, "M": np.array(3, np.int64)}
    # The whole model is one kernel: the If is a native if, the inner loop a function it calls.
    result = run_fused(model, feeds, backend)
    assert_same(result, [acc, np.array(seen)])
    assert_same(result, run_onnxruntime(model, feeds))


GROWING = """
growing (int64 M) => (float[N] v, int64[K] lengths) {
    v0 = Constant <value = float[1] {1}> ()
    v, lengths = Loop(M, , v0) <body = grow (int64 i, bool c, float[N] v_in) => (bool c2, float[N] v_out, int64 n) {
        c2 = Identity(c)
        v_out = Concat <axis = 0> (v_in, v_in)
        n = Size(v_out)
    }>
}
"""


def test_loop_carried_value_may_change_shape_across_iterations(backend):
    result = run_fused(parse(GROWING), {"M": np.array(4, np.int64)}, backend)
    assert_same(result, [np.ones(16, np.float32), np.array([2, 4, 8, 16], np.int64)])


def test_loop_scan_output_whose_shape_changes_is_an_error_naming_the_loop(backend):
    model = parse(GROWING.replace("n = Size(v_out)", "n = Identity(v_out)").replace("int64[K] lengths", "float[K, J] lengths")
                  .replace("int64 n)", "float[J] n)"), check=False)
    with pytest.raises(rnnloop.RunError, match=r"^Loop 'Loop_1' \(ai.onnx opset 17\): stacked output 0 \('lengths'\) "
                                              r"changes from float32\[2\] to float32\[4\] at iteration 1"):
        run_fused(model, {"M": np.array(3, np.int64)}, backend)


PICK = """
pick (float[3] x0, int64 M) => (float[3] x, float[K] picked) {
    x, picked = Loop(M, , x0) <body = step (int64 i, bool c, float[3] x_in) => (bool c2, float[3] x_out, float e) {
        c2 = Identity(c)
        one = Constant <value = int64 {1}> ()
        e = Gather <axis = 0> (x_in, one)
        x_out = Add(x_in, e)
    }>
}
"""


def test_loop_body_may_read_one_element_of_a_vector_with_gather(backend):
    x0 = np.array([1.0, 2.0, 3.0], np.float32)
    x, picked = run_fused(parse(PICK), {"x0": x0, "M": np.array(3, np.int64)}, backend)
    assert_same([x, picked], [x0 + 14, np.array([2.0, 4.0, 8.0], np.float32)])
