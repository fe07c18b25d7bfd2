"""Rewrites of a verified IR graph before planning: small, separate, each named for what it does."""

from __future__ import annotations

import dataclasses

import numpy as np

from .errors import RnnloopError
from .interp.graph import run_op
from .ir import Graph, Loop, Op, TensorType

# A folded result may outgrow its inputs (Expand, Tile, ConstantOfShape) by this much at most:
# beyond it, the session would hold memory that a run allocates only while it needs it.
FOLD_GROWTH_BYTES = 1 << 20


def fold_constants(graph: Graph, keep_outputs: bool = False) -> Graph:
    """The graph with every op whose inputs are all constants run once, now, in it and its subgraphs.

    Lowering an LSTM node transposes, reorders and sums its weights before the loop; OpenVINO's
    bodies transpose their weights inside it, and a GRU's body splits them. With the weights in
    the model, that is work every run (or iteration) would otherwise repeat, and a transposed view
    where a kernel wants a contiguous matrix. A loop's invariant inputs that are constants become
    constants of its body, so that the ops on them fold there too. Loops, branches and sequence
    results stay as they are, and so does an op that fails on its constants: running it reports
    the error, as before. A subgraph's outputs stay computed (`keep_outputs`): its loop or branch
    takes results from ops, not constants.
    """
    constants = dict(graph.constants)
    ops = []
    for op in graph.ops:
        if isinstance(op, Loop):
            op = _capture_constants(op, constants)
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


def _capture_constants(loop: Loop, constants: dict) -> Loop:
    """The loop with its invariant inputs that are constants here made constants of its body, so
    that folding its body reaches the ops on them (a GRU's split of its recurrent weights)."""
    _, _, invariants = loop.input_groups()
    body_invariants = loop.body.inputs[len(loop.body.inputs) - len(invariants):]
    captured = {inner: constants[outer] for outer, inner in zip(invariants, body_invariants)
                if isinstance(constants.get(outer), np.ndarray)}
    if not captured:
        return loop
    kept = [(outer, inner) for outer, inner in zip(invariants, body_invariants) if inner not in captured]
    body_inputs = loop.body.inputs[:len(loop.body.inputs) - len(invariants)] + [inner for _, inner in kept]
    body = dataclasses.replace(loop.body, inputs=body_inputs, constants={**loop.body.constants, **captured})
    inputs = loop.inputs[:len(loop.inputs) - len(invariants)] + [outer for outer, _ in kept]
    return dataclasses.replace(loop, inputs=inputs, body=body, n_invariant=len(kept))


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


# Ops whose outputs after the first are optional, each computed only when named.
_OPTIONAL_OUTPUTS = frozenset({"MaxPool", "LayerNormalization"})


def eliminate_dead_code(graph: Graph) -> Graph:
    """The graph without the ops and constants whose results nothing reads, in it and its subgraphs.

    IR ops have no side effects, so an op whose outputs no later op and no graph output reads can go
    (a Network's while condition leaves its first computation in the body unread, for one). An
    optional output that costs work and that nothing reads (MaxPool's Indices: OpenVINO's MaxPool-8
    always has them) is dropped from its op.
    """
    live = set(graph.outputs)
    kept = []
    for op in reversed(graph.ops):
        if not any(n in live for n in op.outputs if n):
            continue
        if op.subgraphs:
            op = _with_subgraphs(op, eliminate_dead_code)
        if op.op_type in _OPTIONAL_OUTPUTS and any(n and n not in live for n in op.outputs[1:]):
            op = dataclasses.replace(op, outputs=op.outputs[:1] + [n if n in live else "" for n in op.outputs[1:]])
        live.update(n for n in op.inputs if n)
        kept.append(op)
    kept.reverse()
    constants = {k: v for k, v in graph.constants.items() if k in live}
    if len(kept) == len(graph.ops) and all(a is b for a, b in zip(kept, graph.ops)) and \
            len(constants) == len(graph.constants):
        return graph
    return dataclasses.replace(graph, ops=kept, constants=constants)


