"""The Network builder: loops with every limit, iterator and output kind, nesting, and its errors.

Every network runs on both backends (under numba each loop must fuse), against a NumPy statement
of what it computes, and exported to ONNX through onnxruntime as an independent oracle.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import assert_same, run_onnxruntime

import rnnloop

RNG = np.random.default_rng(7)


def check(net: rnnloop.Network, feeds: dict, expected: list, backend: str, rtol: float = 1e-5) -> None:
    """The network's outputs on `backend` (every loop fused under numba) and, exported, in onnxruntime."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", rnnloop.FallbackWarning)
        session = net.compile(backend=backend, strict=backend == "numba")
    assert_same(session.run(None, feeds), expected, rtol=rtol)
    if backend == "interp":  # once per network
        assert_same(run_onnxruntime(net.to_onnx(), feeds), expected, rtol=rtol)


def lstm_network(hidden: int, inputs: int):
    """The LSTM of the builder's docstring (README): y over all steps and the last h."""
    w = RNG.standard_normal((4 * hidden, inputs)).astype(np.float32) * 0.3
    r = RNG.standard_normal((4 * hidden, hidden)).astype(np.float32) * 0.3
    net = rnnloop.Network("lstm")
    x = net.add_input("x", np.float32, ("seq", "batch", inputs))
    h0 = net.add_input("h0", np.float32, ("batch", hidden))
    c0 = net.add_input("c0", np.float32, ("batch", hidden))
    wt, rt = net.constant(w.T), net.constant(r.T)
    loop = net.add_loop()
    x_t = loop.add_iterator(x)
    h, c = loop.add_recurrence(h0), loop.add_recurrence(c0)
    gates = net.add(net.matmul(x_t, wt), net.matmul(h, rt))
    i, o, f, g = net.split(gates, axis=1, num_outputs=4)
    c_next = net.add(net.mul(net.sigmoid(f), c), net.mul(net.sigmoid(i), net.tanh(g)))
    h_next = net.mul(net.sigmoid(o), net.tanh(c_next))
    h.set_next(h_next)
    c.set_next(c_next)
    net.mark_output(loop.add_output(h_next, "concat"), "y")
    net.mark_output(loop.add_output(h, "last"), "h_n")
    return net, w, r


def lstm_reference(x, h, c, w, r):
    def sigmoid(v):
        return 1 / (1 + np.exp(-v))
    ys = []
    for x_t in x:
        i, o, f, g = np.split(x_t @ w.T + h @ r.T, 4, axis=1)
        c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
        h = sigmoid(o) * np.tanh(c)
        ys.append(h)
    return [np.stack(ys), h]


def test_lstm_written_with_the_builder_matches_numpy(backend):
    net, w, r = lstm_network(hidden=8, inputs=5)
    feeds = {"x": RNG.standard_normal((6, 3, 5), dtype=np.float32),
             "h0": RNG.standard_normal((3, 8), dtype=np.float32),
             "c0": RNG.standard_normal((3, 8), dtype=np.float32)}
    check(net, feeds, lstm_reference(feeds["x"], feeds["h0"], feeds["c0"], w, r), backend)


def test_lstm_network_types_follow_the_inputs():
    net, _, _ = lstm_network(hidden=8, inputs=5)
    outputs = {info.name: info for info in net.compile(backend="interp").get_outputs()}
    assert outputs["y"].shape == ["seq", "batch", 8] and outputs["h_n"].shape == ["batch", 8]


def counting_network(limits: str, last_iteration: bool = True):
    """A loop doubling a value: `limits` "count", "while" (while below 100) or "both"."""
    net = rnnloop.Network()
    x = net.add_input("x", np.int64, ())
    n = net.add_input("n", np.int64, ())
    loop = net.add_loop()
    v = loop.add_recurrence(x)
    if limits in ("count", "both"):
        loop.add_trip_limit(n, "count")
    if limits in ("while", "both"):
        loop.add_trip_limit(net.less(v, np.int64(100)), "while")
    v.set_next(net.mul(v, np.int64(2)))
    net.mark_output(loop.add_output(v, "last"), "final")
    net.mark_output(loop.add_output(v, "concat"), "seen")
    if last_iteration:
        net.mark_output(loop.add_output(loop.iteration, "last"), "last_i")
    return net


