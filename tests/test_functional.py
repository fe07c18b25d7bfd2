"""scan, while_loop, fori_loop and trace: jax.lax's meaning, traced NumPy, eager calls, export."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import run_onnxruntime

import rnnloop
from rnnloop import functional

RNG = np.random.default_rng(11)


def test_scan_cumulative_sum_matches_numpy():
    xs = RNG.standard_normal(7).astype(np.float32)
    total, sums = rnnloop.scan(lambda c, x: (c + x, c + x), np.float32(0), xs)
    np.testing.assert_allclose(sums, np.cumsum(xs), rtol=1e-6)
    assert total.dtype == np.float32 and sums.dtype == np.float32
    np.testing.assert_allclose(total, xs.sum(), rtol=1e-6)


def test_reverse_scan_keeps_ys_aligned_with_xs():
    xs = np.arange(1, 5, dtype=np.int64)
    total, suffix = rnnloop.scan(lambda c, x: (c + x, c + x), np.int64(0), xs, reverse=True)
    np.testing.assert_array_equal(suffix, np.cumsum(xs[::-1])[::-1])
    assert total == 10


def test_scan_carries_and_stacks_trees():
    def step(carry, x):
        count, (total, product) = carry
        a, b = x
        return (count + 1, (total + a * b, product * b)), {"ab": a * b, "running": total}

    a = RNG.standard_normal((5, 3))
    b = RNG.standard_normal((5, 3))
    init = (np.int64(0), (np.zeros(3), np.ones(3)))
    (count, (total, product)), ys = rnnloop.scan(step, init, (a, b))
    assert count == 5
    np.testing.assert_allclose(total, (a * b).sum(0))
    np.testing.assert_allclose(product, b.prod(0))
    np.testing.assert_allclose(ys["ab"], a * b)
    np.testing.assert_allclose(ys["running"], np.concatenate([np.zeros((1, 3)), np.cumsum(a * b, 0)[:-1]]))


def test_scan_with_a_length_and_no_xs():
    carry, ys = rnnloop.scan(lambda c, _: (c * 2, c), np.int64(1), None, length=6)
    assert carry == 64
    np.testing.assert_array_equal(ys, [1, 2, 4, 8, 16, 32])


def test_rnn_cell_closing_over_weights_matches_numpy():
    w = RNG.standard_normal((4, 3)).astype(np.float32)
    u = RNG.standard_normal((3, 3)).astype(np.float32)

    def cell(h, x):
        h = np.tanh(x @ w + h @ u + 0.5)
        return h, h

    h0 = np.zeros((2, 3), np.float32)
    xs = RNG.standard_normal((6, 2, 4)).astype(np.float32)
    h, ys = rnnloop.scan(cell, h0, xs)
    expected, hs = h0, []
    for x in xs:
        expected = np.tanh(x @ w + expected @ u + 0.5)
        hs.append(expected)
    np.testing.assert_allclose(h, expected, rtol=1e-5)
    np.testing.assert_allclose(ys, np.stack(hs), rtol=1e-5)
    assert ys.dtype == np.float32


def test_while_loop_runs_newtons_iteration():
    x = rnnloop.while_loop(lambda x: np.abs(x * x - 2) > 1e-12, lambda x: x - (x * x - 2) / (2 * x), np.float64(1.0))
    assert abs(x - np.sqrt(2)) < 1e-12


def test_while_loop_that_is_false_at_once_returns_the_initial_value():
    assert rnnloop.while_loop(lambda v: v < 0, lambda v: v - 1, np.int64(5)) == 5


def test_while_loop_over_a_tuple_carry():
    def body(state):
        a, b, n = state
        return b, a + b, n + 1

    a, b, n = rnnloop.while_loop(lambda s: s[1] < 1000, body, (np.int64(0), np.int64(1), np.int64(0)))
    assert (a, b, n) == (987, 1597, 16)


def test_fori_loop_counts_from_lower_to_upper():
    assert rnnloop.fori_loop(2, 7, lambda i, v: v + i * i, np.int64(0)) == sum(i * i for i in range(2, 7))
    assert rnnloop.fori_loop(5, 2, lambda i, v: v + 1, np.int64(0)) == 0


def test_fori_loop_indexes_an_array_by_the_loop_index():
    table = RNG.standard_normal(8)
    # A NumPy array cannot be indexed by a traced value (as in JAX): gather from it instead.
    assert np.isclose(rnnloop.fori_loop(0, 8, lambda i, acc: acc + rnnloop.op.gather(table, i) * i, np.float64(0)),
                      sum(table[i] * i for i in range(8)))


def test_scans_nest_and_read_the_outer_carry():
    def outer(total, row):
        inner_total, _ = rnnloop.scan(lambda c, x: (c + x * total, None), np.float64(0), row)
        return total + inner_total, inner_total

    rows = RNG.standard_normal((4, 3))
    total, per_row = rnnloop.scan(outer, np.float64(1), rows)
    expected, seen = 1.0, []
    for row in rows:
        inner = sum(x * expected for x in row)
        expected += inner
        seen.append(inner)
    np.testing.assert_allclose(per_row, seen)
    np.testing.assert_allclose(total, expected)


def test_traced_loops_fuse():
    traced = rnnloop.trace(lambda v: rnnloop.while_loop(lambda x: x < 100.0, lambda x: x * 1.5, v), np.float32(1))
    assert "fused" in traced.session.explain()
    assert traced(np.float32(1)) == np.float32(1) * np.float32(1.5) ** 12


def test_eager_calls_trace_once_per_signature():
    calls = []

    def step(c, x):
        calls.append(1)
        return c + x, c

    functional._CACHE.clear()
    for n in (3, 3, 4):
        rnnloop.scan(step, np.float32(0), np.ones(n, np.float32))
    rnnloop.scan(step, np.float64(0), np.ones(3, np.float64))
    assert len(calls) == 3  # (float32, 3), (float32, 4), (float64, 3)


def test_numpy_type_promotion_applies_to_traced_values():
    def f(x):
        return x * 0.5, x / 2, (x + 1).astype(np.int32), x > 0, np.where(x > 0, x, 0.0)

    traced = rnnloop.trace(f, np.arange(3, dtype=np.float32))
    results = traced(np.arange(3, dtype=np.float32))
    assert [r.dtype for r in results] == [np.float32, np.float32, np.int32, np.bool_, np.float32]
    ints = rnnloop.trace(lambda x: x / 2, np.arange(3))(np.arange(3))
    assert ints.dtype == np.float64 and ints[1] == 0.5


def test_indexing_traced_values():
    def f(x):
        return x[1], x[:, 1:3], x[..., ::-1], x[None, 0, -1], x.T, x.reshape(-1), x.sum(axis=1), x.max()

    x = RNG.standard_normal((3, 4)).astype(np.float32)
    got = rnnloop.trace(f, x)(x)
    for a, b in zip(got, f(x)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_op_functions_work_on_arrays_and_traced_values():
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    direct = rnnloop.op.sigmoid(x)
    traced = rnnloop.trace(lambda v: rnnloop.op.sigmoid(v), x)(x)
    np.testing.assert_allclose(direct, 1 / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_allclose(traced, direct, rtol=1e-6)
    first, second = rnnloop.op.split(x, axis=1, split=np.array([1, 2]))
    assert first.shape == (2, 1) and second.shape == (2, 2)


def test_traced_scan_exports_to_onnx_that_onnxruntime_runs(tmp_path):
    w = RNG.standard_normal((4, 3)).astype(np.float32)

    def encode(h, xs):
        return rnnloop.scan(lambda h, x: (np.tanh(x @ w + h), np.tanh(x @ w + h).sum(axis=1)), h, xs, reverse=True)

    h = np.zeros((2, 3), np.float32)
    xs = RNG.standard_normal((5, 2, 4)).astype(np.float32)
    traced = rnnloop.trace(encode, h, xs)
    model = traced.to_onnx(tmp_path / "encode.onnx")
    assert (tmp_path / "encode.onnx").exists()
    expected = traced(h, xs)
    got = run_onnxruntime(model, {"h": h, "xs": xs})
    for a, b in zip(got, expected):  # float32 sums in two engines' orders: an absolute bound near 0 too
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_traced_while_and_fori_loops_export_to_onnx():
    def f(x, n):
        y = rnnloop.while_loop(lambda v: v.sum() < 50.0, lambda v: v * 2.0, x)
        return rnnloop.fori_loop(0, n, lambda i, v: v + i.astype(np.float32), y)

    x, n = np.array([1.0, 2.0], np.float32), np.array(3)
    traced = rnnloop.trace(f, x, n)
    expected = traced(x, n)
    np.testing.assert_allclose(expected, np.array([32.0, 64.0]) + 3)
    np.testing.assert_allclose(run_onnxruntime(traced.to_onnx(), {"x": x, "n": n})[0], expected)


# ---------------------------------------------------------------------------------------------
# Tracing errors


def test_a_carry_that_changes_lists_every_mismatch():
    def step(carry, x):
        a, b, c = carry
        return (a.astype(np.float64), b, np.concatenate([c, c])), x

    init = (np.float32(0), np.zeros(2, np.float32), np.zeros(3, np.float32))
    with pytest.raises(rnnloop.BuildError) as info:
        rnnloop.scan(step, init, np.ones(4, np.float32))
    message = str(info.value)
    assert "carry[0]: returned float64[], the initial value is float32[]" in message
    assert "carry[2]: returned float32[6], the initial value is float32[3] (size 6 on axis 0, not 3)" in message
    assert "carry[1]" not in message and ".astype" in message


def test_a_carry_of_another_structure_is_rejected():
    with pytest.raises(rnnloop.BuildError, match=r"structure .*\('x', 'x'\).* initial carry has x"):
        rnnloop.while_loop(lambda v: v < 3, lambda v: (v, v), np.int64(0))


def test_python_control_flow_on_traced_values_is_explained():
    with pytest.raises(rnnloop.BuildError, match="no truth value.*while_loop"):
        rnnloop.scan(lambda c, x: (c + x if x > 0 else c, None), np.float32(0), np.ones(3, np.float32))


def test_unsupported_numpy_functions_are_named():
    with pytest.raises(rnnloop.BuildError, match="np.arctan is not supported"):
        rnnloop.scan(lambda c, x: (np.arctan(c + x), None), np.float32(0), np.ones(3, np.float32))
    with pytest.raises(rnnloop.BuildError, match="np.cumsum is not supported"):
        rnnloop.trace(lambda x: np.cumsum(x), np.ones(3))


def test_scan_needs_xs_or_a_length_and_a_pair_back():
    with pytest.raises(rnnloop.BuildError, match="give xs or a length"):
        rnnloop.scan(lambda c, x: (c, None), np.float32(0))
    with pytest.raises(rnnloop.BuildError, match="pair"):
        rnnloop.scan(lambda c, x: c, np.float32(0), np.ones(2))
    with pytest.raises(rnnloop.BuildError, match="length is 3 but xs have 2"):
        rnnloop.scan(lambda c, x: (c, x), np.float64(0), np.ones(2), length=3)


def test_while_loop_condition_must_be_a_boolean_scalar():
    with pytest.raises(rnnloop.BuildError, match="boolean scalar"):
        rnnloop.while_loop(lambda v: v, lambda v: v, np.zeros(2, bool))


def test_a_traced_function_called_with_other_arguments_says_so():
    traced = rnnloop.trace(lambda a, b: a + b, np.float32(1), np.float32(2))
    with pytest.raises(rnnloop.InputError, match="traced for arguments"):
        traced(np.float32(1))
    with pytest.raises(rnnloop.InputError, match="must be float32"):
        traced(np.float32(1), "x")


def test_cond_runs_one_branch():
    assert rnnloop.cond(True, lambda x: x * 2, lambda x: x - 1, np.float32(3)) == 6
    assert rnnloop.cond(np.array(False), lambda x: x * 2, lambda x: x - 1, np.float32(3)) == 2


def test_cond_inside_scan_compiles_as_a_native_if_and_is_right(backend):
    def step(total, x):
        total = rnnloop.cond(x > 0, lambda t, v: t + v, lambda t, v: t - v, total, x)
        return total, total

    xs = np.array([1, -2, 3, -4], np.float32)
    traced = rnnloop.trace(lambda t, xs: rnnloop.scan(step, t, xs), np.float32(0), xs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", rnnloop.FallbackWarning)
        session = traced.network.compile(backend=backend)
    if backend == "numba":
        assert "fused into the kernel of Region" in session.explain()
    _, totals = session.run(None, {"t": np.float32(0), "xs": xs})
    np.testing.assert_array_equal(totals, [1, 3, 6, 10])


def test_cond_branches_must_agree():
    with pytest.raises(rnnloop.BuildError, match=r"output\[1\]: true_fun gives float32\[\], false_fun float64\[\]"):
        rnnloop.cond(True, lambda x: (x, x), lambda x: (x, x.astype(np.float64)), np.float32(1))
    with pytest.raises(rnnloop.BuildError, match="structure"):
        rnnloop.cond(True, lambda x: (x, x), lambda x: x, np.float32(1))


def test_a_parameter_named_like_an_output_does_not_clash():
    assert rnnloop.trace(lambda output: output * 2, np.float32(1))(np.float32(3)) == 6
