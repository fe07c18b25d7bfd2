"""The plan: for each loop, a fused kernel or the interpreter, with the reason; and for every loop
body and If branch the interpreter runs, its compiled regions."""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass, field

from .codegen.emitter import NoRule, generator_failure
from .codegen.fused import FusedLoop, debug_level
from .codegen.region import CompiledRegion
from .errors import FallbackWarning, RnnloopError, UnsupportedModelError
from .ir import Graph, Loop, Region, iter_ops
from .partition import Partition, compile_regions

BACKENDS = ("numba", "interp")


@dataclass
class LoopPlan:
    """How one loop runs: `fused` holds the kernel it is part of (its own, or its region's), or
    `reason` says why it is interpreted."""

    op: Loop
    fused: FusedLoop | CompiledRegion | None
    reason: str = ""

    def describe(self) -> str:
        if isinstance(self.fused, CompiledRegion):
            beside = [b if a is self.op else a for a, b in self.fused.kernel.concurrent if self.op is a or self.op is b]
            at_once = f", at once with {beside[0].where()} when the session has a worker free" if beside else ""
            return f"{self.op.where()}: fused into the kernel of {self.fused.label}{at_once}"
        if self.fused is not None:
            return f"{self.op.where()}: fused into one kernel"
        return f"{self.op.where()}: interpreted ({self.reason})"


@dataclass
class Plan:
    """Every loop's plan, and the subgraphs the interpreter runs (interpreted loops' bodies, the
    branches of interpreted Ifs) partitioned into regions like the main graph."""

    loops: list[LoopPlan] = field(default_factory=list)
    partitions: list[Partition] = field(default_factory=list)  # one per subgraph, outermost first
    programs: dict[int, Graph] = field(default_factory=dict)  # id(subgraph) -> it with its regions in place


def plan_graph(graph: Graph, backend: str, strict: bool, regions: dict[int, CompiledRegion] | None = None
               ) -> Plan:
    """Plan every loop of `graph`: outermost first; loops inside a fused loop are part of its kernel,
    and so are the loops of a compiled region (`regions`: by id of their Region op). Under numba,
    the body of a loop that does not fuse and the branches of an If outside every region are
    partitioned into regions of their own, whose kernels the interpreter calls."""
    if backend not in BACKENDS:
        raise RnnloopError(f"backend must be one of {BACKENDS}, got {backend!r}")
    plan = Plan()
    _plan_ops(graph, backend, plan, dict(regions or {}))
    interpreted = [p for p in plan.loops if p.fused is None]
    if backend == "numba" and interpreted:
        if strict:
            raise UnsupportedModelError("strict=True and some loops cannot be fused:\n" +
                                        "\n".join("  " + p.describe() for p in interpreted))
        for p in interpreted:
            warnings.warn(p.describe(), FallbackWarning, stacklevel=4)
    level = debug_level()
    for p in plan.loops:
        if level >= 1:
            print(f"rnnloop: {p.describe()}", file=sys.stderr)
        if level >= 2 and isinstance(p.fused, FusedLoop):  # (a region's source: Session prints it)
            print(p.fused.source, file=sys.stderr)
    return plan


def _plan_ops(graph: Graph, backend: str, plan: Plan, regions: dict[int, CompiledRegion]) -> None:
    for op in graph.ops:
        if isinstance(op, Region):
            compiled = regions.get(id(op))
            plan.loops.extend(LoopPlan(loop, compiled, "" if compiled else "its region runs in the interpreter")
                              for loop in iter_ops(op.body) if isinstance(loop, Loop))
            continue
        if isinstance(op, Loop):
            if backend == "interp":
                plan.loops.append(LoopPlan(op, None, "backend='interp'"))
            else:
                try:
                    plan.loops.append(LoopPlan(op, FusedLoop(op, op.where(), graph.constants)))
                    continue
                except NoRule as e:
                    plan.loops.append(LoopPlan(op, None, str(e)))
                except Exception as e:  # noqa: BLE001 - a code generator bug costs speed, not the answer
                    if debug_level() >= 2:
                        raise
                    plan.loops.append(LoopPlan(op, None, str(generator_failure(e))))
        for sub in op.subgraphs:
            if backend == "numba":
                partition = compile_regions(sub)
                plan.partitions.append(partition)
                if partition.compiled:
                    plan.programs[id(sub)] = sub = partition.graph
                    regions.update((id(c.op), c) for c in partition.compiled)
            _plan_ops(sub, backend, plan, regions)
