"""Partition: the ops of a graph that compile, grouped into regions that each become one kernel.

An op is compilable when the code generator has a rule for it (a loop and an If are compiled with
their subgraphs) and every value it reads or writes is a numeric tensor of known dtype and rank.
Ops are staged so that no region needs an interpreted op in its middle: an op's stage is the
highest among the ops it reads from, plus one when it crosses between compiled and interpreted
code. The compilable ops of one stage form one region, run after every op of lower stages; a path
that leaves a region through an interpreted op can only re-enter compiled code at a later stage.

A region whose generation meets an op it cannot compile (a rule that does not cover this form)
leaves that op to the interpreter and is partitioned again; a region whose kernel does not
compile returns its ops to the graph, so a code generator bug costs speed, never the answer.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from .codegen.emitter import NoRule, debug_level, generator_failure
from .errors import FallbackWarning
from .ir import Graph, If, Loop, Op, Origin, Region, TensorType, iter_ops

# Ops that compute nothing: a region of nothing else is not worth a kernel call.
_FREE = {"Identity"}


@dataclass
class Partition:
    """A graph with regions in place of their ops, what compiles them, and what is interpreted."""

    graph: Graph
    compiled: list = field(default_factory=list)  # codegen.region.CompiledRegion, one per Region op
    interpreted: list[tuple[Op, str]] = field(default_factory=list)  # (op, why) in graph order
    failed: list[str] = field(default_factory=list)  # regions whose kernel did not compile, and why

    def whole(self):
        """The one compiled region that is the whole graph (None when there is none)."""
        graph = self.graph
        if len(graph.ops) == 1 and isinstance(graph.ops[0], Region) and self.compiled \
                and set(graph.outputs) <= set(graph.ops[0].outputs):
            return self.compiled[0]
        return None


def compile_regions(graph: Graph, label: str = "region") -> Partition:
    """Partition `graph` (its own ops; subgraphs are compiled with the loop or If that holds them)
    and compile each region's kernel."""
    from .codegen.region import CompiledRegion, generate_region

    left_out: dict[int, str] = {}
    for op in graph.ops:
        why = _why_not(op, graph)
        if why:
            left_out[id(op)] = why
    while True:  # generate every region; an op a rule refuses leaves its region, and again
        regions = [_region(graph, ops, f"{graph.name}/{label}{number}")
                   for number, ops in enumerate(_regions(graph, left_out), start=1)]
        kernels, failure = [], None
        for region in regions:
            try:
                kernels.append(generate_region(region.body, region.where()))
            except Exception as e:  # noqa: BLE001 - a code generator bug costs speed, not the answer
                if debug_level() >= 2 and not isinstance(e, NoRule):
                    raise
                failure = (region.body.ops, e if isinstance(e, NoRule) else generator_failure(e))
                break
        if failure is None:
            break
        ops, e = failure
        for op in _culprits(ops, e.op):
            left_out[id(op)] = str(e).removeprefix(f"{op.where()}: ")  # (explain() names the op)
    result = Partition(graph)
    placed: dict[int, Region] = {}
    for region, kernel in zip(regions, kernels):
        try:
            compiled = _compiled(region, kernel)
        except NoRule as e:
            result.failed.append(f"{region.where()} ({len(region.body.ops)} ops) did not compile: {e}")
            for op in region.body.ops:
                left_out[id(op)] = f"its region's kernel did not compile ({e})"
            continue
        result.compiled.append(compiled)
        for op in region.body.ops:
            placed[id(op)] = region
    # The program: the regions and the interpreted ops in an order that computes every value
    # before it is read (the stages guarantee there is one).
    program = _schedule(graph, placed)
    result.graph = Graph(graph.name, list(graph.inputs), list(graph.outputs), program,
                         dict(graph.constants), graph.types)
    result.interpreted = [(op, left_out[id(op)]) for op in graph.ops if id(op) not in placed]
    return result


def _compiled(region: Region, kernel):
    """The region's compiled kernel; if one that runs loops at once or shares loop nests with a worker
    does not compile, the kernel that runs them on one thread, with a warning (a bug of ours, which
    costs them a core, not the compiled region)."""
    from .codegen.region import CompiledRegion, generate_region
    try:
        return CompiledRegion(region, kernel)
    except NoRule as e:
        if not kernel.concurrent and not kernel.shared_calls:
            raise
        compiled = CompiledRegion(region, generate_region(region.body, region.where(), at_once=False))
        what = ("its loops run one after the other (running them at once" if kernel.concurrent else
                "its loop nests run on one thread (sharing them with a worker")
        warnings.warn(f"{region.where()}: {what} did not compile: {e}; please report it)", FallbackWarning,
                      stacklevel=5)
        return compiled