def forward_identities(graph: Graph) -> Graph:
    """The graph without the Identity ops of values its ops compute: the value takes the name of
    its first Identity (of the last, for a chain), in the graph and its subgraphs.

    Exporters and lowerings end graphs with them (`Y = Identity(reshaped)`), and the interpreter
    pays microseconds for every op of every run. An Identity of a graph input, of a constant or of
    a value the graph also returns keeps both names, so it stays.
    """
    produced = {n for op in graph.ops for n in op.outputs if n}
    renamed: dict[str, str] = {}  # a result -> the name of the Identity that repeats it
    forwarded = set()  # those Identities, by id
    for op in graph.ops:
        x = op.inputs[0] if op.op_type == "Identity" and len(op.inputs) == 1 else None
        if x and x in produced and x not in graph.outputs and x not in renamed:
            renamed[x] = op.outputs[0]
            forwarded.add(id(op))
    for x in renamed:  # a chain of Identities: its first value takes the last name
        while renamed[x] in renamed:
            renamed[x] = renamed[renamed[x]]
    ops = []
    for op in graph.ops:
        if op.subgraphs:
            op = _with_subgraphs(op, forward_identities)
        if id(op) in forwarded:
            continue
        if any(n in renamed for n in op.inputs + op.outputs):
            op = dataclasses.replace(op, inputs=[renamed.get(n, n) for n in op.inputs],
                                     outputs=[renamed.get(n, n) for n in op.outputs])
        ops.append(op)
    if not renamed and all(a is b for a, b in zip(ops, graph.ops)):
        return graph
    types = dict(graph.types)
    for x, y in renamed.items():
        if y not in types and x in types:
            types[y] = types[x]
    return dataclasses.replace(graph, ops=ops, types=types)


def cancel_unsqueezes(graph: Graph) -> Graph:
    """The graph with every Unsqueeze that a Squeeze of the same axes, or a Gather of index 0 on
    its one new axis, undoes at once read through, in it and its subgraphs.

    Exporters wrap recurrent ops in them: torch's LSTM unsqueezes the initial states for the ONNX
    LSTM's direction axis and squeezes the outputs back, and the LSTM's lowering gathers that axis
    again. Each is a trivial op, but the interpreter pays microseconds for every op of every run.
    A result that is a graph output becomes an Identity of what it repeats; the Unsqueeze itself
    goes with eliminate_dead_code once nothing reads it.
    """
    producers: dict[str, Op] = {}
    same: dict[str, str] = {}  # a result -> the earlier value it equals
    ops = []
    for op in graph.ops:
        if op.subgraphs:
            op = _with_subgraphs(op, cancel_unsqueezes)
        if any(n in same for n in op.inputs):
            op = dataclasses.replace(op, inputs=[same.get(n, n) for n in op.inputs])
        undone = _undone_unsqueeze(op, producers, graph)
        if undone is not None and op.outputs[0] not in graph.outputs:
            same[op.outputs[0]] = undone
            continue
        if undone is not None:
            op = dataclasses.replace(op, op_type="Identity", inputs=[undone], attrs={})
        producers.update((n, op) for n in op.outputs if n)
        ops.append(op)
    if not same and all(a is b for a, b in zip(ops, graph.ops)):
        return graph
    return dataclasses.replace(graph, ops=ops)


def _undone_unsqueeze(op: Op, producers: dict[str, Op], graph: Graph) -> str | None:
    """x when `op` is Squeeze(Unsqueeze(x, axes), axes) or Gather(Unsqueeze(x, [a]), 0 or -1, axis=a)."""
    if op.op_type not in ("Squeeze", "Gather") or len(op.inputs) != 2 or len(op.outputs) != 1:
        return None
    inner = producers.get(op.inputs[0])
    if inner is None or inner.op_type != "Unsqueeze" or len(inner.inputs) != 2 or inner.attrs:
        return None
    rank = _rank(graph, op.inputs[0])
    added = _axes(graph.constants.get(inner.inputs[1]), rank)
    if not added:  # unknown, or none (a Squeeze of no axes may mean all of them)
        return None
    if op.op_type == "Squeeze":
        removed = _axes(graph.constants.get(op.inputs[1]), rank)
        return inner.inputs[0] if removed == added and not op.attrs else None
    index = graph.constants.get(op.inputs[1])
    if index is None or index.ndim != 0 or int(index) not in (0, -1) or set(op.attrs) - {"axis"}:
        return None
    axis = _axes(np.asarray([op.attrs.get("axis", 0)]), rank)
    return inner.inputs[0] if len(added) == 1 and axis == added else None


def _rank(graph: Graph, name: str) -> int | None:
    t = graph.type_of(name)
    return len(t.shape) if isinstance(t, TensorType) and t.shape is not None else None


def _axes(axes: np.ndarray | None, rank: int | None) -> set[int] | None:
    """Constant axes as a set of non-negative ones; None when unknown (negative ones need the rank)."""
    if axes is None or axes.ndim > 1 or axes.dtype.kind not in "iu":
        return None
    values = [int(a) for a in axes.reshape(-1)]
    if any(a < 0 for a in values):
        if rank is None:
            return None
        values = [a + rank for a in values]
    return set(values) if len(set(values)) == len(values) else None


