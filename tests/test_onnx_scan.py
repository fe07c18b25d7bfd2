"""ONNX Scan: every scan axis and direction, for inputs and outputs, against a NumPy reference.

Every test runs on both backends (the `backend` fixture); under numba, run_fused checks that the scan
runs as one kernel and run_falling_back that it is interpreted for the reason the test names.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import assert_same, load_fused, parse, run_fused, run_onnxruntime, thin

import rnnloop

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
                         thin(itertools.product([0, 1, 2, -1], [0, 1], [0, 1, -1], [0, 1]), 12))
def test_scan_matches_reference_for_every_axis_and_direction(in_axis, in_dir, out_axis, out_dir, backend):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 10
    model = parse(SCAN.format(in_axis=in_axis, in_dir=in_dir, out_axis=out_axis, out_dir=out_dir), check=False)
    slice_shape = np.delete(np.array(x.shape), in_axis % 3)
    feeds = {"s0": np.zeros(slice_shape, np.float32), "x": x}
    s, y = reference(x, in_axis % 3, in_dir, out_axis % 3, out_dir)
    assert_same(run_fused(model, feeds, backend), [s, y])


def test_scan_agrees_with_onnxruntime_on_a_reversed_axis(backend):
    model = parse(SCAN.format(in_axis=1, in_dir=1, out_axis=2, out_dir=1), check=False)
    x = np.random.default_rng(0).standard_normal((2, 5, 3)).astype(np.float32)
    feeds = {"s0": np.zeros((2, 3), np.float32), "x": x}
    assert_same(run_fused(model, feeds, backend), run_onnxruntime(model, feeds))


def test_scan_over_an_empty_axis_returns_the_initial_state_and_an_empty_output(backend):
    model = parse(SCAN.format(in_axis=0, in_dir=0, out_axis=0, out_dir=0), check=False)
    feeds = {"s0": np.ones((3, 4), np.float32), "x": np.zeros((0, 3, 4), np.float32)}
    s, y = run_fused(model, feeds, backend)
    assert_same([s], [feeds["s0"]])
    # symbolic body dims are unknown after zero iterations: the rank and dtype are right, sizes 0
    assert y.ndim == 3 and y.shape[0] == 0 and y.dtype == np.float32


SCAN2 = """
scan2 (float[N{dims}] a, float[M{dims}] b) => (float[K{dims}] y) {{
    y = Scan <num_scan_inputs = 2, body = step (float{part} u, float{part} v) => (float{part} w) {{ w = Add(u, v) }}> (a, b)
}}
"""


def scan2(part: list[int]):
    dims = "".join(f", {d}" for d in part)
    return parse(SCAN2.format(dims=dims, part=f"[{', '.join(map(str, part))}]" if part else ""))


@pytest.mark.parametrize("part", [[], [2]], ids=["rank0_parts", "rank1_parts"])
def test_scan_adds_two_inputs_slice_by_slice(part, backend):
    a = np.arange(3 * int(np.prod(part)), dtype=np.float32).reshape([3, *part])
    b = a * 10
    assert_same(run_fused(scan2(part), {"a": a, "b": b}, backend), [a + b])


@pytest.mark.parametrize("part", [[], [2]], ids=["rank0_parts", "rank1_parts"])
def test_scan_inputs_of_different_lengths_are_an_error_naming_the_scan(part, backend):
    a, b = np.zeros([3, *part], np.float32), np.zeros([4, *part], np.float32)
    with pytest.raises(rnnloop.RunError, match=r"^Scan 'Scan_0' \(ai.onnx opset 17\): .*different numbers of iterations \(3, 4\)"):
        run_fused(scan2(part), {"a": a, "b": b}, backend)


SCAN8 = """
scan8 (int64[B] lens, float[B, D] s0, float[B, T, D] x) => (float[B, D] s, float[B, T, D] y) {
    s, y = Scan <num_scan_inputs = 1, directions = [DIRECTION],
                 body = step (float[D] s_in, float[D] x_t) => (float[D] s_out, float[D] y_t) {
        s_out = Add(s_in, x_t)
        y_t = Identity(s_out)
    }> (lens, s0, x)
}
"""


@pytest.mark.parametrize("direction", [0, pytest.param(1, marks=pytest.mark.slow)])
def test_scan8_runs_each_batch_row_to_its_own_sequence_length(direction, backend):
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
    # Scan-8 lowers to a loop over the batch around a loop over time; the outer one pads each row's
    # outputs to the full length by pads it computes (Pad of computed pads compiles): both fuse.
    session = load_fused(model, backend)
    if backend == "numba":
        assert [p.fused is not None for p in session.plans] == [True, True], session.explain()
    assert_same(session.run(None, {"lens": lens, "s0": s0, "x": x}), [s_expect, y_expect])
