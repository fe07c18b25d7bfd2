"""Which models compute each batch row from that row alone, and along which axis of each input and
output the rows lie: what lets Session.run split a batch over threads (issue 25).

The analysis labels every value of the graph, loop bodies and If branches included:

- FREE: the same whatever rows the batch holds (constants, values computed from them alone);
- Rows(k): a tensor whose axis k is the batch axis, each row computed from the same row of the inputs;
- Size: an integer scalar (or [1]) equal to the batch size, as exporters read it with Shape and Gather;
- ShapeVec(k, dims): a 1-D int64 shape whose element k is the batch size; `dims` says what each
  element is where known (an int, a symbolic dim name, or None) so that a Reshape to it can be
  proved to keep the rows apart.

An op splits only by a rule below that proves it maps rows to rows; any other op, or an op the rules
do not cover (a reduction over the batch axis, a Reshape that mixes rows, a loop whose condition
reads the rows), makes the model unsplittable, with that op as the reason. The inputs' batch axes
are not declared in ONNX: every assignment of one axis (or none) per tensor input is tried, and the
splittable ones are kept, best first (see `plan`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Union

import numpy as np

from .ir import Graph, If, Loop, Op, Region, TensorType

FREE = None


@dataclass(frozen=True)
class Rows:
    axis: int


@dataclass(frozen=True)
class Size:
    pass


@dataclass(frozen=True)
class ShapeVec:
    axis: int
    dims: tuple  # one entry per element: int, symbolic name, "B" (the batch size) or None (unknown)


Label = Union[None, Rows, Size, ShapeVec]


class NotSplittable(Exception):
    """The model mixes batch rows (or the rules cannot prove it does not): the op and why."""


@dataclass(frozen=True)
class Split:
    """A way to split a model's batch: each input's batch axis (None: passed whole), each output's."""

    inputs: tuple[int | None, ...]
    outputs: tuple[int | None, ...]


MAX_ASSIGNMENTS = 256  # of input axes tried; a model with more combinations is not split


def plan(graph: Graph) -> tuple[list[Split], str | None]:
    """The ways to split `graph`'s batch (every input axis assignment that the rules prove
    splittable and that splits at least one input and one output), and, when there is none, why."""
    choices = []
    for name in graph.inputs:
        t = graph.type_of(name)
        if not isinstance(t, TensorType) or t.shape is None:
            choices.append([FREE])
        else:  # (never an axis of fixed size: compiled code may rely on it, and the parts would differ)
            choices.append([FREE] + [Rows(k) for k in range(len(t.shape)) if not isinstance(t.shape[k], int)])
    combos = list(itertools.islice(itertools.product(*choices), MAX_ASSIGNMENTS + 1))
    if len(combos) > MAX_ASSIGNMENTS:
        return [], f"more than {MAX_ASSIGNMENTS} ways to choose the inputs' batch axes"
    found, reason = [], "no input has an axis of a size the model leaves open"
    for combo in combos:
        if all(c is FREE for c in combo):
            continue
        try:
            outputs = label_graph(graph, list(combo))
        except NotSplittable as e:
            reason = str(e)
            continue
        if any(isinstance(o, (Size, ShapeVec)) for o in outputs) or all(o is FREE for o in outputs):
            reason = "no output holds the batch's rows"
            continue
        found.append(Split(tuple(c.axis if c else None for c in combo), tuple(o.axis if o else None for o in outputs)))
    # Splitting more inputs means fewer copies of whole inputs per part; ties keep the first axis.
    found.sort(key=lambda s: -sum(a is not None for a in s.inputs))
    return found, (None if found else reason)


