"""rnnloop.export: IR graphs as ONNX models that onnxruntime runs with the interpreter's results.

Networks and traced functions are exported in test_network.py and test_functional.py; here are
the loop ports they do not produce (concatenation on an existing axis, loaded models' scans) and
the ops ONNX dropped.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import assert_same, parse, run_onnxruntime

import rnnloop
from rnnloop.builder import Builder
from rnnloop.export import to_onnx
from rnnloop.ir import Slice, Stack, TensorType
from rnnloop.session import Session

F32 = np.dtype(np.float32)


def interpreted(graph, feeds: dict) -> list:
    return Session(graph, backend="interp").run(None, feeds)


def stacking_graph(stack: Stack):
    """A loop over the rows of x ([n, 2, 3]) stacking each row times 2 as `stack` says."""
    b = Builder("stacking")
    x = b.input("x", TensorType(F32, (None, 2, 3)))
    body = b.sub("body")
    row = body.input("row", TensorType(F32, (2, 3)))
    body.output(body.op1("Mul", row, body.constant(np.float32(2))))
    body.set_type(body.graph.outputs[0], TensorType(F32, (2, 3)))
    y, = b.loop(body.graph, sliced=[(x, Slice(axis=0))], stacked=[stack], outputs=["y"])
    b.output(y)
    return b.graph


@pytest.mark.parametrize("concat, axis, reverse, length", [
    *itertools.product([True], [0, 1, -1], [False, True], [None]),
    (False, 2, True, 6), (True, 1, False, 12), (False, -1, False, None)])
def test_stacked_outputs_export_for_every_join(concat, axis, reverse, length):
    graph = stacking_graph(Stack(axis=axis, reverse=reverse, concat=concat, length=length))
    feeds = {"x": np.random.default_rng(0).standard_normal((4, 2, 3)).astype(np.float32)}
    expected = interpreted(graph, feeds)
    assert_same(run_onnxruntime(to_onnx(graph), feeds), expected)


def test_a_loaded_scan_model_exports_back_to_onnx():
    model = parse("""
    scan (float[P, Q] s0, float[A, B, C] x) => (float[P, Q] s, float[U, V, W] y) {
        s, y = Scan <num_scan_inputs = 1, scan_input_axes = [1], scan_input_directions = [1],
                     scan_output_axes = [2], scan_output_directions = [1],
                     body = step (float[P, Q] s_in, float[P, Q] x_t) => (float[P, Q] s_out, float[P, Q] y_t) {
            s_out = Add(s_in, x_t)
            y_t = Mul(s_out, x_t)
        }> (s0, x)
    }
    """)
    session = rnnloop.load(model, backend="interp")
    feeds = {"s0": np.zeros((2, 4), np.float32),
             "x": np.random.default_rng(1).standard_normal((2, 5, 4)).astype(np.float32)}
    assert_same(run_onnxruntime(to_onnx(session.graph), feeds), session.run(None, feeds))


def test_ops_onnx_dropped_export_as_the_math_they_stand_for():
    net = rnnloop.Network()
    x = net.add_input("x", np.float32, (3,))
    net.mark_output(net.affine(x, alpha=2.0, beta=1.0), "affine")
    net.mark_output(net.scaled_tanh(x, alpha=3.0, beta=0.5), "scaled_tanh")
    feeds = {"x": np.array([-1.0, 0.0, 2.0], np.float32)}
    expected = [2 * feeds["x"] + 1, 3 * np.tanh(0.5 * feeds["x"])]
    assert_same(net.compile(backend="interp").run(None, feeds), expected)
    assert_same(run_onnxruntime(net.to_onnx(), feeds), expected)


def test_a_window_slice_is_rejected_by_name():
    b = Builder("window")
    x = b.input("x", TensorType(F32, (8,)))
    body = b.sub("body")
    part = body.input("part", TensorType(F32, (2,)))
    body.output(part)
    b.output(b.loop(body.graph, sliced=[(x, Slice(part=2, stride=2, keep_axis=True))],
                    stacked=[Stack(concat=True)])[0])
    with pytest.raises(rnnloop.UnsupportedModelError, match="window, stride or part size"):
        to_onnx(b.graph)


def test_a_graph_is_written_at_the_lowest_opset_that_has_its_ops():
    """The IR's GroupNormalization is ONNX's form of opset 21 (scale and bias per channel), Gelu exists
    from 20, an AveragePool's dilations and Pad's wrap from 19; DFT-17's axis becomes DFT-20's input
    where the model needs 20. Each export keeps the meaning: onnxruntime runs it to the interpreter's
    results, and a model of opset-18 ops stays at 18, readable by older runtimes."""
    rng = np.random.default_rng(7)
    cases = {
        18: (18, """g (float[2, 6, 5] x) => (float[2, 6, 5] y) {
                 y = Relu(x) }""", {"x": rng.standard_normal((2, 6, 5)).astype(np.float32)}),
        19: (19, """g (float[1, 2, 9, 9] x) => (float[1, 2, 7, 7] y, float[1, 2, 13, 13] z) {
                 y = AveragePool <kernel_shape = [2, 2], dilations = [2, 2]> (x)
                 pads = Constant <value = int64[8] {0, 0, 2, 2, 0, 0, 2, 2}> ()
                 z = Pad <mode = "wrap"> (x, pads) }""",
             {"x": rng.standard_normal((1, 2, 9, 9)).astype(np.float32)}),
        21: (18, """g (float[2, 6, 5] x) => (float[2, 6, 5] y) {
                 scale = Constant <value = float[3] {0.5, 2.0, -1.0}> ()
                 bias = Constant <value = float[3] {0.1, 0.2, 0.3}> ()
                 y = GroupNormalization <num_groups = 3> (x, scale, bias) }""",
             {"x": rng.standard_normal((2, 6, 5)).astype(np.float32)}),
        20: (17, """g (float[3, 8, 1] x) => (float[3, 5, 2] y) {
                 y = DFT <onesided = 1> (x) }""", {"x": rng.standard_normal((3, 8, 1)).astype(np.float32)}),
    }
    for opset, (source_opset, text, feeds) in cases.items():
        session = rnnloop.load(parse(text, opset=source_opset, check=False), backend="interp")
        graph = session.graph
        if opset == 20:  # (a Gelu after the DFT makes the model need opset 20)
            graph.ops.append(type(graph.ops[0])("Gelu", [graph.outputs[0]], ["gelu"]))
            graph.types["gelu"] = graph.types[graph.outputs[0]]
            graph.outputs.append("gelu")
        model = to_onnx(graph)
        assert model.opset_import[0].version == opset
        assert model.ir_version == {18: 8, 19: 9, 20: 9, 21: 10}[opset]
        assert_same(run_onnxruntime(model, feeds), interpreted(graph, feeds), rtol=1e-5, atol=1e-6)
