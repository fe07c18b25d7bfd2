"""Converters for ONNX LSTM, GRU and RNN: one loop per direction, over a rnnloop.cells body.

The weights are sliced and transposed per direction outside the loop (constant weights make those
constants), the sequence is the loop's sliced input (read backwards for the reverse direction, by
index, without a copy) and Y is its stacked output; bidirectional runs two loops and joins them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..cells import ACTIVATION_DEFAULTS, GATES, Activation, CellSpec, cell_body
from ..errors import ModelError, UnsupportedModelError
from ..ir import Origin, Slice, Stack, TensorType
from .registry import converts

_DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}
_CANONICAL = {name.lower(): name for name in ACTIVATION_DEFAULTS}


@converts("LSTM", since=1)
def convert_lstm(n, X, W, R, B="", sequence_lens="", initial_h="", initial_c="", P="", *, hidden_size=None,
                 direction="forward", activations=None, activation_alpha=None, activation_beta=None,
                 clip=None, input_forget=0, layout=0, output_sequence=0):
    """ONNX LSTM (every opset): gates i, o, f, c; optional peepholes P and coupled input/forget gates."""
    convert_recurrent(n, "LSTM", X, W, R, B, sequence_lens, initial_h, initial_c, P, hidden_size, direction,
                      activations, activation_alpha, activation_beta, clip, layout, input_forget=bool(input_forget))


@converts("GRU", since=1)
def convert_gru(n, X, W, R, B="", sequence_lens="", initial_h="", *, hidden_size=None, direction="forward",
                activations=None, activation_alpha=None, activation_beta=None, clip=None, layout=0,
                linear_before_reset=0, output_sequence=0):
    """ONNX GRU (every opset): gates z, r, h; linear_before_reset 0 or 1."""
    convert_recurrent(n, "GRU", X, W, R, B, sequence_lens, initial_h, "", "", hidden_size, direction, activations,
                      activation_alpha, activation_beta, clip, layout, linear_before_reset=bool(linear_before_reset))


@converts("RNN", since=1)
def convert_rnn(n, X, W, R, B="", sequence_lens="", initial_h="", *, hidden_size=None, direction="forward",
                activations=None, activation_alpha=None, activation_beta=None, clip=None, layout=0,
                output_sequence=0):
    """ONNX RNN (every opset): h_next = f(x W^T + h R^T + Wb + Rb)."""
    convert_recurrent(n, "RNN", X, W, R, B, sequence_lens, initial_h, "", "", hidden_size, direction, activations,
                      activation_alpha, activation_beta, clip, layout)


def convert_recurrent(n, kind, X, W, R, B, sequence_lens, initial_h, initial_c, P, hidden_size, direction,
                      activations, activation_alpha, activation_beta, clip, layout, *, input_forget=False,
                      linear_before_reset=False, clip_gates_only=False):
    """Lower an ONNX-shaped recurrent op (also the OpenVINO sequences, rewritten to ONNX's form)
    into one loop per direction; `n` supplies the builder, origin, dtypes and output names."""
    b = n.b
    if layout not in (0, 1):
        raise ModelError(f"{n.origin}: layout must be 0 or 1, got {layout}")
    directions = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}.get(direction)
    if directions is None:
        raise ModelError(f"{n.origin}: direction must be forward, reverse or bidirectional, got '{direction}'")
    dtype = n.dtype_of(X) or n.dtype_of(W)
    if dtype is None or dtype not in (np.float32, np.float64):
        raise UnsupportedModelError(f"{n.origin}: {kind} is supported for float32 and float64 "
                                    f"(X is {dtype if dtype is not None else 'of unknown type'})")
    hidden = _hidden_size(n, R, hidden_size)
    acts = _activations(n, kind, len(directions), activations, activation_alpha, activation_beta)
    k = len(_DEFAULT_ACTIVATIONS[kind])
    i64 = np.int64
    x = b.op1("Transpose", X, perm=[1, 0, 2]) if layout else X  # [steps, batch, input]
    d_axis = 1 if layout else 0  # the direction axis of initial_h / initial_c: [batch, D, H] in layout 1
    gh = GATES[kind] * hidden
    lengths, taus = None, ""
    if sequence_lens:  # the time index of every step, sliced beside x (cells.cell_body)
        lengths = n.dtype_of(sequence_lens) or np.dtype(np.int32)
        steps = b.op1("Squeeze", b.op1("Shape", x, start=0, end=1), b.constant(np.array([0], i64)))
        taus = b.op1("Range", b.constant(np.asarray(0, lengths)), b.op1("Cast", steps, to=np.dtype(lengths)),
                     b.constant(np.asarray(1, lengths)))
    finals, ys = [], []
    node_origin = b.origin
    for d, reverse in enumerate(directions):
        spec = CellSpec(kind, hidden, np.dtype(dtype), acts[d * k:(d + 1) * k],
                        None if clip is None else float(clip), peepholes=bool(P),
                        input_forget=input_forget, linear_before_reset=linear_before_reset,
                        clip_gates_only=clip_gates_only)
        index = b.constant(np.asarray(d, i64))
        wt = b.op1("Transpose", b.op1("Gather", W, index, axis=0), perm=[1, 0])  # [input, G*H]
        rt = b.op1("Transpose", b.op1("Gather", R, index, axis=0), perm=[1, 0])  # [hidden, G*H]
        if B:
            wb, rb = b.op("Split", [b.op1("Gather", B, index, axis=0), b.constant(np.array([gh, gh], i64))], 2,
                          axis=0)
        else:
            wb = rb = b.constant(np.zeros(gh, dtype))
        extra = []
        if kind == "GRU" and linear_before_reset:  # the recurrent h bias stays inside r * (...)
            zr_only = b.constant(np.concatenate([np.ones(2 * hidden), np.zeros(hidden)]).astype(dtype))
            bias = b.op1("Add", wb, b.op1("Mul", rb, zr_only))
            extra.append(b.op1("Slice", rb, b.constant(np.array([2 * hidden], i64)),
                               b.constant(np.array([3 * hidden], i64))))
        else:
            bias = b.op1("Add", wb, rb)
        if P:
            extra.append(b.op1("Gather", P, index, axis=0))
        states = [_initial(n, x, initial_h, index, d_axis, hidden, dtype)]
        if kind == "LSTM":
            states.append(_initial(n, x, initial_c, index, d_axis, hidden, dtype))
        if len(directions) == 2 and node_origin is not None:  # explain() and errors say which loop is which
            b.origin = DirectionOrigin(**{f.name: getattr(node_origin, f.name) for f in dataclasses.fields(Origin)},
                                       direction="reverse" if reverse else "forward")
        body = cell_body(b, spec, lengths)
        sliced = [(x, Slice(axis=0, reverse=reverse))] + ([(taus, Slice(axis=0, reverse=reverse))] if taus else [])
        outs = b.loop(body, carried=states, sliced=sliced, invariants=[wt, rt, bias, *extra] +
                      ([sequence_lens] if sequence_lens else []), stacked=[Stack(axis=0, reverse=reverse)])
        b.origin = node_origin
        finals.append(outs[:-1])
        # [steps, batch, hidden] also when there are no steps, which leave no part to take the shape of
        shape = b.op1("Concat", b.op1("Shape", x, start=0, end=1), b.op1("Shape", states[0]), axis=0)
        ys.append(b.op1("Reshape", outs[-1], shape, allowzero=1))
    _outputs(n, ys, finals, layout)


@dataclasses.dataclass(frozen=True)
class DirectionOrigin(Origin):
    """The origin of the ops of one direction of a bidirectional LSTM, GRU or RNN (its loop among them):
    "LSTM 'enc' (ai.onnx opset 14), reverse direction"."""

    direction: str = "forward"

    def __str__(self) -> str:
        return f"{super().__str__()}, {self.direction} direction"


def _hidden_size(n, R: str, hidden_size) -> int:
    if hidden_size is not None:
        return int(hidden_size)
    t = n.type_of(R)
    if isinstance(t, TensorType) and t.shape is not None and len(t.shape) == 3 and isinstance(t.shape[2], int):
        return t.shape[2]
    raise ModelError(f"{n.origin}: hidden_size is not given and R's shape does not say it")


def _activations(n, kind, n_dirs, names, alphas, betas) -> list[Activation]:
    """The activation functions of every direction, alpha and beta aligned with them by position."""
    default = _DEFAULT_ACTIVATIONS[kind]
    names = [a.decode() if isinstance(a, bytes) else str(a) for a in (names or default * n_dirs)]
    if len(names) == len(default) and n_dirs == 2:
        names = names * 2
    if len(names) != len(default) * n_dirs:
        raise ModelError(f"{n.origin}: {kind} takes {len(default)} activation(s) per direction, got {names}")
    alphas, betas = list(alphas or []), list(betas or [])
    result = []
    for k, name in enumerate(names):
        canonical = _CANONICAL.get(name.lower())
        if canonical is None:
            raise UnsupportedModelError(f"{n.origin}: activation '{name}' is not one ONNX defines "
                                        f"({', '.join(ACTIVATION_DEFAULTS)})")
        alpha, beta = ACTIVATION_DEFAULTS[canonical]
        result.append(Activation(canonical, alphas[k] if k < len(alphas) and alpha is not None else alpha,
                                 betas[k] if k < len(betas) and beta is not None else beta))
    return result


def _initial(n, x: str, given: str, index: str, d_axis: int, hidden: int, dtype) -> str:
    """This direction's initial state [batch, hidden]: from the input, or zeros."""
    b = n.b
    if given:
        return b.op1("Gather", given, index, axis=d_axis)
    batch = b.op1("Shape", x, start=1, end=2)
    shape = b.op1("Concat", batch, b.constant(np.array([hidden], np.int64)), axis=0)
    return b.op1("Expand", b.constant(np.zeros((1, hidden), dtype)), shape)


def _outputs(n, ys: list[str], finals: list[list[str]], layout: int) -> None:
    """Y [steps, D, batch, hidden] (layout 1: [batch, steps, D, hidden]), Y_h and Y_c [D, batch,
    hidden] (layout 1: [batch, D, hidden]), for the outputs the node names."""
    b = n.b
    wanted = list(n.outputs) + [""] * (3 - len(n.outputs))

    def join(parts: list[str], axis: int, name: str, perm: list[int]) -> None:
        axes = b.constant(np.array([axis], np.int64))
        if len(parts) == 1 and not layout:
            b.op("Unsqueeze", [parts[0], axes], [name])
            return
        parts = [b.op1("Unsqueeze", p, axes) for p in parts]
        joined = parts[0] if len(parts) == 1 else b.op1("Concat", *parts, axis=axis)
        b.op("Transpose" if layout else "Identity", [joined], [name], **({"perm": perm} if layout else {}))

    if wanted[0]:
        join(ys, 1, wanted[0], [2, 0, 1, 3])
    for k in (1, 2):
        if wanted[k]:
            if k - 1 >= len(finals[0]):
                raise ModelError(f"{n.origin}: has no output {k}")
            join([f[k - 1] for f in finals], 0, wanted[k], [1, 0, 2])