def label_graph(graph: Graph, inputs: list[Label]) -> list[Label]:
    """The labels of `graph`'s outputs, given its inputs' labels; NotSplittable if an op mixes rows."""
    labels: dict[str, Label] = dict(zip(graph.inputs, inputs))
    for name in graph.constants:
        labels[name] = FREE
    env = _Env(graph, labels)
    for op in graph.ops:
        outs = _label_op(op, [labels.get(n, FREE) if n else FREE for n in op.inputs], env)
        if outs is None:
            raise NotSplittable(f"{op.where()}: mixes the rows of the batch (or no rule proves it does not)")
        labels.update(zip(op.outputs, outs))
    return [labels.get(n, FREE) for n in graph.outputs]


class _Env:
    """What the rules read besides labels: constant values and static dims of the graph's values."""

    def __init__(self, graph: Graph, labels: dict[str, Label]):
        self.graph, self.labels = graph, labels
        self.dims_override: dict[str, tuple] = {}

    def const(self, name: str) -> np.ndarray | None:
        return self.graph.constants.get(name) if name else None

    def rank(self, name: str) -> int | None:
        t = self.graph.type_of(name)
        return len(t.shape) if isinstance(t, TensorType) and t.shape is not None else None

    def dims(self, name: str) -> tuple | None:
        if name in self.dims_override:
            return self.dims_override[name]
        t = self.graph.type_of(name)
        return tuple(t.shape) if isinstance(t, TensorType) and t.shape is not None else None


def _ints(env: _Env, name: str) -> list[int] | None:
    value = env.const(name)
    return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


def _axis(axis: int, rank: int | None) -> int | None:
    if axis >= 0:
        return axis
    return None if rank is None else axis + rank


