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
    """Each output index maps to a source index per axis (or none: the constant) by the mode's rule;
    one loop nest copies. Negative pads crop. Pads and axes the model fixes are baked in; pads or
    axes computed at run time (exporters build them from Shape arithmetic) are read into one begin
    and end per axis, checked as the interpreter checks them."""
    x = ins[0]
    mode = op.attrs.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise NoRule(f"mode '{mode}'")
    if x.kind == "scalar" or x.rank == 0:
        raise NoRule("Pad of a scalar")
    rank = x.rank
    has_axes = len(op.inputs) > 3 and bool(op.inputs[3])
    fixed_axes = not has_axes or g.const(op.inputs[3]) is not None
    if g.const(op.inputs[1]) is not None and fixed_axes:
        pads = _constant_pads(g, op, rank, has_axes)
    else:
        pads = _runtime_pads(g, op, ins, rank, has_axes, fixed_axes)
    value = "0"
    if mode == "constant" and len(op.inputs) > 2 and op.inputs[2]:
        v = ins[2]
        first = f"{v.expr}[{', '.join(['0'] * v.rank)}]"
        value = v.item() if v.kind == "scalar" or v.rank == 0 else f"({first} if {v.expr}.size > 0 else 0)"
    dtype, _ = g.out_type(op.outputs[0], rank, x.dtype)
    emit = g.body
    src, n, dims, grow = [], [], [], []
    for a in range(rank):
        begin, end = pads[a]
        lo, hi = _part(emit, begin, f"lo{a}", negative=True), _part(emit, end, f"hi{a}", negative=True)
        length = emit.fresh(f"n{a}")
        crop = _sum(lo, hi)
        emit(f"{length} = {x.dim(a)} - {crop if crop.isidentifier() or crop.isdigit() else f'({crop})'}")
        if (lo, hi) != ("0", "0"):
            g.fail_if(f"{length} < 0", op, f"pads {{a}}, {{b}} remove more than the entries of axis {a}",
                      a=begin, b=end)
        before, after = _part(emit, begin, f"before{a}"), _part(emit, end, f"after{a}")
        if mode != "constant" and (before, after) != ("0", "0"):
            padded = " or ".join(f"{p} > 0" for p in (before, after) if not p.isdigit()) or "True"
            g.fail_if(f"({padded}) and {length} == 0", op, f"cannot pad the empty axis {a} in mode '{mode}'")
        n.append(length)
        src.append(lo)
        grow.append(before)
        dims.append(f"{length} + {_sum(before, after)}")
    out = g.buffer(op.outputs[0], dtype, dims)
    index = [emit.fresh(f"o{a}") for a in range(rank)]
    sources = []
    depth = emit.depth
    inside = []
    for a in range(rank):
        emit(f"for {index[a]} in range({out}.shape[{a}]):")
        emit.depth += 1
        s = emit.fresh(f"s{a}")
        emit(f"{s} = {index[a]} - {grow[a]}" if grow[a] != "0" else f"{s} = {index[a]}")
        if mode == "edge":
            emit(f"{s} = min(max({s}, 0), {n[a]} - 1)")
        elif mode == "wrap":
            emit(f"{s} = {s} % {n[a]}")
        elif mode == "reflect":
            with emit.block(f"while {s} < 0 or {s} >= {n[a]}:"):
                emit(f"{s} = (-{s} if {s} < 0 else 2 * ({n[a]} - 1) - {s}) if {n[a]} > 1 else 0")
        else:
            inside.append(f"0 <= {s} < {n[a]}")
        sources.append(f"{s} + {src[a]}" if src[a] != "0" else s)
    read = f"{x.expr}[{', '.join(sources)}]"
    if inside:
        emit(f"{out}[{', '.join(index)}] = {read} if {' and '.join(inside)} else {value}")
    else:
        emit(f"{out}[{', '.join(index)}] = {read}")
    emit.depth = depth
    return [Var(out, dtype, rank, "buffer", tuple(dims))]


def _sum(a: str, b: str) -> str:
    if a.isdigit() and b.isdigit():
        return str(int(a) + int(b))
    return a if b == "0" else b if a == "0" else f"{a} + {b}"


