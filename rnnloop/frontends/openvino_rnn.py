"""OpenVINO's recurrent layers: the cells as one step of rnnloop.cells, the sequences through the
ONNX converter (one loop per direction).

OpenVINO orders an LSTM's gates f, i, c, o where ONNX (and rnnloop.cells) use i, o, f, c; a GRU's
are z, r, h in both. Weights are reordered by a Gather outside the loop, which constant folding
runs once at load. OpenVINO keeps one bias per gate, ONNX a pair (input and recurrent): the
recurrent half is zeros, except a GRU's h bias with linear_before_reset, which OpenVINO appends.
Sequences are batch-first: X [batch, steps, input], states [batch, directions, hidden], and Y
[batch, directions, steps, hidden].
"""

from __future__ import annotations

import numpy as np

from ..cells import ACTIVATION_DEFAULTS, GATES, Activation, CellSpec, cell_step
from .onnx_rnn import convert_recurrent
from .registry import converts

_LSTM_FROM_OPENVINO = [1, 3, 0, 2]  # ONNX's i, o, f, c among OpenVINO's f, i, c, o
_DEFAULTS = {"LSTM": "sigmoid,tanh,tanh", "GRU": "sigmoid,tanh", "RNN": "tanh"}


def _reordered(n, kind: str, value: str, hidden: int, axis: int) -> str:
    if kind != "LSTM":
        return value
    rows = np.concatenate([np.arange(k * hidden, (k + 1) * hidden) for k in _LSTM_FROM_OPENVINO])
    return n.b.op1("Gather", value, n.const(rows), axis=axis)


def _settings(n, kind: str) -> tuple[int, list[str], float | None]:
    hidden = n.attr_int("hidden_size")
    names = [a.strip() for a in n.attr("activations", _DEFAULTS[kind]).split(",") if a.strip()]
    clip = n.attr_float("clip", 0.0)
    return hidden, names, (clip if clip > 0 else None)  # OpenVINO's clip 0 means no clipping


def _cell(n, kind: str, x, h, c, w, r, bias):
    hidden, names, clip = _settings(n, kind)
    canonical = {a.lower(): a for a in ACTIVATION_DEFAULTS}
    acts = []
    for name in names:
        if name.lower() not in canonical:
            raise n.unsupported(f"activation '{name}' is not supported")
        acts.append(Activation(canonical[name.lower()], *ACTIVATION_DEFAULTS[canonical[name.lower()]]))
    lbr = kind == "GRU" and n.attr_bool("linear_before_reset", False)
    dtype = n.dtype_of(x) or np.dtype(np.float32)
    spec = CellSpec(kind, hidden, np.dtype(dtype), acts, clip, clip_gates_only=True, linear_before_reset=lbr)
    b, gh = n.b, GATES[kind] * hidden
    wt = b.op1("Transpose", _reordered(n, kind, w, hidden, 0), perm=[1, 0])
    rt = b.op1("Transpose", _reordered(n, kind, r, hidden, 0), perm=[1, 0])
    bias = _reordered(n, kind, bias, hidden, 0)
    extra = None
    if lbr:  # OpenVINO's bias is [z, r, input h, recurrent h]
        extra = b.op1("Slice", bias, n.const([gh]), n.const([gh + hidden]))
        bias = b.op1("Slice", bias, n.const([0]), n.const([gh]))
    states = cell_step(b, spec, h, c, x, wt, rt, bias, extra)
    for state, name in zip(states, n.outputs):
        b.op("Identity", [state], [name])


@converts("LSTMCell", 1, fmt="openvino")
def convert_lstm_cell(n, x, h, c, w, r, bias, p=""):
    if p:
        raise n.unsupported("LSTMCell-1 peepholes (input P) are not supported")
    _cell(n, "LSTM", x, h, c, w, r, bias)


@converts("GRUCell", 3, fmt="openvino")
def convert_gru_cell(n, x, h, w, r, bias):
    _cell(n, "GRU", x, h, None, w, r, bias)


@converts("RNNCell", 1, fmt="openvino")
def convert_rnn_cell(n, x, h, w, r, bias):
    _cell(n, "RNN", x, h, None, w, r, bias)


def _sequence(n, kind: str, x, h0, c0, lengths, w, r, bias):
    hidden, names, clip = _settings(n, kind)
    direction = n.attr("direction", "forward").lower()
    lbr = kind == "GRU" and n.attr_bool("linear_before_reset", False)
    b, gh = n.b, GATES[kind] * hidden
    dirs = 2 if direction == "bidirectional" else 1
    w, r = _reordered(n, kind, w, hidden, 1), _reordered(n, kind, r, hidden, 1)
    bias = _reordered(n, kind, bias, hidden, 1)
    dtype = n.dtype_of(x) or np.dtype(np.float32)
    if lbr:  # [z, r, input h | recurrent h] -> ONNX's [Wb | Rb] with Rb = [0, 0, recurrent h]
        input_part = b.op1("Slice", bias, n.const([0]), n.const([gh]), n.const([1]))
        recurrent = b.op1("Slice", bias, n.const([gh]), n.const([gh + hidden]), n.const([1]))
        zeros = b.constant(np.zeros((dirs, 2 * hidden), dtype))
        bias = b.op1("Concat", input_part, zeros, recurrent, axis=1)
    else:
        bias = b.op1("Concat", bias, b.constant(np.zeros((dirs, gh), dtype)), axis=1)
    steps = (n.in_shape(0) or (None, None))[1]
    known = b.graph.constants.get(lengths)
    if known is not None and steps is not None and (np.asarray(known) == steps).all():
        lengths = ""  # every row runs every step: no masking needed
    y = b.fresh("y")
    outputs = [y, *n.outputs[1:]]
    convert_recurrent(n.with_outputs(outputs), kind, x, w, r, bias, lengths, h0, c0 or "", "", hidden,
                      direction, names, None, None, clip, 1, linear_before_reset=lbr, clip_gates_only=True)
    b.op("Transpose", [y], [n.outputs[0]], perm=[0, 2, 1, 3])  # [batch, steps, D, H] -> [batch, D, steps, H]


@converts("LSTMSequence", 5, fmt="openvino")
def convert_lstm_sequence(n, x, h0, c0, lengths, w, r, bias):
    _sequence(n, "LSTM", x, h0, c0, lengths, w, r, bias)


@converts("GRUSequence", 5, fmt="openvino")
def convert_gru_sequence(n, x, h0, lengths, w, r, bias):
    _sequence(n, "GRU", x, h0, None, lengths, w, r, bias)


@converts("RNNSequence", 5, fmt="openvino")
def convert_rnn_sequence(n, x, h0, lengths, w, r, bias):
    _sequence(n, "RNN", x, h0, None, lengths, w, r, bias)
