"""ONNX Scan: every scan axis and direction, for inputs and outputs, against a NumPy reference."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import assert_same, parse, run, run_onnxruntime

SCAN = """
scan (float[P, Q] s0, float[A, B, C] x) => (float[P, Q] s, float[U, V, W] y) {{
    s, y = Scan <num_scan_inputs = 1, scan_input_axes = [{in_axis}], scan_input_directions = [{in_dir}],
                 scan_output_axes = [{out_axis}], scan_output_directions = [{out_dir}],
                 body = step (float[P, Q] s_in, float[P, Q] x_t) => (float[P, Q] s_out, float[P, Q] y_t) {{
        s_out = Add(s_in, x_t)
        y_t = Mul(s_out, x_t)
    }}> (s0, x)
}}
"""


def reference(x: np.ndarray, in_axis: int, in_dir: int, out_axis: int, out_dir: int):
    steps = np.moveaxis(x, in_axis, 0)
    if in_dir:
        steps = steps[::-1]
    s = np.zeros(steps.shape[1:], np.float32)
    ys = []
    for x_t in steps:
        s = s + x_t
        ys.append(s * x_t)
    ys = np.array(ys)
    if out_dir:
        ys = ys[::-1]
    return s, np.moveaxis(ys, 0, out_axis)


@pytest.mark.parametrize("in_axis, in_dir, out_axis, out_dir",
                         list(itertools.product([0, 1, 2, -1], [0, 1], [0, 1, -1], [0, 1])))
def test_scan_matches_reference_for_every_axis_and_direction(in_axis, in_dir, out_axis, out_dir):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10
    model = parse(SCAN.format(in_axis=in_axis, in_dir=in_dir, out_axis=out_axis, out_dir=out_dir), check=False)
    slice_shape = np.delete(np.array(x.shape), in_axis % 3)
    feeds = {"s0": np.zeros(slice_shape, np.float32), "x": x}
    s, y = reference(x, in_axis % 3, in_dir, out_axis % 3, out_dir)
    assert_same(run(model, feeds), [s, y])


def test_scan_agrees_with_onnxruntime_on_a_reversed_axis():
    model = parse(SCAN.format(in_axis=1, in_dir=1, out_axis=2, out_dir=1), check=False)
    x = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
    feeds = {"s0": np.zeros((2, 3), np.float32), "x": x}
    assert_same(run(model, feeds), run_onnxruntime(model, feeds))


def test_scan_over_an_empty_axis_returns_the_initial_state_and_an_empty_output():
    model = parse(SCAN.format(in_axis=0, in_dir=0, out_axis=0, out_dir=0), check=False)
    feeds = {"s0": np.ones((3, 4), np.float32), "x": np.zeros((0, 3, 4), np.float32)}
    s, y = run(model, feeds)
    assert_same([s], [feeds["s0"]])
    # symbolic body dims are unknown after zero iterations: the rank and dtype are right, sizes 0
    assert y.ndim == 3 and y.shape[0] == 0 and y.dtype == np.float32


def test_scan_inputs_of_different_lengths_are_an_error_naming_the_scan():
    import rnnloop
    model = parse("""
    scan2 (float[N] a, float[M] b) => (float[K] y) {
        y = Scan <num_scan_inputs = 2, body = step (float u, float v) => (float w) { w = Add(u, v) }> (a, b)
    }""")
    with pytest.raises(rnnloop.RunError, match=r"Scan .*different numbers of iterations \(3, 4\)"):
        run(model, {"a": np.zeros(3, np.float32), "b": np.zeros(4, np.float32)})


SCAN8 = """
scan8 (int64[B] lens, float[B, D] s0, float[B, T, D] x) => (float[B, D] s, float[B, T, D] y) {
    s, y = Scan <num_scan_inputs = 1, directions = [DIRECTION],
                 body = step (float[D] s_in, float[D] x_t) => (float[D] s_out, float[D] y_t) {
        s_out = Add(s_in, x_t)
        y_t = Identity(s_out)
    }> (lens, s0, x)
}
"""


@pytest.mark.parametrize("direction", [0, 1])
def test_scan8_runs_each_batch_row_to_its_own_sequence_length(direction):
    model = parse(SCAN8.replace("DIRECTION", str(direction)), opset=8)
    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    lens = np.array([4, 2], np.int64)
    s0 = np.ones((2, 3), np.float32)
    s_expect, y_expect = np.zeros_like(s0), np.zeros_like(x)
    for b in range(2):
        steps = x[b, :lens[b]][::-1] if direction else x[b, :lens[b]]
        state = s0[b]
        for t, x_t in enumerate(steps):
            state = state + x_t
            y_expect[b, t] = state
        s_expect[b] = state
    assert_same(run(model, {"lens": lens, "s0": s0, "x": x}), [s_expect, y_expect])
