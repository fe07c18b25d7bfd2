"""Rewrites of a verified IR graph before planning: small, separate, each named for what it does."""

from __future__ import annotations

import dataclasses

import numpy as np

from .errors import RnnloopError
from .interp.graph import run_op
from .ir import Graph, Loop

# A folded result may outgrow its inputs (Expand, Tile, ConstantOfShape) by this much at most:
# beyond it, the session would hold memory that a run allocates only while it needs it.
FOLD_GROWTH_BYTES = 1 << 20


def fold_constants(graph: Graph, keep_outputs: bool = False) -> Graph:
    """The graph with every op whose inputs are all constants run once, now, in it and its subgraphs.

    Lowering an LSTM node transposes, reorders and sums its weights before the loop; OpenVINO's
    bodies transpose their weights inside it. With the weights in the model, that is work every
    run (or iteration) would otherwise repeat, and a transposed view where a kernel wants a
    contiguous matrix. Loops, branches and sequence results stay as they are, and so does an op
    that fails on its constants: running it reports the error, as before. A subgraph's outputs
    stay computed (`keep_outputs`): its loop or branch takes results from ops, not constants.
    """
    constants = dict(graph.constants)
    ops = []
    for op in graph.ops:
        if op.subgraphs:
            op = _with_subgraphs(op, lambda g: fold_constants(g, keep_outputs=True))
        result = None
        if op.inputs and not op.subgraphs and not (keep_outputs and any(n in graph.outputs for n in op.outputs)):
            result = _fold(op, constants)
        if result is None:
            ops.append(op)
        else:
            constants.update((name, value) for name, value in zip(op.outputs, result) if name)
    if len(ops) == len(graph.ops) and all(a is b for a, b in zip(ops, graph.ops)):
        return graph
    return dataclasses.replace(graph, ops=ops, constants=constants)


def _with_subgraphs(op, rewrite):
    """A loop or branch op with `rewrite` applied to each subgraph (the op itself when none changes)."""
    fields = {"body": op.body} if isinstance(op, Loop) else {"then_graph": op.then_graph, "else_graph": op.else_graph}
    new = {k: rewrite(g) for k, g in fields.items()}
    return op if all(new[k] is g for k, g in fields.items()) else dataclasses.replace(op, **new)


def _fold(op, constants: dict) -> list[np.ndarray] | None:
    values = [constants.get(n) if n else None for n in op.inputs]
    if any(n and not isinstance(v, np.ndarray) for n, v in zip(op.inputs, values)):
        return None
    try:
        with np.errstate(all="ignore"):
            result = run_op(op, values)
    except RnnloopError:
        return None
    results = list(result) if isinstance(result, tuple) else [result]
    if len(results) < len(op.outputs) or not all(isinstance(r, np.ndarray) for r in results):
        return None
    given = sum(v.nbytes for v in values if v is not None)
    if sum(r.nbytes for r in results) > given + FOLD_GROWTH_BYTES:
        return None
    # Contiguous copies: a view would keep its base alive and hand kernels a strided layout.
    return [r.copy() if r.base is not None or not r.flags.c_contiguous else r for r in results]


def eliminate_dead_code(graph: Graph) -> Graph:
    """The graph without the ops and constants whose results nothing reads, in it and its subgraphs.

    IR ops have no side effects, so an op whose outputs no later op and no graph output reads can go
    (a Network's while condition leaves its first computation in the body unread, for one).
    """
    live = set(graph.outputs)
    kept = []
    for op in reversed(graph.ops):
        if not any(n in live for n in op.outputs if n):
            continue
        if op.subgraphs:
            op = _with_subgraphs(op, eliminate_dead_code)
        live.update(n for n in op.inputs if n)
        kept.append(op)
    kept.reverse()
    constants = {k: v for k, v in graph.constants.items() if k in live}
    if len(kept) == len(graph.ops) and all(a is b for a, b in zip(kept, graph.ops)) and \
            len(constants) == len(graph.constants):
        return graph
    return dataclasses.replace(graph, ops=kept, constants=constants)