def doubling(x: int, n: int | None, below: int | None):
    seen = []
    while (n is None or len(seen) < n) and (below is None or x < below):
        seen.append(x)
        x *= 2
    return [np.int64(x), np.array(seen, np.int64), np.int64(len(seen) - 1)]


@pytest.mark.parametrize("limits, x, n", [("count", 3, 5), ("while", 3, 0), ("both", 3, 4), ("both", 3, 10)])
def test_trip_limits_stop_on_whichever_fires_first(backend, limits, x, n):
    net = counting_network(limits)
    expected = doubling(x, n if limits != "while" else None, 100 if limits != "count" else None)
    check(net, {"x": np.array(x), "n": np.array(n)}, expected, backend)


def test_while_limit_is_checked_before_the_first_iteration(backend):
    net = counting_network("while", last_iteration=False)
    final, seen = net.compile(backend=backend).run(None, {"x": np.array(500), "n": np.array(0)})
    assert final == 500 and seen.shape == (0,)


def test_last_of_a_plain_value_after_zero_iterations_is_an_error(backend):
    net = counting_network("count")
    with pytest.raises(rnnloop.RunError, match="Gather"):
        net.compile(backend=backend).run(["last_i"], {"x": np.int64(1), "n": np.int64(0)})


def iterator_network():
    """One loop with an iterator on every axis of a rank-3 tensor, forward and reverse, and each
    output kind on every axis of the stack, with and without padding."""
    net = rnnloop.Network()
    xs = [net.add_input(f"x{axis}", np.float32, [4 if a == axis else 2 + a for a in range(3)]) for axis in range(3)]
    loop = net.add_loop()
    parts = [loop.add_iterator(x, axis=axis, reverse=reverse) for reverse in (False, True)
             for axis, x in enumerate(xs)]
    # The parts differ in shape ([3, 4], [2, 4], [2, 3]): add the sum of the others to the first.
    flat = net.concat(*(net.reshape(p, np.array([-1])) for p in parts[1:]), axis=0)
    value = net.add(parts[0], net.reduce_sum(flat, keepdims=0))
    for kind in ("concat", "reverse"):
        for axis in (0, 1, 2, -1):
            net.mark_output(loop.add_output(value, kind, axis=axis), f"{kind}_{axis}")
            net.mark_output(loop.add_output(value, kind, axis=axis, length=6), f"{kind}_{axis}_padded")
    net.mark_output(loop.add_output(value, "last"), "last")
    return net


def iterator_reference(feeds: dict) -> list:
    xs = [feeds[f"x{axis}"] for axis in range(3)]
    values = []
    for i in range(4):
        parts = [np.take(x, i if not reverse else 3 - i, axis=axis) for reverse in (False, True)
                 for axis, x in enumerate(xs)]
        values.append(parts[0] + np.float32(sum(p.sum(dtype=np.float32) for p in parts[1:])))
    expected = []
    padding = np.zeros((2, 3, 4), np.float32)  # entries 4 and 5 of a stack padded to 6
    for order in (values, values[::-1]):
        for axis in (0, 1, 2, -1):
            expected += [np.stack(order, axis=axis), np.stack([*order, *padding], axis=axis)]
    return expected + [values[-1]]


@pytest.mark.slow
def test_iterators_on_every_axis_and_every_output_kind(backend):
    feeds = {f"x{axis}": RNG.standard_normal([4 if a == axis else 2 + a for a in range(3)]).astype(np.float32)
             for axis in range(3)}
    check(iterator_network(), feeds, iterator_reference(feeds), backend, rtol=1e-4)


