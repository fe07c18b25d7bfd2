"""Built-in example models (ONNX), used by the demo, `rnnloop bench` and the benchmarks.

The LSTM and GRU builders come in three forms with the same weights and feeds for the same arguments:
`*_loop` (an ONNX Loop that Gathers step i of X), `*_scan` (an ONNX Scan over axis 0 of X) and
`*_native` (ONNX's own LSTM/GRU op), so any two of them must give the same outputs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np
import onnx
from onnx import numpy_helper

from .frontend_models import crnn, fsmn_stream, vad_conv

# onnxruntime reads at most IR version 13; these models stay well below it.
IR_VERSION = 8
OPSET = 17

Built = tuple[onnx.ModelProto, dict[str, np.ndarray]]


def _finish(text: str, initializers: dict[str, np.ndarray]) -> onnx.ModelProto:
    model = onnx.parser.parse_model(f'<ir_version: {IR_VERSION}, opset_import: ["" : {OPSET}]>\n{text}')
    model.graph.initializer.extend(numpy_helper.from_array(v, name=k) for k, v in initializers.items())
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def _cell(gates: int, batch: int, input_size: int, hidden: int, steps: int, seed: int, states: int):
    """Random cell weights in x·W layout (W[I, gates·H], R[H, gates·H], input and recurrent biases) and feeds."""
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(hidden)

    def uniform(*shape):
        return rng.uniform(-scale, scale, shape).astype(np.float32)

    weights = uniform(input_size, gates * hidden), uniform(hidden, gates * hidden), uniform(gates * hidden), \
        uniform(gates * hidden)
    feeds = {"X": rng.standard_normal((steps, batch, input_size)).astype(np.float32)}
    # Non-zero initial states, so a model that drops them cannot agree with one that keeps them.
    for name in ["h0", "c0"][:states]:
        feeds[name] = rng.uniform(-0.5, 0.5, (batch, hidden)).astype(np.float32)
    return weights, feeds


# The cell bodies, shared by the Loop and Scan forms: they read x, h_prev (and c_prev) and write
# h_next (and c_next) and y. ONNX gate orders: i, o, f, c for LSTM and z, r, h for GRU.
LSTM_BODY = """
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
"""

# linear_before_reset = 0, onnxruntime's default: h~ = tanh(x·Wh + (r ⊙ h)·Rh + Wbh + Rbh).
GRU_BODY = """
            xw = MatMul(x, W)
            xb = Add(xw, Wb)
            xz, xr, xh = Split <axis = 1> (xb, parts3)
            hw = MatMul(h_prev, Rzr)
            hb = Add(hw, Rbzr)
            hz, hr = Split <axis = 1> (hb, parts2)
            zs = Add(xz, hz)
            z = Sigmoid(zs)
            rs = Add(xr, hr)
            r = Sigmoid(rs)
            rh = Mul(r, h_prev)
            hh = MatMul(rh, Rh)
            hhb = Add(hh, Rbh)
            hs = Add(xh, hhb)
            ht = Tanh(hs)
            one = Constant <value = float {1.0}> ()
            keep_new = Sub(one, z)
            new_part = Mul(keep_new, ht)
            old_part = Mul(z, h_prev)
            h_next = Add(new_part, old_part)
            y = Identity(h_next)
