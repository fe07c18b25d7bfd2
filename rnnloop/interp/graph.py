"""Runs an IR graph op by op: the executable specification of rnnloop and its fallback."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import OpError, RnnloopError, RunError
from ..ir import Graph, If, Loop, Op, Region
from . import conv_ops, math_ops, nn_ops, quant_ops, resize, sequence_ops, signal_ops, small_ops, tensor_ops  # noqa: F401  (register the op functions)
from .registry import RUNNERS

# Ops whose output is a list no other value shares: a later SequenceInsert may extend it in place.
FRESH_LIST_OPS = {"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SplitToSequence"}


@dataclass
class Options:
    """Run-time options of the interpreter."""

    max_iterations: int | None = None
    # Loops that run as fused kernels, by id of their op: callables shaped like run_loop.
    kernels: dict[int, Callable] = field(default_factory=dict)
    # Subgraphs (loop bodies, If branches) to run as another graph: the same with compiled regions
    # in place of their ops (plan.Plan.programs), by id of the subgraph.
    programs: dict[int, Graph] = field(default_factory=dict)
    # The threads a call may use, and the workers that share a kernel's products (codegen/pool.py).
    threads: int = 1
    pool: Any = None


# Ops that, given the shapes of the graph's inputs and its constants, compute the same small values
# every run: shape arithmetic (an RNN's output shape, a loop's trip count from its input's length).
_SHAPE_OF = {"Shape", "Size"}  # read only their input's shape
_SHAPE_MATH = {"Gather", "Squeeze", "Unsqueeze", "Concat", "Slice", "Add", "Sub", "Mul", "Div", "Cast",
               "Identity", "Max", "Min"}
_SHAPE_MEMO_SIZE = 16  # input shapes remembered per graph (a server sees few)


@dataclass
class _Step:
    op: Op
    run: Callable
    dies: frozenset[str]  # inputs whose last use in the graph is this op
    control: bool  # a loop or a branch: runs with the options (a fused kernel, maybe)
    fresh: bool  # its output is a list no other value shares
    shaped: bool = False  # its outputs follow from the input shapes alone (see GraphPlan)


@dataclass
class GraphPlan:
    """A graph prepared for repeated runs: op functions looked up and last uses known.

    The shape arithmetic on the graph's inputs (steps marked `shaped`) is remembered by the shapes
    of the inputs it reads (`shape_sources`): a run with shapes seen before takes the values other
    steps read from it (`shape_exits`) from `memo` instead of running those ops, a few microseconds
    each (an LSTM's run at batch 1: 20 instead of 26 µs besides its loop). The memo holds copies
    and hands out copies, so that nothing a reader does with a value (return it, keep it in a
    sequence) reaches a later run.
    """

    graph: Graph
    steps: list[_Step] = field(default_factory=list)
    shape_sources: list[str] = field(default_factory=list)
    shape_exits: list[str] = field(default_factory=list)
    memo: dict[tuple, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, graph: Graph) -> "GraphPlan":
        # Cached on the graph: loop bodies run once per iteration.
        plan = graph.__dict__.get("_plan")
        if plan is None:
            steps = _plan_steps(graph)
            shaped = [s.op for s in steps if s.shaped]
            sources = [op.inputs[0] for op in shaped if op.op_type in _SHAPE_OF]
            made = {n for op in shaped for n in op.outputs if n}
            exits = [n for s in steps if not s.shaped for n in s.op.inputs if n in made]
            plan = cls(graph, steps, list(dict.fromkeys(sources)), list(dict.fromkeys(exits)))
            graph.__dict__["_plan"] = plan
        return plan

    def remembered(self, env: dict[str, Any]) -> tuple[tuple | None, dict[str, Any] | None]:
        """The memo key of this run (None: shape arithmetic runs op by op) and the values it holds."""
        if not self.shape_sources:
            return None, None
        shapes = []
        for name in self.shape_sources:
            value = env.get(name)
            if not isinstance(value, np.ndarray):
                return None, None
            shapes.append(value.shape)
        key = tuple(shapes)
        found = self.memo.get(key)
        return key, None if found is None else {n: _copy(v) for n, v in found.items()}

    def remember(self, key: tuple, env: dict[str, Any]) -> None:
        if len(self.memo) >= _SHAPE_MEMO_SIZE:
            self.memo.clear()
        self.memo[key] = {n: _copy(env[n]) for n in self.shape_exits}


def _copy(value: Any) -> Any:
    return value.copy() if isinstance(value, np.ndarray) else value


def _plan_steps(graph: Graph) -> list[_Step]:
    last_use: dict[str, int] = {}
    for index, op in enumerate(graph.ops):
        for name in op.inputs:
            if name:
                last_use[name] = index
    kept = set(graph.outputs)
    known = set(graph.constants)  # values the shape arithmetic may read: constants, its own results
    steps = []
    for index, op in enumerate(graph.ops):
        dies = frozenset(n for n in op.inputs if n and last_use[n] == index and n not in kept)
        run = _runner(op)
        reads = [n for n in op.inputs if n]
        shaped = (type(op) is Op and not kept.intersection(op.outputs) and bool(reads)
                  and (op.op_type in _SHAPE_OF and reads[0] in graph.inputs
                       or op.op_type in _SHAPE_MATH and all(n in known for n in reads)))
        if shaped:
            known.update(n for n in op.outputs if n)
        steps.append(_Step(op, run, dies, isinstance(op, (Loop, If, Region)), op.op_type in FRESH_LIST_OPS,
                           shaped))
    return steps


def _runner(op: Op) -> Callable:
    if isinstance(op, Loop):
        from .loop import run_loop
        return run_loop
    if isinstance(op, If):
        return run_if
    if isinstance(op, Region):
        return run_region
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
    if options.programs:
        graph = options.programs.get(id(graph), graph)
    plan = GraphPlan.of(graph)
    env: dict[str, Any] = dict(graph.constants)
    env.update(zip(graph.inputs, args))
    mine = {n for n, o in zip(graph.inputs, owned or ()) if o}
    key, remembered = plan.remembered(env)
    if remembered is not None:
        env.update(remembered)
    for step in plan.steps:
        if remembered is not None and step.shaped:
            continue
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
    if key is not None and remembered is None:
        plan.remember(key, env)
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


def run_region(op: Region, values: list[Any], options: Options) -> tuple:
    """A region without its kernel is its body, op by op."""
    outputs, _ = run_graph(op.body, values, options)
    return tuple(outputs)
