"""Type inference over the IR: every value's most precise type, into loop bodies and branches.

Exporters often declare loop body values by element type alone, or sequences with elements of
unknown shape, while kernels need a dtype and a rank for every value. This pass derives them from
the loop's inputs and the ops (ONNX's per-node inference), to a fixed point over carried values.
A declared type is never made less precise: inference fills in what the declaration leaves
unknown, and where the two contradict the declaration stays, for verify and the kernels to report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

import numpy as np

from .infer import infer
from .ir import Graph, If, Loop, Op, OptionalType, SequenceType, Slice, Stack, TensorType, Type, iter_ops

# Rounds of a loop body before its carried types are widened to dtype only. Types only lose
# precision from round to round (a dim becomes unknown, then the rank), so most loops are stable
# in two rounds; the bound keeps a deep nest of loops from costing rounds to the power of depth.
MAX_ROUNDS = 6

_INT64, _BOOL = np.dtype(np.int64), np.dtype(np.bool_)


@dataclass(frozen=True)
class _NoElements:
    """The element type of a sequence known to be empty (SequenceEmpty): joined with an element
    type it gives that type, so the sequences a loop grows from empty get their elements' shape.
    Only this pass sees it; the graph gets a tensor type of unknown rank instead."""

    dtype: np.dtype | None


_Inferred = Union[Type, _NoElements, None]  # None: nothing known


def infer_types(graph: Graph) -> Graph:
    """Refine the types of `graph` and of every subgraph in it, in place; returns `graph`."""
    declared = {id(g): dict(g.types) for g in [graph, *(s for op in iter_ops(graph) for s in op.subgraphs)]}
    _Inference(declared).graph(graph, [graph.type_of(n) for n in graph.inputs], {})
    return graph


class _Inference:
    """One run of the pass: the declared types of every graph, and ONNX's answers so far."""

    def __init__(self, declared: dict[int, dict[str, Type]]):
        # A loop body is inferred once per round; it starts from its declared types every time, so
        # that an early round's guess about a carried value never sticks.
        self.declared = declared
        self.memo: dict[tuple, list] = {}  # (id(op), input types) -> output types

    def graph(self, g: Graph, input_types: list[_Inferred], values: dict[str, np.ndarray]) -> dict[str, _Inferred]:
        """The types of g's values given its inputs' types (and constant values); writes g.types."""
        declared = self.declared[id(g)]
        env: dict[str, _Inferred] = {}

        def found(name: str, t: _Inferred) -> None:
            env[name] = refine(declared.get(name), t)

        for name, t in zip(g.inputs, input_types):
            found(name, t)
        values = {**values, **g.constants}
        for name, value in g.constants.items():
            exact = isinstance(value, np.ndarray) and value.dtype != object
            found(name, TensorType(value.dtype, value.shape) if exact else None)
        for op in g.ops:
            ins = [env.get(n) if n else None for n in op.inputs]
            if isinstance(op, Loop):
                outs = self.loop(op, ins, values)
            elif isinstance(op, If):
                outs = self.branches(op, ins, values)
            elif all(_complete(declared.get(n)) for n in op.outputs if n):
                outs = [None] * len(op.outputs)  # nothing to add: most ops outside loops, typed by ONNX
            else:
                outs = self.op(op, ins, values)
            for name, t in zip(op.outputs, outs):
                if name:
                    found(name, t)
        g.types.clear()
        g.types.update(declared)
        g.types.update((n, t) for n, t in ((n, refine(declared.get(n), public(t))) for n, t in env.items())
                       if t is not None)
        return env

    def op(self, op: Op, ins: list[_Inferred], values: dict[str, np.ndarray]) -> list[_Inferred]:
        """The output types of a plain op; unknown where ONNX's inference cannot say."""
        if op.op_type == "SequenceEmpty":
            return [SequenceType(_NoElements(np.dtype(op.attrs.get("dtype", np.float32))))]
        if op.op_type == "Identity":
            return ins[:1]
        if op.op_type == "SequenceInsert" and len(ins) >= 2 and isinstance(ins[0], SequenceType):
            # ONNX keeps an unknown element shape unknown; the inserted tensor's type refines it.
            return [SequenceType(join(ins[0].elem, ins[1]) or TensorType())]
        args = [public(t) for t in ins]
        key = (id(op), *map(_key, args))
        if key not in self.memo:
            try:
                self.memo[key] = infer(op, args, {n: values[n] for n in op.inputs if n in values})
            except Exception:  # inference is advice: an op it rejects or does not know keeps its declared type
                self.memo[key] = [None] * len(op.outputs)
        return self.memo[key]

    def loop(self, op: Loop, ins: list[_Inferred], values: dict[str, np.ndarray]) -> list[_Inferred]:
        """The loop's output types; its body's types, to a fixed point over the carried values."""
        body, nc, ns = op.body, op.n_carried, len(op.sliced)
        params = [TensorType(_INT64, ())] * op.body_iteration + [TensorType(_BOOL, ())] * op.body_cond_in
        if len(ins) != 2 + nc + ns + op.n_invariant or len(body.inputs) != len(params) + len(ins) - 2 \
                or len(body.outputs) != op.body_cond_out + nc + len(op.stacked):
            self.graph(body, [None] * len(body.inputs), {})  # ports that do not fit: verify says so
            return [None] * len(op.outputs)
        carried, sources, invariants = ins[2:2 + nc], ins[2 + nc:2 + nc + ns], ins[2 + nc + ns:]
        slices = [_part(t, spec) for t, spec in zip(sources, op.sliced)]
        inner = body.inputs[len(body.inputs) - op.n_invariant:]
        outer = op.inputs[len(op.inputs) - op.n_invariant:]
        known = {i: values[o] for o, i in zip(outer, inner) if o in values}
        _, nexts, stacked = op.body_groups()
        for round_ in range(MAX_ROUNDS + 1):
            if round_ == MAX_ROUNDS:  # not stable yet: assume only what no iteration can change
                carried = [_widened(t) for t in carried]
            env = self.graph(body, [*params, *carried, *slices, *invariants], known)
            merged = [join(t, env.get(n)) for t, n in zip(carried, nexts)]
            if list(map(_key, merged)) == list(map(_key, carried)) or round_ == MAX_ROUNDS:
                break
            carried = merged
        return [*carried, *(_stacked(env.get(n), spec) for n, spec in zip(stacked, op.stacked))]

    def branches(self, op: If, ins: list[_Inferred], values: dict[str, np.ndarray]) -> list[_Inferred]:
        """The If's output types: what both branches' outputs have in common."""
        results = []
        for branch in (op.then_graph, op.else_graph):
            captures = ins[1:] if len(branch.inputs) == len(ins) - 1 else [None] * len(branch.inputs)
            known = {i: values[o] for o, i in zip(op.inputs[1:], branch.inputs) if o in values}
            env = self.graph(branch, captures, known)
            results.append([env.get(n) for n in branch.outputs])
        return [join(a, b) for a, b in zip(*results)]