"""


def _lstm_weights(weights, hidden: int) -> dict[str, np.ndarray]:
    W, R, Wb, Rb = weights
    return {"W": W, "R": R, "Bias": Wb + Rb, "parts": np.full(4, hidden, np.int64)}


def _gru_weights(weights, hidden: int) -> dict[str, np.ndarray]:
    W, R, Wb, Rb = weights
    return {"W": W, "Wb": Wb, "Rzr": np.ascontiguousarray(R[:, :2 * hidden]), "Rbzr": Rb[:2 * hidden],
            "Rh": np.ascontiguousarray(R[:, 2 * hidden:]), "Rbh": Rb[2 * hidden:],
            "parts3": np.full(3, hidden, np.int64), "parts2": np.full(2, hidden, np.int64)}


def _native_weights(weights) -> dict[str, np.ndarray]:
    """ONNX LSTM/GRU layout: W[num_directions, gates·H, I], R[num_directions, gates·H, H], B = [Wb, Rb]."""
    W, R, Wb, Rb = weights
    return {"Wn": np.ascontiguousarray(W.T[None]), "Rn": np.ascontiguousarray(R.T[None]),
            "Bn": np.concatenate([Wb, Rb])[None]}


def _states(states: list[str], suffix: str = "") -> str:
    """The [B, H] state tensors `states`, each name + suffix, declared as in a signature."""
    return ", ".join(f"float[B, H] {s}{suffix}" for s in states)


def _signature(name: str, states: list[str]) -> str:
    """The signature every LSTM/GRU model shares: X and the initial states in, final states and Y out."""
    return f"{name} (float[T, B, I] X, {_states(states, '0')}) => ({_states(states)}, float[T, B, H] Y)"


def _loop_text(name: str, body: str, states: list[str]) -> str:
    """A Loop over axis 0 of X: the body Gathers x = X[i] and carries `states`."""
    prev, nxt = _states(states, "_prev"), _states(states, "_next")
    return f"""
    {_signature(name, states)} {{
        shape = Shape(X)
        zero = Constant <value = int64[1] {{0}}> ()
        steps_1d = Gather <axis = 0> (shape, zero)
        steps = Squeeze(steps_1d)
        go = Constant <value = bool {{1}}> ()
        {", ".join(states)}, Y = Loop(steps, go, {", ".join(s + "0" for s in states)}) <body = step (
                int64 i, bool cond_in, {prev}) => (bool cond_out, {nxt}, float[B, H] y) {{
            cond_out = Identity(cond_in)
            x = Gather <axis = 0> (X, i)
            {body}
        }}>
    }}
    """


def _scan_text(name: str, body: str, states: list[str]) -> str:
    """A Scan over axis 0 of X carrying `states`."""
    prev, nxt = _states(states, "_prev"), _states(states, "_next")
    return f"""
    {_signature(name, states)} {{
        {", ".join(states)}, Y = Scan <num_scan_inputs = 1, body = step ({prev}, float[B, I] x)
                                       => ({nxt}, float[B, H] y) {{
            {body}
        }}> ({", ".join(s + "0" for s in states)}, X)
    }}
    """


def _native_text(name: str, op: str, hidden: int, states: list[str]) -> str:
    """ONNX's own LSTM/GRU op, with the Loop models' inputs and outputs ([B, H] states, Y[T, B, H])."""
    unsqueeze = "\n".join(f"        {s}_3 = Unsqueeze({s}0, axis0)" for s in states)
    squeeze = "\n".join(f"        {s} = Squeeze({s}_n, axis0)" for s in states)
    # LSTM's optional inputs: X, W, R, B, sequence_lens, initial_h, initial_c; GRU's stop at initial_h.
    return f"""
    {_signature(name, states)} {{
        axis0 = Constant <value = int64[1] {{0}}> ()
        axis1 = Constant <value = int64[1] {{1}}> ()
{unsqueeze}
        Y4, {", ".join(s + "_n" for s in states)} = {op} <hidden_size = {hidden}> (X, Wn, Rn, Bn, , {", ".join(s + "_3" for s in states)})
        Y = Squeeze(Y4, axis1)
{squeeze}
    }}
    """


def lstm_loop(batch: int = 1, input_size: int = 64, hidden: int = 128, steps: int = 200, seed: int = 0) -> Built:
    """An LSTM written as an ONNX Loop (Gather on the iteration number, MatMul, Split, Sigmoid, Tanh, Mul).

    Gates in ONNX order i, o, f, c. Returns the model and feeds X[steps, batch, input], h0, c0;
    its outputs are h, c and Y[steps, batch, hidden].
    """
    weights, feeds = _cell(4, batch, input_size, hidden, steps, seed, states=2)
    return _finish(_loop_text("lstm_loop", LSTM_BODY, ["h", "c"]), _lstm_weights(weights, hidden)), feeds


def lstm_scan(batch: int = 1, input_size: int = 64, hidden: int = 128, steps: int = 200, seed: int = 0) -> Built:
    """The LSTM cell of `lstm_loop` as an ONNX Scan body, scanning axis 0 of X with states h and c."""
    weights, feeds = _cell(4, batch, input_size, hidden, steps, seed, states=2)
    return _finish(_scan_text("lstm_scan", LSTM_BODY, ["h", "c"]), _lstm_weights(weights, hidden)), feeds


def lstm_native(batch: int = 1, input_size: int = 64, hidden: int = 128, steps: int = 200, seed: int = 0) -> Built:
    """ONNX's LSTM op with the weights, feeds and outputs of `lstm_loop` for the same arguments."""
    weights, feeds = _cell(4, batch, input_size, hidden, steps, seed, states=2)
    return _finish(_native_text("lstm_native", "LSTM", hidden, ["h", "c"]), _native_weights(weights)), feeds


