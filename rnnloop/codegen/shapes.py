"""Code generation rules for the shape ops exporters put around every RNN (Size, ConstantOfShape,
Range) and Pad; each checked against the interpreter's function of the same op."""

from __future__ import annotations

import numpy as np

from ..ir import Op
from .emitter import NoRule, Var, dtype_name, literal, shape_tuple
from .kernel import LoopGen, _scalar_of, emits
from .rules import _const_ints, _static_length


@emits("Size")
def emit_size(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """The element count of the input, as a 0-d int64."""
    x = ins[0]
    g.out_type(op.outputs[0], 0, np.dtype(np.int64))
    out = g.buffer(op.outputs[0], np.dtype(np.int64), [])
    size = "1" if x.kind == "scalar" else " * ".join(x.dim(a) for a in range(x.rank)) or "1"
    g.body(f"{out}[()] = {size}")
    return [Var(out, np.dtype(np.int64), 0, "buffer")]


@emits("ConstantOfShape")
def emit_constant_of_shape(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """An array of the computed shape filled with the value attribute (float32 0 by default)."""
    shape = ins[0]
    value = op.attrs.get("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    if value.size != 1:
        raise NoRule("the value attribute holds more than one element")
    if shape.kind == "scalar" or shape.rank != 1 or shape.dtype.kind not in "iu":
        raise NoRule("the shape is not a vector of integers")
    length = _static_length(g, op.inputs[0], shape)
    dtype, rank = g.out_type(op.outputs[0], length, value.dtype)
    dims = []
    for j in range(length):
        d = g.body.fresh(f"d{j}")
        g.body(f"{d} = np.int64({shape.expr}[{j}])")
        dims.append(d)
    if dims:
        g.fail_if(" or ".join(f"{d} < 0" for d in dims), op, "the shape {listed} has a negative dimension",
                  shapes=(shape_tuple(dims), shape_tuple(dims), len(dims)))
    out = g.buffer(op.outputs[0], dtype, dims)
    g.body(f"{out}[...] = {literal(value.reshape(-1)[0], dtype)}")
    return [Var(out, dtype, rank, "buffer", tuple(dims))]


@emits("Range")
def emit_range(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """start + i * delta for i < max(ceil((limit - start) / delta), 0); integers exactly."""
    start, limit, delta = ins
    dtype = start.dtype
    if dtype.kind not in "iuf" or dtype == np.float16 or limit.dtype != dtype or delta.dtype != dtype:
        raise NoRule("Range of mixed or unsupported dtypes")
    g.out_type(op.outputs[0], 1, dtype)
    first, stop, step = (g.body.fresh(n) for n in ("first", "stop", "step"))
    for name, v, what in ((first, start, "start"), (stop, limit, "limit"), (step, delta, "delta")):
        g.body(f"{name} = {_scalar_of(g, v, '0', what, op)}")
    count = g.body.fresh("count")
    if dtype.kind in "iu":
        g.fail_if(f"{step} == 0", op, "delta must not be 0")
        g.body(f"{count} = max(-((np.int64({first}) - np.int64({stop})) // np.int64({step})), 0)")
    else:
        span = g.body.fresh("span")
        g.body(f"{span} = (np.float64({stop}) - np.float64({first})) / np.float64({step}) "
               f"if {step} != 0 else np.nan")
        g.fail_if(f"not np.isfinite({span})", op, "the range has no finite length")
        g.body(f"{count} = max(np.int64(math.ceil({span})), 0)")
    out = g.buffer(op.outputs[0], dtype, [count])
    i = g.body.fresh("i")
    with g.body.block(f"for {i} in range({count}):"):
        g.body(f"{out}[{i}] = {first} + {dtype_name(dtype)}({i}) * {step}" if dtype.kind == "f"
               else f"{out}[{i}] = {dtype_name(dtype)}(np.int64({first}) + {i} * np.int64({step}))")
    return [Var(out, dtype, 1, "buffer", (count,))]


@emits("Pad")
def emit_pad(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Constant pads (negative ones crop): each output index maps to a source index per axis
    (or none: the constant), by the mode's rule; one loop nest copies."""
    x = ins[0]
    mode = op.attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise NoRule(f"mode '{mode}'")
    if x.kind == "scalar" or x.rank == 0:
        raise NoRule("Pad of a scalar")
    rank = x.rank
    axes = list(range(rank))
    if len(op.inputs) > 3 and op.inputs[3]:
        axes = [a % rank if -rank <= a < rank else -1 for a in _const_ints(g, op.inputs[3], "axes input")]
        if -1 in axes or len(set(axes)) != len(axes):
            raise NoRule("axes out of range or repeated")
    amounts = _const_ints(g, op.inputs[1], "pads input")
    if len(amounts) != 2 * len(axes):
        raise NoRule(f"pads has {len(amounts)} values for {len(axes)} axes")
    pads = {a: (amounts[k], amounts[k + len(axes)]) for k, a in enumerate(axes)}
    value = "0"
    if mode == "constant" and len(op.inputs) > 2 and op.inputs[2]:
        v = ins[2]
        first = f"{v.expr}[{', '.join(['0'] * v.rank)}]"
        value = v.item() if v.kind == "scalar" or v.rank == 0 else f"({first} if {v.expr}.size > 0 else 0)"
    dtype, _ = g.out_type(op.outputs[0], rank, x.dtype)
    emit = g.body
    src, n, dims = [], [], []
    for a in range(rank):
        begin, end = pads.get(a, (0, 0))
        crop_lo, crop_hi = -min(begin, 0), -min(end, 0)
        length = emit.fresh(f"n{a}")
        emit(f"{length} = {x.dim(a)} - {crop_lo + crop_hi}")
        if crop_lo + crop_hi:
            g.fail_if(f"{length} < 0", op, f"pads {begin}, {end} remove more than the {{a}} entries of axis {a}",
                      a=x.dim(a))
        if mode != "constant" and (begin > 0 or end > 0):
            g.fail_if(f"{length} == 0", op, f"cannot pad the empty axis {a} in mode '{mode}'")
        n.append(length)
        src.append(crop_lo)
        dims.append(f"{length} + {max(begin, 0) + max(end, 0)}")
    out = g.buffer(op.outputs[0], dtype, dims)
    index = [emit.fresh(f"o{a}") for a in range(rank)]
    sources = []
    depth = emit.depth
    inside = []
    for a in range(rank):
        begin = max(pads.get(a, (0, 0))[0], 0)
        emit(f"for {index[a]} in range({out}.shape[{a}]):")
        emit.depth += 1
        s = emit.fresh(f"s{a}")
        emit(f"{s} = {index[a]} - {begin}")
        if mode == "edge":
            emit(f"{s} = min(max({s}, 0), {n[a]} - 1)")
        elif mode == "wrap":
            emit(f"{s} = {s} % {n[a]}")
        elif mode == "reflect":
            with emit.block(f"while {s} < 0 or {s} >= {n[a]}:"):
                emit(f"{s} = (-{s} if {s} < 0 else 2 * ({n[a]} - 1) - {s}) if {n[a]} > 1 else 0")
        else:
            inside.append(f"0 <= {s} < {n[a]}")
        sources.append(f"{s} + {src[a]}" if src[a] else s)
    read = f"{x.expr}[{', '.join(sources)}]"
    if inside:
        emit(f"{out}[{', '.join(index)}] = {read} if {' and '.join(inside)} else {value}")
    else:
        emit(f"{out}[{', '.join(index)}] = {read}")
    emit.depth = depth
    return [Var(out, dtype, rank, "buffer", tuple(dims))]
