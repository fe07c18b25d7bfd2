"""Scan hoisting: x_t · W computed for many t at once, by chunks of rows (codegen.kernel._rows_matmul).

A chunk holds kernel.HOIST_CHUNK_ROWS product rows; these sequences cross chunk boundaries in both
directions, and a Gather by a data-dependent index reads rows out of order (one row per product).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import assert_same, parse, run_fused, thin
from onnx import numpy_helper

import rnnloop
from rnnloop.codegen import kernel

RNG = np.random.default_rng(7)
W = RNG.standard_normal((4, 3)).astype(np.float32)


def _with_weights(text: str, **weights: np.ndarray):
    model = parse(text, check=False)
    model.graph.initializer.extend(numpy_helper.from_array(v, name=k) for k, v in weights.items())
    return model


def _scan(direction: int):
    return _with_weights(f"""
        agraph (float[T, B, 4] xs, float[B, 3] h0) => (float[B, 3] h, float[T, B, 3] ys) {{
            h, ys = Scan <num_scan_inputs = 1, scan_input_directions = [{direction}],
                          body = step (float[B, 3] hp, float[B, 4] x) => (float[B, 3] hn, float[B, 3] y) {{
                xw = MatMul(x, W)
                s = Add(xw, hp)
                hn = Tanh(s)
                y = Identity(hn)
            }}> (h0, xs)
        }}""", W=W)


@pytest.mark.parametrize("direction", [0, 1])
@pytest.mark.parametrize("steps, batch", [(2 * kernel.HOIST_CHUNK_ROWS + 3, 1), (41, 5), (3, 0)])
def test_a_scan_reads_its_hoisted_rows_in_either_direction(direction, steps, batch, backend):
    model = _scan(direction)
    feeds = {"xs": RNG.standard_normal((steps, batch, 4)).astype(np.float32) * 0.3,
             "h0": RNG.standard_normal((batch, 3)).astype(np.float32)}
    got = run_fused(model, feeds, backend)
    h, ys = feeds["h0"], []
    for t in (range(steps) if direction == 0 else reversed(range(steps))):
        h = np.tanh(feeds["xs"][t] @ W + h)
        ys.append(h)
    assert_same(got, [h, np.stack(ys)], rtol=1e-5, atol=1e-5)  # ys in the order of iterations
    if backend == "numba":
        assert "by chunks of rows" in rnnloop.load(model).kernel_sources()[0][1]


def test_a_gather_by_a_carried_index_reads_hoisted_rows_out_of_order(backend):
    """A decoder's pattern: the next row of the table depends on the state (here k -> 7k + 3 mod V)."""
    vocab = 300
    table = RNG.standard_normal((vocab, 1, 4)).astype(np.float32)
    model = _with_weights("""
        agraph (int64 trip, int64 k0, float[1, 3] h0) => (float[1, 3] h, int64 k, float[N, 1, 3] ys) {
            h, k, ys = Loop(trip, "", h0, k0) <body = step (int64 i, bool c, float[1, 3] hp, int64 kp)
                                                  => (bool co, float[1, 3] hn, int64 kn, float[1, 3] y) {
                x = Gather(table, kp)
                xw = MatMul(x, W)
                s = Add(xw, hp)
                hn = Tanh(s)
                seven = Constant <value = int64 {7}> ()
                three = Constant <value = int64 {3}> ()
                v = Constant <value = int64 {300}> ()
                k7 = Mul(kp, seven)
                k73 = Add(k7, three)
                kn = Mod(k73, v)
                co = Identity(c)
                y = Identity(hn)
            }>
        }""", table=table, W=W)
    feeds = {"trip": np.array(50, np.int64), "k0": np.array(5, np.int64),
             "h0": np.zeros((1, 3), np.float32)}
    got = run_fused(model, feeds, backend)
    h, k, ys = feeds["h0"], 5, []
    for _ in range(50):
        h = np.tanh(table[k] @ W + h)
        k = (7 * k + 3) % vocab
        ys.append(h)
    assert_same(got, [h, np.array(k, np.int64), np.stack(ys)], rtol=1e-5, atol=1e-5)
    if backend == "numba":
        assert "by chunks of rows" in rnnloop.load(model).kernel_sources()[0][1]


@pytest.mark.parametrize("product, batch", thin([(p, b) for b in (1, 7) for p in (
    "MatMul(h, R)", "Gemm <transB = 1> (h, RT, b)", "Gemm <alpha = 0.5> (h, R, b)")], 6))
def test_products_by_constant_weights_use_panels_packed_at_load(product, batch, backend):
    """Weights in the model are packed once, at load, and passed in; Gemm's transB reads them transposed."""
    R = RNG.standard_normal((3, 3)).astype(np.float32) * 0.5
    model = _with_weights(f"""
        agraph (float[T, B, 4] xs, float[B, 3] h0) => (float[B, 3] h, float[T, B, 3] ys) {{
            h, ys = Scan <num_scan_inputs = 1,
                          body = step (float[B, 3] h, float[B, 4] x) => (float[B, 3] hn, float[B, 3] y) {{
                xw = MatMul(x, W)
                hr = {product}
                s = Add(xw, hr)
                hn = Tanh(s)
                y = Identity(hn)
            }}> (h0, xs)
        }}""", W=W, R=R, RT=np.ascontiguousarray(R.T), b=np.full(3, 0.25, np.float32))
    feeds = {"xs": RNG.standard_normal((9, batch, 4)).astype(np.float32),
             "h0": RNG.standard_normal((batch, 3)).astype(np.float32)}
    got = run_fused(model, feeds, backend)
    h, ys = feeds["h0"], []
    for x in feeds["xs"]:
        hr = h @ R if product.startswith("MatMul") else (0.5 if "alpha" in product else 1.0) * (h @ R) + 0.25
        h = np.tanh(x @ W + hr)
        ys.append(h)
    assert_same(got, [h, np.stack(ys)], rtol=1e-5, atol=1e-5)
    if backend == "numba":
        source = rnnloop.load(model).kernel_sources()[0][1]
        # Both products read panels packed at load: passed in (k_panels) or, when small, frozen into
        # the module as constants (K_n); none is packed in the kernel.
        products = re.findall(r"_s\.matmul_packed\w*\([^,]+, [^,]+, (\w+),", source)
        assert len(products) == 2 and all(p.startswith(("k_panels", "K_")) for p in products), products
        assert "_s.pack(" not in source