def gru_loop(batch: int = 1, input_size: int = 64, hidden: int = 128, steps: int = 200, seed: int = 0) -> Built:
    """A GRU (linear_before_reset = 0, gates z, r, h) written as an ONNX Loop.

    Returns the model and feeds X[steps, batch, input], h0; its outputs are h and Y[steps, batch, hidden].
    """
    weights, feeds = _cell(3, batch, input_size, hidden, steps, seed, states=1)
    return _finish(_loop_text("gru_loop", GRU_BODY, ["h"]), _gru_weights(weights, hidden)), feeds


def gru_scan(batch: int = 1, input_size: int = 64, hidden: int = 128, steps: int = 200, seed: int = 0) -> Built:
    """The GRU cell of `gru_loop` as an ONNX Scan body, scanning axis 0 of X with state h."""
    weights, feeds = _cell(3, batch, input_size, hidden, steps, seed, states=1)
    return _finish(_scan_text("gru_scan", GRU_BODY, ["h"]), _gru_weights(weights, hidden)), feeds


def gru_native(batch: int = 1, input_size: int = 64, hidden: int = 128, steps: int = 200, seed: int = 0) -> Built:
    """ONNX's GRU op with the weights, feeds and outputs of `gru_loop` for the same arguments."""
    weights, feeds = _cell(3, batch, input_size, hidden, steps, seed, states=1)
    return _finish(_native_text("gru_native", "GRU", hidden, ["h"]), _native_weights(weights)), feeds


def small_loop(steps: int = 1000) -> Built:
    """A 3-op Loop body (Mul, Add, Tanh) on a [1, 16] carried tensor."""
    text = """
    small_loop (int64 M, float[1, 16] x0) => (float[1, 16] x) {
        x = Loop(M, , x0) <body = step (int64 i, bool cond_in, float[1, 16] x_prev) => (bool cond_out, float[1, 16] x_next) {
            cond_out = Identity(cond_in)
            half = Constant <value = float {0.5}> ()
            scaled = Mul(x_prev, half)
            shifted = Add(scaled, half)
            x_next = Tanh(shifted)
        }>
    }
    """
    feeds = {"M": np.asarray(steps, np.int64), "x0": np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)}
    return _finish(text, {}), feeds