def _part(emit, amount: str, hint: str, negative: bool = False) -> str:
    """The part of a pad amount that grows the axis (max(amount, 0)), or with `negative` the part
    that crops it (max(-amount, 0)): a literal for a literal amount, else a new name."""
    if amount.lstrip("-").isdigit():
        return str(max(-int(amount), 0) if negative else max(int(amount), 0))
    name = emit.fresh(hint)
    emit(f"{name} = max(-{amount}, 0)" if negative else f"{name} = max({amount}, 0)")
    return name


def _constant_pads(g: LoopGen, op: Op, rank: int, has_axes: bool) -> list[tuple[str, str]]:
    """(begin, end) of every axis as literals: pads and axes the model fixes."""
    axes = list(range(rank))
    if has_axes:
        axes = [a % rank if -rank <= a < rank else -1 for a in _const_ints(g, op.inputs[3], "axes input")]
        if -1 in axes or len(set(axes)) != len(axes):
            raise NoRule("axes out of range or repeated")
    amounts = _const_ints(g, op.inputs[1], "pads input")
    if len(amounts) != 2 * len(axes):
        raise NoRule(f"pads has {len(amounts)} values for {len(axes)} axes")
    pads = {a: (str(amounts[k]), str(amounts[k + len(axes)])) for k, a in enumerate(axes)}
    return [pads.get(a, ("0", "0")) for a in range(rank)]


def _runtime_pads(g: LoopGen, op: Op, ins: list[Var | None], rank: int, has_axes: bool,
                  fixed_axes: bool) -> list[tuple[str, str]]:
    """(begin, end) of every axis as names of int64 values read from pads computed at run time (and
    from axes, fixed or computed), with the interpreter's checks: two values per axis, axes in range
    and not repeated."""
    pads = ins[1]
    if pads is None or pads.kind == "scalar" or pads.rank != 1 or pads.dtype.kind not in "iu":
        raise NoRule("the pads input is not a vector of integers")
    emit = g.body
    count = pads.dim(0)
    if fixed_axes:
        axes = list(range(rank)) if not has_axes else _const_ints(g, op.inputs[3], "axes input")
        axes = [a % rank if -rank <= a < rank else -1 for a in axes]
        if -1 in axes or len(set(axes)) != len(axes):
            raise NoRule("axes out of range or repeated")
        m = len(axes)
        g.fail_if(f"{count} != {2 * m}", op, f"pads has {{a}} values; it needs two (begin, end) for each of {m} axes",
                  a=count)
        pairs = {}
        for k, a in enumerate(axes):
            begin, end = emit.fresh(f"begin{a}"), emit.fresh(f"end{a}")
            emit(f"{begin} = np.int64({pads.expr}[{k}])")
            emit(f"{end} = np.int64({pads.expr}[{k + m}])")
            pairs[a] = (begin, end)
        return [pairs.get(a, ("0", "0")) for a in range(rank)]
    axes = ins[3]
    if axes.kind == "scalar" or axes.rank != 1 or axes.dtype.kind not in "iu":
        raise NoRule("the axes input is not a vector of integers")
    m = axes.dim(0)
    g.fail_if(f"{count} != 2 * {m}", op, "pads has {a} values; it needs two (begin, end) for each of {b} axes",
              a=count, b=m)
    begins, ends, named, k, axis = (emit.fresh(h) for h in ("begins", "ends", "named", "k", "axis"))
    emit(f"{begins} = np.zeros({rank}, np.int64)")
    emit(f"{ends} = np.zeros({rank}, np.int64)")
    emit(f"{named} = np.zeros({rank}, np.bool_)")
    with emit.block(f"for {k} in range({m}):"):
        emit(f"{axis} = np.int64({axes.expr}[{k}])")
        g.fail_if(f"{axis} < -{rank} or {axis} >= {rank}", op,
                  f"axis {{a}} is outside [{-rank}, {rank - 1}] for a tensor of rank {rank}", a=axis)
        emit(f"{axis} = {axis} + {rank} if {axis} < 0 else {axis}")
        g.fail_if(f"{named}[{axis}]", op, "the axes name axis {a} twice", a=axis)
        emit(f"{named}[{axis}] = True")
        emit(f"{begins}[{axis}] = {pads.expr}[{k}]")
        emit(f"{ends}[{axis}] = {pads.expr}[{k} + {m}]")
    result = []
    for a in range(rank):
        begin, end = emit.fresh(f"begin{a}"), emit.fresh(f"end{a}")
        emit(f"{begin} = {begins}[{a}]")
        emit(f"{end} = {ends}[{a}]")
        result.append((begin, end))
    return result
