"""ONNX LSTM, GRU and RNN nodes (rnnloop/frontends/onnx_rnn.py over rnnloop/cells.py).

The oracle is a plain NumPy step loop written here from the ONNX spec (onnx's reference evaluator
ignores activations, clip, input_forget and sequence_lens), and onnxruntime where it supports the
attributes. The ONNX node tests for lstm/gru/rnn run in test_onnx_node_conformance.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import IR_VERSION, load_fused, thin
from onnx import TensorProto, helper

import rnnloop

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
DEFAULTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}


def _act(name, alpha, beta, x):
    return {
        "Relu": lambda: np.maximum(x, 0), "Tanh": lambda: np.tanh(x), "Sigmoid": lambda: 1 / (1 + np.exp(-x)),
        "Affine": lambda: alpha * x + beta, "LeakyRelu": lambda: np.where(x >= 0, x, alpha * x),
        "ThresholdedRelu": lambda: np.where(x > alpha, x, 0), "ScaledTanh": lambda: alpha * np.tanh(beta * x),
        "HardSigmoid": lambda: np.clip(alpha * x + beta, 0, 1), "Elu": lambda: np.where(x >= 0, x, alpha * (np.exp(x) - 1)),
        "Softsign": lambda: x / (1 + np.abs(x)), "Softplus": lambda: np.log1p(np.exp(x)),
    }[name]()


def reference(kind, feeds, hidden, direction="forward", activations=None, alpha=(), beta=(), clip=None,
              input_forget=0, linear_before_reset=0, layout=0):
    """Y, Y_h[, Y_c] by the ONNX formulas, one step at a time, in float64."""
    f64 = {k: (None if v is None else np.asarray(v, np.float64)) for k, v in feeds.items()}
    X, W, R = f64["X"], f64["W"], f64["R"]
    if layout:
        X = X.transpose(1, 0, 2)
    T, batch, _ = X.shape
    D = 2 if direction == "bidirectional" else 1
    G, H = GATES[kind], hidden
    acts = activations or DEFAULTS[kind] * D
    lens = feeds.get("sequence_lens")
    lens = np.full(batch, T) if lens is None else lens

    def init(name):
        v = f64.get(name)
        if v is None:
            return np.zeros((D, batch, H))
        return v.transpose(1, 0, 2) if layout else v

    h0, c0 = init("initial_h"), init("initial_c")
    Y, Yh, Yc = np.zeros((T, D, batch, H)), np.zeros((D, batch, H)), np.zeros((D, batch, H))
    for d in range(D):
        k = len(DEFAULTS[kind])

        def a(j, x, d=d, k=k):
            x = x if clip is None else np.clip(x, -clip, clip)
            i = d * k + j
            return _act(acts[i], alpha[i] if i < len(alpha) else None, beta[i] if i < len(beta) else None, x)

        reverse = direction == "reverse" or d == 1
        Wb, Rb = (np.split(f64["B"][d], 2) if f64.get("B") is not None else (np.zeros(G * H),) * 2)
        h, c = h0[d].copy(), c0[d].copy()
        for step in range(T):
            t = T - 1 - step if reverse else step
            x = X[t]
            if kind == "LSTM":
                g = x @ W[d].T + h @ R[d].T + Wb + Rb
                gi, go, gf, gc = np.split(g, 4, axis=1)
                P = f64.get("P")
                pi, po, pf = np.split(P[d], 3) if P is not None else (0, 0, 0)
                i = a(0, gi + pi * c)
                f = 1 - i if input_forget else a(0, gf + pf * c)
                c_new = f * c + i * a(1, gc)
                h_new = a(0, go + po * c_new) * a(2, c_new)
            elif kind == "GRU":
                Wz, Wr, Wh = np.split(W[d], 3)
                Rz, Rr, Rh = np.split(R[d], 3)
                wbz, wbr, wbh = np.split(Wb, 3)
                rbz, rbr, rbh = np.split(Rb, 3)
                z = a(0, x @ Wz.T + h @ Rz.T + wbz + rbz)
                r = a(0, x @ Wr.T + h @ Rr.T + wbr + rbr)
                if linear_before_reset:
                    n = a(1, x @ Wh.T + r * (h @ Rh.T + rbh) + wbh)
                else:
                    n = a(1, x @ Wh.T + (r * h) @ Rh.T + rbh + wbh)
                h_new, c_new = (1 - z) * n + z * h, c
            else:
                h_new, c_new = a(0, x @ W[d].T + h @ R[d].T + Wb + Rb), c
            active = (t < lens)[:, None]
            h, c = np.where(active, h_new, h), np.where(active, c_new, c)
            Y[t, d] = np.where(active, h_new, 0)
        Yh[d], Yc[d] = h, c
    if layout:
        Y, Yh, Yc = Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    return [Y, Yh, Yc] if kind == "LSTM" else [Y, Yh]


def build(kind, hidden, batch=3, steps=5, inputs=8, direction="forward", layout=0, dtype=np.float32,
          with_lens=False, peepholes=False, seed=0, **attrs):
    """The node as a model, and feeds for it."""
    rng = np.random.default_rng(seed)
    D, G = 2 if direction == "bidirectional" else 1, GATES[kind]
    feeds = {"X": rng.standard_normal((batch, steps, inputs) if layout else (steps, batch, inputs)),
             "W": 0.5 * rng.standard_normal((D, G * hidden, inputs)),
             "R": 0.5 * rng.standard_normal((D, G * hidden, hidden)),
             "B": 0.3 * rng.standard_normal((D, 2 * G * hidden)),
             "sequence_lens": rng.integers(0, steps + 1, batch).astype(np.int32) if with_lens else None,
             "initial_h": rng.standard_normal((batch, D, hidden) if layout else (D, batch, hidden))}
    names = ["X", "W", "R", "B", "sequence_lens", "initial_h"]
    if kind == "LSTM":
        feeds["initial_c"] = rng.standard_normal(feeds["initial_h"].shape)
        feeds["P"] = 0.5 * rng.standard_normal((D, 3 * hidden)) if peepholes else None
        names += ["initial_c", "P"]
    feeds = {k: (v if v is None or v.dtype == np.int32 else v.astype(dtype)) for k, v in feeds.items()}
    used = [n if feeds[n] is not None else "" for n in names]
    outs = ["Y", "Y_h"] + (["Y_c"] if kind == "LSTM" else [])
    node = helper.make_node(kind, used, outs, hidden_size=hidden, direction=direction,
                            **({"layout": layout} if layout else {}), **attrs)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph(
        [node], "rnn",
        [helper.make_tensor_value_info(n, TensorProto.INT32 if n == "sequence_lens" else elem, feeds[n].shape)
         for n in names if feeds[n] is not None],
        [helper.make_tensor_value_info(o, elem, None) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=IR_VERSION)
    return model, {k: v for k, v in feeds.items() if v is not None}


CASES = {
    "lstm_bidirectional_layout1_lens_peepholes_clip": {
        "kind": "LSTM", "direction": "bidirectional", "layout": 1, "with_lens": True, "peepholes": True, "clip": 0.7},
    "lstm_input_forget_other_activations": {
        "kind": "LSTM", "input_forget": 1, "activations": ["HardSigmoid", "LeakyRelu", "Affine"],
        "activation_alpha": [0.3, 0.2, 0.5], "activation_beta": [0.6, 0.0, 0.1]},
    "gru_reverse_linear_before_reset_lens": {"kind": "GRU", "direction": "reverse", "linear_before_reset": 1, "with_lens": True},
    "gru_bidirectional_relu_elu_hardsigmoid_softplus_clip": {
        "kind": "GRU", "direction": "bidirectional", "activations": ["Relu", "Elu", "HardSigmoid", "Softplus"],
        "activation_alpha": [0.0, 0.5, 0.25], "activation_beta": [0.0, 0.0, 0.4], "clip": 1.5},
    "rnn_layout1_softsign": {"kind": "RNN", "layout": 1, "activations": ["Softsign"]},
    "rnn_bidirectional_scaledtanh_thresholdedrelu": {
        "kind": "RNN", "direction": "bidirectional", "activations": ["ScaledTanh", "ThresholdedRelu"],
        "activation_alpha": [0.8, 0.1], "activation_beta": [1.2]},
}


# (the default run keeps the plainest case, which compiles fastest; --slow runs the others)
@pytest.mark.parametrize("case", thin(sorted(CASES, key=lambda c: (c != "rnn_layout1_softsign", c)), 12, single=True))
def test_against_a_numpy_step_loop(case, backend):
    kw = dict(CASES[case])
    kind, hidden = kw.pop("kind"), 4
    build_kw = {k: kw.pop(k) for k in ("direction", "layout", "with_lens", "peepholes") if k in kw}
    model, feeds = build(kind, hidden, **build_kw, **kw)
    got = load_fused(model, backend).run(None, feeds)
    want = reference(kind, feeds, hidden, build_kw.get("direction", "forward"), kw.get("activations"),
                     kw.get("activation_alpha", ()), kw.get("activation_beta", ()), kw.get("clip"),
                     kw.get("input_forget", 0), kw.get("linear_before_reset", 0), build_kw.get("layout", 0))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


@pytest.mark.slow
def test_float64_lstm_is_exact_to_float64(backend):
    model, feeds = build("LSTM", 5, direction="bidirectional", dtype=np.float64, with_lens=True)
    got = load_fused(model, backend).run(None, feeds)
    for g, w in zip(got, reference("LSTM", feeds, 5, "bidirectional")):
        assert g.dtype == np.float64
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_against_onnxruntime(kind, backend):
    ort = pytest.importorskip("onnxruntime")
    # No clip: onnxruntime's LSTM with clip differs from the spec's reading here (the input of every
    # activation clipped) by up to 8e-3; the NumPy oracle above checks clip.
    model, feeds = build(kind, 6, batch=2, steps=7, direction="bidirectional", with_lens=True,
                         peepholes=kind == "LSTM", **({"linear_before_reset": 1} if kind == "GRU" else {}))
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = load_fused(model, backend).run(None, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind, layout", thin([(k, layout) for layout in (0, 1) for k in ("RNN", "LSTM", "GRU")], 6))
def test_zero_steps_give_an_empty_y_of_the_full_shape_and_the_initial_state(kind, layout, backend):
    model, feeds = build(kind, 4, batch=2, steps=0, direction="bidirectional", layout=layout)
    y, yh, *yc = load_fused(model, backend).run(None, feeds)
    assert y.shape == ((2, 0, 2, 4) if layout else (0, 2, 2, 4))
    np.testing.assert_array_equal(yh, feeds["initial_h"])
    if kind == "LSTM":
        np.testing.assert_array_equal(yc[0], feeds["initial_c"])


def test_an_unknown_activation_is_rejected_at_load_by_name():
    model, _ = build("RNN", 3, activations=["Swish"])
    with pytest.raises(rnnloop.UnsupportedModelError, match=r"RNN .*activation 'Swish'"):
        rnnloop.load(model)


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_explain_says_which_direction_of_a_bidirectional_op_each_loop_is(kind):
    model, _ = build(kind, 3, direction="bidirectional")
    model.graph.node[0].name = "enc"
    assert rnnloop.load(model, backend="interp").explain().splitlines()[:-1] == [  # (the last: threads)
        f"{kind} 'enc' (ai.onnx opset 14), forward direction: interpreted (backend='interp')",
        f"{kind} 'enc' (ai.onnx opset 14), reverse direction: interpreted (backend='interp')"]
    model, _ = build(kind, 3, direction="reverse")  # one loop: the node says its direction
    assert rnnloop.load(model, backend="interp").explain().splitlines()[0] == \
        f"{kind} '{kind}_0' (ai.onnx opset 14): interpreted (backend='interp')"


@pytest.mark.slow
def test_a_two_layer_model_as_torch_exports_it(backend):
    """Embedding (Gather), a bidirectional LSTM, its Y reshaped to [steps, batch, 2*hidden], a GRU,
    then Linear and LogSoftmax: one node per layer, as torch.onnx.export writes it."""
    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(3)
    vocab, emb, hidden, steps, batch = 11, 6, 5, 7, 2
    init = {"E": rng.standard_normal((vocab, emb)), "W1": 0.4 * rng.standard_normal((2, 4 * hidden, emb)),
            "R1": 0.4 * rng.standard_normal((2, 4 * hidden, hidden)), "B1": 0.2 * rng.standard_normal((2, 8 * hidden)),
            "W2": 0.4 * rng.standard_normal((1, 3 * hidden, 2 * hidden)),
            "R2": 0.4 * rng.standard_normal((1, 3 * hidden, hidden)), "B2": 0.2 * rng.standard_normal((1, 6 * hidden)),
            "L": rng.standard_normal((hidden, vocab)), "Lb": rng.standard_normal(vocab)}
    tensors = [helper.make_tensor(k, TensorProto.FLOAT, v.shape, v.astype(np.float32).ravel()) for k, v in init.items()]
    tensors += [helper.make_tensor("shape", TensorProto.INT64, [3], [0, 0, -1]),
                helper.make_tensor("axis1", TensorProto.INT64, [1], [1])]
    nodes = [
        helper.make_node("Gather", ["E", "tokens"], ["x"]),
        helper.make_node("LSTM", ["x", "W1", "R1", "B1"], ["y1"], hidden_size=hidden, direction="bidirectional"),
        helper.make_node("Transpose", ["y1"], ["y1t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["y1t", "shape"], ["x2"]),
        helper.make_node("GRU", ["x2", "W2", "R2", "B2"], ["y2", "h2"], hidden_size=hidden, linear_before_reset=1),
        helper.make_node("Squeeze", ["y2", "axis1"], ["y2s"]),
        helper.make_node("MatMul", ["y2s", "L"], ["logits0"]),
        helper.make_node("Add", ["logits0", "Lb"], ["logits"]),
        helper.make_node("LogSoftmax", ["logits"], ["out"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "two_layers", [helper.make_tensor_value_info("tokens", TensorProto.INT64, [steps, batch])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("h2", TensorProto.FLOAT, None)], tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=IR_VERSION)
    feeds = {"tokens": rng.integers(0, vocab, (steps, batch))}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = load_fused(model, backend).run(None, feeds)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