def _culprits(ops: list[Op], failed: Op | None) -> list[Op]:
    """The ops of a region to leave out when generating it failed at `failed`: the op itself, or
    the loop or If holding it in a subgraph (whose body the plan then partitions in turn); all of
    them when the failure names no op."""
    for op in ops:
        if op is failed or any(inner is failed for sub in op.subgraphs for inner in iter_ops(sub)):
            return [op]
    return ops


def _why_not(op: Op, graph: Graph) -> str:
    """Why `op` cannot be compiled, or "" when it may be."""
    from .codegen import conv, nn, quant, reductions, resize, rules, shapes, signal, small_ops  # noqa: F401  (they register the rules)
    from .codegen.kernel import RULES
    from .codegen.scalar import ELEMENTWISE
    if type(op) is Op and op.op_type not in RULES and op.op_type not in ELEMENTWISE:
        return f"no code generation rule for {op.op_type}"
    if not isinstance(op, (Loop, If)) and type(op) is not Op:
        return f"{op.op_type} is not compiled"
    for name in [*op.inputs, *op.outputs]:
        if not name:
            continue
        t = graph.type_of(name)
        if name in graph.constants:
            value = graph.constants[name]
            if isinstance(value, np.ndarray) and _numeric(value.dtype):
                continue
            return f"constant '{name}' is not a numeric tensor"
        if not (isinstance(t, TensorType) and t.dtype is not None and t.shape is not None):
            return f"'{name}' is not a tensor of known dtype and rank ({t})"
        if not _numeric(t.dtype):
            return f"'{name}' is {np.dtype(t.dtype)}, which kernels do not compute in"
    return ""


def _numeric(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind in "biuf" and dtype != np.float16


def _regions(graph: Graph, left_out: dict[int, str]) -> list[list[Op]]:
    """The compilable ops grouped by stage (see the module's docstring), in graph order; a group of
    ops that compute nothing is left to the interpreter."""
    stage_of: dict[str, tuple[int, bool]] = {}  # value -> (stage of its producer, compiled?)
    groups: dict[int, list[Op]] = {}
    for op in graph.ops:
        compiled = id(op) not in left_out
        stage = 0
        for name in op.inputs:
            if name in stage_of:
                s, by_kernel = stage_of[name]
                stage = max(stage, s + 1 if compiled and not by_kernel else s)
        for name in op.outputs:
            if name:
                stage_of[name] = (stage, compiled)
        if compiled:
            groups.setdefault(stage, []).append(op)
    regions = []
    for stage in sorted(groups):
        ops = groups[stage]
        if all(op.op_type in _FREE for op in ops):
            for op in ops:
                left_out[id(op)] = "it computes nothing"
            continue
        regions.append(ops)
    return regions


def _region(graph: Graph, ops: list[Op], label: str) -> Region:
    """The Region op `label` of `ops`: reads what they read from outside, gives what is read after them."""
    made = {n for op in ops for n in op.outputs if n}
    members = {id(op) for op in ops}
    inputs, constants = [], {}
    for op in ops:
        for name in op.inputs:
            if not name or name in made:
                continue
            if name in graph.constants:
                constants[name] = graph.constants[name]
            elif name not in inputs:
                inputs.append(name)
    read_after = {n for op in graph.ops if id(op) not in members for n in op.inputs}
    outputs = [n for op in ops for n in op.outputs if n and (n in read_after or n in graph.outputs)]
    body = Graph(f"{graph.name}/region", inputs, outputs, list(ops), constants, graph.types)
    return Region("Region", list(inputs), list(outputs), origin=Origin("rnnloop", label, "Region", None, "rnnloop"),
                  body=body)


def _schedule(graph: Graph, placed: dict[int, Region]) -> list[Op]:
    """The program's ops: a topological order of the interpreted ops and the regions."""
    ready = set(graph.inputs) | set(graph.constants)
    pending: list[Op] = []
    seen: set[int] = set()
    for op in graph.ops:
        region = placed.get(id(op))
        if region is None:
            pending.append(op)
        elif id(region) not in seen:
            seen.add(id(region))
            pending.append(region)
    program = []
    while pending:  # (a few passes: stages guarantee progress)
        rest = []
        for op in pending:
            if all(not n or n in ready for n in op.inputs):
                program.append(op)
                ready.update(n for n in op.outputs if n)
            else:
                rest.append(op)
        if len(rest) == len(pending):
            raise AssertionError(f"partition: no order for {[o.where() for o in rest]}")
        pending = rest
    return program