def test_padding_shorter_than_the_loop_is_an_error(backend):
    net = rnnloop.Network()
    x = net.add_input("x", np.float32, ("n", 2))
    loop = net.add_loop()
    net.mark_output(loop.add_output(loop.add_iterator(x), "concat", length=3), "y")
    session = net.compile(backend=backend)
    assert session.run(None, {"x": np.ones((2, 2), np.float32)})[0].shape == (3, 2)
    with pytest.raises(rnnloop.RunError, match="padded length 3|length"):
        session.run(None, {"x": np.ones((5, 2), np.float32)})


def test_nested_loops_use_outer_values_directly(backend):
    """A matrix power by repeated products, each product a loop over the rows of the left side."""
    net = rnnloop.Network()
    a = net.add_input("a", np.float64, (3, 3))
    n = net.add_input("n", np.int64, ())
    outer = net.add_loop()
    outer.add_trip_limit(n)
    p = outer.add_recurrence(net.constant(np.eye(3)))
    inner = outer.add_loop()
    row = inner.add_iterator(p)
    product = inner.add_output(net.matmul(row, a), "concat")
    p.set_next(product)
    net.mark_output(outer.add_output(p, "last"), "power")
    net.mark_output(outer.add_output(net.reduce_sum(product, keepdims=0), "concat"), "sums")
    m = RNG.standard_normal((3, 3))
    powers = [np.linalg.matrix_power(m, k) for k in range(1, 5)]
    check(net, {"a": m, "n": np.array(4)}, [powers[-1], np.array([q.sum() for q in powers])], backend, rtol=1e-9)


def test_values_from_outside_are_computed_once_outside():
    net = rnnloop.Network()
    x = net.add_input("x", np.float32, (4,))
    loop = net.add_loop()
    loop.add_trip_limit(3)
    outside = net.exp(x)
    acc = loop.add_recurrence(x)
    acc.set_next(net.add(acc, outside))
    net.mark_output(loop.add_output(acc), "y")
    graph = net.graph()
    assert [op.op_type for op in graph.ops] == ["Exp", "Loop", "Identity"]
    assert [op.op_type for op in graph.ops[1].body.ops] == ["Add"]


# ---------------------------------------------------------------------------------------------
# Errors name the op or loop and say what to do


def test_op_inputs_that_do_not_fit_are_rejected_with_the_op_named():
    net = rnnloop.Network()
    a = net.add_input("a", np.float32, ("batch", 64))
    b = net.constant(np.zeros((63, 8), np.float32))
    with pytest.raises(rnnloop.BuildError, match=r"MatMul 'gates'.*a: float32\[batch,64\].*matrix multiplication"):
        net.matmul(a, b, name="gates")
    with pytest.raises(rnnloop.BuildError, match=r"Add 'add_\d+'.*float64"):
        net.add(a, np.zeros(64))
    with pytest.raises(rnnloop.BuildError, match="not an op"):
        net.op("Foo", a)


def test_a_python_scalar_takes_the_dtype_of_its_partner():
    net = rnnloop.Network()
    a = net.add_input("a", np.float32, (2,))
    assert net.mul(a, 0.5).dtype == np.float32
    assert net.gather(a, 1, axis=0).shape == ()


def test_values_of_two_sibling_loops_cannot_meet():
    net = rnnloop.Network()
    x = net.add_input("x", np.float32, (3, 2))
    first, second = net.add_loop(), net.add_loop()
    with pytest.raises(rnnloop.BuildError, match="two loops or conditionals that are not nested"):
        net.add(first.add_iterator(x), second.add_iterator(x))


def test_incomplete_loops_are_rejected_when_compiled():
    net = rnnloop.Network()
    x = net.add_input("x", np.float32, (2,))
    loop = net.add_loop()
    loop.add_recurrence(x)
    with pytest.raises(rnnloop.BuildError, match="has no next value"):
        net.compile()
    net = rnnloop.Network()
    loop = net.add_loop()
    r = loop.add_recurrence(net.add_input("x", np.float32, (2,)))
    r.set_next(r)
    with pytest.raises(rnnloop.BuildError, match="no limit"):
        net.compile()


