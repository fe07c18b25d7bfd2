"""Checks an IR graph's names, ports, types and shapes, and reports every problem at once."""

from __future__ import annotations

import numpy as np

from .errors import ModelError
from .ir import Graph, If, Loop, OptionalType, SequenceType, TensorType
from .ops import OPS


def verify(graph: Graph) -> None:
    """Raise one ModelError listing every problem found in the graph and its subgraphs."""
    problems: list[str] = []
    _check_graph(graph, problems)
    if problems:
        listing = "\n".join(f"  - {p}" for p in problems)
        raise ModelError(f"the model has {len(problems)} problem(s):\n{listing}\n"
                         "Fix the model (or the exporter that wrote it) and load it again.")


def _check_graph(graph: Graph, problems: list[str]) -> None:
    defined = set(graph.constants)
    for name in graph.inputs:
        if name in defined:
            problems.append(f"graph '{graph.name}': value '{name}' is defined twice")
        defined.add(name)
    for op in graph.ops:
        if op.op_type not in OPS:
            problems.append(f"{op.where()}: '{op.op_type}' is not an op the IR knows")
        for name in op.inputs:
            if name and name not in defined:
                problems.append(f"{op.where()}: input '{name}' is not defined before it is used "
                                f"in graph '{graph.name}'")
        for name in op.outputs:
            if name and name in defined:
                problems.append(f"{op.where()}: output '{name}' is defined twice in graph '{graph.name}'")
            defined.add(name)
        if isinstance(op, Loop):
            _check_loop(graph, op, problems)
        elif isinstance(op, If):
            _check_if(op, problems)
        for sub in op.subgraphs:
            _check_graph(sub, problems)
    for name in graph.outputs:
        if name not in defined:
            problems.append(f"graph '{graph.name}': output '{name}' is never defined")


def _check_loop(graph: Graph, loop: Loop, problems: list[str]) -> None:
    where, body = loop.where(), loop.body
    n_params = loop.body_iteration + loop.body_cond_in
    n_sliced = len(loop.sliced)
    expect_in = 2 + loop.n_carried + n_sliced + loop.n_invariant
    if len(loop.inputs) != expect_in:
        problems.append(f"{where}: has {len(loop.inputs)} inputs, its ports need {expect_in}")
        return
    expect_body_in = n_params + loop.n_carried + n_sliced + loop.n_invariant
    if len(body.inputs) != expect_body_in:
        problems.append(f"{where}: the body takes {len(body.inputs)} inputs, but the loop passes "
                        f"{expect_body_in} ({n_params} iteration/condition, {loop.n_carried} carried, "
                        f"{n_sliced} sliced, {loop.n_invariant} invariant)")
        return
    expect_body_out = loop.body_cond_out + loop.n_carried + len(loop.stacked)
    if len(body.outputs) != expect_body_out:
        problems.append(f"{where}: the body returns {len(body.outputs)} outputs, but the loop needs "
                        f"{expect_body_out} ({int(loop.body_cond_out)} condition, {loop.n_carried} carried, "
                        f"{len(loop.stacked)} stacked)")
        return
    if len(loop.outputs) > loop.n_carried + len(loop.stacked):
        problems.append(f"{where}: has {len(loop.outputs)} outputs, its ports give "
                        f"{loop.n_carried + len(loop.stacked)}")
    _check_scalar(graph, loop.trip_count, "trip count", np.integer, where, problems)
    _check_scalar(graph, loop.cond, "condition", np.bool_, where, problems)
    if loop.body_cond_out:
        _check_scalar(body, body.outputs[0], "body condition", np.bool_, where, problems)
    for spec in loop.sliced:
        if spec.stride < 1 or spec.part < 1 or (not spec.keep_axis and spec.part != 1):
            problems.append(f"{where}: sliced input {spec} needs stride >= 1, part >= 1, "
                            "and part == 1 when the axis is dropped")
    for spec in loop.stacked:
        if spec.length is not None and spec.length < 0:
            problems.append(f"{where}: stacked output padded to a negative length {spec.length}")
    for k, name in enumerate(loop.body_groups()[2]):
        t = body.type_of(name)
        if isinstance(t, TensorType) and t.shape is not None:
            # After zero iterations a stacked output has the declared sizes: they must make an array.
            try:
                np.empty((0, *(d if isinstance(d, int) else 0 for d in t.shape)), t.dtype or np.float32)
            except ValueError:
                problems.append(f"{where}: stacked output {k} ('{name}') is declared with sizes "
                                f"{list(t.shape)}, too large for any array")
    initial, _, _ = loop.input_groups()
    carried_in = body.inputs[n_params:n_params + loop.n_carried]
    _, carried_out, _ = loop.body_groups()
    for k, (init, param, result) in enumerate(zip(initial, carried_in, carried_out)):
        types = [graph.type_of(init), body.type_of(param), body.type_of(result)]
        dtypes = {_dtype_of(t) for t in types} - {None}
        if len(dtypes) > 1:
            listed = ", ".join(f"{role} '{n}' {t}" for role, n, t in
                               zip(("initial", "body input", "body result"), (init, param, result), types))
            problems.append(f"{where}: carried value {k} changes dtype across the loop ({listed}); "
                            "a carried value must keep its dtype")


def _check_if(op: If, problems: list[str]) -> None:
    n_captures = len(op.inputs) - 1
    for branch in (op.then_graph, op.else_graph):
        if len(branch.inputs) != n_captures:
            problems.append(f"{op.where()}: branch '{branch.name}' takes {len(branch.inputs)} inputs, "
                            f"the If passes {n_captures}")
        if len(branch.outputs) != len(op.outputs):
            problems.append(f"{op.where()}: branch '{branch.name}' returns {len(branch.outputs)} outputs, "
                            f"the If has {len(op.outputs)}")


def _dtype_of(t) -> object:
    """A comparable description of a type's element kind, or None when unknown."""
    if isinstance(t, TensorType):
        return t.dtype
    if isinstance(t, OptionalType):  # an optional carries either nothing or a value of its element type
        return _dtype_of(t.elem)
    if isinstance(t, SequenceType):
        inner = _dtype_of(t.elem)
        return None if inner is None else ("seq", inner)
    return None


def _check_scalar(graph: Graph, name: str, role: str, kind, where: str, problems: list[str]) -> None:
    t = graph.type_of(name) if name else None
    if not isinstance(t, TensorType):
        return
    if t.dtype is not None and not np.issubdtype(t.dtype, kind):
        problems.append(f"{where}: the {role} '{name}' is {t.dtype}, expected {kind.__name__.strip('_')}")
    if t.shape is not None and (len(t.shape) > 1 or (t.shape and t.shape[0] not in (1, None))):
        problems.append(f"{where}: the {role} '{name}' has shape {t}, expected a scalar")

