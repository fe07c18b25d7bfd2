"""Code generation rules: one function per op (or family), each checked against the interpreter."""

from __future__ import annotations

from contextlib import ExitStack

import numpy as np

from ..ir import Op
from . import fusion
from .emitter import NoRule, Var, copy_nest, dtype_name, int_argument, permuted, shape_tuple
from .kernel import LoopGen, emits, matmul_call


def _out(g: LoopGen, op: Op, rank: int, dtype=None, k: int = 0) -> tuple[np.dtype, int]:
    return g.out_type(op.outputs[k], rank, dtype)


def _index(rank: int, axis: int, index: str) -> str:
    parts = [":"] * rank
    parts[axis] = index
    return ", ".join(parts)


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise NoRule(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


def _const_ints(g: LoopGen, name: str, what: str) -> list[int]:
    value = g.const(name)
    if value is None:
        raise NoRule(f"the {what} must be a constant to compile")
    return [int(v) for v in value.reshape(-1)]


# ---------------------------------------------------------------------------------------------
# Elementwise ops: one loop nest over the broadcast shape, per-element code from scalar.py


@emits("<elementwise>")
def emit_elementwise(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """out = f(a, b, ...) with NumPy broadcasting: a loop nest of one op (fusion.py makes the nests
    of several)."""
    return [fusion.emit(g, [op], {op.outputs[0]})[op.outputs[0]]]


@emits("SequenceInsert")
def emit_sequence_insert(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Append to a carried sequence (kernel._carried_sequence): grow its storage when full, write
    the element in the next row. Elements of another shape than the first send the loop back to the
    interpreter, which holds sequences of any shapes."""
    if op.inputs[0] not in g.sequences:
        raise NoRule("SequenceInsert is compiled only as the append to a carried sequence")
    store, count, elem = g.sequences[op.inputs[0]]
    x = ins[1]
    rank = 0 if x.kind == "scalar" else x.rank
    if x.dtype != elem.dtype or rank != len(elem.shape):
        raise NoRule(f"the element is {x.dtype} of rank {rank}, the sequence holds {elem}")
    shape = shape_tuple([x.dim(a) for a in range(rank)])
    g.fail_if(f"{count} > 0 and {store}.shape[1:] != {shape}", op,
              "the sequence's elements change shape at iteration {t}; the fused kernel holds elements "
              "of one shape", fallback=True)
    emit = g.body
    with emit.block(f"if {count} == {store}.shape[0]:"):
        grown = emit.fresh("grown")
        emit(f"{grown} = np.empty((max(2 * {count}, 16),) + {shape}, {dtype_name(elem.dtype)})")
        emit(f"_r.put({grown}[:{count}], {store})")
        emit(f"{store} = {grown}")
    if rank == 0:
        emit(f"{store}[{count}] = {x.expr if x.kind == 'scalar' else x.item()}")
    else:
        emit(f"_r.put({store}[{count}], {x.expr})")
    emit(f"{count} += 1")
    return [Var(store, elem.dtype, rank + 1, "sequence")]


@emits("Identity")
def emit_identity(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """The same value under a new name: no code."""
    return [ins[0]]


# ---------------------------------------------------------------------------------------------
# Views: Gather by a scalar, Slice, Squeeze, Unsqueeze, Transpose, Split, Reshape, Flatten


def _checked_index(g: LoopGen, op: Op, index: str, n: str) -> str:
    """A run-time index normalised like ONNX (negative counts from the end) and bounds-checked."""
    k = g.body.fresh("k")
    g.body(f"{k} = np.int64({index})")
    g.body(f"{k} = {k} + {n} if {k} < 0 else {k}")
    g.fail_if(f"{k} < 0 or {k} >= {n}", op, "index {a} is out of range for an axis of size {b}",
              a=f"np.int64({index})", b=n)
    return k


@emits("Gather")
def emit_gather(g: LoopGen, op: Op, ins: list[Var | None], axis: int = 0) -> list[Var]:
    """A scalar index gives a view; a vector of indices copies the selected slices."""
    x, indices = ins
    axis = _axis(op.attrs.get("axis", 0), x.rank)
    dtype, rank = _out(g, op, x.rank - 1 + indices.rank, x.dtype)
    if indices.kind == "scalar" or indices.rank == 0:
        k = _checked_index(g, op, indices.item(), x.dim(axis))
        if x.rank == 1:  # one element of a vector, kept a 0-d array; Numba reshapes only
            # contiguous arrays, and a vector may be a strided view (a Scan's part along axis 1):
            # ascontiguousarray copies that one element, and is no code for a contiguous vector
            view = g.view(f"v_{op.outputs[0]}", f"np.ascontiguousarray({x.expr}[{k}:{k} + 1]).reshape(())")
        else:
            view = g.view(f"v_{op.outputs[0]}", f"{x.expr}[{_index(x.rank, axis, k)}]")
        if axis == 0 and x.kind == "invariant":
            g.add_rows(op.outputs[0], x, k)  # x_t = X[i]: products with it can be hoisted
        return [Var(view, dtype, rank, "view", tuple(x.dim(a) for a in range(x.rank) if a != axis))]
    if indices.rank != 1:
        raise NoRule("Gather with indices of rank > 1 is not compiled yet")
    dims = [x.dim(a) for a in range(axis)] + [indices.dim(0)] + [x.dim(a) for a in range(axis + 1, x.rank)]
    out = g.buffer(op.outputs[0], dtype, dims)
    j = g.body.fresh("j")
    with g.body.block(f"for {j} in range({indices.dim(0)}):"):
        k = _checked_index(g, op, f"{indices.expr}[{j}]", x.dim(axis))
        others = [a for a in range(x.rank) if a != axis]  # the axes copied whole, by loops
        at = [f"{{{others.index(a)}}}" if a != axis else None for a in range(x.rank)]
        copy_nest(g.body, out, x.expr, [x.dim(a) for a in others],
                  [i or j for i in at], [i or k for i in at])
    return [Var(out, dtype, rank, "buffer")]


@emits("Slice")
def emit_slice(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """A strided view; starts, ends and steps may be computed in the body, axes must be constant."""
    x, starts, ends = ins[:3]
    axes_in = ins[3] if len(ins) > 3 else None
    steps_in = ins[4] if len(ins) > 4 else None
    count = starts.dim(0) if starts.kind != "scalar" and starts.rank == 1 else None
    if count is None or ends.rank != 1:
        raise NoRule("starts and ends must be 1-D")
    n_axes = _static_length(g, op.inputs[1], starts)
    axes = list(range(n_axes)) if axes_in is None else _const_ints(g, op.inputs[3], "axes input")
    axes = [_axis(a, x.rank) for a in axes]
    if len(set(axes)) != len(axes):
        raise NoRule("repeated axes")
    steps_const = None if steps_in is None else g.const(op.inputs[4])
    first, second = [":"] * x.rank, [":"] * x.rank
    for j, axis in enumerate(axes):
        n = x.dim(axis)
        step = "1" if steps_in is None else f"{steps_in.expr}[{j}]"
        if steps_const is not None and int(steps_const[j]) == 0:
            raise NoRule("a step of 0")
        if steps_const is None and steps_in is not None:
            g.fail_if(f"{step} == 0", op, "slice step must not be 0")
        s, c = g.body.fresh("start"), g.body.fresh("count")
        g.body(f"{s}, {c} = _r.slice_range({starts.expr}[{j}], {ends.expr}[{j}], {int_argument(step)}, "
               f"{int_argument(n)})")
        first[axis] = f"{s}::{step}"
        second[axis] = f":{c}"
    view = g.view(f"v_{op.outputs[0]}", f"{x.expr}[{', '.join(first)}][{', '.join(second)}]")
    return [Var(view, x.dtype, x.rank, "view")]


def _static_length(g: LoopGen, name: str, v: Var) -> int:
    """The element count of a vector input (starts, a shape), when it is known before running."""
    value = g.const(name)
    if value is not None:
        return value.size
    if v.shape is not None and v.rank == 1 and v.shape[0].isdigit():
        return int(v.shape[0])
    t = g.type_of(name)
    if not t.shape:  # a 0-d value holds one element
        return 1
    if not isinstance(t.shape[0], int):
        raise NoRule(f"the length of '{name}' is not known before running")
    return t.shape[0]


def _axes_input(g: LoopGen, op: Op, ins: list[Var | None]) -> list[int] | None:
    if len(op.inputs) > 1 and op.inputs[1]:
        return _const_ints(g, op.inputs[1], "axes input")
    return None


@emits("Squeeze")
def emit_squeeze(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Index the removed size-1 axes with 0: a view, checked to be size 1."""
    x = ins[0]
    axes = _axes_input(g, op, ins)
    if axes is None:  # every axis of size 1: those the model says are, checked that no other is
        shape = g.declared_shape(op.inputs[0], x.rank) or (None,) * x.rank
        axes = [a for a, d in enumerate(shape) if d == 1]
        others = [x.dim(a) for a, d in enumerate(shape) if not isinstance(d, int)]
        if others:
            g.fail_if(" or ".join(f"{d} == 1" for d in others), op,
                      "an axis of size 1 the model does not declare: the result's rank depends on it",
                      fallback=True)
    axes = {_axis(a, x.rank) for a in axes}
    for a in sorted(axes):
        g.fail_if(f"{x.dim(a)} != 1", op, f"cannot squeeze axis {a} of size {{a}}", a=x.dim(a))
    index = ["0" if a in axes else ":" for a in range(x.rank)]
    view = g.view(f"v_{op.outputs[0]}", f"{x.expr}[{', '.join(index)}]")
    kept = g.kept_rows.get(op.inputs[0])
    if kept is not None and axes == {kept[2]}:  # a slice's part without its axis: a row, hoistable
        g.add_rows(op.outputs[0], kept[0], kept[1])
    return [_rank0_view(g, view, x, x.rank - len(axes))]


def _rank0_view(g: LoopGen, view: str, x: Var, rank: int) -> Var:
    # Indexing every axis yields an element, not an array: keep rank-0 values as 0-d arrays.
    if rank == 0:
        g.body(f"{view} = np.full((), {view}, {dtype_name(x.dtype)})")
        return Var(view, x.dtype, 0, "fresh")
    return Var(view, x.dtype, rank, "view", owner=x.memory())


@emits("Unsqueeze")
def emit_unsqueeze(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Insert size-1 axes with np.newaxis: a view."""
    x = ins[0]
    axes = _axes_input(g, op, ins)
    if axes is None:
        raise NoRule("Unsqueeze needs its axes")
    rank = x.rank + len(axes)
    axes = {_axis(a, rank) for a in axes}
    src = x.expr
    if x.kind == "scalar":
        src = g.body.fresh("s")
        g.body(f"{src} = np.full((), {x.expr}, {dtype_name(x.dtype)})")
    index = ["np.newaxis" if a in axes else ":" for a in range(rank)]
    view = g.view(f"v_{op.outputs[0]}",
                  f"{src}[{', '.join(index)}]" if x.rank else f"{src}.reshape({shape_tuple(['1'] * rank)})")
    return [Var(view, x.dtype, rank, "view", owner=x.memory())]


@emits("Transpose")
def emit_transpose(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """A view with permuted strides."""
    x = ins[0]
    perm = op.attrs.get("perm")
    perm = list(range(x.rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(x.rank)):
        raise NoRule(f"perm {perm} is not a permutation of the axes")
    view = g.view(f"v_{op.outputs[0]}", permuted(x.expr, perm))
    return [Var(view, x.dtype, x.rank, "view")]


@emits("Split")
def emit_split(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Views of consecutive parts along the axis."""
    x = ins[0]
    axis = _axis(op.attrs.get("axis", 0), x.rank)
    n = x.dim(axis)
    k = len(op.outputs)
    emit = g.body
    if len(op.inputs) > 1 and op.inputs[1]:
        ints = _const_ints(g, op.inputs[1], "split input")
        sizes = [str(s) for s in ints]
        total = " + ".join(sizes) if sizes else "0"
        bad = "True" if any(s < 0 for s in ints) else f"{total} != {n}"
        g.fail_if(bad, op, f"split sizes {ints} must be non-negative and add up to the axis size {{a}}", a=n)
    else:
        # Equal parts; with num_outputs (opset 18) the last part may be smaller.
        part = emit.fresh("part")
        emit(f"{part} = -(-{n} // {k})")
        if "num_outputs" not in op.attrs:
            g.fail_if(f"{n} % {k} != 0", op, f"axis size {{a}} does not split into {k} equal parts", a=n)
        sizes = [part] * (k - 1) + [f"{n} - {k - 1} * {part}"]
        g.fail_if(f"{n} - {k - 1} * {part} < 0", op, f"axis size {{a}} cannot give {k} parts", a=n)
    outs, offset = [], "0"
    for j, size in enumerate(sizes):
        view = g.view(f"v_{op.outputs[j] or 'part'}",
                      f"{x.expr}[{_index(x.rank, axis, f'{offset}:{offset} + {size}')}]")
        outs.append(Var(view, x.dtype, x.rank, "view", tuple(size if a == axis else x.dim(a) for a in range(x.rank))))
        # Columns of an array, read from it (or from its row) by a fused nest, which needs them as
        # wide as its output: so only parts of a fixed width above 1 (fusion._function).
        if axis == x.rank - 1 and x.kind not in ("scalar", "lazy", "sequence") and size.isdigit() and int(size) > 1:
            g.column_parts[view] = (x, offset)
        o = emit.fresh("o")
        emit(f"{o} = {offset} + {size}")
        offset = o
    return outs


def _reshape_view(g: LoopGen, op: Op, x: Var, dims: list[str], dtype) -> Var:
    view = g.body.fresh(f"v_{op.outputs[0]}")
    g.body(f"{view} = np.ascontiguousarray({x.expr}).reshape({shape_tuple(dims)})")
    # (a copy when x is not contiguous, which the kernel then owns too)
    return Var(view, dtype, len(dims), "view", owner=x.memory())


@emits("Reshape")
def emit_reshape(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """A view of the contiguous data (a copy only when the input is not contiguous). The target
    shape is a constant, or computed (a Shape of another value, say) of a length known in advance."""
    x, target = ins
    if x.kind == "scalar":  # a constant's literal: the 0-d array of it, made once
        from .kernel import _zero_d
        x = _zero_d(g, x)
    allowzero = op.attrs.get("allowzero", 0)
    if g.const(op.inputs[1]) is None:
        return [_reshape_view(g, op, x, _computed_dims(g, op, x, target, allowzero), x.dtype)]
    shape = _const_ints(g, op.inputs[1], "shape input")
    if any(s == 0 and j >= x.rank for j, s in enumerate(shape)) and not allowzero:
        raise NoRule(f"shape {shape} copies (0) a dimension the input of rank {x.rank} does not have")
    dims = [x.dim(j) if s == 0 and not allowzero else str(s) for j, s in enumerate(shape)]
    if shape.count(-1) > 1:
        raise NoRule("more than one -1 in the shape")
    size = g.body.fresh("size")
    g.body(f"{size} = {x.expr}.size")
    if -1 in shape:
        j = shape.index(-1)
        known = " * ".join(d for i, d in enumerate(dims) if i != j) or "1"
        g.fail_if(f"{known} == 0 or {size} % ({known}) != 0", op,
                  f"cannot reshape {{a}} elements to {shape}", a=size)
        dims[j] = f"{size} // ({known})"
    g.fail_if(f"{' * '.join(dims) or '1'} != {size}", op, f"cannot reshape {{a}} elements to {shape}", a=size)
    return [_reshape_view(g, op, x, dims, x.dtype)]


def _computed_dims(g: LoopGen, op: Op, x: Var, target: Var, allowzero: int) -> list[str]:
    """The sizes a shape computed in the kernel asks for, checked as the interpreter checks them:
    0 copies the input's size (unless allowzero), one -1 is inferred, none is below -1."""
    if target.rank != 1 or target.dtype.kind not in "iu":
        raise NoRule(f"the shape input '{op.inputs[1]}' is not a vector of integers")
    length = _static_length(g, op.inputs[1], target)
    emit = g.body
    dims = []
    for j in range(length):
        d = emit.fresh(f"d{j}")
        emit(f"{d} = np.int64({target.expr}[{j}])")
        if not allowzero:
            if j < x.rank:
                emit(f"{d} = {x.dim(j)} if {d} == 0 else {d}")
            else:
                g.fail_if(f"{d} == 0", op, f"the shape copies (0) dimension {j}, which the input of rank "
                          f"{x.rank} does not have")
        dims.append(d)
    size = emit.fresh("size")
    emit(f"{size} = {x.expr}.size")
    if not dims:
        g.fail_if(f"{size} != 1", op, "cannot reshape {a} elements to a scalar", a=size)
        return dims
    unknown = " + ".join(f"({d} == -1)" for d in dims)
    g.fail_if(f"{unknown} > 1 or {' or '.join(f'{d} < -1' for d in dims)}", op,
              "the shape has more than one -1 or a size below -1")
    if allowzero:
        g.fail_if(f"({unknown}) > 0 and ({' or '.join(f'{d} == 0' for d in dims)})", op,
                  "the shape has both 0 and -1, which allowzero=1 makes ambiguous")
    known = emit.fresh("known")
    emit(f"{known} = {' * '.join(f'({d} if {d} != -1 else 1)' for d in dims)}")
    g.fail_if(f"({unknown}) > 0 and ({known} == 0 or {size} % {known} != 0)", op,
              "cannot infer the -1 of the shape for {a} elements", a=size)
    for d in dims:
        emit(f"{d} = {size} // {known} if {d} == -1 else {d}")
    g.fail_if(f"{' * '.join(dims)} != {size}", op, "cannot reshape {a} elements to {before}", a=size,
              shapes=(shape_tuple(dims), shape_tuple(dims), len(dims)))
    return dims


@emits("Flatten")
def emit_flatten(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """[prod(shape[:axis]), prod(shape[axis:])] as a view."""
    x = ins[0]
    axis = op.attrs.get("axis", 1)
    if not -x.rank <= axis <= x.rank:
        raise NoRule(f"axis {axis} is out of range")
    axis = axis + x.rank if axis < 0 else axis
    left = " * ".join(x.dim(a) for a in range(axis)) or "1"
    right = " * ".join(x.dim(a) for a in range(axis, x.rank)) or "1"
    return [_reshape_view(g, op, x, [left, right], x.dtype)]


@emits("Expand")
def emit_expand(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """The input broadcast with the shape values (NumPy's rules both ways, like the interpreter),
    copied into a buffer. The shape's length must be known before running; its values need not be."""
    x, shape = ins
    if shape is None:
        raise NoRule("Expand needs its shape input")
    if shape.dtype.kind not in "iu":
        raise NoRule(f"the shape is {shape.dtype}, not integers")
    x_rank = 0 if x.kind == "scalar" else x.rank
    value = g.const(op.inputs[1])
    if value is not None:
        if value.ndim > 1:
            raise NoRule("the shape is not 1-D")
        if any(int(v) < 0 for v in value.reshape(-1)):
            raise NoRule(f"the shape {value.reshape(-1).tolist()} has a negative dimension")
        sizes = [str(int(v)) for v in value.reshape(-1)]
    else:
        sizes = _expand_sizes(g, op, shape)
    n = len(sizes)
    dtype, rank = _out(g, op, max(x_rank, n), x.dtype)
    # Align both to the right: an axis missing on one side has size 1 there.
    dims, flags = [], []
    for d in range(rank):
        a = x.dim(d - (rank - x_rank)) if d >= rank - x_rank else "1"
        s = sizes[d - (rank - n)] if d >= rank - n else "1"
        if s in ("1", a):
            dim = a
        elif a == "1":
            dim = s
        else:
            dim = g.body.fresh(f"d{d}")
            g.body(f"{dim} = _r.broadcast_dim({int_argument(a)}, {int_argument(s)})")
            g.fail_if(f"{dim} < 0", op, f"cannot broadcast the input's size {{a}} with the shape's {{b}} "
                      f"on axis {d} of the output; sizes must be equal or one of them 1", a=a, b=s)
            if s.isdigit():  # checked, a fixed size above 1 is the output's
                dim = s
        dims.append(dim)
        if d >= rank - x_rank:  # the input's index on this axis: the output's, or 0 where it is 1
            flags.append("0" if a == "1" else "" if a == dim else f"(1 if {a} != 1 else 0)")
    out = g.buffer(op.outputs[0], dtype, dims)
    emit = g.body
    if x_rank == 0:
        emit(f"{out}[...] = {x.item()}")  # (fill() does not take 0-d arrays)
        return [Var(out, dtype, rank, "buffer")]
    idx = [emit.fresh(f"i{d}") for d in range(rank)]
    at = [idx[rank - x_rank + k] if f == "" else "0" if f == "0" else f"{idx[rank - x_rank + k]} * {f}"
          for k, f in enumerate(flags)]
    with ExitStack() as nest:
        for d, i in enumerate(idx):
            nest.enter_context(emit.block(f"for {i} in range({dims[d]}):"))
        emit(f"{out}[{', '.join(idx)}] = {x.expr}[{', '.join(at)}]")
    return [Var(out, dtype, rank, "buffer")]


def _expand_sizes(g: LoopGen, op: Op, shape: Var) -> list[str]:
    """Names of the values of a shape computed in the body, checked to be sizes (not negative)."""
    if shape.kind == "scalar" or shape.rank == 0:  # one value, as the interpreter accepts
        values = [shape.item()]
    else:
        if shape.rank != 1:
            raise NoRule("the shape is not 1-D")
        n = _static_length(g, op.inputs[1], shape)
        if shape.dim(0) != str(n):  # its declared length, held to
            g.fail_if(f"{shape.dim(0)} != {n}", op, f"the shape holds {{a}} values where {n} were inferred",
                      a=shape.dim(0))
        values = [f"{shape.expr}[{j}]" for j in range(n)]
    sizes = []
    for j, v in enumerate(values):
        size = g.body.fresh(f"size{j}")
        g.body(f"{size} = np.int64({v})")
        g.fail_if(f"{size} < 0", op, f"the shape has a negative dimension ({{a}} at index {j}); "
                  "dimensions must be >= 0", a=size)
        sizes.append(size)
    return sizes


# ---------------------------------------------------------------------------------------------
# Concat and Shape


@emits("Concat")
def emit_concat(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Copy each input into its slice of one buffer."""
    parts = [v for v in ins if v is not None]
    dtype, rank = _out(g, op, parts[0].rank, parts[0].dtype)
    if any(v.kind == "scalar" or v.rank != rank for v in parts):
        raise NoRule("every input must be an array of the output's rank")
    axis = _axis(op.attrs["axis"], rank)
    first = parts[0]
    for v in parts[1:]:
        for a in range(rank):
            if a != axis:
                g.fail_if(f"{v.dim(a)} != {first.dim(a)}", op,
                          f"inputs differ on axis {a} ({{a}} and {{b}})", a=v.dim(a), b=first.dim(a))
    dims = [first.dim(a) if a != axis else " + ".join(v.dim(axis) for v in parts) for a in range(rank)]
    out = g.buffer(op.outputs[0], dtype, dims)
    offset = "0"
    for v in parts:
        copy_nest(g.body, out, v.expr, [v.dim(a) for a in range(rank)],
                  [f"{offset} + {{{a}}}" if a == axis else f"{{{a}}}" for a in range(rank)],
                  [f"{{{a}}}" for a in range(rank)])
        o = g.body.fresh("o")
        g.body(f"{o} = {offset} + {v.dim(axis)}")
        offset = o
    return [Var(out, dtype, rank, "buffer")]


@emits("Shape")
def emit_shape(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """The dims of the input (between start and end) as int64."""
    x = ins[0]
    rank = 0 if x.kind == "scalar" else x.rank
    start, end = op.attrs.get("start", 0), op.attrs.get("end")
    axes = list(range(rank))[slice(start, end)]
    out = g.buffer(op.outputs[0], np.dtype(np.int64), [str(len(axes))])
    for j, a in enumerate(axes):
        g.body(f"{out}[{j}] = {x.dim(a)}")
    return [Var(out, np.dtype(np.int64), 1, "buffer")]


# ---------------------------------------------------------------------------------------------
# Matrix products


@emits("MatMul")
def emit_matmul(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Floats through BLAS into the buffer; integers and a vector by a vector through generated loops.

    Operands of rank > 2 (batches of matrices, broadcast like np.matmul) go to reductions.py.
    """
    a, b = ins
    if a.kind == "scalar" or b.kind == "scalar" or a.rank == 0 or b.rank == 0:
        raise NoRule("MatMul of a scalar")
    if a.dtype.name not in ("float32", "float64", "int32", "int64"):
        raise NoRule(f"MatMul of {a.dtype} is not compiled (compiled: float32, float64, int32, int64)")
    if a.rank > 2 or b.rank > 2:
        from .reductions import emit_batched_matmul
        return emit_batched_matmul(g, op, a, b)
    dtype, rank = _out(g, op, (a.rank == 2) + (b.rank == 2), a.dtype)
    if a.dtype != b.dtype:
        raise NoRule("MatMul inputs of different dtypes")
    k_a = a.dim(a.rank - 1)
    k_b = b.dim(0)
    g.fail_if(f"{k_a} != {k_b}", op, "inner dimensions differ ({a} and {b})", a=k_a, b=k_b)
    dims = ([a.dim(0)] if a.rank == 2 else []) + ([b.dim(1)] if b.rank == 2 else [])
    out = g.buffer(op.outputs[0], dtype, dims)
    emit = g.body
    if dtype.kind == "f" and rank > 0:  # BLAS has no out= form for a vector by a vector
        panels = g.panels(b, b.expr, a.dim(0), g.const(op.inputs[1])) if a.rank == 2 and b.rank == 2 else None
        emit(matmul_call(a.expr, b.expr, out, a.rank, b.rank, panels))
        return [Var(out, dtype, rank, "buffer")]
    # out[m, n] = sum_k a[m, k] * b[k, n], k outside n so the inner loop runs along rows of b.
    m = a.dim(0) if a.rank == 2 else "1"
    n = b.dim(1) if b.rank == 2 else "1"
    zero = "0" if dtype.kind != "f" else "0.0"
    i, kk, j, aik = (emit.fresh(n) for n in ("i", "kk", "j", "aik"))
    a_at = f"{a.expr}[{i}, {kk}]" if a.rank == 2 else f"{a.expr}[{kk}]"
    b_at = f"{b.expr}[{kk}, {j}]" if b.rank == 2 else f"{b.expr}[{kk}]"
    out_at = {(2, 2): f"{out}[{i}, {j}]", (1, 2): f"{out}[{j}]", (2, 1): f"{out}[{i}]", (1, 1): f"{out}[()]"}
    emit(f"{out}[...] = {zero}")  # fill() does not take 0-d arrays (vector by vector)
    with emit.block(f"for {i} in range({m}):"), emit.block(f"for {kk} in range({k_a}):"):
        emit(f"{aik} = {a_at}")
        with emit.block(f"for {j} in range({n}):"):
            emit(f"{out_at[a.rank, b.rank]} += {aik} * {b_at}")
    return [Var(out, dtype, rank, "buffer")]


@emits("Gemm")
def emit_gemm(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """alpha * op(A) @ op(B) + beta * C for float matrices, through BLAS."""
    a, b = ins[:2]
    c = ins[2] if len(ins) > 2 else None
    if a.dtype.kind != "f" or a.rank != 2 or b.rank != 2:
        raise NoRule("Gemm is compiled for float matrices")
    dtype, _ = _out(g, op, 2, a.dtype)
    at = f"{a.expr}.T" if op.attrs.get("transA", 0) else a.expr
    bt = f"{b.expr}.T" if op.attrs.get("transB", 0) else b.expr
    emit = g.body
    pa, pb = emit.fresh("ga"), emit.fresh("gb")
    emit(f"{pa} = {at}")
    emit(f"{pb} = {bt}")
    g.fail_if(f"{pa}.shape[1] != {pb}.shape[0]", op, "inner dimensions differ ({a} and {b})",
              a=f"{pa}.shape[1]", b=f"{pb}.shape[0]")
    out = g.buffer(op.outputs[0], dtype, [f"{pa}.shape[0]", f"{pb}.shape[1]"])
    b_value = g.const(op.inputs[1])
    if b_value is not None and op.attrs.get("transB", 0):
        b_value = b_value.T
    emit(matmul_call(pa, pb, out, panels=g.panels(b, pb, f"{pa}.shape[0]", b_value)))
    alpha, beta = float(op.attrs.get("alpha", 1.0)), float(op.attrs.get("beta", 1.0))
    lit = dtype_name(dtype)
    if c is None and alpha == 1.0:
        return [Var(out, dtype, 2, "buffer")]
    i, j = emit.fresh("i"), emit.fresh("j")
    cexpr = ""
    if c is not None:
        if c.kind == "scalar" or c.rank == 0:
            cexpr = f" + {lit}({beta!r}) * {c.item()}"
        else:
            if c.rank == 2:
                g.fail_if(f"({c.dim(0)} != 1 and {c.dim(0)} != {out}.shape[0])", op,
                          "C cannot broadcast to the product ({a} rows)", a=c.dim(0))
            cols = c.dim(c.rank - 1)
            g.fail_if(f"({cols} != 1 and {cols} != {out}.shape[1])", op,
                      "C cannot broadcast to the product ({a} columns)", a=cols)
            at = ([f"({i} if {c.dim(0)} != 1 else 0)"] if c.rank == 2 else []) + [f"({j} if {cols} != 1 else 0)"]
            cexpr = f" + {lit}({beta!r}) * {c.expr}[{', '.join(at)}]"
    with emit.block(f"for {i} in range({out}.shape[0]):"), emit.block(f"for {j} in range({out}.shape[1]):"):
        emit(f"{out}[{i}, {j}] = {lit}({alpha!r}) * {out}[{i}, {j}]{cexpr}")
    return [Var(out, dtype, 2, "buffer")]
