"""Converters for ONNX's quantisation ops and the com.microsoft ops onnxruntime's quantiser emits.

QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger and ConvInteger are IR ops
(rnnloop/interp/quant_ops.py). The others are lowered into them with onnxruntime's arithmetic:

- QLinearMatMul / QLinearConv: the int32 product (plus QLinearConv's int32 bias), times
  a_scale * b_scale / y_scale in float32, rounded half to even, plus y_zero_point, saturated.
- com.microsoft MatMulIntegerToFloat: the int32 product times a_scale * b_scale, plus the bias;
  DynamicQuantizeMatMul: A quantised to uint8 by its range first (DynamicQuantizeLinear); QGemm: the
  int32 product plus its int32 C, times alpha * a_scale * b_scale, requantised as QLinearMatMul when
  it has y_scale.
- com.microsoft DynamicQuantizeLSTM: an LSTM whose W [D, input, 4H] and R [D, hidden, 4H] are
  int8/uint8 with scales and zero points per direction (or per column). As onnxruntime computes
  it: X (all steps) is quantised to uint8 by its range once and multiplied by W in int32; at each
  step h is quantised by its own range and multiplied by R; each product is scaled back to float
  by (its input's scale * the weight's), the two summed, then the bias and the usual gates.

Any other op of the com.microsoft domain is listed as unsupported by name (rnnloop/frontends/onnx.py).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from onnx import helper

from ..cells import Cell, CellSpec
from ..errors import ModelError, UnsupportedModelError
from ..ir import Origin, Slice, Stack, TensorType
from .onnx_ops import convert_as_is
from .onnx_rnn import DirectionOrigin, _activations, _hidden_size, _initial, _outputs
from .registry import converts

MICROSOFT = "com.microsoft"  # the domain, also the converters' format key in the registry

for _op, _since in (("DynamicQuantizeLinear", 11), ("MatMulInteger", 10), ("ConvInteger", 10)):
    converts(_op, since=_since)(convert_as_is)

F32, I32, U8 = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.uint8)


def _dtype_code(n, name: str, code) -> np.dtype | None:
    """An attribute naming an element type (a TensorProto code; 0 means unset) as a NumPy dtype."""
    if code is None or (not isinstance(code, np.dtype) and int(code) == 0):
        return None
    if isinstance(code, np.dtype):
        return code
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(int(code)))
    except (KeyError, ValueError, TypeError) as e:
        raise ModelError(f"{n.origin}: {name} {code} is not an element type ONNX defines") from e


def _block(n, block_size) -> int:
    if int(block_size) < 0:
        raise ModelError(f"{n.origin}: block_size must be 0 (per tensor or axis) or positive, got {block_size}")
    return int(block_size)


@converts("QuantizeLinear", since=10)
def convert_quantizelinear(n, x, y_scale, y_zero_point="", *, axis=1, saturate=1, block_size=0, output_dtype=0,
                           precision=0):
    """Every form (10: per tensor; 13: axis; 19: saturate; 21: blocks, output_dtype; 23: precision)."""
    attrs = {"axis": int(axis), "saturate": int(saturate), "block_size": _block(n, block_size)}
    for name, value in (("output_dtype", output_dtype), ("precision", precision)):
        dtype = _dtype_code(n, name, value)
        if dtype is not None:
            attrs[name] = dtype
    n.emit("QuantizeLinear", [x, y_scale, y_zero_point], **attrs)


@converts("DequantizeLinear", since=10)
def convert_dequantizelinear(n, x, x_scale, x_zero_point="", *, axis=1, block_size=0, output_dtype=0):
    """Every form (10: per tensor; 13: axis; 21: blocks; 23: output_dtype)."""
    attrs = {"axis": int(axis), "block_size": _block(n, block_size)}
    dtype = _dtype_code(n, "output_dtype", output_dtype)
    if dtype is not None:
        attrs["output_dtype"] = dtype
    n.emit("DequantizeLinear", [x, x_scale, x_zero_point], **attrs)


def _scalar_f32(n, name: str) -> str:
    """A scale as float32 (a float16 scale is widened: the multiplier is computed in float32)."""
    dtype = n.dtype_of(name)
    return name if dtype == F32 else n.b.op1("Cast", name, to=F32)


def _requantise(n, acc: str, multiplier: str, y_zero_point: str) -> None:
    """The node's output: round(float(acc) * multiplier) + y_zero_point, saturated to its type."""
    b = n.b
    scaled = b.op1("Mul", b.op1("Cast", acc, to=F32), multiplier)
    n.emit("QuantizeLinear", [scaled, b.constant(np.asarray(1.0, F32)), y_zero_point], axis=1, saturate=1,
           block_size=0)


