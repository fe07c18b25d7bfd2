"""Code generation rules for the quantisation ops: QuantizeLinear, DequantizeLinear (per tensor or per
axis; blocks, 4-bit and float8 types stay interpreted), DynamicQuantizeLinear and MatMulInteger (a B
of rank 2); each checked against rnnloop/interp/quant_ops.py in tests/test_quant.py. The heavy parts
are compiled helpers (rnnloop/codegen/quant_rt.py, imported by the kernels that use them as _q): a
constant B of MatMulInteger (weights) is packed for its int8 dot products here, once, at load.
ConvInteger has no rule (the interpreter runs it).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir import Op
from .emitter import NoRule, Var, dtype_name
from .kernel import LoopGen, emits
from .reductions import _axis
from .small_ops import _nest

INTS = {"uint8": (0, 255), "int8": (-128, 127), "uint16": (0, 65535), "int16": (-32768, 32767)}
SCALES = ("float32", "float64")


def _at(expr: str, index: list[str]) -> str:
    return f"{expr}[{', '.join(index)}]" if index else f"{expr}[()]"


def _array(v: Var | None, what: str) -> Var:
    if v is None or v.kind == "scalar":
        raise NoRule(f"the {what} is not an array")
    return v


def _parameter(g: LoopGen, op: Op, v: Var | None, x: Var, axis: int | None, what: str) -> Callable[[list[str]], str]:
    """An expression of the scale or zero point that applies at index `index` of x: one value
    (a literal, a 0-d array, or one element), or one per entry of x's `axis`, checked."""
    if v is None:
        return lambda index: "0"
    if v.kind == "scalar":
        return lambda index: v.expr
    if v.rank == 0:
        return lambda index: v.item()
    if v.rank != 1 or axis is None:
        raise NoRule(f"{what} of rank {v.rank}")
    step = g.body.fresh("step")
    g.fail_if(f"{v.dim(0)} != 1 and {v.dim(0)} != {x.dim(axis)}", op,
              f"{what} has {{a}} values; per axis {axis} it needs {{b}} (or one, per tensor)", a=v.dim(0), b=x.dim(axis))
    g.body(f"{step} = 0 if {v.dim(0)} == 1 else 1")
    return lambda index: f"{v.expr}[{index[axis]} * {step}]"


def _axis_of(op: Op, x: Var, *params: Var | None) -> int | None:
    if op.attrs.get("block_size", 0):
        raise NoRule("blocked quantisation")
    if any(p is not None and p.kind != "scalar" and p.rank == 1 for p in params):
        if x.rank == 0:
            raise NoRule("a per-axis parameter of a 0-d x")
        return _axis(op.attrs.get("axis", 1), x.rank)
    return None