def join(a: _Inferred, b: _Inferred) -> _Inferred:
    """The most precise type that holds both a value of type a and one of type b."""
    if isinstance(b, _NoElements):
        a, b = b, a
    if isinstance(a, _NoElements):  # no elements yet: the other side's elements are all there are
        if not isinstance(b, (TensorType, _NoElements)):
            return None
        # (SequenceInsert needs the element's dtype to be the sequence's, so one may stand for both.)
        dtype = b.dtype if a.dtype is None else a.dtype if b.dtype is None else _common(a.dtype, b.dtype)
        return _NoElements(dtype) if isinstance(b, _NoElements) else TensorType(dtype, b.shape)
    if a is None or b is None or type(a) is not type(b):
        return None
    if isinstance(a, (SequenceType, OptionalType)):
        return type(a)(join(a.elem, b.elem) or TensorType())
    dtype = _common(a.dtype, b.dtype)
    if a.shape is None or b.shape is None or len(a.shape) != len(b.shape):
        return TensorType(dtype, None)
    return TensorType(dtype, tuple(x if x == y else None for x, y in zip(a.shape, b.shape)))


def refine(declared: Type | None, inferred: _Inferred) -> _Inferred:
    """`declared` with the unknowns `inferred` knows filled in; `declared` itself where they contradict."""
    if declared is None:
        return inferred
    if inferred is None:
        return declared
    if isinstance(inferred, _NoElements):  # an empty sequence's elements fit any declared element type
        if not isinstance(declared, TensorType) or _clash(declared.dtype, inferred.dtype):
            return declared
        return _NoElements(declared.dtype if inferred.dtype is None else inferred.dtype)
    if type(declared) is not type(inferred):
        return declared
    if isinstance(declared, (SequenceType, OptionalType)):
        return type(declared)(refine(declared.elem, inferred.elem))
    if _clash(declared.dtype, inferred.dtype):
        return declared
    dtype = declared.dtype if declared.dtype is not None else inferred.dtype
    if declared.shape is None or inferred.shape is None:
        return TensorType(dtype, inferred.shape if declared.shape is None else declared.shape)
    if len(declared.shape) != len(inferred.shape):
        return declared
    dims = []
    for d, i in zip(declared.shape, inferred.shape):
        if isinstance(d, int) and isinstance(i, int) and d != i:
            return declared
        dims.append(max(d, i, key=_precision))  # the declared one when equally precise
    return TensorType(dtype, tuple(dims))


