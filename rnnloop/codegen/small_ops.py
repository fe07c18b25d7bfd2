"""Code generation rules for the small data movers of front ends: Hardmax, DepthToSpace, SpaceToDepth,
ReverseSequence, GatherElements and ScatterElements; each checked against the interpreter's function
of the same op (rnnloop.interp.small_ops, tensor_ops). Every index read from a tensor is checked
before it is used."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import numpy as np

from ..ir import Op
from .emitter import Emitter, NoRule, Var, dtype_name, literal
from .kernel import LoopGen, emits
from .rules import _axis, _checked_index


@contextmanager
def _nest(emit: Emitter, dims: list[str], hint: str = "i") -> Iterator[list[str]]:
    """Loops over `dims` (the last innermost); yields their index names."""
    names = [emit.fresh(f"{hint}{k}") for k in range(len(dims))]
    with ExitStack() as stack:
        for name, dim in zip(names, dims):
            stack.enter_context(emit.block(f"for {name} in range({dim}):"))
        yield names


def _array(v: Var | None, what: str) -> Var:
    if v is None or v.kind == "scalar" or v.rank == 0:
        raise NoRule(f"the {what} is not an array")
    return v


def _at(x: str, index: list[str]) -> str:
    return f"{x}[{', '.join(index)}]"


# ---------------------------------------------------------------------------------------------
# Hardmax


@emits("Hardmax")
def emit_hardmax(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """1 at the first maximum along the axis (a NaN counts as the maximum, as np.argmax), 0 elsewhere."""
    x = _array(ins[0], "input")
    axis = _axis(op.attrs.get("axis", -1), x.rank)
    dtype, rank = g.out_type(op.outputs[0], x.rank, x.dtype)
    dims = [x.dim(a) for a in range(rank)]
    out = g.buffer(op.outputs[0], dtype, dims)
    emit = g.body
    others = [a for a in range(rank) if a != axis]
    one, zero = literal(1, dtype), literal(0, dtype)
    with _nest(emit, [dims[a] for a in others]) as names:
        at = dict(zip(others, names))
        j, best, where, v = (emit.fresh(n) for n in ("j", "best", "at", "v"))

        def index(k: str) -> list[str]:
            return [k if a == axis else at[a] for a in range(rank)]

        with emit.block(f"if {dims[axis]} > 0:"):
            emit(f"{best} = {_at(x.expr, index('0'))}")
            emit(f"{where} = 0")
            with emit.block(f"for {j} in range(1, {dims[axis]}):"):
                emit(f"{v} = {_at(x.expr, index(j))}")
                with emit.block(f"if {best} == {best} and ({v} > {best} or {v} != {v}):"):
                    emit(f"{best} = {v}")
                    emit(f"{where} = {j}")
            with emit.block(f"for {j} in range({dims[axis]}):"):
                emit(f"{_at(out, index(j))} = {one} if {j} == {where} else {zero}")
    return [Var(out, dtype, rank, "buffer")]


# ---------------------------------------------------------------------------------------------
# DepthToSpace and SpaceToDepth


def _block_args(op: Op, x: Var) -> tuple[int, str]:
    if x.rank != 4:
        raise NoRule(f"{op.op_type} of rank {x.rank} (it takes rank 4)")
    b, mode = int(op.attrs.get("blocksize", 0)), op.attrs.get("mode", "DCR")
    if b < 1 or mode not in ("DCR", "CRD"):
        raise NoRule(f"blocksize {b} and mode '{mode}'")
    return b, mode


def _channel(mode: str, c: str, i: str, j: str, b: int, depth: str) -> str:
    """The channel of (c, i, j) in the deep tensor of `depth` channels per block position."""
    return f"({i} * {b} + {j}) * {depth} + {c}" if mode == "DCR" else f"{c} * {b * b} + {i} * {b} + {j}"


@emits("DepthToSpace")
def emit_depthtospace(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """out[n, c, h*b + i, w*b + j] = x[n, channel(c, i, j), h, w]: one loop nest."""
    x = _array(ins[0], "input")
    b, mode = _block_args(op, x)
    dtype, _ = g.out_type(op.outputs[0], 4, x.dtype)
    n, c, h, w = (x.dim(a) for a in range(4))
    g.fail_if(f"{c} % {b * b} != 0", op, f"the {{a}} channels do not divide into blocks of {b}x{b}", a=c)
    depth = g.body.fresh("depth")
    g.body(f"{depth} = {c} // {b * b}")
    out = g.buffer(op.outputs[0], dtype, [n, depth, f"{h} * {b}", f"{w} * {b}"])
    emit = g.body
    with _nest(emit, [n, depth, h, str(b), w, str(b)]) as (ni, ci, hi, ii, wi, ji):
        emit(f"{out}[{ni}, {ci}, {hi} * {b} + {ii}, {wi} * {b} + {ji}] = "
             f"{x.expr}[{ni}, {_channel(mode, ci, ii, ji, b, depth)}, {hi}, {wi}]")
    return [Var(out, dtype, 4, "buffer")]


@emits("SpaceToDepth")
def emit_spacetodepth(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """out[n, channel(c, i, j), h, w] = x[n, c, h*b + i, w*b + j]: one loop nest."""
    x = _array(ins[0], "input")
    b, mode = _block_args(op, x)
    dtype, _ = g.out_type(op.outputs[0], 4, x.dtype)
    n, c, h, w = (x.dim(a) for a in range(4))
    g.fail_if(f"{h} % {b} != 0 or {w} % {b} != 0", op,
              f"height {{a}} and width {{b}} must both be multiples of the blocksize {b}", a=h, b=w)
    emit = g.body
    hb, wb = emit.fresh("hb"), emit.fresh("wb")
    emit(f"{hb} = {h} // {b}")
    emit(f"{wb} = {w} // {b}")
    out = g.buffer(op.outputs[0], dtype, [n, f"{c} * {b * b}", hb, wb])
    with _nest(emit, [n, c, str(b), str(b), hb, wb]) as (ni, ci, ii, ji, hi, wi):
        emit(f"{out}[{ni}, {_channel(mode, ci, ii, ji, b, c)}, {hi}, {wi}] = "
             f"{x.expr}[{ni}, {ci}, {hi} * {b} + {ii}, {wi} * {b} + {ji}]")
    return [Var(out, dtype, 4, "buffer")]


# ---------------------------------------------------------------------------------------------
# ReverseSequence


@emits("ReverseSequence")
def emit_reversesequence(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """For each batch entry, its first sequence_lens[i] steps reversed, the rest copied; every
    length checked against the time axis."""
    x, lens = _array(ins[0], "input"), _array(ins[1], "sequence_lens")
    batch_axis, time_axis = int(op.attrs.get("batch_axis", 1)), int(op.attrs.get("time_axis", 0))
    if {batch_axis, time_axis} != {0, 1} or x.rank < 2 or lens.rank != 1 or lens.dtype.kind not in "iu":
        raise NoRule("ReverseSequence of this form")
    dtype, rank = g.out_type(op.outputs[0], x.rank, x.dtype)
    dims = [x.dim(a) for a in range(rank)]
    out = g.buffer(op.outputs[0], dtype, dims)
    emit = g.body
    g.fail_if(f"{lens.dim(0)} != {dims[batch_axis]}", op, "sequence_lens has {a} values for a batch of {b}",
              a=lens.dim(0), b=dims[batch_axis])
    bi, ti, length, src = (emit.fresh(n) for n in ("b", "t", "length", "src"))
    with emit.block(f"for {bi} in range({dims[batch_axis]}):"):
        emit(f"{length} = np.int64({lens.expr}[{bi}])")
        g.fail_if(f"{length} < 0 or {length} > {dims[time_axis]}", op,
                  "a sequence length of {a} is outside [0, {b}], the time axis' size", a=length, b=dims[time_axis])
        with emit.block(f"for {ti} in range({dims[time_axis]}):"):
            emit(f"{src} = {length} - 1 - {ti} if {ti} < {length} else {ti}")
            with _nest(emit, dims[2:]) as rest:
                to, at = [bi, ti], [bi, src]
                if batch_axis == 1:
                    to, at = to[::-1], at[::-1]
                emit(f"{_at(out, to + rest)} = {_at(x.expr, at + rest)}")
    return [Var(out, dtype, rank, "buffer")]


# ---------------------------------------------------------------------------------------------
# GatherElements and ScatterElements


def _element_shapes(g: LoopGen, op: Op, x: Var, indices: Var, axis: int, updates: Var | None = None) -> None:
    """indices (and updates, their shape) fit data: the same rank, no larger outside the axis."""
    if indices.rank != x.rank or indices.dtype.kind not in "iu":
        raise NoRule(f"indices of rank {indices.rank} and {indices.dtype} for data of rank {x.rank}")
    for a in range(x.rank):
        if a != axis:
            g.fail_if(f"{indices.dim(a)} > {x.dim(a)}", op,
                      f"indices are larger than data on axis {a} ({{a}} > {{b}})", a=indices.dim(a), b=x.dim(a))
    if updates is not None:
        if updates.rank != x.rank:
            raise NoRule(f"updates of rank {updates.rank} for data of rank {x.rank}")
        for a in range(x.rank):
            g.fail_if(f"{updates.dim(a)} != {indices.dim(a)}", op,
                      f"updates and indices differ on axis {a} ({{a}} and {{b}})", a=updates.dim(a),
                      b=indices.dim(a))


@emits("GatherElements")
def emit_gatherelements(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """out[i, j, k] = data[indices[i, j, k], j, k] (axis 0), each index checked."""
    x, indices = _array(ins[0], "data"), _array(ins[1], "indices")
    axis = _axis(op.attrs.get("axis", 0), x.rank)
    _element_shapes(g, op, x, indices, axis)
    dtype, rank = g.out_type(op.outputs[0], x.rank, x.dtype)
    dims = [indices.dim(a) for a in range(rank)]
    out = g.buffer(op.outputs[0], dtype, dims)
    emit = g.body
    with _nest(emit, dims) as names:
        k = _checked_index(g, op, _at(indices.expr, names), x.dim(axis))
        emit(f"{_at(out, names)} = {_at(x.expr, [k if a == axis else i for a, i in enumerate(names)])}")
    return [Var(out, dtype, rank, "buffer")]


_REDUCE = {"add": "{0} + {1}", "mul": "{0} * {1}", "max": "_m.maximum({0}, {1})", "min": "_m.minimum({0}, {1})"}


@emits("ScatterElements")
def emit_scatterelements(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """A copy of data, then out[indices[i, j], j] = updates[i, j] (axis 0) in order, or reduced into
    it; each index checked."""
    x, indices, updates = _array(ins[0], "data"), _array(ins[1], "indices"), _array(ins[2], "updates")
    axis = _axis(op.attrs.get("axis", 0), x.rank)
    reduction = op.attrs.get("reduction", "none")
    if reduction != "none" and (reduction not in _REDUCE or x.dtype == np.bool_):
        raise NoRule(f"reduction '{reduction}' on {x.dtype}")
    if updates.dtype != x.dtype:
        raise NoRule("updates of another dtype than data")
    _element_shapes(g, op, x, indices, axis, updates)
    dtype, rank = g.out_type(op.outputs[0], x.rank, x.dtype)
    out = g.buffer(op.outputs[0], dtype, [x.dim(a) for a in range(rank)])
    emit = g.body
    emit(f"_r.put({out}, {x.expr})")
    with _nest(emit, [indices.dim(a) for a in range(rank)]) as names:
        k = _checked_index(g, op, _at(indices.expr, names), x.dim(axis))
        target = _at(out, [k if a == axis else i for a, i in enumerate(names)])
        value = _at(updates.expr, names)
        if reduction == "none":
            emit(f"{target} = {value}")
        else:
            emit(f"{target} = {dtype_name(dtype)}({_REDUCE[reduction].format(target, value)})")
    return [Var(out, dtype, rank, "buffer")]