def sequence_insert_loop(steps: int = 8000) -> Built:
    """A Loop that appends one [4] tensor per iteration to a sequence (SequenceInsert), then concatenates it."""
    text = """
    sequence_insert_loop (int64 M, float[4] x) => (float[N] y) {
        empty = SequenceEmpty <dtype = 1> ()
        seq = Loop(M, , empty) <body = step (int64 i, bool cond_in, seq(float[4]) s_prev) => (bool cond_out, seq(float[4]) s_next) {
            cond_out = Identity(cond_in)
            s_next = SequenceInsert(s_prev, x)
        }>
        y = ConcatFromSequence <axis = 0> (seq)
    }
    """
    return _finish(text, {}), {"M": np.asarray(steps, np.int64), "x": np.arange(4, dtype=np.float32)}


def elementwise_chain(ops: int = 10, width: int = 16, rows: int = 1) -> Built:
    """`ops` elementwise ops in a chain on a [rows, width] tensor, cycling through Add and Mul by
    [width] constants, Tanh and Sigmoid: at one row, a model whose time is all per-call and per-op
    overhead; at many, one loop nest that a worker shares (kernel.emit_shared_call)."""
    rng = np.random.default_rng(0)
    lines, initializers, last = [], {}, "x"
    for k in range(ops):
        kind = ("Add", "Tanh", "Mul", "Sigmoid")[k % 4]
        out = f"v{k}" if k < ops - 1 else "y"
        if kind in ("Add", "Mul"):
            initializers[f"c{k}"] = rng.uniform(0.5, 1.5, width).astype(np.float32)
            lines.append(f"{out} = {kind}({last}, c{k})")
        else:
            lines.append(f"{out} = {kind}({last})")
        last = out
    if not lines:
        lines.append("y = Identity(x)")
    text = f"elementwise_chain (float[{rows}, {width}] x) => (float[{rows}, {width}] y) {{\n" + "\n".join(lines) + "\n}"
    feeds = {"x": np.linspace(-1, 1, rows * width, dtype=np.float32).reshape(rows, width)}
    return _finish(text, initializers), feeds