@emits("QuantizeLinear")
def emit_quantizelinear(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """y = saturate(rint(x / scale) + zero_point), one loop nest."""
    x, scale = _array(ins[0], "input"), ins[1]
    zp = ins[2] if len(ins) > 2 else None
    out = np.dtype(zp.dtype if zp is not None else op.attrs.get("output_dtype", np.uint8))
    if out.name not in INTS:
        raise NoRule(f"QuantizeLinear to {out} is not compiled (compiled: {', '.join(INTS)})")
    if x.dtype.name not in SCALES or scale.dtype != x.dtype:
        raise NoRule(f"QuantizeLinear of {x.dtype} by a {scale.dtype} scale")
    precision = op.attrs.get("precision")
    if precision is not None and np.dtype(precision) != scale.dtype:
        raise NoRule(f"precision {np.dtype(precision)}")
    axis = _axis_of(op, x, scale, zp)
    dtype, rank = g.out_type(op.outputs[0], x.rank, out)
    s_at, z_at = _parameter(g, op, scale, x, axis, "y_scale"), _parameter(g, op, zp, x, axis, "y_zero_point")
    dims = [x.dim(a) for a in range(rank)]
    y = g.buffer(op.outputs[0], dtype, dims)
    emit, lo, hi = g.body, *INTS[out.name]
    q = emit.fresh("q")
    with _nest(emit, dims) as index:
        emit(f"{q} = np.rint({_at(x.expr, index)} / {s_at(index)}) + {dtype_name(x.dtype)}({z_at(index)})")
        emit(f"{_at(y, index)} = {dtype_name(dtype)}(min(max({q}, {lo}.0), {hi}.0))")
    return [Var(y, dtype, rank, "buffer")]


@emits("DequantizeLinear")
def emit_dequantizelinear(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """y = float32(x - zero_point) * scale, one loop nest."""
    x, scale = _array(ins[0], "input"), ins[1]
    zp = ins[2] if len(ins) > 2 else None
    if x.dtype.name not in INTS and x.dtype != np.int32:
        raise NoRule(f"DequantizeLinear of {x.dtype} is not compiled")
    if zp is not None and zp.dtype != x.dtype:
        raise NoRule("a zero point of another type than x")
    if scale.dtype.name not in SCALES:
        raise NoRule(f"DequantizeLinear by a {scale.dtype} scale")
    out = np.dtype(op.attrs.get("output_dtype", scale.dtype))
    if out != scale.dtype:
        raise NoRule(f"output_dtype {out} for a {scale.dtype} scale")
    axis = _axis_of(op, x, scale, zp)
    dtype, rank = g.out_type(op.outputs[0], x.rank, out)
    s_at, z_at = _parameter(g, op, scale, x, axis, "x_scale"), _parameter(g, op, zp, x, axis, "x_zero_point")
    dims = [x.dim(a) for a in range(rank)]
    y = g.buffer(op.outputs[0], dtype, dims)
    wide = "np.float64" if x.dtype == np.int32 else "np.float32"  # (exact differences, rounded once)
    with _nest(g.body, dims) as index:
        g.body(f"{_at(y, index)} = {dtype_name(dtype)}(np.float32({wide}({_at(x.expr, index)}) - "
               f"{wide}({z_at(index)})) * {s_at(index)})")
    return [Var(y, dtype, rank, "buffer")]


def _flat(g: LoopGen, v: Var, array: str) -> str:
    """A 1-D view of a C-contiguous array of v's shape."""
    size = " * ".join(v.dim(a) for a in range(v.rank)) or "1"
    return g.view("flat", f"{array}.reshape(({size},))")


@emits("DynamicQuantizeLinear")
def emit_dynamicquantizelinear(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """(y, y_scale, y_zero_point) by quant_rt.dynamic_quantize over x's elements."""
    x = _array(ins[0], "input")
    if x.dtype != np.float32:
        raise NoRule(f"DynamicQuantizeLinear of {x.dtype}")
    u8, f32 = np.dtype(np.uint8), np.dtype(np.float32)
    g.out_type(op.outputs[0], x.rank, u8)
    dims = [x.dim(a) for a in range(x.rank)]
    y = g.buffer(op.outputs[0], u8, dims)
    outs = [Var(y, u8, x.rank, "buffer")]
    emit = g.body
    scale, zero, status = emit.fresh("scale"), emit.fresh("zero"), emit.fresh("st")
    emit(f"{scale}, {zero}, {status} = _q.dynamic_quantize({_flat(g, x, g.contiguous(x))}, {_flat(g, x, y)})")
    g.fail_if(f"{status} != 0", op, "x holds NaN or infinity, which have no quantised range")
    for name, value, dtype in zip(op.outputs[1:], (scale, zero), (f32, u8)):
        if not name:
            outs.append(Var("0", dtype, 0, "scalar"))
            continue
        g.out_type(name, 0, dtype)
        buf = g.buffer(name, dtype, [])
        emit(f"{buf}[()] = {value}")
        outs.append(Var(buf, dtype, 0, "buffer"))
    return outs


def _zero_point(g: LoopGen, op: Op, v: Var | None, name: str, what: str, per_column: bool) -> str:
    """The zero point as a 1-D int32 array (one value, or with per_column one per column)."""
    if v is None:
        return g.pass_constant(np.zeros(1, np.int32), "k_zp")
    value = g.const(name)
    if value is not None and (value.size == 1 or (per_column and value.ndim == 1)):
        return g.pass_constant(value.astype(np.int32).reshape(-1), "k_zp")
    if v.kind == "scalar" or v.rank == 0:
        arr = g.body.fresh("zp")
        g.body(f"{arr} = np.empty(1, np.int32)")
        g.body(f"{arr}[0] = np.int32({v.expr if v.kind == 'scalar' else v.item()})")
        return arr
    if v.rank == 1 and not per_column:
        g.fail_if(f"{v.dim(0)} != 1", op, f"{what} per row is not compiled", fallback=True)
    if v.rank != 1:
        raise NoRule(f"{what} of rank {v.rank}")
    return f"{g.contiguous(v)}.astype(np.int32)"


@emits("MatMulInteger")
def emit_matmulinteger(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """(A - a_zp) @ (B - b_zp) in int32 for A of rank 2 or more and B of rank 2, by quant_rt;
    a constant B is packed for its int8 dot products once, here."""
    a, b = _array(ins[0], "A"), _array(ins[1], "B")
    za, zb = (ins[2] if len(ins) > 2 else None), (ins[3] if len(ins) > 3 else None)
    if a.dtype.name not in ("uint8", "int8") or b.dtype.name not in ("uint8", "int8"):
        raise NoRule(f"MatMulInteger of {a.dtype} by {b.dtype}")
    if a.rank < 2 or b.rank != 2:
        raise NoRule(f"MatMulInteger of rank {a.rank} by rank {b.rank} (compiled: rank 2 or more by rank 2)")
    dtype, rank = g.out_type(op.outputs[0], a.rank, np.dtype(np.int32))
    k, n = a.dim(a.rank - 1), b.dim(1)
    g.fail_if(f"{k} != {b.dim(0)}", op, "inner dimensions differ ({a} and {b})", a=k, b=b.dim(0))
    za_arr = _zero_point(g, op, za, op.inputs[2] if len(op.inputs) > 2 else "", "a_zero_point", False)
    zb_arr = _zero_point(g, op, zb, op.inputs[3] if len(op.inputs) > 3 else "", "b_zero_point", True)
    g.fail_if(f"{zb_arr}.shape[0] != 1 and {zb_arr}.shape[0] != {n}", op,
              "b_zero_point has {a} values; per column it needs {b} (or one, per tensor)", a=f"{zb_arr}.shape[0]", b=n)
    dims = [a.dim(d) for d in range(a.rank - 1)] + [n]
    out = g.buffer(op.outputs[0], dtype, dims)
    rows = " * ".join(dims[:-1])
    a2 = g.view("a2", f"{g.contiguous(a)}.reshape(({rows}, {k}))")
    out2 = g.view("out2", f"{out}.reshape(({rows}, {n}))")
    value = g.const(op.inputs[1])
    if value is not None and value.ndim == 2 and value.dtype == b.dtype:
        from .quant_rt import pack
        packed, colsum = pack(value, unsigned_a=a.dtype == np.uint8)
        packed = g.pass_constant(packed, "k_qpanels")
        colsum = g.pass_constant(colsum, "k_colsum")
    else:
        packed = g.pass_constant(np.empty((0, 0, 0, 0), b.dtype), "k_none")
        colsum = g.pass_constant(np.empty(0, np.int32), "k_none")
    g.fail_if(f"_q.matmul_integer({a2}, {g.contiguous(b)}, np.int32({za_arr}[0]), {zb_arr}, {out2}, {packed}, "
              f"{colsum}) != 0", op, "rnnloop internal error: the product's sizes do not agree; please report it",
              fallback=True)
    return [Var(out, dtype, rank, "buffer")]
