"""An If in a loop body as a native `if`: each branch's ops compiled inside its own block.

Both branches write each output into one buffer of the output's dtype and rank, allocated before
the loop and reused while its shape holds, so that after the `if` the name has one Numba type
whichever branch ran (and a carried output can be double-buffered like any other buffer). A branch's
ops run only in that branch: nothing in it is hoisted out of the loop, and its checks stay in its
block, so an error the branch not taken would raise is never raised.
"""

from __future__ import annotations

import numpy as np

from ..ir import Graph, If
from .emitter import NoRule, Var, code_text, dtype_name, shape_tuple
from .kernel import LoopGen, _scalar_of, emit_ops


def emit_if(g: LoopGen, op: If) -> list[Var]:
    """The If's outputs, computed by the branch its condition selects (a native `if`)."""
    g.body(f"# {code_text(op.where())}")
    cond = g.var(op.inputs[0])
    captures = [g.var(n) for n in op.inputs[1:]]
    if cond is None or any(v is None for v in captures):
        raise NoRule(f"{op.where()}: an omitted input")
    known = [g.const(n) for n in op.inputs[1:]]
    for graph in (op.then_graph, op.else_graph):
        if len(graph.inputs) != len(captures) or len(graph.outputs) != len(op.outputs):
            raise NoRule(f"{op.where()}: branch '{graph.name}' takes {len(graph.inputs)} inputs and gives "
                         f"{len(graph.outputs)} outputs, the If passes {len(captures)} and expects {len(op.outputs)}")
    taken = _constant_condition(g, op.inputs[0])
    if taken is not None:  # one branch only, inline: its results are the If's
        results = _branch(g, op, op.then_graph if taken else op.else_graph, captures, known)
        return [_checked(g, op, k, v) for k, v in enumerate(results)]
    flag = _scalar_of(g, cond, "True", "condition", op)
    buffers = [g.body.fresh(f"if_{name or 'out'}") for name in op.outputs]
    kinds: list[tuple[np.dtype, int] | None] = [None] * len(op.outputs)
    for header, graph in ((f"if {flag}:", op.then_graph), ("else:", op.else_graph)):
        with g.body.block(header):
            results = _branch(g, op, graph, captures, known)
            for k, (buf, v) in enumerate(zip(buffers, results)):
                kinds[k] = _agree(op, k, kinds[k], v)
                _copy(g, buf, v)
            if not results:
                g.body("pass")
    outs = []
    for k, (buf, (dtype, rank)) in enumerate(zip(buffers, kinds)):
        g.pre(f"{buf} = np.empty({shape_tuple(['0'] * rank)}, {dtype_name(dtype)})")
        outs.append(_checked(g, op, k, Var(buf, dtype, rank, "buffer")))
    return outs


def _constant_condition(g: LoopGen, name: str) -> bool | None:
    """The condition's value when it is fixed when the kernel is generated, else None."""
    value = g.const(name)
    if value is not None and value.size == 1:
        return bool(value.reshape(-1)[0])
    return None


def _branch(g: LoopGen, op: If, graph: Graph, captures: list[Var], known: list[np.ndarray | None]) -> list[Var]:
    """Emit a branch's ops where the body is now; returns the Vars of its outputs.

    Its inputs are the captures' values (`known`: their constant values, or None), its constants
    its own. What rules learn about values inside it (rows of hoistable products, carried
    sequences) is forgotten after it."""
    saved = (g.graph, g.known, g.values, g.rows, g.kept_rows, g.sequences)
    g.graph = graph
    g.known = {name: value for name, value in zip(graph.inputs, known) if value is not None}
    g.values, g.rows, g.kept_rows, g.sequences = {}, {}, {}, {}
    try:
        for name, v in zip(graph.inputs, captures):
            g.define(name, v)
        g.define_constants(graph, f"{op.where()}: branch")
        emit_ops(g, graph, set(graph.constants), hoist=False)  # hoisted work would run in both branches
        return [_result(g, op, graph, name) for name in graph.outputs]
    finally:
        g.graph, g.known, g.values, g.rows, g.kept_rows, g.sequences = saved


def _result(g: LoopGen, op: If, graph: Graph, name: str) -> Var:
    """A branch output's value, checked against the branch's declared type."""
    v = g.values.get(name)
    if v is None or v.kind in ("sequence", "lazy"):
        raise NoRule(f"{op.where()}: output '{name}' of branch '{graph.name}' is not a tensor the kernel holds")
    try:
        g.out_type(name, 0 if v.kind == "scalar" else v.rank, v.dtype)
    except NoRule as e:
        raise NoRule(f"{op.where()}: branch '{graph.name}': {e}") from None
    return v


def _agree(op: If, k: int, kind: tuple[np.dtype, int] | None, v: Var) -> tuple[np.dtype, int]:
    """The dtype and rank of output k, which both branches must give alike (one Numba type)."""
    mine = (np.dtype(v.dtype), 0 if v.kind == "scalar" else v.rank)
    if kind is not None and kind != mine:
        raise NoRule(f"{op.where()}: output {k} ('{op.outputs[k]}') is {kind[0]} of rank {kind[1]} in the then branch "
                     f"but {mine[0]} of rank {mine[1]} in the else branch; a compiled If needs them alike")
    return mine


def _copy(g: LoopGen, buf: str, v: Var) -> None:
    """In a branch: the value into the output's buffer (reallocated when its shape changes)."""
    if v.kind == "scalar" or v.rank == 0:
        g.body(f"{buf}[()] = {v.item()}")
        return
    shape = shape_tuple([v.dim(a) for a in range(v.rank)])
    with g.body.block(f"if {buf}.shape != {shape}:"):
        g.body(f"{buf} = np.empty({shape}, {dtype_name(v.dtype)})")
    g.body(f"_r.put({buf}, {v.expr})")


def _checked(g: LoopGen, op: If, k: int, v: Var) -> Var:
    """Output k, checked against the If's declared type."""
    try:
        g.out_type(op.outputs[k], 0 if v.kind == "scalar" else v.rank, v.dtype)
    except NoRule as e:
        raise NoRule(f"{op.where()}: {e}") from None
    return v
