"""Runs an IR graph op by op: the executable specification of rnnloop and its fallback."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import OpError, RnnloopError, RunError
from ..ir import Graph, If, Loop, Op
from . import math_ops, sequence_ops, tensor_ops  # noqa: F401  (register the op functions)
from .registry import RUNNERS

# Ops whose output is a list no other value shares: a later SequenceInsert may extend it in place.
FRESH_LIST_OPS = {"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SplitToSequence"}


@dataclass
class Options:
    """Run-time options of the interpreter."""

    max_iterations: int | None = None
    # Loops that run as fused kernels, by id of their op: callables shaped like run_loop.
    kernels: dict[int, Callable] = field(default_factory=dict)


@dataclass
class _Step:
    op: Op
    run: Callable
    dies: frozenset[str]  # inputs whose last use in the graph is this op
    control: bool  # a loop or a branch: runs with the options (a fused kernel, maybe)
    fresh: bool  # its output is a list no other value shares


@dataclass
class GraphPlan:
    """A graph prepared for repeated runs: op functions looked up and last uses known."""

    graph: Graph
    steps: list[_Step] = field(default_factory=list)

    @classmethod
    def of(cls, graph: Graph) -> "GraphPlan":
        # Cached on the graph: loop bodies run once per iteration.
        plan = graph.__dict__.get("_plan")
        if plan is None:
            plan = cls(graph, _plan_steps(graph))
            graph.__dict__["_plan"] = plan
        return plan


def _plan_steps(graph: Graph) -> list[_Step]:
    last_use: dict[str, int] = {}
    for index, op in enumerate(graph.ops):
        for name in op.inputs:
            if name:
                last_use[name] = index
    kept = set(graph.outputs)
    steps = []
    for index, op in enumerate(graph.ops):
        dies = frozenset(n for n in op.inputs if n and last_use[n] == index and n not in kept)
        run = _runner(op)
        steps.append(_Step(op, run, dies, run is run_if or isinstance(op, Loop), op.op_type in FRESH_LIST_OPS))
    return steps


def _runner(op: Op) -> Callable:
    if isinstance(op, Loop):
        from .loop import run_loop
        return run_loop
    if isinstance(op, If):
        return run_if
    try:
        return RUNNERS[op.op_type]
    except KeyError:
        raise RunError(f"{op.where()}: the interpreter has no function for '{op.op_type}'") from None


def run_graph(graph: Graph, args: Sequence[Any], options: Options,
              owned: Sequence[bool] | None = None) -> tuple[list[Any], list[bool]]:
    """Run `graph` on `args`; returns its outputs and, per output, whether the caller may mutate it.

    `owned[k]` says the caller hands over argument k: a list nobody else holds, which SequenceInsert
    may then extend in place. That keeps a sequence built up in a loop O(1) amortised per append.
    """
    plan = GraphPlan.of(graph)
    env: dict[str, Any] = dict(graph.constants)
    env.update(zip(graph.inputs, args))
    mine = {n for n, o in zip(graph.inputs, owned or ()) if o}
    for step in plan.steps:
        op = step.op
        values = [env[n] if n else None for n in op.inputs]
        owns_first = bool(mine) and bool(op.inputs) and op.inputs[0] in mine and op.inputs[0] in step.dies
        if owns_first and op.op_type == "SequenceInsert":
            result = _insert_in_place(op, *values)
        elif step.control:
            run = options.kernels.get(id(op), step.run)
            result = run(op, values, options)
        else:
            result = _call(step.run, op, values)
        results = result if isinstance(result, tuple) else (result,)
        if len(results) < len(op.outputs):
            raise RunError(f"{op.where()}: produced {len(results)} outputs, the model expects {len(op.outputs)}")
        for name, value in zip(op.outputs, results):
            if name:
                env[name] = value
        if mine:
            mine -= step.dies
        if step.fresh or (owns_first and op.op_type == "Identity"):
            mine.add(op.outputs[0])
    outputs = [env[n] for n in graph.outputs]
    seen: set[str] = set()
    handed = []
    for name in graph.outputs:
        handed.append(name in mine and name not in seen)
        seen.add(name)
    return outputs, handed


def _insert_in_place(op: Op, seq: list, tensor: Any, position: Any = None) -> list:
    """SequenceInsert on a list this graph owns and no longer needs: extend it instead of copying."""
    if position is None:
        seq.append(tensor)
        return seq
    index = int(np.asarray(position).reshape(-1)[0])
    if not -len(seq) <= index <= len(seq):
        raise RunError(f"{op.where()}: position {index} is outside [-{len(seq)}, {len(seq)}] "
                       "for a sequence of that length")
    seq.insert(index if index >= 0 else index + len(seq), tensor)
    return seq


def run_op(op: Op, values: list[Any]) -> Any:
    """Run one op that is neither a loop nor a branch on its input values."""
    return _call(_runner(op), op, values)


def _call(fn: Callable, op: Op, values: list[Any]) -> Any:
    try:
        result = fn(*values, **op.attrs)
    except RnnloopError as e:
        if isinstance(e, OpError):
            raise RunError(f"{op.where()}: {e}") from e
        raise
    except Exception as e:  # numpy errors on bad values: name the node
        raise RunError(f"{op.where()}: {type(e).__name__}: {e}") from e
    if isinstance(result, tuple):
        return tuple(_as_value(r) for r in result)
    return _as_value(result)


def _as_value(value: Any) -> Any:
    # NumPy reductions return scalars; the IR's tensors are always arrays.
    if isinstance(value, np.generic):
        return np.asarray(value)
    return value


def run_if(op: If, values: list[Any], options: Options) -> tuple:
    """Run the branch the condition selects on the captures."""
    cond = values[0]
    if cond is None or np.size(cond) != 1:
        raise RunError(f"{op.where()}: the condition must hold exactly one value, got shape {np.shape(cond)}")
    branch = op.then_graph if bool(np.asarray(cond).reshape(-1)[0]) else op.else_graph
    outputs, _ = run_graph(branch, values[1:], options)
    return tuple(outputs)
