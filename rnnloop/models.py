"""Built-in example models (ONNX), used by the demo, `rnnloop bench` and the benchmarks."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

# onnxruntime reads at most IR version 13; these models stay well below it.
IR_VERSION = 8
OPSET = 17


def _finish(text: str, initializers: dict[str, np.ndarray]) -> onnx.ModelProto:
    model = onnx.parser.parse_model(text)
    model.graph.initializer.extend(numpy_helper.from_array(v, name=k) for k, v in initializers.items())
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def lstm_loop(batch: int = 1, input_size: int = 64, hidden: int = 128, steps: int = 200,
              seed: int = 0) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """An LSTM written as an ONNX Loop (Gather on the iteration number, MatMul, Split, Sigmoid, Tanh, Mul).

    Gates in ONNX order i, o, f, c. Returns the model and feeds X[steps, batch, input], h0, c0.
    """
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(hidden)
    weights = {
        "W": rng.uniform(-scale, scale, (input_size, 4 * hidden)).astype(np.float32),
        "R": rng.uniform(-scale, scale, (hidden, 4 * hidden)).astype(np.float32),
        "Bias": rng.uniform(-scale, scale, (4 * hidden,)).astype(np.float32),
        "parts": np.full(4, hidden, np.int64),
    }
    text = f"""
    <ir_version: {IR_VERSION}, opset_import: ["" : {OPSET}]>
    lstm_loop (float[T, B, I] X, float[B, H] h0, float[B, H] c0) => (float[B, H] h, float[B, H] c, float[T, B, H] Y) {{
        shape = Shape(X)
        zero = Constant <value = int64[1] {{0}}> ()
        steps_1d = Gather <axis = 0> (shape, zero)
        steps = Squeeze(steps_1d)
        go = Constant <value = bool {{1}}> ()
        h, c, Y = Loop(steps, go, h0, c0) <body = lstm_step (int64 i, bool cond_in, float[B, H] h_prev,
                                                           float[B, H] c_prev)
                                                          => (bool cond_out, float[B, H] h_next,
                                                              float[B, H] c_next, float[B, H] y) {{
            cond_out = Identity(cond_in)
            x = Gather <axis = 0> (X, i)
            xw = MatMul(x, W)
            hr = MatMul(h_prev, R)
            pre = Add(xw, hr)
            gates = Add(pre, Bias)
            gi, go_, gf, gc = Split <axis = 1> (gates, parts)
            it = Sigmoid(gi)
            ot = Sigmoid(go_)
            ft = Sigmoid(gf)
            ct = Tanh(gc)
            keep = Mul(ft, c_prev)
            write = Mul(it, ct)
            c_next = Add(keep, write)
            tc = Tanh(c_next)
            h_next = Mul(ot, tc)
            y = Identity(h_next)
        }}>
    }}
    """
    model = _finish(text, weights)
    feeds = {
        "X": rng.standard_normal((steps, batch, input_size)).astype(np.float32),
        "h0": np.zeros((batch, hidden), np.float32),
        "c0": np.zeros((batch, hidden), np.float32),
    }
    return model, feeds


def small_loop(steps: int = 1000) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A 3-op Loop body (Mul, Add, Tanh) on a [1, 16] carried tensor."""
    text = f"""
    <ir_version: {IR_VERSION}, opset_import: ["" : {OPSET}]>
    small_loop (int64 M, float[1, 16] x0) => (float[1, 16] x) {{
        x = Loop(M, , x0) <body = step (int64 i, bool cond_in, float[1, 16] x_prev) => (bool cond_out, float[1, 16] x_next) {{
            cond_out = Identity(cond_in)
            half = Constant <value = float {{0.5}}> ()
            scaled = Mul(x_prev, half)
            shifted = Add(scaled, half)
            x_next = Tanh(shifted)
        }}>
    }}
    """
    model = _finish(text, {})
    feeds = {"M": np.asarray(steps, np.int64), "x0": np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)}
    return model, feeds


def sequence_insert_loop(steps: int = 8000) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A Loop that appends one [4] tensor per iteration to a sequence (SequenceInsert), then concatenates it."""
    text = f"""
    <ir_version: {IR_VERSION}, opset_import: ["" : {OPSET}]>
    sequence_insert_loop (int64 M, float[4] x) => (float[N] y) {{
        empty = SequenceEmpty <dtype = 1> ()
        seq = Loop(M, , empty) <body = step (int64 i, bool cond_in, seq(float[4]) s_prev) => (bool cond_out, seq(float[4]) s_next) {{
            cond_out = Identity(cond_in)
            s_next = SequenceInsert(s_prev, x)
        }}>
        y = ConcatFromSequence <axis = 0> (seq)
    }}
    """
    model = _finish(text, {})
    return model, {"M": np.asarray(steps, np.int64), "x": np.arange(4, dtype=np.float32)}


MODELS = {"lstm_loop": lstm_loop, "small_loop": small_loop, "sequence_insert_loop": sequence_insert_loop}
