"""The kernel of a region (partition.py): its ops as straight-line code in one function, loops as
functions it calls and Ifs as native `if`s; compiled at load and called like the interpreter's
run_region."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..interp.graph import Options, run_region
from ..ir import Graph, Loop, Region
from .emitter import NoRule, Var, code_text, dtype_name
from .fused import Compiled
from .kernel import ENTRY, KernelModule, LoopGen, ModuleGen, drop_unused, emit_ops

def generate_region(body: Graph, label: str, at_once: bool = True) -> KernelModule:
    """The kernel module of a region's body; with `at_once`, loops that can run at once do
    (concurrent_loops). Raises NoRule, with `op` set to the op that cannot be compiled when there
    is one."""
    module = ModuleGen(label)
    module.loops = 1  # (the loops it calls are inner loops: `kernel` is the region's function)
    g = LoopGen(module, body, {}, label)
    g.params = ["status", "max_iter"]
    for name in body.inputs:
        t = g.type_of(name)
        arg = g.pre.fresh(f"in_{name}")
        g.params.append(arg)
        g.define(name, Var(arg, np.dtype(t.dtype), len(t.shape), "invariant"))
    g.define_constants(body, "region")
    g.pre("t = 0")  # (errors report an iteration; straight-line code has none)
    if at_once:
        body, g.partners = concurrent_loops(body)
        g.graph = body
    emit_ops(g, body, set(), hoist=False)
    returned: set[str] = set()
    outputs = [_returned(g, name, returned) for name in body.outputs]
    results = ", ".join(v.expr for v in outputs)
    params, constants = g.params[:2 + len(body.inputs)], g.params[2 + len(body.inputs):]
    assert len(constants) == len(g.constants)
    # The constants come as one table made at load (fused.bind): a call unboxes one array, not one each.
    bind = [f"    {name} = _r.bound(consts, {k}, np.{value.dtype}, {value.ndim})"
            for k, (name, value) in enumerate(zip(constants, g.constants))]
    lines = [ENTRY, f"def kernel({', '.join(params + (['consts'] if bind else []))}):", f'    """{code_text(label)}"""',
             *bind, *g.pre.lines, *g.body.lines,
             f"    return ({results}{',' if len(outputs) == 1 else ''})"]
    module.functions.append("\n".join(drop_unused(lines, g.owned)))
    return replace(module.kernel_module("kernel", g.constants), bound=bool(bind))


def concurrent_loops(graph: Graph) -> tuple[Graph, dict[int, Loop]]:
    """Pairs of loops that can run at once, one beside the other (the two directions of a
    bidirectional layer): each loop is paired with the next one that reads nothing it computes,
    the ops that loop needs moved before the first where they are after it, and the second put
    right after the first. The graph in that order, and the pairs by the first's id. (The kernel
    runs a pair at once only if both loops are of one code: kernel._emit_concurrent_loops.)"""
    ops = list(graph.ops)
    partners: dict[int, Loop] = {}
    paired: set[int] = set()
    k = 0
    while k < len(ops):
        first = ops[k]
        if isinstance(first, Loop) and id(first) not in paired:
            made = {name: i for i, op in enumerate(ops) for name in op.outputs if name}  # (each name once)
            for j in range(k + 1, len(ops)):
                second = ops[j]
                if not isinstance(second, Loop) or id(second) in paired:
                    continue
                needed = _needed_after(ops, made, k, j)
                if needed is None:
                    continue
                # first's needs, then second's (in their order), first, second, then the rest
                moved = [ops[i] for i in sorted(needed)]
                rest = [op for i, op in enumerate(ops[k + 1:], start=k + 1) if i not in needed and i != j]
                ops = ops[:k] + moved + [first, second] + rest
                partners[id(first)] = second
                paired |= {id(first), id(second)}
                k += len(moved)
                break
        k += 1
    return (replace(graph, ops=ops) if partners else graph), partners


def _needed_after(ops: list, made: dict[str, int], k: int, j: int) -> set[int] | None:
    """The ops between ops[k] and ops[j] that ops[j] reads from, directly or not (`made`: the op
    that makes each value); None if ops[j] reads from ops[k] that way (then they cannot run at once)."""
    needed: set[int] = set()
    todo = [j]
    while todo:
        for name in ops[todo.pop()].inputs:
            i = made.get(name)
            if i is None or i < k or i in needed:
                continue
            if i == k:
                return None
            needed.add(i)
            todo.append(i)
    return needed


def _returned(g: LoopGen, name: str, returned: set[str]) -> Var:
    """An output as an array of its declared dtype and rank that the caller owns: a literal
    becomes a 0-d array, and anything in memory the kernel did not allocate in this call (an input,
    a view of one, a constant, which may be frozen into the code and read-only), or in memory an
    output before it has (`returned`: the same value twice, a value and its reshape), is copied."""
    v = g.values.get(name)
    if v is None or v.kind in ("sequence", "lazy"):
        raise NoRule(f"region output '{name}' is not a tensor the kernel holds")
    rank = 0 if v.kind == "scalar" else v.rank
    g.out_type(name, rank, v.dtype)
    if v.kind == "scalar":
        array = g.body.fresh(f"out_{name}")
        g.body(f"{array} = np.empty((), {dtype_name(v.dtype)})")
        g.body(f"{array}[()] = {v.expr}")
        return Var(array, v.dtype, 0, "fresh")
    memory = v.memory()
    if memory is None or memory in returned:
        copy = g.body.fresh(f"out_{name}")
        g.body(f"{copy} = np.copy({v.expr})")
        return Var(copy, v.dtype, v.rank, "fresh")
    returned.add(memory)
    return v


class CompiledRegion(Compiled):
    """Runs one region through its generated kernel, compiled here; the interpreter runs it for
    inputs of other types."""

    def __init__(self, op: Region, kernel: KernelModule):
        self.op = op
        self.label = op.where()
        self.kernel = kernel  # generate_region(op.body, op.where()), by the partition
        self.expected = []
        for name in op.body.inputs:
            t = op.body.type_of(name)
            self.expected.append((np.dtype(t.dtype), len(t.shape)))
        self.setup()

    def prefix_types(self) -> tuple:
        from numba import types
        return (types.Array(types.int64, 1, "C"), types.int64)

    def __call__(self, op: Region, values: list[Any], options: Options) -> tuple:
        if not self.fits(values):
            return self.interpret(op, values, options, "inputs of other dtypes or ranks than the model declares")
        cap = -1 if options.max_iterations is None else int(options.max_iterations)
        return self.call(op, values, options, (cap,), values)

    def run_interpreted(self, op: Region, values: list[Any], options: Options) -> tuple:
        return run_region(op, values, options)

    def describe(self) -> str:
        ops = self.op.body.ops
        names = ", ".join(code_text(o.where()) for o in ops[:6]) + (", ..." if len(ops) > 6 else "")
        return f"{self.label}: {len(ops)} op(s) compiled into one kernel ({names})"