@pytest.mark.parametrize("mistake, match", [
    (lambda net, loop, x, r: r.set_next(net.cast(x, to=np.float64)), "keeps its dtype and shape"),
    (lambda net, loop, x, r: loop.add_trip_limit(x), "integer scalar"),
    (lambda net, loop, x, r: loop.add_trip_limit(3) or loop.add_trip_limit(4), "already has a count"),
    (lambda net, loop, x, r: loop.add_trip_limit(x, "until"), "not 'count' or 'while'"),
    (lambda net, loop, x, r: loop.add_iterator(r), "must come from outside"),
    (lambda net, loop, x, r: loop.add_iterator(x, axis=2), "out of range"),
    (lambda net, loop, x, r: loop.add_output(r, "stack"), "not one of last, concat, reverse"),
    (lambda net, loop, x, r: loop.add_output(r, "concat", axis=3), "out of range"),
    (lambda net, loop, x, r: net.mark_output(net.neg(r), "y"), "bring it out with add_output"),
    (lambda net, loop, x, r: net.add_input("x", np.float32, (1,)), "already used"),
])
def test_builder_mistakes_are_named(mistake, match):
    net = rnnloop.Network()
    x = net.add_input("x", np.float32, (2, 3))
    loop = net.add_loop()
    r = loop.add_recurrence(x)
    with pytest.raises(rnnloop.BuildError, match=match):
        mistake(net, loop, x, r)


def test_a_while_condition_may_not_read_an_iterator():
    net = rnnloop.Network()
    x = net.add_input("x", np.float32, (5,))
    loop = net.add_loop()
    part = loop.add_iterator(x)
    r = loop.add_recurrence(net.constant(np.float32(0)))
    r.set_next(net.add(r, part))
    loop.add_trip_limit(net.less(part, 3.0), "while")
    net.mark_output(loop.add_output(r), "y")
    with pytest.raises(rnnloop.BuildError, match="depends on .* from an iterator"):
        net.compile()


# ---------------------------------------------------------------------------------------------
# Conditionals


def conditional_network():
    """y = exp(x) + w if p else -x: the then branch reads a value from outside directly."""
    net = rnnloop.Network()
    x = net.add_input("x", np.float32, ("n",))
    p = net.add_input("p", np.bool_, ())
    w = net.constant(np.float32(0.5))
    branch = net.add_if(p)
    x_in = branch.add_input(x)
    net.mark_output(branch.add_output(net.add(net.exp(x_in), w), net.neg(x_in)), "y")
    net.mark_output(branch.add_output(x, net.constant(np.zeros(1, np.float32))), "passed")
    return net


@pytest.mark.parametrize("p", [True, False])
def test_a_conditional_runs_the_branch_its_condition_selects(p):
    x = np.array([0.0, 1.0, 2.0], np.float32)
    expected = [np.exp(x) + np.float32(0.5), x] if p else [-x, np.zeros(1, np.float32)]
    check(conditional_network(), {"x": x, "p": np.array(p)}, expected, "interp")


def test_a_conditional_types_its_outputs_from_both_branches():
    outputs = {info.name: info for info in conditional_network().compile(backend="interp").get_outputs()}
    assert outputs["y"].shape == ["n"] and outputs["passed"].shape == [None]


def test_conditional_mistakes_are_named():
    net = rnnloop.Network()
    x = net.add_input("x", np.float32, (2,))
    with pytest.raises(rnnloop.BuildError, match="boolean scalar"):
        net.add_if(x)
    branch = net.add_if(True)
    with pytest.raises(rnnloop.BuildError, match="one dtype and rank"):
        branch.add_output(x, net.constant(np.zeros((2, 2), np.float32)))
    with pytest.raises(rnnloop.BuildError, match="use add_if"):
        net.op("If", x)