@converts("QLinearMatMul", since=10)
def convert_qlinearmatmul(n, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
    """y = saturate(round((a - a_zp) @ (b - b_zp) * (a_scale * b_scale / y_scale)) + y_zp)"""
    bd = n.b
    acc = bd.op1("MatMulInteger", a, b, a_zero_point, b_zero_point)
    multiplier = bd.op1("Div", bd.op1("Mul", _scalar_f32(n, a_scale), _scalar_f32(n, b_scale)), _scalar_f32(n, y_scale))
    _requantise(n, acc, multiplier, y_zero_point)


def _per_channel(n, value: str, rank: int) -> str:
    """A per-tensor or per-output-channel [M] parameter shaped [M, 1, ...] to broadcast over [N, M, ...]."""
    b = n.b
    flat = b.op1("Reshape", value, b.constant(np.array([-1], np.int64)))
    return b.op1("Reshape", flat, b.constant(np.array([-1] + [1] * (rank - 2), np.int64)))


@converts("QLinearConv", since=10)
def convert_qlinearconv(n, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B="", *,
                        auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, pads=None, strides=None):
    """y = saturate(round((ConvInteger(x, w) + B) * (x_scale * w_scale[m] / y_scale)) + y_zp)"""
    bd = n.b
    t = n.type_of(x)
    rank = len(t.shape) if isinstance(t, TensorType) and t.shape is not None else None
    if rank is None:
        raise UnsupportedModelError(f"{n.origin}: x's rank is unknown; QLinearConv needs it")
    attrs = {k: v for k, v in dict(auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape,
                                   pads=pads, strides=strides).items() if v is not None}
    acc = bd.op1("ConvInteger", x, w, x_zero_point, w_zero_point, **attrs)
    if B:
        acc = bd.op1("Add", acc, _per_channel(n, B, rank))
    ws = _per_channel(n, _scalar_f32(n, w_scale), rank) if _size(n, w_scale) != 1 else _scalar_f32(n, w_scale)
    multiplier = bd.op1("Div", bd.op1("Mul", _scalar_f32(n, x_scale), ws), _scalar_f32(n, y_scale))
    _requantise(n, acc, multiplier, y_zero_point)


def _size(n, name: str) -> int | None:
    """The element count of a value whose shape is known, else None."""
    t = n.type_of(name)
    if isinstance(t, TensorType) and t.shape is not None and all(isinstance(d, int) for d in t.shape):
        return int(np.prod(t.shape, dtype=np.int64))
    return None


# ---------------------------------------------------------------------------------------------
# com.microsoft


def _scaled_product(n, aq: str, a_scale: str, a_zp: str, w: str, w_scale: str, w_zp: str, bias: str = "") -> str:
    """float(MatMulInteger(aq, w)) * (a_scale * w_scale) [+ bias], as onnxruntime's output processor."""
    b = n.b
    acc = b.op1("MatMulInteger", aq, w, a_zp, w_zp)
    y = b.op1("Mul", b.op1("Cast", acc, to=F32), b.op1("Mul", a_scale, w_scale))
    return b.op1("Add", y, bias) if bias else y


@converts("MatMulIntegerToFloat", since=1, fmt=MICROSOFT)
def convert_matmulintegertofloat(n, A, B, a_scale, b_scale, a_zero_point="", b_zero_point="", bias=""):
    """Y = (A - a_zp) @ (B - b_zp) * (a_scale * b_scale) + bias, the product in int32"""
    n.emit("Identity", [_scaled_product(n, A, a_scale, a_zero_point, B, b_scale, b_zero_point, bias)])


@converts("QGemm", since=1, fmt=MICROSOFT)
def convert_qgemm(n, A, a_scale, a_zero_point, B, b_scale, b_zero_point="", C="", y_scale="", y_zero_point="", *,
                  alpha=1.0, transA=0, transB=0):
    """The quantiser's Gemm (static, QOperator format): acc = (A' - a_zp) @ (B' - b_zp) + C in int32
    (C quantised with scale alpha * a_scale * b_scale), then float(acc) * (alpha * a_scale * b_scale),
    or, given y_scale, that requantised: saturate(round(float(acc) * (alpha * a_scale * b_scale /
    y_scale)) + y_zp). b_scale and b_zero_point are per tensor or per column of B'."""
    bd = n.b
    a = bd.op1("Transpose", A, perm=[1, 0]) if transA else A
    w = bd.op1("Transpose", B, perm=[1, 0]) if transB else B
    acc = bd.op1("MatMulInteger", a, w, a_zero_point, b_zero_point)
    if C:
        acc = bd.op1("Add", acc, C)
    scale = bd.op1("Mul", bd.op1("Mul", bd.constant(np.asarray(alpha, F32)), _scalar_f32(n, a_scale)),
                   _scalar_f32(n, b_scale))
    if not y_scale:
        n.emit("Mul", [bd.op1("Cast", acc, to=F32), scale])
        return
    _requantise(n, acc, bd.op1("Div", scale, _scalar_f32(n, y_scale)), y_zero_point)


@converts("DynamicQuantizeMatMul", since=1, fmt=MICROSOFT)
def convert_dynamicquantizematmul(n, A, B, b_scale, b_zero_point="", bias=""):
    """Y = MatMulIntegerToFloat(DynamicQuantizeLinear(A), B): A quantised to uint8 by its range"""
    aq, a_scale, a_zp = n.b.op("DynamicQuantizeLinear", [A], 3)
    n.emit("Identity", [_scaled_product(n, aq, a_scale, a_zp, B, b_scale, b_zero_point, bias)])


@converts("DynamicQuantizeLSTM", since=1, fmt=MICROSOFT)
def convert_dynamicquantizelstm(n, X, W, R, B="", sequence_lens="", initial_h="", initial_c="", P="", W_scale="",
                                W_zero_point="", R_scale="", R_zero_point="", *, hidden_size=None,
                                direction="forward", activations=None, activation_alpha=None, activation_beta=None,
                                clip=None, input_forget=0):
    """onnxruntime's int8 LSTM: see the module's docstring; one loop per direction."""
    b = n.b
    if sequence_lens:
        raise UnsupportedModelError(f"{n.origin}: sequence_lens is not supported for DynamicQuantizeLSTM "
                                    "(onnxruntime quantises the steps up to the longest length); re-export without "
                                    "it or open an issue")
    if not (W_scale and W_zero_point and R_scale and R_zero_point):
        raise ModelError(f"{n.origin}: W_scale, W_zero_point, R_scale and R_zero_point are required inputs")
    directions = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}.get(direction)
    if directions is None:
        raise ModelError(f"{n.origin}: direction must be forward, reverse or bidirectional, got '{direction}'")
    if n.dtype_of(X) not in (F32, None):
        raise UnsupportedModelError(f"{n.origin}: DynamicQuantizeLSTM takes float32 X, got {n.dtype_of(X)}")
    hidden = _r_hidden(n, R, hidden_size)
    acts = _activations(n, "LSTM", len(directions), activations, activation_alpha, activation_beta)
    gh = 4 * hidden
    xq, x_scale, x_zp = b.op("DynamicQuantizeLinear", [X], 3)  # all steps at once, as onnxruntime
    finals, ys = [], []
    node_origin = b.origin
    for d, reverse in enumerate(directions):
        index = b.constant(np.asarray(d, np.int64))

        def pick(value: str) -> str:
            return b.op1("Gather", value, index, axis=0)

        # The steps' input products in int32 [T, B, 4H], each scaled in its step: the scaling then
        # fuses into the step's gates (a pass over all of them, and their floats, cost 2-3%).
        x_acc = b.op1("MatMulInteger", xq, pick(W), x_zp, pick(W_zero_point))
        x_scale_w = b.op1("Mul", x_scale, pick(W_scale))
        if B:
            wb, rb = b.op("Split", [pick(B), b.constant(np.array([gh, gh], np.int64))], 2, axis=0)
            bias = b.op1("Add", wb, rb)
        else:
            bias = b.constant(np.zeros(gh, F32))
        states = [_initial(n, X, initial_h, index, 0, hidden, F32), _initial(n, X, initial_c, index, 0, hidden, F32)]
        if len(directions) == 2 and node_origin is not None:
            b.origin = DirectionOrigin(**{f.name: getattr(node_origin, f.name) for f in dataclasses.fields(Origin)},
                                       direction="reverse" if reverse else "forward")
        spec = CellSpec("LSTM", hidden, F32, acts[3 * d:3 * d + 3], None if clip is None else float(clip),
                        peepholes=bool(P), input_forget=bool(input_forget))
        body = _quantised_cell(b, spec, n.dtype_of(R), _rank(n, R_zero_point), _rank(n, R_scale))
        invariants = [x_scale_w, pick(R), pick(R_zero_point), pick(R_scale), bias] + ([pick(P)] if P else [])
        outs = b.loop(body, carried=states, sliced=[(x_acc, Slice(axis=0, reverse=reverse))], invariants=invariants,
                      stacked=[Stack(axis=0, reverse=reverse)])
        b.origin = node_origin
        finals.append(outs[:-1])
        shape = b.op1("Concat", b.op1("Shape", X, start=0, end=1), b.op1("Shape", states[0]), axis=0)
        ys.append(b.op1("Reshape", outs[-1], shape, allowzero=1))
    _outputs(n, ys, finals, 0)