def stack_in_transposed_order(graph: Graph) -> Graph:
    """The graph with every Transpose of a Concat of Unsqueezes (a stack of values) made that stack
    on the transposed axis, in it and its subgraphs: a copy of the stack less.

    A bidirectional LSTM's lowering stacks its two directions' outputs Y [steps, 2, batch, hidden],
    and exporters follow it with Transpose(perm=[0, 2, 1, 3]) and a Reshape to [steps, batch,
    2·hidden] for the next layer: the Concat copies every output once, the Transpose again. When the
    Transpose only moves the new axis of each Unsqueeze (every other axis keeps its order), it is
    Concat(Unsqueeze(x, [perm⁻¹(a)]), axis=perm⁻¹(c)): the stack made where the Transpose puts it,
    and the Reshape after it a view. It rewrites when the Concat is read by the Transpose alone.
    """
    readers = _readers(graph)
    producers = {n: op for op in graph.ops for n in op.outputs if n}
    constants, types = dict(graph.constants), dict(graph.types)
    used = set(graph.inputs) | set(constants) | set(producers)
    stacks: dict[int, list[Op]] = {}  # id(Transpose) -> the ops that replace it
    for op in graph.ops:
        if op.op_type == "Transpose" and len(op.inputs) == 1 and len(op.outputs) == 1:
            replacement = _stack_transposed(op, producers, readers, graph, constants, types, used)
            if replacement is not None:
                stacks[id(op)] = replacement
    return _rewritten(graph, stacks, constants, types, stack_in_transposed_order)


def _stack_transposed(transpose: Op, producers: dict, readers: dict, graph: Graph, constants: dict, types: dict,
                      used: set[str]) -> list[Op] | None:
    """The Unsqueezes and Concat that make `transpose`'s result directly (new values added to
    `constants`, `types` and `used`), or None."""
    concat = producers.get(transpose.inputs[0])
    rank = _rank(graph, transpose.inputs[0])
    if concat is None or concat.op_type != "Concat" or rank is None or readers.get(concat.outputs[0]) != 1 \
            or concat.outputs[0] in graph.outputs:
        return None
    perm = [int(p) for p in transpose.attrs.get("perm", range(rank - 1, -1, -1))]
    if sorted(perm) != list(range(rank)):
        return None
    parts = []
    for name in concat.inputs:
        unsqueeze = producers.get(name)
        if unsqueeze is None or unsqueeze.op_type != "Unsqueeze" or len(unsqueeze.inputs) != 2 or unsqueeze.attrs:
            return None
        added = _axes(graph.constants.get(unsqueeze.inputs[1]), rank)
        if added is None or len(added) != 1:
            return None
        parts.append((unsqueeze, added.pop()))
    axis = int(concat.attrs.get("axis", 0))
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis < rank or any([p for p in perm if p != a] != [p for p in range(rank) if p != a] for _, a in parts):
        return None  # (the Transpose moves other axes too)
    ops, inputs, axes_at = [], [], {}
    for unsqueeze, a in parts:
        where = perm.index(a)
        if where not in axes_at:
            axes_at[where] = _new_constant(f"{unsqueeze.inputs[1]}_at{where}", np.array([where], np.int64), constants,
                                           types, used)
        axes = axes_at[where]
        out = _fresh(f"{unsqueeze.outputs[0]}_at{where}", used)
        t = graph.type_of(unsqueeze.outputs[0])
        if isinstance(t, TensorType) and t.shape is not None:
            types[out] = TensorType(t.dtype, tuple(t.shape[p] for p in perm))
        ops.append(dataclasses.replace(unsqueeze, inputs=[unsqueeze.inputs[0], axes], outputs=[out]))
        inputs.append(out)
    ops.append(dataclasses.replace(concat, inputs=inputs, outputs=list(transpose.outputs),
                                   attrs={**concat.attrs, "axis": perm.index(axis)}))
    return ops


def _fresh(base: str, used: set[str]) -> str:
    """`base` or, when taken, base2, base3..., added to `used`."""
    name, k = base, 1
    while name in used:
        k += 1
        name = f"{base}{k}"
    used.add(name)
    return name