def _elementwise(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    """NumPy broadcasting: rows stay rows if every input with rows has them on the same output axis
    and every FREE input has size 1 (or no axis) there."""
    ranks = [env.rank(n) if n else 0 for n in op.inputs]
    if any(isinstance(x, (Size, ShapeVec)) for x in ins) or (any(ins) and None in ranks):
        return None
    if not any(ins):
        return [FREE] * len(op.outputs)
    out_rank = max(ranks)
    axes = {x.axis + out_rank - r for x, r in zip(ins, ranks) if isinstance(x, Rows)}
    if len(axes) != 1:
        return None
    axis = axes.pop()
    for name, x, r in zip(op.inputs, ins, ranks):
        if x is FREE and name:
            k = axis - (out_rank - r)
            dims = env.dims(name)
            if k >= 0 and (dims is None or dims[k] != 1):
                return None
    return [Rows(axis)] * len(op.outputs)


def _matmul(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    a, b = ins
    if a is FREE and b is FREE:
        return [FREE]
    ra, rb = env.rank(op.inputs[0]), env.rank(op.inputs[1])
    if ra is None or rb is None or ra < 2 or rb < 2:
        return None
    out = max(ra, rb)
    if isinstance(a, Rows) and b is FREE and a.axis != ra - 1:
        # Rows of A's matrices, or a leading axis of A that B broadcasts along (size 1 or absent).
        k = a.axis - (ra - rb)  # the same axis of B
        if a.axis == ra - 2 or k < 0 or (env.dims(op.inputs[1]) or (None,) * rb)[k] == 1:
            return [Rows(a.axis + out - ra)]
        return None
    if isinstance(a, Rows) and isinstance(b, Rows) and a.axis < ra - 2 and b.axis < rb - 2 \
            and a.axis + out - ra == b.axis + out - rb:
        return [Rows(a.axis + out - ra)]  # (a batched product, each of the batch's matrices its own)
    return None


def _gemm(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    a, b = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else FREE
    if a is FREE and b is FREE and c is FREE:
        return [FREE]
    if a == Rows(1 if op.attrs.get("transA") else 0) and b is FREE and c is FREE:
        dims = env.dims(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] else None
        if len(op.inputs) > 2 and op.inputs[2] and (dims is None or (len(dims) == 2 and dims[0] != 1)):
            return None
        return [Rows(0)]
    return None


def _transpose(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    x = ins[0]
    if not isinstance(x, Rows):
        return [FREE] if x is FREE else None
    rank = env.rank(op.inputs[0])
    perm = op.attrs.get("perm") or (list(range(rank))[::-1] if rank else None)
    return None if perm is None else [Rows(list(perm).index(x.axis))]


def _unsqueeze(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    x, axes = ins[0], _ints(env, op.inputs[1]) if len(op.inputs) > 1 else op.attrs.get("axes")
    if x is FREE:
        return [FREE]
    if axes is None:
        return None
    if isinstance(x, Size):  # the batch size as a shape of one element
        return [ShapeVec(0, ("B",))] if axes in ([0], [-1]) else None
    if not isinstance(x, Rows):
        return None
    rank = (env.rank(op.inputs[0]) or 0) + len(axes)
    axes = sorted(_axis(a, rank) for a in axes)
    k = x.axis
    for a in axes:  # the input's axes fill the output's places left free, in order
        if a <= k:
            k += 1
    return [Rows(k)]


def _squeeze(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    x = ins[0]
    if x is FREE:
        return [FREE]
    axes = _ints(env, op.inputs[1]) if len(op.inputs) > 1 and op.inputs[1] else op.attrs.get("axes")
    rank = env.rank(op.inputs[0])
    if isinstance(x, ShapeVec) and x.dims == ("B",) and axes in ([0], [-1], None):
        return [Size()]
    if not isinstance(x, Rows) or axes is None or rank is None:
        return None  # (without axes, a part of one row would lose its batch axis)
    axes = [_axis(a, rank) for a in axes]
    if x.axis in axes:
        return None
    return [Rows(x.axis - sum(a < x.axis for a in axes))]


def _along(op: Op, ins: list[Label], env: _Env, axis_of=lambda op: op.attrs.get("axis", 0)) -> list[Label] | None:
    """Ops that work along one axis (Concat, Split, Softmax, ...): fine unless it is the batch axis."""
    labelled = [x for x in ins if x is not FREE]
    if not labelled:
        return [FREE] * len(op.outputs)
    if any(not isinstance(x, Rows) for x in labelled) or len(set(labelled)) != 1:
        return None
    rows = labelled[0]
    axis = _axis(axis_of(op), env.rank(op.inputs[0]))
    if axis is None or axis == rows.axis:
        return None
    return [rows] * len(op.outputs)


def _concat(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    if any(isinstance(x, (Size, ShapeVec)) for x in ins):  # a shape assembled from parts
        if op.attrs.get("axis", 0) not in (0, -1):
            return None
        dims, at = [], None
        for name, x in zip(op.inputs, ins):
            if isinstance(x, ShapeVec):
                if at is not None:
                    return None
                at = len(dims) + x.axis
                dims += x.dims
            elif x is FREE and (value := _ints(env, name)) is not None:
                dims += value
            elif x is FREE and env.dims_override.get(name) is not None:
                dims += env.dims_override[name]
            else:
                return None
        return [ShapeVec(at, tuple(dims))]
    if any(x is FREE for x in ins) and any(ins):
        return None  # a whole FREE tensor beside rows would need one copy per row
    return _along(op, ins, env)


def _shape(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    x = ins[0]
    dims = env.dims(op.inputs[0])
    if dims is None:
        return None if x is not FREE else [FREE]
    rank = len(dims)
    start = _axis(op.attrs.get("start", 0), rank)
    end = op.attrs.get("end")
    end = rank if end is None else _axis(end, rank)
    start, end = max(0, min(start, rank)), max(0, min(end, rank))
    picked = tuple("B" if isinstance(x, Rows) and k == x.axis else d for k, d in enumerate(dims))[start:end]
    if isinstance(x, Rows) and start <= x.axis < end:
        return [ShapeVec(x.axis - start, picked)]
    if x is FREE or isinstance(x, Rows):
        # (the other dims of a tensor with rows: the same in every part; remembered for Concat)
        env.dims_override[op.outputs[0]] = picked
        return [FREE]
    return None


def _gather(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    data, indices = ins
    axis = op.attrs.get("axis", 0)
    if isinstance(data, ShapeVec) and indices is FREE:
        picked = _ints(env, op.inputs[1])
        if picked is None:
            return None
        n = len(data.dims)
        picked = [p + n if p < 0 else p for p in picked]
        if data.axis not in picked:
            env.dims_override[op.outputs[0]] = tuple(data.dims[p] for p in picked if 0 <= p < n)
            return [FREE]
        scalar = np.ndim(env.const(op.inputs[1])) == 0
        return [Size()] if scalar else [ShapeVec(picked.index(data.axis), tuple(data.dims[p] for p in picked))]
    rank, irank = env.rank(op.inputs[0]), env.rank(op.inputs[1])
    if data is FREE and indices is FREE:
        return [FREE]
    if rank is None or irank is None:
        return None
    axis = _axis(axis, rank)
    if isinstance(data, Rows) and indices is FREE and data.axis != axis:
        return [Rows(data.axis if data.axis < axis else data.axis + irank - 1)]
    if data is FREE and isinstance(indices, Rows):  # an embedding looked up per row
        return [Rows(axis + indices.axis)]
    return None


def _slice(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    data = ins[0]
    if any(x is not FREE for x in ins[1:]):
        return None
    if data is FREE:
        return [FREE]
    if not isinstance(data, Rows):
        return None
    rank = env.rank(op.inputs[0])
    axes = _ints(env, op.inputs[3]) if len(op.inputs) > 3 and op.inputs[3] else (list(range(rank)) if rank else None)
    if axes is None or rank is None:
        return None
    if data.axis in [_axis(a, rank) for a in axes]:
        return None  # (a slice of the batch axis would take other rows in each part)
    return [data]


def _reshape(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    x, shape = ins
    if x is FREE and shape is FREE:
        return [FREE]
    if not isinstance(x, Rows):
        return None
    dims = env.dims(op.inputs[0])
    if dims is None:
        return None
    before = list(dims[:x.axis])
    if isinstance(shape, ShapeVec):
        target = list(shape.dims[:shape.axis])
    elif shape is FREE and (value := _ints(env, op.inputs[1])) is not None:
        # A constant shape holds no batch size: only 0s (copy the input's dim) up to the batch axis.
        if op.attrs.get("allowzero", 0) or any(v != 0 for v in value[:x.axis + 1]):
            return None
        return [x]
    else:
        return None
    # The rows stay apart when the dims before the batch axis are the same ones: proved by equal
    # sizes or equal symbolic names (ONNX's inference gives one name to one size).
    if len(target) != len(before) or any(a is None or b is None or a != b for a, b in zip(target, before)):
        return None
    return [Rows(shape.axis)]


def _expand(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    x, shape = ins
    if x is FREE and shape is FREE:
        return [FREE]
    if isinstance(shape, ShapeVec) and x is FREE:  # zeros or a row broadcast to the batch's shape
        dims = env.dims(op.inputs[0])
        if dims is None:
            return None
        k = shape.axis - (len(shape.dims) - len(dims))
        return [Rows(shape.axis)] if k < 0 or dims[k] == 1 else None
    value = _ints(env, op.inputs[1])
    rank = env.rank(op.inputs[0])
    if isinstance(x, Rows) and shape is FREE and value is not None and rank is not None:
        out = max(rank, len(value))
        k = x.axis + out - rank - (out - len(value))  # the batch axis's entry of the shape
        return [Rows(x.axis + out - rank)] if k < 0 or value[k] == 1 else None
    return None


def _constant_of_shape(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    shape = ins[0]
    if shape is FREE:
        return [FREE]
    return [Rows(shape.axis)] if isinstance(shape, ShapeVec) else None


def _reduce(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    x = ins[0]
    if all(i is FREE for i in ins):
        return [FREE]
    if not isinstance(x, Rows) or any(i is not FREE for i in ins[1:]):
        return None
    rank = env.rank(op.inputs[0])
    if len(op.inputs) > 1 and op.inputs[1]:
        axes = _ints(env, op.inputs[1])
    else:
        axes = op.attrs.get("axes")
        if axes is None and not op.attrs.get("noop_with_empty_axes", 0):
            return None  # (every axis)
        axes = axes or []
    if axes is None or rank is None:
        return None
    axes = [_axis(a, rank) for a in axes]
    if x.axis in axes:
        return None
    keep = op.attrs.get("keepdims", 1)
    return [Rows(x.axis if keep else x.axis - sum(a < x.axis for a in axes))]


def _arg(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    x = ins[0]
    if x is FREE:
        return [FREE]
    rank = env.rank(op.inputs[0])
    axis = _axis(op.attrs.get("axis", 0), rank) if rank is not None else None
    if not isinstance(x, Rows) or axis is None or axis == x.axis:
        return None
    return [Rows(x.axis if op.attrs.get("keepdims", 1) or x.axis < axis else x.axis - 1)]


def _batch_first(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    """Ops over [N, C, ...] whose other inputs are weights (Conv, pools, instance norms): row n alone."""
    x = ins[0]
    if all(i is FREE for i in ins):
        return [FREE] * len(op.outputs)
    if x != Rows(0) or any(i is not FREE for i in ins[1:]):
        return None
    return [Rows(0)] * len(op.outputs)


def _layer_norm(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    x = ins[0]
    if all(i is FREE for i in ins):
        return [FREE] * len(op.outputs)
    rank = env.rank(op.inputs[0])
    axis = _axis(op.attrs.get("axis", -1), rank) if rank is not None else None
    if not isinstance(x, Rows) or axis is None or x.axis >= axis or any(i is not FREE for i in ins[1:]):
        return None
    return [x] + [x] * (len(op.outputs) - 1)


def _loop(op: Loop, ins: list[Label], env: _Env) -> list[Label] | None:
    if ins[0] is not FREE or ins[1] is not FREE:
        return None  # (a trip count or condition from the rows would differ between parts)
    carried, sliced, invariant = op.input_groups()
    nc, ns = op.n_carried, len(op.sliced)
    c_in = ins[2:2 + nc]
    s_in = ins[2 + nc:2 + nc + ns]
    i_in = ins[2 + nc + ns:]
    parts = []
    for source, x, how in zip(sliced, s_in, op.sliced):
        if x is FREE:
            parts.append(FREE)
            continue
        if not isinstance(x, Rows):
            return None
        axis = _axis(how.axis, env.rank(source))
        if axis is None or axis == x.axis:
            return None
        parts.append(Rows(x.axis if how.keep_axis or x.axis < axis else x.axis - 1))
    state = list(c_in)
    if any(isinstance(x, (Size, ShapeVec)) for x in state + i_in):
        return None
    lead = [FREE] * (int(op.body_iteration) + int(op.body_cond_in))
    for _ in range(3):  # carried labels to a fixed point: FREE may become rows once
        outs = label_graph(op.body, lead + state + parts + list(i_in))
        cond, nxt, stacked = outs[:int(op.body_cond_out)], outs[int(op.body_cond_out):int(op.body_cond_out) + nc], \
            outs[int(op.body_cond_out) + nc:]
        if any(c is not FREE for c in cond):
            return None  # (the loop would stop at another iteration in each part)
        if nxt == state:
            break
        if any(a is not FREE and a != b for a, b in zip(state, nxt)):
            return None
        state = nxt
    else:
        return None
    if any(isinstance(x, (Size, ShapeVec)) for x in nxt + stacked):
        return None
    results = list(state)
    for x, how, value in zip(stacked, op.stacked, op.body_groups()[2]):
        if x is FREE:
            results.append(FREE)
            continue
        rank = op.body.type_of(value)
        rank = len(rank.shape) if isinstance(rank, TensorType) and rank.shape is not None else None
        if how.concat:
            axis = _axis(how.axis, rank)
            if axis is None or axis == x.axis:
                return None
            results.append(x)
        else:
            axis = _axis(how.axis, None if rank is None else rank + 1)
            if axis is None:
                return None
            results.append(Rows(x.axis + 1 if axis <= x.axis else x.axis))
    # The stacked outputs' first dim: the iteration count, which with only slices to count is the
    # sliced axis's size (so a Reshape after the loop can be proved to keep rows apart).
    if op.inputs[0] == "" and op.inputs[1] == "" and not op.body_cond_out and len(sliced) == 1 \
            and op.sliced[0].part == 1 and op.sliced[0].start == 0 and op.sliced[0].end is None \
            and op.sliced[0].stride == 1:
        source = env.dims(sliced[0])
        axis = _axis(op.sliced[0].axis, len(source) if source else None)
        for name, how, x in zip(op.outputs[nc:], op.stacked, stacked):
            dims = env.dims(name)
            if source is not None and axis is not None and dims is not None and not how.concat and how.axis == 0:
                env.dims_override[name] = (source[axis],) + dims[1:]
    return results


def _if(op: If, ins: list[Label], env: _Env) -> list[Label] | None:
    if ins[0] is not FREE:
        return None
    then = label_graph(op.then_graph, ins[1:])
    other = label_graph(op.else_graph, ins[1:])
    return then if then == other else None


def _region(op: Region, ins: list[Label], env: _Env) -> list[Label] | None:
    return label_graph(op.body, ins)


_RULES = {
    "MatMul": _matmul, "Gemm": _gemm, "Transpose": _transpose, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze,
    "Concat": _concat, "Shape": _shape, "Gather": _gather, "Slice": _slice, "Reshape": _reshape,
    "Expand": _expand, "ConstantOfShape": _constant_of_shape, "ArgMax": _arg, "ArgMin": _arg,
    "LayerNormalization": _layer_norm, "Loop": _loop, "If": _if, "Region": _region,
    "Split": _along, "Softmax": lambda op, ins, env: _along(op, ins, env, lambda op: op.attrs.get("axis", -1)),
    "LogSoftmax": lambda op, ins, env: _along(op, ins, env, lambda op: op.attrs.get("axis", -1)),
    "Hardmax": lambda op, ins, env: _along(op, ins, env, lambda op: op.attrs.get("axis", -1)),
    **{op: _reduce for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2",
                              "ReduceLogSumExp")},
    **{op: _batch_first for op in ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool",
                                   "GlobalMaxPool", "InstanceNormalization", "GroupNormalization",
                                   "BatchNormalization")},
}


def _label_op(op: Op, ins: list[Label], env: _Env) -> list[Label] | None:
    from .codegen.scalar import ELEMENTWISE
    if op.op_type in ("Identity", "Dropout") and len(op.outputs) == 1:
        return [ins[0]]
    if op.op_type in ELEMENTWISE or op.op_type == "CastLike":
        if all(x is FREE for x in ins):
            return [FREE] * len(op.outputs)
        if op.op_type == "Cast" and isinstance(ins[0], (Size, ShapeVec)):  # (int64 to int64 and back)
            return [ins[0]]
        return _elementwise(op, ins, env)
    rule = _RULES.get(op.op_type)
    if rule is None:
        return [FREE] * len(op.outputs) if all(x is FREE for x in ins) and not op.subgraphs else None
    return rule(op, ins, env)


def describe(splits: list[Split], reason: str | None, graph: Graph) -> str:
    if not splits:
        return f"the batch is not split over threads: {reason}"
    s = splits[0]
    where = ", ".join(f"{n} axis {a}" for n, a in zip(graph.inputs, s.inputs) if a is not None)
    return f"the batch may be split over threads along {where}"

