"""Recurrent cells as loop bodies: one step of an LSTM, GRU or simple RNN in the loop IR.

Front ends (ONNX's LSTM/GRU/RNN nodes) and the library API build their loops from these bodies, so
every spelling of a cell reaches the fused compiler as the same ops: one product of the step's input
with the input weights (which the compiler hoists out of the loop as one product over all steps),
one or two products with the recurrent weights, and elementwise gates (which it fuses into one loop
nest). The formulas are ONNX's (operators LSTM, GRU, RNN), gate order included.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .builder import Builder
from .errors import UnsupportedModelError
from .ir import Graph, TensorType

# Activation functions ONNX's recurrent ops accept, and the defaults of their alpha and beta: those
# of the ONNX operators of the same name; the spec gives none for Affine and ScaledTanh, whose
# defaults here (1 and 0, 1 and 1) make them the identity and plain tanh.
ACTIVATION_DEFAULTS: dict[str, tuple[float | None, float | None]] = {
    "Relu": (None, None), "Tanh": (None, None), "Sigmoid": (None, None), "Softsign": (None, None),
    "Softplus": (None, None), "LeakyRelu": (0.01, None), "ThresholdedRelu": (1.0, None),
    "Elu": (1.0, None), "HardSigmoid": (0.2, 0.5), "Affine": (1.0, 0.0), "ScaledTanh": (1.0, 1.0),
}


@dataclass(frozen=True)
class Activation:
    """An activation function by ONNX name, with its alpha and beta where it takes them."""

    name: str
    alpha: float | None = None
    beta: float | None = None


@dataclass
class CellSpec:
    """What one direction of a recurrent op computes per step.

    `kind` is "LSTM", "GRU" or "RNN"; `activations` are (f, g, h) for an LSTM, (f, g) for a GRU and
    (f,) for an RNN; `clip` bounds every activation's input (ONNX's words), or only the gates' when
    `clip_gates_only` (OpenVINO leaves an LSTM's cell state unclipped before h); `peepholes` and
    `input_forget` are the LSTM's, `linear_before_reset` the GRU's.
    """

    kind: str
    hidden: int
    dtype: np.dtype
    activations: list[Activation] = field(default_factory=list)
    clip: float | None = None
    clip_gates_only: bool = False
    peepholes: bool = False
    input_forget: bool = False
    linear_before_reset: bool = False


GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def cell_body(b: Builder, spec: CellSpec, lengths: np.dtype | None = None) -> Graph:
    """The body of a loop over steps: inputs (h, [c,] x_t, [tau,] Wt, Rt, bias..., [P], [lens])
    and outputs (h_next, [c_next,] h_next again for the stacked output).

    With `lengths` (the integer dtype of per-row sequence lengths) the body also takes the step's
    time index tau (a 0-d slice of 0..steps-1, in the loop's direction) and the lengths [batch]: a
    row whose length is at most tau keeps its state and outputs zeros. Read backwards, a row's
    steps past its length come first and leave the initial state alone, so its reverse pass starts
    at its own last step, as ONNX specifies.

    Wt is the input weights transposed, [input, gates*hidden]; Rt the recurrent ones, [hidden,
    gates*hidden]. Biases: an LSTM or RNN takes one [gates*hidden] sum of both; a GRU takes the
    [3*hidden] sum for z, r and h (linear_before_reset=0), or the input bias [3*hidden] and the
    recurrent h bias [hidden] apart (=1). An LSTM with peepholes takes P as [3*hidden] (i, o, f).
    """
    body = b.sub(f"{spec.kind.lower()}_cell")
    body.origin = b.origin
    vec, mat = TensorType(spec.dtype, (None,)), TensorType(spec.dtype, (None, None))
    h = body.input(b.fresh("h"), mat)
    c = body.input(b.fresh("c"), mat) if spec.kind == "LSTM" else None
    x = body.input(b.fresh("x"), mat)
    tau = body.input(b.fresh("tau"), TensorType(np.dtype(lengths), ())) if lengths is not None else None
    wt, rt = body.input(b.fresh("Wt"), mat), body.input(b.fresh("Rt"), mat)
    cell = Cell(body, spec)
    bias = body.input(b.fresh("bias"), vec)
    extra = None
    if spec.kind == "LSTM" and spec.peepholes:
        extra = body.input(b.fresh("P"), vec)
    elif spec.kind == "GRU" and spec.linear_before_reset:
        extra = body.input(b.fresh("Rbh"), vec)
    states = cell_step(body, spec, h, c, x, wt, rt, bias, extra)
    step = body.op1("Identity", states[0])  # Y's part of this step
    if tau is not None:
        lens = body.input(b.fresh("lens"), TensorType(np.dtype(lengths), (None,)))
        active = body.op1("Unsqueeze", body.op1("Less", tau, lens), body.constant(np.array([1], np.int64)))
        previous = [h, c] if spec.kind == "LSTM" else [h]
        states = [body.op1("Where", active, new, old) for new, old in zip(states, previous)]
        step = body.op1("Where", active, step, cell.const(0.0))
    for name in [*states, step]:
        body.output(name)
    # Declared dtypes, which the compiler needs: the cell's float dtype, but for the step mask.
    for op in body.graph.ops:
        dtype = np.dtype(np.bool_) if op.op_type == "Less" else \
            body.graph.types[op.inputs[0]].dtype if op.op_type == "Unsqueeze" else spec.dtype
        for name in op.outputs:
            body.graph.types.setdefault(name, TensorType(dtype, None))
    return body.graph


def cell_step(b: Builder, spec: CellSpec, h: str, c: str | None, x: str, wt: str, rt: str, bias: str,
              extra: str | None = None) -> list[str]:
    """One step's ops emitted into `b`, outside any loop (a front end's single-step cell op):
    returns [h_next] or, for an LSTM, [h_next, c_next]. The inputs are cell_body's; `extra` is
    an LSTM's peepholes P or a GRU's recurrent h bias (linear_before_reset)."""
    cell = Cell(b, spec)
    if spec.kind == "LSTM":
        return list(cell.lstm(h, c, x, wt, rt, bias, extra))
    if spec.kind == "GRU":
        return [cell.gru(h, x, wt, rt, bias, extra)]
    return [cell.rnn(h, x, wt, rt, bias)]


class Cell:
    """Emits one step's ops into a body builder (also for front ends' own cell bodies: the
    quantised LSTM of rnnloop/frontends/onnx_quant.py)."""

    def __init__(self, b: Builder, spec: CellSpec):
        self.b, self.spec = b, spec

    def const(self, value: float) -> str:
        return self.b.constant(np.asarray(value, self.spec.dtype))

    def act(self, k: int, x: str, gate: bool = True) -> str:
        """Activation k of the spec applied to x, its input clipped first when the spec says."""
        b, a = self.b, self.spec.activations[k]
        if self.spec.clip is not None and (gate or not self.spec.clip_gates_only):
            x = b.op1("Clip", x, self.const(-self.spec.clip), self.const(self.spec.clip))
        if a.name in ("Relu", "Tanh", "Sigmoid", "Softsign", "Softplus"):
            return b.op1(a.name, x)
        if a.name in ("LeakyRelu", "ThresholdedRelu", "Elu"):
            return b.op1(a.name, x, alpha=float(a.alpha))
        if a.name == "HardSigmoid":
            return b.op1("HardSigmoid", x, alpha=float(a.alpha), beta=float(a.beta))
        if a.name == "Affine":
            return b.op1("Add", b.op1("Mul", x, self.const(a.alpha)), self.const(a.beta))
        if a.name == "ScaledTanh":
            return b.op1("Mul", b.op1("Tanh", b.op1("Mul", x, self.const(a.beta))), self.const(a.alpha))
        raise UnsupportedModelError(f"activation '{a.name}' is not supported")

    def split(self, x: str, parts: int) -> list[str]:
        if parts == 1:
            return [x]
        hidden = self.b.constant(np.full(parts, self.spec.hidden, np.int64))
        return self.b.op("Split", [x, hidden], parts, axis=1)

    def lstm(self, h, c, x, wt, rt, bias, p):
        b = self.b
        gates = b.op1("Add", b.op1("Add", b.op1("MatMul", x, wt), b.op1("MatMul", h, rt)), bias)
        return self.lstm_gates(c, gates, p)

    def lstm_gates(self, c, gates, p):
        """(h_next, c_next) from the gates' pre-activations [batch, 4 * hidden] (i, o, f, c)."""
        b = self.b
        gi, go, gf, gc = self.split(gates, 4)
        if p is not None:
            pi, po, pf = b.op("Split", [p, b.constant(np.full(3, self.spec.hidden, np.int64))], 3, axis=0)
            gi = b.op1("Add", gi, b.op1("Mul", pi, c))
            gf = b.op1("Add", gf, b.op1("Mul", pf, c))
        i = self.act(0, gi)
        f = b.op1("Sub", self.const(1.0), i) if self.spec.input_forget else self.act(0, gf)
        c_next = b.op1("Add", b.op1("Mul", f, c), b.op1("Mul", i, self.act(1, gc)))
        if p is not None:
            go = b.op1("Add", go, b.op1("Mul", po, c_next))
        h_next = b.op1("Mul", self.act(0, go), self.act(2, c_next, gate=False))
        return h_next, c_next

    def gru(self, h, x, wt, rt, bias, rbh):
        b, hidden = self.b, self.spec.hidden
        xz, xr, xh = self.split(b.op1("Add", b.op1("MatMul", x, wt), bias), 3)
        if rbh is not None:  # r * (h Rh^T + Rbh): one product with all of R per step
            hz, hr, hh = self.split(b.op1("MatMul", h, rt), 3)
        else:  # (r * h) Rh^T needs r first: the z and r columns, then the h ones
            two = b.constant(np.array([2 * hidden, hidden], np.int64))
            rt_zr, rt_h = b.op("Split", [rt, two], 2, axis=1)
            hz, hr = self.split(b.op1("MatMul", h, rt_zr), 2)
        z = self.act(0, b.op1("Add", xz, hz))
        r = self.act(0, b.op1("Add", xr, hr))
        if rbh is None:
            hh = b.op1("MatMul", b.op1("Mul", r, h), rt_h)
        else:
            hh = b.op1("Mul", r, b.op1("Add", hh, rbh))
        n = self.act(1, b.op1("Add", xh, hh))
        # h_next = (1 - z) * n + z * h
        return b.op1("Add", b.op1("Mul", b.op1("Sub", self.const(1.0), z), n), b.op1("Mul", z, h))

    def rnn(self, h, x, wt, rt, bias):
        b = self.b
        return self.act(0, b.op1("Add", b.op1("Add", b.op1("MatMul", x, wt), b.op1("MatMul", h, rt)), bias))