def fold_batchnorm(graph: Graph) -> Graph:
    """The graph with every inference BatchNormalization that follows a Conv folded into the Conv's
    weights, in it and its subgraphs.

    Exporters write Conv then BatchNormalization (torch's Conv2d + BatchNorm2d in eval mode): a
    second pass over the whole activation that an affine map per output channel does. With
    a = scale / sqrt(var + epsilon), the Conv's W' = W * a along its output channels (axis 0) and
    B' = (B - mean) * a + bias (B = 0 when the Conv has none). It folds when W, the Conv's B and
    the statistics are constants of the graph and the Conv's output is read by the
    BatchNormalization alone; the Conv then writes the BatchNormalization's output.
    """
    readers = _readers(graph)
    producers = {n: op for op in graph.ops for n in op.outputs if n}
    constants, types = dict(graph.constants), dict(graph.types)
    used = set(graph.inputs) | set(constants) | set(producers)
    folded: dict[int, Op] = {}  # id(Conv) -> the Conv that replaces it; id(BatchNormalization) -> None
    for op in graph.ops:
        conv = producers.get(op.inputs[0]) if op.op_type == "BatchNormalization" and op.inputs else None
        if conv is None or conv.op_type != "Conv" or readers.get(op.inputs[0]) != 1 or op.inputs[0] in graph.outputs:
            continue
        replacement = _folded_conv(op, conv, constants, types, used)
        if replacement is not None:
            folded[id(conv)], folded[id(op)] = replacement, None
    return _rewritten(graph, folded, constants, types, fold_batchnorm)


def _rewritten(graph: Graph, folded: dict, constants: dict, types: dict, rewrite) -> Graph:
    """The graph with each op of `folded` (by id) replaced by its value there (an op, a list of ops,
    or None to drop it), with `constants` and `types`, and `rewrite` applied to its subgraphs; the
    graph itself when nothing changes."""
    ops = []
    for op in graph.ops:
        if op.subgraphs:
            op = _with_subgraphs(op, rewrite)
        if id(op) in folded:
            new = folded[id(op)]
            ops.extend([] if new is None else new if isinstance(new, list) else [new])
            continue
        ops.append(op)
    if not folded and all(a is b for a, b in zip(ops, graph.ops)):
        return graph
    return dataclasses.replace(graph, ops=ops, constants=constants, types=types)