def _r_hidden(n, R: str, hidden_size) -> int:
    """hidden_size, or R's axis 1 ([D, hidden, 4 * hidden] in this op)."""
    if hidden_size is not None:
        return int(hidden_size)
    t = n.type_of(R)
    if isinstance(t, TensorType) and t.shape is not None and len(t.shape) == 3 and isinstance(t.shape[1], int):
        return t.shape[1]
    return _hidden_size(n, R, None)


def _rank(n, name: str) -> int | None:
    """The rank of one direction's slice of a [D] or [D, 4H] parameter."""
    t = n.type_of(name)
    return len(t.shape) - 1 if isinstance(t, TensorType) and t.shape is not None else None


def _quantised_cell(b, spec: CellSpec, r_dtype, zp_rank: int | None, scale_rank: int | None):
    """The loop body: inputs (h, c, x_acc_t, x_scale * W_scale, Rq, R_zp, R_scale, bias[, P]), with
    x_acc_t the step's input product in int32; outputs (h, c, h)."""
    body = b.sub("qlstm_cell")
    body.origin = b.origin
    mat = TensorType(F32, (None, None))
    h, c = body.input(b.fresh("h"), mat), body.input(b.fresh("c"), mat)
    x_acc = body.input(b.fresh("x_acc"), TensorType(np.dtype(np.int32), (None, None)))
    x_scale_w = body.input(b.fresh("x_scale_w"), TensorType(F32, None))
    rq = body.input(b.fresh("Rq"), TensorType(r_dtype, (None, None)) if r_dtype is not None else None)
    r_zp = body.input(b.fresh("R_zp"), TensorType(r_dtype, (None,) * zp_rank)
                      if r_dtype is not None and zp_rank is not None else None)
    r_scale = body.input(b.fresh("R_scale"), TensorType(F32, (None,) * scale_rank) if scale_rank is not None else None)
    bias = body.input(b.fresh("bias"), TensorType(F32, (None,)))
    p = body.input(b.fresh("P"), TensorType(F32, (None,))) if spec.peepholes else None
    hq, h_scale, h_zp = body.op("DynamicQuantizeLinear", [h], 3)
    acc = body.op1("MatMulInteger", hq, rq, h_zp, r_zp)
    hr = body.op1("Mul", body.op1("Cast", acc, to=F32), body.op1("Mul", h_scale, r_scale))
    xw = body.op1("Mul", body.op1("Cast", x_acc, to=F32), x_scale_w)  # as _scaled_product rounds it
    gates = body.op1("Add", body.op1("Add", hr, xw), bias)
    h_next, c_next = Cell(body, spec).lstm_gates(c, gates, p)
    for name in (h_next, c_next, body.op1("Identity", h_next)):
        body.output(name)
    return body.graph