def vad_stream(chunk: int = 512, hidden: int = 128, seed: int = 0) -> Built:
    """A streaming voice-activity model in the shape of the published ones, one `chunk` of samples
    per call with the LSTM state carried between calls: an If on the sample rate (8 kHz audio is
    scaled), a Conv-free STFT front end (reflect Pad, frames of 128 samples with hop 64 cut by
    Reshape/Slice/Concat, a MatMul by a fixed windowed Fourier basis, Pow/Sqrt magnitude), two
    LSTM(hidden) layers and a Sigmoid head on the last frame."""
    rng = np.random.default_rng(seed)
    frame, hop, bins = 128, 64, 65
    frames = chunk // hop
    n = np.arange(frame)[:, None]
    k = np.arange(bins)[None, :]
    window = np.hanning(frame)[:, None]
    basis = np.concatenate([np.cos(2 * np.pi * n * k / frame), -np.sin(2 * np.pi * n * k / frame)], axis=1) * window

    def lstm_weights(inputs):
        scale = 1 / np.sqrt(hidden)
        return (rng.uniform(-scale, scale, (1, 4 * hidden, inputs)).astype(np.float32),
                rng.uniform(-scale, scale, (1, 4 * hidden, hidden)).astype(np.float32),
                rng.uniform(-scale, scale, (1, 8 * hidden)).astype(np.float32))

    (w1, r1, b1), (w2, r2, b2) = lstm_weights(bins), lstm_weights(hidden)
    initializers = {
        "basis": basis.astype(np.float32), "pads": np.array([0, hop // 2, 0, hop // 2], np.int64),
        "half": np.array(0.5, np.float32), "rate16k": np.array(16000, np.int64),
        "shape3": np.array([1, frames + 1, hop], np.int64), "two": np.array(2, np.float32),
        "zero1": np.array([0], np.int64), "one1": np.array([1], np.int64), "last1": np.array([frames], np.int64),
        "axis1": np.array([1], np.int64), "split": np.array([bins, bins], np.int64),
        "ones2": np.array([1, 1], np.int64),
        "W1": w1, "R1": r1, "B1": b1, "W2": w2, "R2": r2, "B2": b2,
        "head": rng.uniform(-0.1, 0.1, (hidden, 1)).astype(np.float32), "head_bias": np.zeros(1, np.float32),
        "last": np.array(frames - 1, np.int64), "last1_plus": np.array([frames + 1], np.int64),
    }
    text = f"""
    vad_stream (float[1, {chunk}] x, int64 sr, float[2, 1, {hidden}] h, float[2, 1, {hidden}] c)
        => (float[1, 1] prob, float[2, 1, {hidden}] h_out, float[2, 1, {hidden}] c_out) {{
        is16k = Equal(sr, rate16k)
        audio = If(is16k) <
            then_branch = g16 () => (float[1, {chunk}] a16) {{ a16 = Identity(x) }},
            else_branch = g8 () => (float[1, {chunk}] a8) {{ a8 = Mul(x, half) }}
        >
        padded = Pad <mode = "reflect"> (audio, pads)
        halves = Reshape(padded, shape3)
        first = Slice(halves, zero1, last1, axis1)
        second = Slice(halves, one1, last1_plus, axis1)
        frames = Concat <axis = 2> (first, second)
        spectrum = MatMul(frames, basis)
        re, im = Split <axis = 2> (spectrum, split)
        re2 = Pow(re, two)
        im2 = Pow(im, two)
        power = Add(re2, im2)
        magnitude = Sqrt(power)
        steps = Transpose <perm = [1, 0, 2]> (magnitude)
        h1, h2 = Split <axis = 0> (h, ones2)
        c1, c2 = Split <axis = 0> (c, ones2)
        y1, h1_out, c1_out = LSTM <hidden_size = {hidden}> (steps, W1, R1, B1, , h1, c1)
        y1_steps = Squeeze(y1, one1)
        y2, h2_out, c2_out = LSTM <hidden_size = {hidden}> (y1_steps, W2, R2, B2, , h2, c2)
        h_out = Concat <axis = 0> (h1_out, h2_out)
        c_out = Concat <axis = 0> (c1_out, c2_out)
        y_last = Gather(y2, last)
        features = Squeeze(y_last, zero1)
        logits = MatMul(features, head)
        shifted = Add(logits, head_bias)
        prob = Sigmoid(shifted)
    }}
    """
    rng_feeds = np.random.default_rng(seed + 1)
    feeds = {"x": rng_feeds.uniform(-1, 1, (1, chunk)).astype(np.float32), "sr": np.array(16000, np.int64),
             "h": np.zeros((2, 1, hidden), np.float32), "c": np.zeros((2, 1, hidden), np.float32)}
    return _finish(text, initializers), feeds


def gru_decoder_step(batch: int = 12, hidden: int = 256, source: int = 32, vocab: int = 2000, seed: int = 0) -> Built:
    """One step of a seq2seq decoder as published models export it, without a loop: the previous
    tokens' embeddings, two GRU cells written as MatMul/Sigmoid/Tanh, dot-product attention over
    the encoder's outputs (batched MatMul, Softmax), and a LogSoftmax over the vocabulary."""
    rng = np.random.default_rng(seed)
    scale = 1 / np.sqrt(hidden)

    def uniform(*shape):
        return rng.uniform(-scale, scale, shape).astype(np.float32)

    initializers = {"embedding": uniform(vocab, hidden), "out_w": uniform(2 * hidden, vocab),
                    "out_b": uniform(vocab), "thirds": np.array([hidden] * 3, np.int64),
                    "halves": np.array([hidden] * 2, np.int64), "last": np.array([2], np.int64),
                    "one_axis": np.array([1], np.int64)}
    cells = []
    for k in (1, 2):
        initializers.update({f"W{k}": uniform(hidden, 3 * hidden), f"bW{k}": uniform(3 * hidden),
                             f"Rzr{k}": uniform(hidden, 2 * hidden), f"bR{k}": uniform(2 * hidden),
                             f"Rn{k}": uniform(hidden, hidden), f"bRn{k}": uniform(hidden)})
        x = "x" if k == 1 else "h1_out"
        cells.append(f"""
        xw{k} = MatMul({x}, W{k})
        xwb{k} = Add(xw{k}, bW{k})
        xz{k}, xr{k}, xn{k} = Split <axis = 1> (xwb{k}, thirds)
        hzr{k} = MatMul(h{k}, Rzr{k})
        hzrb{k} = Add(hzr{k}, bR{k})
        hz{k}, hr{k} = Split <axis = 1> (hzrb{k}, halves)
        zs{k} = Add(xz{k}, hz{k})
        z{k} = Sigmoid(zs{k})
        rs{k} = Add(xr{k}, hr{k})
        r{k} = Sigmoid(rs{k})
        rh{k} = Mul(r{k}, h{k})
        hn{k} = MatMul(rh{k}, Rn{k})
        hnb{k} = Add(hn{k}, bRn{k})
        ns{k} = Add(xn{k}, hnb{k})
        n{k} = Tanh(ns{k})
        d{k} = Sub(h{k}, n{k})
        zd{k} = Mul(z{k}, d{k})
        h{k}_out = Add(n{k}, zd{k})""")
    text = f"""
    gru_decoder_step (int64[{batch}] tokens, float[{batch}, {hidden}] h1, float[{batch}, {hidden}] h2,
                      float[{batch}, {source}, {hidden}] memory)
        => (float[{batch}, {vocab}] logprobs, float[{batch}, {hidden}] h1_out, float[{batch}, {hidden}] h2_out) {{
        x = Gather(embedding, tokens)
        {"".join(cells)}
        query = Unsqueeze(h2_out, last)
        scores = MatMul(memory, query)
        weights = Softmax <axis = 1> (scores)
        weights_t = Transpose <perm = [0, 2, 1]> (weights)
        context3 = MatMul(weights_t, memory)
        context = Squeeze(context3, one_axis)
        both = Concat <axis = 1> (h2_out, context)
        logits = MatMul(both, out_w)
        biased = Add(logits, out_b)
        logprobs = LogSoftmax <axis = 1> (biased)
    }}
    """
    feeds_rng = np.random.default_rng(seed + 1)
    feeds = {"tokens": feeds_rng.integers(0, vocab, batch).astype(np.int64),
             "h1": feeds_rng.uniform(-1, 1, (batch, hidden)).astype(np.float32),
             "h2": feeds_rng.uniform(-1, 1, (batch, hidden)).astype(np.float32),
             "memory": feeds_rng.uniform(-1, 1, (batch, source, hidden)).astype(np.float32)}
    return _finish(text, initializers), feeds


def _bidirectional_encoder(kind: str, batch: int, input_size: int, hidden: int, steps: int, layers: int,
                           seed: int) -> Built:
    """A stack of `layers` bidirectional ONNX LSTM/GRU nodes as torch.onnx.export (dynamo=False) writes
    nn.LSTM/nn.GRU(num_layers=layers, bidirectional=True) called without initial states: zero states
    made by Shape/Gather/Unsqueeze/Concat/ConstantOfShape and sliced per layer, and between layers
    Y[T, 2, B, H] -> Transpose(perm 0, 2, 1, 3) -> Reshape(0, 0, -1) -> the next layer's X[T, B, 2H]."""
    rng = np.random.default_rng(seed)
    scale = 1 / np.sqrt(hidden)
    gates = 4 if kind == "LSTM" else 3
    states = ["h", "c"] if kind == "LSTM" else ["h"]
    initializers: dict[str, np.ndarray] = {
        "state_rows": np.array([2 * layers], np.int64), "state_hidden": np.array([hidden], np.int64),
        "one": np.array(1, np.int64), "axis0": np.array([0], np.int64), "flatten": np.array([0, 0, -1], np.int64)}
    lines = [
        "shape = Shape(X)",
        "batch = Gather <axis = 0> (shape, one)",
        "batch1 = Unsqueeze(batch, axis0)",
        "state_shape = Concat <axis = 0> (state_rows, batch1, state_hidden)",
        "zeros = ConstantOfShape <value = float[1] {0}> (state_shape)"]
    # torch.nn.LSTM's gates i, f, g, o and GRU's r, z, n are reordered by its exporter into ONNX's order;
    # random weights need no reordering. GRU: torch's cell is linear_before_reset = 1.
    attributes = f"direction = \"bidirectional\", hidden_size = {hidden}" + \
        (", linear_before_reset = 1" if kind == "GRU" else "")
    x = "X"
    for k in range(layers):
        inputs = input_size if k == 0 else 2 * hidden
        initializers.update({
            f"W{k}": rng.uniform(-scale, scale, (2, gates * hidden, inputs)).astype(np.float32),
            f"R{k}": rng.uniform(-scale, scale, (2, gates * hidden, hidden)).astype(np.float32),
            f"B{k}": rng.uniform(-scale, scale, (2, 2 * gates * hidden)).astype(np.float32),
            f"first{k}": np.array([2 * k], np.int64), f"last{k}": np.array([2 * k + 2], np.int64)})
        for s in states:
            lines.append(f"{s}0_{k} = Slice(zeros, first{k}, last{k}, axis0)")
        state_in = ", ".join(f"{s}0_{k}" for s in states)
        state_out = ", ".join(f"{s}_{k}" for s in states)
        lines.append(f"Y{k}, {state_out} = {kind} <{attributes}> ({x}, W{k}, R{k}, B{k}, , {state_in})")
        lines.append(f"Yt{k} = Transpose <perm = [0, 2, 1, 3]> (Y{k})")
        x = "Y" if k == layers - 1 else f"X{k + 1}"
        lines.append(f"{x} = Reshape(Yt{k}, flatten)")
    finals = []
    for s in states:
        lines.append(f"{s}_n = Concat <axis = 0> ({', '.join(f'{s}_{k}' for k in range(layers))})")
        finals.append(f"float[{2 * layers}, B, {hidden}] {s}_n")
    body = "\n        ".join(lines)
    name = f"bi{kind.lower()}_encoder"
    text = f"""
    {name} (float[T, B, {input_size}] X) => (float[T, B, {2 * hidden}] Y, {", ".join(finals)}) {{
        {body}
    }}
    """
    feeds = {"X": np.random.default_rng(seed + 1).standard_normal((steps, batch, input_size)).astype(np.float32)}
    return _finish(text, initializers), feeds


def bilstm_encoder(batch: int = 12, input_size: int = 80, hidden: int = 256, steps: int = 100, layers: int = 3,
                   seed: int = 0) -> Built:
    """A stacked bidirectional LSTM encoder as published speech and text models export it (torch's
    nn.LSTM(input_size, hidden, num_layers=layers, bidirectional=True) through torch.onnx.export,
    dynamo=False): one ONNX LSTM node per layer, direction "bidirectional", zero initial states, and
    the Transpose/Reshape glue between layers. The defaults are a speech encoder's: 80 log-mel features,
    100 frames (1 s at a 10 ms hop), three layers of 256 per direction, batch 12. Feed X[steps, batch,
    input]; outputs Y[steps, batch, 2·hidden], h_n and c_n [2·layers, batch, hidden]."""
    return _bidirectional_encoder("LSTM", batch, input_size, hidden, steps, layers, seed)


def bigru_encoder(batch: int = 12, input_size: int = 80, hidden: int = 256, steps: int = 100, layers: int = 3,
                  seed: int = 0) -> Built:
    """`bilstm_encoder` with nn.GRU's layers (ONNX GRU, linear_before_reset = 1, as torch exports it);
    outputs Y[steps, batch, 2·hidden] and h_n [2·layers, batch, hidden]."""
    return _bidirectional_encoder("GRU", batch, input_size, hidden, steps, layers, seed)


# (batch, input_size, hidden, steps) of the LSTM/GRU workloads the benchmarks time.
def lstm_step(batch: int = 1, input_size: int = 64, hidden: int = 128, steps: int = 200, seed: int = 0):
    """The cell of `lstm_loop` as a Python step function for `rnnloop.scan`, with its initial carry
    and xs: `rnnloop.scan(step, init, xs)` returns ((h, c), Y) with lstm_loop's outputs."""
    from . import op
    (w, r, wb, rb), feeds = _cell(4, batch, input_size, hidden, steps, seed, states=2)
    bias = wb + rb

    def step(carry, x):
        h, c = carry
        i, o, f, g = op.split(x @ w + h @ r + bias, axis=1, num_outputs=4)
        c = op.sigmoid(f) * c + op.sigmoid(i) * np.tanh(g)
        h = op.sigmoid(o) * np.tanh(c)
        return (h, c), h

    return step, (feeds["h0"], feeds["c0"]), feeds["X"]


RNN_SIZES = ((1, 64, 128, 200), (1, 128, 256, 200), (16, 128, 256, 200), (64, 256, 512, 100))

MODELS: dict[str, Callable[..., Built]] = {
    "lstm_loop": lstm_loop, "lstm_scan": lstm_scan, "lstm_native": lstm_native,
    "gru_loop": gru_loop, "gru_scan": gru_scan, "gru_native": gru_native,
    "small_loop": small_loop, "sequence_insert_loop": sequence_insert_loop,
    "elementwise_chain": elementwise_chain, "vad_stream": vad_stream, "gru_decoder_step": gru_decoder_step,
    "bilstm_encoder": bilstm_encoder, "bigru_encoder": bigru_encoder,
    "vad_conv": vad_conv, "crnn": crnn, "fsmn_stream": fsmn_stream,
}


def native_peer(name: str) -> str | None:
    """The built-in model holding ONNX's own LSTM/GRU op that computes the same as `name`, if any."""
    cell = name.split("_")[0]
    return f"{cell}_native" if cell in ("lstm", "gru") and name != f"{cell}_native" else None


def size_names(name: str) -> list[str]:
    """The size parameters of a built-in model's builder, in order (its seed left out)."""
    return [p for p in inspect.signature(MODELS[name]).parameters if p != "seed"]


def resolve(spec: str, **given: int | None) -> tuple[str, dict[str, int]]:
    """A built-in model's name and full arguments from `NAME` or `NAME:SIZExSIZE...` and keyword sizes.

    The sizes after the colon follow `size_names(NAME)`, so `lstm_loop:16x128x256x200` is batch 16,
    input 128, hidden 256, 200 steps, and `small_loop:500` is 500 steps. A keyword that is not None
    overrides them; the rest take the builder's defaults.
    """
    name, _, sizes = spec.partition(":")
    if name not in MODELS:
        raise ValueError(f"'{name}' is not a built-in model; the built-in models are {', '.join(MODELS)}")
    names = size_names(name)
    values = sizes.split("x") if sizes else []
    if len(values) > len(names) or not all(v.isdigit() for v in values):
        raise ValueError(f"'{spec}': sizes after the colon are up to {len(names)} integers "
                         f"{' x '.join(names)}, like {name}:{'x'.join(str(_defaults(name)[n]) for n in names)}")
    arguments = dict(_defaults(name))
    arguments.update(zip(names, map(int, values)))
    parameters = inspect.signature(MODELS[name]).parameters
    arguments.update({k: v for k, v in given.items() if v is not None and k in parameters})
    return name, arguments


def _defaults(name: str) -> dict[str, int]:
    return {k: p.default for k, p in inspect.signature(MODELS[name]).parameters.items()}