def _folded_conv(bn: Op, conv: Op, constants: dict, types: dict, used: set[str]) -> Op | None:
    """The Conv with `bn` folded into new constants (added to `constants`, `types` and `used`), or
    None when it cannot be."""
    if len(bn.inputs) != 5 or len([n for n in bn.outputs if n]) != 1 or bn.attrs.get("training_mode", 0):
        return None
    if len(conv.inputs) < 2 or len(conv.outputs) != 1:
        return None
    w = constants.get(conv.inputs[1])
    b = constants.get(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
    stats = [constants.get(n) for n in bn.inputs[1:]]
    if not isinstance(w, np.ndarray) or w.dtype.kind != "f" or w.ndim < 2 or \
            (len(conv.inputs) > 2 and conv.inputs[2] and not isinstance(b, np.ndarray)):
        return None
    channels = w.shape[0]
    if any(not isinstance(s, np.ndarray) or s.dtype.kind != "f" or s.shape != (channels,) for s in stats) or \
            (b is not None and b.shape != (channels,)):
        return None
    scale, shift, mean, var = (s.astype(np.float64) for s in stats)
    a = scale / np.sqrt(var + float(bn.attrs.get("epsilon", 1e-5)))
    bias = np.zeros(channels) if b is None else b.astype(np.float64)
    new_w = (w.astype(np.float64) * a.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)
    new_b = ((bias - mean) * a + shift).astype(w.dtype)
    names = [_new_constant(f"{conv.inputs[1]}_bn_{hint}", value, constants, types, used)
             for hint, value in (("W", new_w), ("B", new_b))]
    return dataclasses.replace(conv, inputs=[conv.inputs[0], *names], outputs=[bn.outputs[0]])


def _new_constant(base: str, value: np.ndarray, constants: dict, types: dict, used: set[str]) -> str:
    """The name of `value`, added to `constants` and `types` under `base` or, when taken, base2, base3..."""
    name = _fresh(base, used)
    constants[name] = value
    types[name] = TensorType(value.dtype, value.shape)
    return name


def _readers(graph: Graph) -> dict[str, int]:
    """How many inputs of the graph's ops read each value."""
    readers: dict[str, int] = {}
    for op in graph.ops:
        for name in op.inputs:
            readers[name] = readers.get(name, 0) + 1
    return readers


# A folded embedding table may be this much larger than the table and weights it replaces, and
# no larger than EMBEDDING_TABLE_BYTES: beyond, the memory outweighs the product it saves a run.
EMBEDDING_GROWTH = 4
EMBEDDING_TABLE_BYTES = 64 << 20


def fold_embedding_products(graph: Graph) -> Graph:
    """The graph with every product of gathered embeddings by constant weights read from a table of
    the products, in it and its subgraphs.

    A decoder step looks its previous tokens up in an embedding table E and multiplies them by the
    input weights W of its first layer: MatMul(Gather(E, tokens), W), often + b (a GRU written as
    MatMul/Sigmoid/Tanh, a Linear after an Embedding). Each row of the product is a row of E @ W
    (+ b), so the pass computes that table once, in float64, and the run gathers its rows: a
    12 x 256 x 768 product less per step of the benchmark decoder. It folds when E, W (2-D) and
    b ([N]) are constants of one float dtype, the Gather is on axis 0 and read by the MatMul alone
    (and the MatMul by the Add alone), and the table stays within EMBEDDING_GROWTH times the bytes
    of E and W and EMBEDDING_TABLE_BYTES. Indices out of range are reported as the Gather's, as before.
    """
    readers = _readers(graph)
    producers = {n: op for op in graph.ops for n in op.outputs if n}
    constants, types = dict(graph.constants), dict(graph.types)
    used = set(graph.inputs) | set(constants) | set(producers)
    folded: dict[int, Op | None] = {}  # id(op) -> the Gather that replaces it (the chain's last op), or None
    chains = [c for c in (_embedding_chain(op, producers, readers, constants, graph.outputs) for op in graph.ops) if c]
    with_add = {id(matmul) for _, matmul, add in chains if add is not None}
    for gather, matmul, add in chains:
        if add is None and id(matmul) in with_add:  # folded with its Add
            continue
        table, w = constants[gather.inputs[0]], constants[matmul.inputs[1]]
        product = table.astype(np.float64) @ w.astype(np.float64)
        if add is not None:
            product += constants[_other(add, matmul.outputs[0])].astype(np.float64)
        last = add or matmul
        name = _new_constant(f"{gather.inputs[0]}_times_{matmul.inputs[1]}", product.astype(table.dtype),
                             constants, types, used)
        folded[id(gather)] = folded[id(matmul)] = None
        folded[id(last)] = dataclasses.replace(gather, inputs=[name, gather.inputs[1]], outputs=list(last.outputs))
    return _rewritten(graph, folded, constants, types, fold_embedding_products)


def _other(op: Op, name: str) -> str:
    """The input of a two-input op that is not `name`."""
    return op.inputs[1] if op.inputs[0] == name else op.inputs[0]


def _embedding_chain(op: Op, producers: dict, readers: dict, constants: dict,
                     outputs: list[str]) -> tuple[Op, Op, Op | None] | None:
    """(Gather, MatMul, the bias Add or None) when `op`, an Add or a MatMul, ends a chain that
    fold_embedding_products folds; a MatMul's Add that qualifies folds with it, from the Add."""
    add, matmul = None, op
    if op.op_type == "Add" and len(op.inputs) == 2:
        add, matmul = op, next((producers[n] for n in op.inputs if n in producers and
                                producers[n].op_type == "MatMul"), None)
    if matmul is None or matmul.op_type != "MatMul" or len(matmul.inputs) != 2:
        return None
    gather = producers.get(matmul.inputs[0])
    if gather is None or gather.op_type != "Gather" or gather.attrs.get("axis", 0) != 0 or \
            readers.get(gather.outputs[0]) != 1 or gather.outputs[0] in outputs:
        return None
    table, w = constants.get(gather.inputs[0]), constants.get(matmul.inputs[1])
    if not isinstance(table, np.ndarray) or not isinstance(w, np.ndarray) or table.ndim != 2 or w.ndim != 2 or \
            table.dtype.kind != "f" or w.dtype != table.dtype or table.shape[1] != w.shape[0]:
        return None
    grown = table.shape[0] * w.shape[1] * table.itemsize
    if grown > EMBEDDING_TABLE_BYTES or grown > EMBEDDING_GROWTH * (table.nbytes + w.nbytes):
        return None
    if add is None:
        return gather, matmul, None
    b = constants.get(_other(add, matmul.outputs[0]))
    if readers.get(matmul.outputs[0]) != 1 or matmul.outputs[0] in outputs or not isinstance(b, np.ndarray) or \
            b.dtype != table.dtype or b.shape not in ((w.shape[1],), (1,)):
        return None
    return gather, matmul, add