# Never `dtype == None`: NumPy reads None as float64 there, so np.dtype("float64") == None is True.

def _clash(a: np.dtype | None, b: np.dtype | None) -> bool:
    """Whether two dtypes are both known and differ."""
    return a is not None and b is not None and a != b


def _common(a: np.dtype | None, b: np.dtype | None) -> np.dtype | None:
    """The dtype both have, None when either is unknown or they differ."""
    return a if a is not None and b is not None and a == b else None


def _precision(dim) -> int:
    """How much a dim says: a fixed size more than a symbolic name, which says more than nothing."""
    return 2 if isinstance(dim, int) else 1 if isinstance(dim, str) else 0


def _key(t: _Inferred) -> tuple | None:
    """A type as plain values that compare without NumPy's reading of None as float64."""
    if isinstance(t, (SequenceType, OptionalType)):
        return type(t).__name__, _key(t.elem)
    if isinstance(t, (TensorType, _NoElements)):
        return type(t).__name__, None if t.dtype is None else t.dtype.str, getattr(t, "shape", None)
    return None


def public(t: _Inferred) -> Type | None:
    """The type as the rest of rnnloop knows types (an empty sequence's elements: rank unknown)."""
    if isinstance(t, _NoElements):
        return TensorType(t.dtype, None)
    if isinstance(t, (SequenceType, OptionalType)):
        return type(t)(public(t.elem))
    return t


def _complete(t: Type | None) -> bool:
    """Whether nothing about a type is unknown: a tensor of known dtype and fixed sizes."""
    return isinstance(t, TensorType) and t.dtype is not None and t.shape is not None \
        and all(isinstance(d, int) for d in t.shape)


def _widened(t: _Inferred) -> _Inferred:
    """The type with only its dtypes kept."""
    if isinstance(t, (SequenceType, OptionalType)):
        return type(t)(_widened(public(t.elem)) or TensorType())
    return TensorType(t.dtype, None) if isinstance(t, TensorType) else None


def _part(t: _Inferred, spec: Slice) -> _Inferred:
    """The type of one part of a sliced input of type t."""
    if not isinstance(t, TensorType) or t.shape is None:
        return TensorType(t.dtype, None) if isinstance(t, TensorType) else None
    rank = len(t.shape)
    if not -rank <= spec.axis < rank:  # the kernel and the interpreter report it
        return TensorType(t.dtype, None)
    axis = spec.axis % rank
    shape = list(t.shape)
    if spec.keep_axis:
        shape[axis] = spec.part
    else:
        del shape[axis]
    return TensorType(t.dtype, tuple(shape))


def _stacked(t: _Inferred, spec: Stack) -> _Inferred:
    """The type of a stacked output whose iterations give values of type t."""
    if not isinstance(t, TensorType) or t.shape is None:
        return TensorType(t.dtype, None) if isinstance(t, TensorType) else None
    shape, rank = list(t.shape), len(t.shape)
    if spec.concat:
        if not -rank <= spec.axis < rank:
            return TensorType(t.dtype, None)
        axis = spec.axis % rank
        size = shape[axis]
        # Padding adds whole iterations: `length` parts of the same size.
        shape[axis] = spec.length * size if spec.length is not None and isinstance(size, int) else None
    else:
        if not -rank - 1 <= spec.axis <= rank:
            return TensorType(t.dtype, None)
        shape.insert(spec.axis % (rank + 1), spec.length)
    return TensorType(t.dtype, tuple(shape))
