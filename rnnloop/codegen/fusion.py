"""Elementwise fusion: a connected group of elementwise ops in a loop body becomes one loop nest.

An LSTM cell's gates are nine elementwise ops (three Sigmoids, two Tanhs, Muls and an Add) on
[batch, hidden] arrays. One loop nest per op writes and rereads eight intermediate arrays every
step, and each nest is a function Numba compiles; one nest for the group keeps the intermediates
in registers and compiles once. Only the values used outside the group (the next cell state, the
output) are written to memory.

A group qualifies when it has a single sink (every member feeds the last one, so every member's
shape broadcasts into the sink's, which the nest iterates over) and nothing outside the group reads
a member before the sink is computed (the nest runs where the sink was). Each member's broadcast is
still checked with its own error message; a member smaller than the sink along an axis is simply
recomputed along it. Groups that do not qualify run op by op, and so do ops whose inputs are all
fixed before the loop (those are hoisted out of it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..ir import Graph, Op, TensorType
from .emitter import NoRule, Var, dtype_name, int_argument
from .kernel import HELPER, SPLIT_ELEMENT_OPS, emit_shared_call
from .scalar import ELEMENTWISE, scalar_expr
from .scalar import NoRule as NoScalarRule

# Ops whose element code can raise (integer division by zero, 0 to a negative power): a group holds
# at most one, so that an error names the right node.
_RAISING = frozenset({"Div", "Mod", "Pow"})


@dataclass
class Group:
    """Elementwise ops fused into one loop nest, in body order; the last is the sink."""

    ops: list[Op]
    materialized: set[str]  # member outputs read outside the group (the sink's included)


def plan(body: Graph, fixed: set[str]) -> dict[int, Group]:
    """The groups of two or more ops among `body`'s, by id() of each member. `fixed` names the
    values that are the same every iteration (invariant inputs, constants)."""
    varying = set(body.inputs) - fixed
    for op in body.ops:
        if any(n in varying for n in op.inputs if n):
            varying.update(n for n in op.outputs if n)
    members = [op for op in body.ops if type(op) is Op and op.op_type in ELEMENTWISE
               and len(op.outputs) == 1 and any(n in varying for n in op.inputs if n)]
    producer = {op.outputs[0]: op for op in members}
    parent = {id(op): id(op) for op in members}

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for op in members:
        for n in op.inputs:
            if n in producer:
                parent[root(id(op))] = root(id(producer[n]))
    components: dict[int, list[Op]] = {}
    for op in members:
        components.setdefault(root(id(op)), []).append(op)

    position = {id(op): k for k, op in enumerate(body.ops)}
    readers: dict[str, list[Op]] = {}
    for op in body.ops:
        for n in op.inputs:
            readers.setdefault(n, []).append(op)
    groups: dict[int, Group] = {}
    for ops in components.values():
        group = _qualify(ops, readers, position, set(body.outputs))
        if group is not None:
            groups.update((id(op), group) for op in ops)
    return groups


def split_first(body: Graph, fixed: set[str], const) -> Graph:
    """`body` with each Split along the last axis of an elementwise result that nothing else reads
    done first: the op runs on the parts of its inputs, up the chain of such ops, when all of it then
    fuses into one group with what reads the parts (else `body` as it is). `const` gives a constant's
    value (LoopGen.const).

    An LSTM cell adds the bias (and in int8, dequantises) over [batch, 4 hidden], then splits the
    gates: two nests, with the sum written and read in between. Split first, the parts of a
    product's result are column views of its buffer (fused nests read them in place), and the cell
    is one nest (an int8 LSTM step at batch 1: 1-3% faster, in a loop of steps alone)."""
    readers: dict[str, int] = {}
    for op in body.ops:
        for n in op.inputs:
            readers[n] = readers.get(n, 0) + 1
    types = dict(body.types)
    taken = set(types) | set(body.constants) | set(body.inputs) | {n for op in body.ops for n in op.outputs}
    ops, changed, parts = list(body.ops), True, {}  # parts: each new op's id -> the first Split's id
    while changed:
        changed = False
        producers = {op.outputs[0]: k for k, op in enumerate(ops) if len(op.outputs) == 1}
        for k, split in enumerate(ops):
            x = split.inputs[0] if type(split) is Op and split.op_type == "Split" and split.inputs else None
            p = producers.get(x)
            if p is None or readers.get(x) != 1 or x in body.outputs:
                continue
            rewritten = _split_first(ops[p], split, types, const, taken)
            if rewritten is None:
                continue
            for n in ops[p].inputs + split.inputs:
                readers[n] -= 1
            for op in rewritten:
                parts[id(op)] = parts.get(id(split), id(split))
                for n in op.inputs:
                    readers[n] = readers.get(n, 0) + 1
            ops[k:k + 1] = rewritten
            del ops[p]
            changed = True
            break
    if not parts:
        return body
    graph = dataclasses.replace(body, ops=ops, types=types)
    groups = plan(graph, fixed)
    for first in set(parts.values()):
        mine = [op for op in ops if parts.get(id(op)) == first and op.op_type != "Split"]
        if len({id(groups.get(id(op))) for op in mine}) != 1 or id(mine[0]) not in groups:
            return body  # not one group: the parts would run as several nests
    return graph


def _split_first(producer: Op, split: Op, types: dict, const, taken: set[str]) -> list[Op] | None:
    """[Splits of `producer`'s inputs, then `producer` once per part] for `split` of its result, or
    None when that does not apply (see split_first)."""
    if type(producer) is not Op or producer.op_type not in ELEMENTWISE or producer.op_type in _RAISING:
        return None
    t = types.get(split.inputs[0])
    if not isinstance(t, TensorType) or not t.shape or split.attrs.get("axis", 0) not in (-1, len(t.shape) - 1):
        return None
    total = t.shape[-1]
    sizes = const(split.inputs[1]) if len(split.inputs) > 1 and split.inputs[1] else None
    if not isinstance(total, int) or sizes is None or sizes.ndim != 1 or int(sizes.sum()) != total \
            or "" in split.outputs or len(sizes) != len(split.outputs):
        return None
    ops, inputs = [], []  # inputs: per producer input, its name for each part
    for n in producer.inputs:
        value = const(n) if n else None
        known = types.get(n) if value is None else value
        shape, dtype = getattr(known, "shape", None), getattr(known, "dtype", None)
        if not n or (shape is not None and (len(shape) == 0 or shape[-1] == 1)):
            inputs.append([n] * len(sizes))  # the same for every part (broadcast along the axis)
            continue
        if shape is None or shape[-1] != total or dtype is None:
            return None
        names = []
        for j, size in enumerate(sizes):
            name = f"{n}_part{j}"
            while name in taken:
                name += "_"
            taken.add(name)
            names.append(name)
            types[name] = TensorType(np.dtype(dtype), (*shape[:-1], int(size)))
        ops.append(Op("Split", [n, split.inputs[1]], names, {"axis": -1}, origin=split.origin))
        inputs.append(names)
    for j, out in enumerate(split.outputs):
        ops.append(dataclasses.replace(producer, inputs=[names[j] for names in inputs], outputs=[out]))
    return ops


def _qualify(ops: list[Op], readers: dict[str, list[Op]], position: dict[int, int],
             outputs: set[str]) -> Group | None:
    if len(ops) < 2 or sum(op.op_type in _RAISING for op in ops) > 1:
        return None
    ids = {id(op) for op in ops}
    sinks = [op for op in ops if not any(id(r) in ids for r in readers.get(op.outputs[0], []))]
    if sinks != [ops[-1]]:
        return None
    last = position[id(ops[-1])]
    materialized = {ops[-1].outputs[0]}
    for op in ops:
        outside = [r for r in readers.get(op.outputs[0], []) if id(r) not in ids]
        if any(position[id(r)] < last for r in outside):
            return None
        if outside or op.outputs[0] in outputs:
            materialized.add(op.outputs[0])
    return Group(ops, materialized)


def emit(g, ops: list[Op], materialized: set[str]) -> dict[str, Var]:
    """Emit `ops` (a Group's, or one elementwise op) as one loop nest; returns the materialized
    values. `g` is the LoopGen; each op's output shape is computed and checked in the body first."""
    lazy: dict[str, Var] = {}  # every member's element: expr is its local name in the nest
    results: dict[str, Var] = {}  # the materialized members' buffers
    for k, op in enumerate(ops):
        present = [v for v in _inputs(g, lazy, op) if v is not None]
        dtype, rank = g.out_type(op.outputs[0], max(v.rank for v in present))
        dims = _broadcast_dims(g, op, [v for v in present if v.kind != "scalar"], rank)
        name = op.outputs[0]
        lazy[name] = Var(f"e{k}", dtype, rank, "lazy", tuple(dims))
        if name in materialized:
            results[name] = Var(g.buffer(name, dtype, dims), dtype, rank, "buffer", tuple(dims))
    if len(ops) == 1 and _binary_rows(g, ops[0], results):
        return results
    # The nest runs over the sink's elements: a member broadcast into an empty sink (a size 1
    # against a size 0) would never be written. That rare call runs in the interpreter.
    sink = lazy[ops[-1].outputs[0]]
    for name, v in results.items():
        if v.shape != sink.shape and name != ops[-1].outputs[0]:
            g.fail_if(f"{_size(sink)} == 0 and {_size(v)} != 0", ops[-1],
                      f"'{name}' is broadcast into an empty result, which the fused loop does not compute",
                      fallback=True)
    arrays = {v.expr: v for v in results.values()}  # the helper's parameters: outputs, then inputs
    for op in ops:
        arrays.update((v.expr, v) for v in _inputs(g, lazy, op) if v is not None and v.kind not in ("scalar", "lazy"))
    # A view of columns of a contiguous array (LoopGen.column_parts) is read from that array at its
    # first column, passed after the arrays: one array at fixed offsets vectorises better than a
    # row view per part (an LSTM's gates at batch 1: 0.19 against 0.39 µs).
    columns: dict[str, tuple[str, str]] = {}  # view -> (that array, the parameter of its first column)
    firsts: list[str] = []
    for v in list(arrays.values()):
        if v.expr in g.column_parts:
            whole, first = g.column_parts[v.expr]
            arrays.setdefault(whole.expr, whole)
            columns[v.expr] = (whole.expr, f"q{len(firsts)}")
            firsts.append(first)
    least = -(-SPLIT_ELEMENT_OPS // len(ops))  # the elements that make a nest worth sharing
    split = _split_axis(g, sink, ops[-1].outputs[0], least)
    function = g.module.helper(_function(g, ops, lazy, results, list(arrays.values()), columns, split))
    raising = [op for op in ops if op.op_type in _RAISING]
    if raising:
        g.mark(raising[0])  # integer division by zero raises inside the helper
    if split is None:
        g.body(f"{function}({', '.join([*(a for a in arrays if a not in columns), *firsts])})")
    else:
        emit_shared_call(g, function, [v for e, v in arrays.items() if e not in columns],
                         _contiguous(arrays.values(), results), firsts, sink.dim(split), _size(sink), least)
    return results


def _split_axis(g, sink: Var, name: str, least: int) -> int | None:
    """The axis along which a nest's call is shared with a worker (kernel.emit_shared_call): its
    first axis but the last not of size 1, when the model fixes its sizes (as it declares `name`,
    the sink, or as its dims say) and it has at least `least` elements. None for a nest of sizes
    the model leaves open: sharing costs each nest about 1.4 s of compile time (three of FSMN's:
    9.8 s against 5.7, ad hoc on the Xeon, 2026-12-02), which a nest that turns out small would pay
    for nothing; a batch of several rows is split over the threads before the kernel (batching.py).
    None also inside a loop (a step's work: the products of a step are shared instead)."""
    if g.loop is not None or sink.rank == 0 or not g.module.at_once:
        return None
    dims = [sink.dim(d) for d in range(sink.rank)]
    declared = g.declared_shape(name, sink.rank) or (None,) * sink.rank
    sizes = [d if isinstance(d, int) else int(e) if e.isdigit() else None for d, e in zip(declared, dims)]
    if None in sizes or int(np.prod(sizes)) < least:
        return None
    # Not the last axis: bounds of its own on the innermost loop keep LLVM from vectorising it
    # (a chain of 10 ops on [1, 2**20] took 4 times as long).
    return next((d for d, size in enumerate(sizes[:-1]) if size != 1), None)


# runtime.binary_rows computes these ops, by their codes there.
_BINARY_ROWS = {"Add": 0, "Sub": 1, "Mul": 2, "Div": 3}


def _binary_rows(g, op: Op, results: dict[str, Var]) -> bool:
    """One Add, Sub, Mul or (float) Div of two arrays of rank 1 or 2, such as a bias added to a
    product: emitted as a call of runtime.binary_rows, compiled once per machine, instead of a nest
    of its own compiled with each kernel (0.1 s of a GRU kernel's compile time, each)."""
    out = results.get(op.outputs[0])
    ins = [g.var(n) for n in op.inputs]
    if op.op_type not in _BINARY_ROWS or out is None or not 1 <= out.rank <= 2 or len(ins) != 2:
        return False
    if op.op_type == "Div" and out.dtype.kind != "f":
        return False  # integer division raises on zero and floors: the nest has its rule
    if any(v is None or v.kind == "scalar" or v.rank < 1 or v.dtype != out.dtype for v in ins):
        return False
    rows = [v.expr if v.rank == 2 else f"{v.expr}[None, :]" for v in (out, *ins)]
    g.body(f"_r.binary_rows({', '.join(rows)}, {_BINARY_ROWS[op.op_type]})")
    return True


def _size(v: Var) -> str:
    """The element count of a value of known dims, as an expression."""
    return " * ".join(v.dim(a) for a in range(v.rank)) or "1"


def _broadcast_dims(g, op: Op, arrays: list[Var], rank: int) -> list[str]:
    """Expressions of the broadcast output dims, checked: NumPy's rules, axis by axis from the right.

    A size already taken into a checked dim (LoopGen.dim_sizes) needs no second check: in an LSTM's
    gates, every member meets the batch size of the gates again, and one check per axis is enough.
    Nor do sizes checked together earlier in the iteration, or before the loop (LoopGen.checked_dims).
    """
    dims = []
    for d in range(rank):
        dim, covered = None, frozenset()
        for v in arrays:
            if v.rank - rank + d < 0:
                continue
            size = v.dim(v.rank - rank + d)
            sizes = g.dim_sizes.get(size, frozenset([size]))
            if size == "1" or sizes <= covered:
                continue
            if dim is None or covered <= sizes:
                dim, covered = size, sizes
                continue
            covered = covered | sizes
            known = g.checked_dims.get(covered)
            if known is not None and (known[1] is g.hoist or known[1] is g.body):
                dim = known[0]  # checked earlier in the iteration (or before the loop)
                continue
            checked = g.body.fresh(f"d{d}")
            g.body(f"{checked} = _r.broadcast_dim({int_argument(dim)}, {int_argument(size)})")
            g.fail_if(f"{checked} < 0", op, f"the input shapes do not broadcast (axis {d} of the output)")
            g.dim_sizes[checked] = covered
            # Checked, sizes that include a fixed one above 1 broadcast to it. (The fixed size is
            # not given `covered`: a literal means the same anywhere, the check only where it ran.)
            dim = next((s for s in covered if s.isdigit() and int(s) > 1), checked)
            if g.body.depth == g.top_depth:  # not inside a block that may not run
                g.checked_dims[covered] = (dim, g.body)
        dims.append(dim or "1")
    return dims


def _inputs(g, lazy: dict[str, Var], op: Op) -> list[Var | None]:
    return [None if not n else lazy.get(n) or g.var(n) for n in op.inputs]


def _function(g, ops: list[Op], lazy: dict[str, Var], results: dict[str, Var], arrays: list[Var],
              columns: dict[str, tuple[str, str]], split: int | None = None) -> str:
    """The helper's source, named FUNCTION, with `arrays` but the column parts as parameters (p0, p1,
    ...), then the first columns of `columns` (q0, q1, ...: see emit).

    It loops over the sink's shape; every other array is read (written) at the loop index, or at 0
    along an axis where it has size 1 (a flag per axis, found at run time). The source holds one
    loop: LLVM versions the innermost one on the last axis's flags (0 or 1), and its copy for flags
    of 1 vectorises. (A general copy of the loop written out cost a third of an LSTM kernel's compile
    time; spreading arrays of one column first, through a call, cost 5% of a GRU step at batch 1.)
    """
    sink = results[ops[-1].outputs[0]]
    rank = sink.rank
    idx = [f"i{d}" for d in range(rank)]
    name = {v.expr: f"p{k}" for k, v in enumerate(arrays)}
    full = _full(g, ops, lazy, results)
    # The loop must see arrays Numba types as C-contiguous for the inner loop to vectorise.
    # Buffers and carried state are (np.empty, np.ascontiguousarray), and are indexed directly;
    # column parts of those are read from them (see emit); other arrays (views, inputs) are read by
    # rows through np.ascontiguousarray, a view when the row's elements are adjacent. A row view
    # costs reference counting, so it is not taken when not needed (a tiny loop feels it).
    contiguous = _contiguous(arrays, results)
    setup, rows, at = [], [], {}
    viewed: set[str] = set()  # the parameters read through a row view r{p}
    leading: dict[str, list[str]] = {}  # parameter -> its index along each axis but the last

    def row_view(p: str) -> str:
        """r{p}: parameter p's row at the sink's leading indices (all of a 1-D p), made once."""
        if p not in viewed:
            viewed.add(p)
            lead = leading[p]
            row = f"np.ascontiguousarray({p}[{', '.join(lead)}])" if lead else f"np.ascontiguousarray({p})"
            (rows if lead else setup).append(f"r{p} = {row}")
        return f"r{p}"

    last: dict[str, str] = {}  # parameter -> its index along the last axis
    # Arrays read or written at the sink's index: not column parts, nor an array only read through
    # its parts.
    direct = {v.expr for op in ops for v in _inputs(g, lazy, op) if v is not None} - set(columns)
    direct |= {v.expr for v in results.values()}
    for v in arrays:
        p = name[v.expr]
        if v.expr in columns or v.rank == 0:
            continue
        leading[p] = []
        for axis in range(v.rank - 1):
            d = rank - v.rank + axis
            if v.expr in full:
                leading[p].append(idx[d])
            else:
                setup.append(f"f{p}_{axis} = 1 if {p}.shape[{axis}] != 1 else 0")
                leading[p].append(f"{idx[d]} * f{p}_{axis}")
        last[p] = idx[-1]
        if v.expr in direct and v.expr not in full and not _wide(v):
            setup.append(f"g{p} = 1 if {p}.shape[{v.rank - 1}] != 1 else 0")
            last[p] = f"{idx[-1]} * g{p}"
    for v in arrays:
        p = name[v.expr]
        if v.rank == 0:
            at[p] = f"{p}[()]"
        elif v.expr in contiguous:
            at[p] = f"{p}[{', '.join(leading[p] + [last[p]])}]"
        elif v.expr in columns:  # the same leading axes as its whole array, so the same indices
            # The column index is unsigned (first >= 0: Split's offsets): a signed one gets Numba's
            # code for negative indices, which turns the vector loads into gathers (LSTM gates at
            # batch 1: 0.25 against 0.35 µs). A whole array not sure to be C-contiguous is read
            # through its row, one view for all its parts.
            whole, first = columns[v.expr]
            column = f"np.uint64({first} + {idx[-1]})"
            pw = name[whole]
            at[p] = f"{pw}[{', '.join(leading[pw] + [column])}]" if whole in contiguous else \
                f"{row_view(pw)}[{column}]"
        else:
            at[p] = f"{row_view(p)}[{last[p]}]"

    params = [p for e, p in name.items() if e not in columns]
    lines = [HELPER,
             f"def FUNCTION({', '.join([*params, *(q for _, q in columns.values()), *(['lo', 'hi'] if split is not None else [])])}):",
             f'    """{" ".join(op.op_type for op in ops)} over rank {rank}"""']
    lines += ["    " + line for line in setup]
    for d in range(rank):
        pad = "    " * (d + 1)
        if d == rank - 1:  # the row views, just outside the innermost loop
            lines += [pad + line for line in rows]
        bounds = "lo, hi" if d == split else f"{name[sink.expr]}.shape[{d}]"
        lines.append(f"{pad}for {idx[d]} in range({bounds}):")
    pad = "    " * (rank + 1)
    for k, op in enumerate(ops):
        ins = _inputs(g, lazy, op)
        exprs = ["" if v is None else v.expr if v.kind in ("scalar", "lazy") else at[name[v.expr]] for v in ins]
        out = op.outputs[0]
        dtype = lazy[out].dtype
        try:
            value = scalar_expr(op.op_type, op.attrs, [None if v is None else v.dtype for v in ins], dtype, exprs)
        except NoScalarRule as e:
            raise NoRule(str(e)) from None
        # Held in its own dtype, as an array would hold it: int32 arithmetic wraps at 32 bits.
        lines.append(f"{pad}{lazy[out].expr} = {dtype_name(dtype)}({value})")
        if out in results:
            lines.append(f"{pad}{at[name[results[out].expr]]} = {lazy[out].expr}")
    return "\n".join(lines)


def _contiguous(arrays, results: dict[str, Var]) -> set[str]:
    """The expressions of a nest's arrays that are C-contiguous, so indexed directly: its buffers and
    carried state (np.empty, np.ascontiguousarray) and its results."""
    return {v.expr for v in arrays if v.kind in ("buffer", "state")} | {v.expr for v in results.values()}


def _wide(v: Var) -> bool:
    """Whether v's last size is the nest's for sure, needing no flag: a fixed size above 1 (a nest's
    inputs broadcast to its sizes, checked before it runs, so the nest's is that size too)."""
    last = v.dim(v.rank - 1)
    return last.isdigit() and int(last) > 1


def _full(g, ops: list[Op], lazy: dict[str, Var], results: dict[str, Var]) -> set[str]:
    """Expressions of the arrays sure to have the sink's shape: the sink, and going back from a
    value of that shape, the only array input of its op when of the same rank (a unary chain)."""
    rank = results[ops[-1].outputs[0]].rank
    full = {ops[-1].outputs[0]}
    for op in reversed(ops):
        if op.outputs[0] in full:
            arrays = [(n, v) for n, v in zip(op.inputs, _inputs(g, lazy, op))
                      if v is not None and v.kind != "scalar" and v.rank > 0]
            if len(arrays) == 1 and arrays[0][1].rank == rank:
                full.add(arrays[0][0])
    exprs = set()
    for n in full:
        if n in results or n not in lazy:
            exprs.add((results.get(n) or g.var(n)).expr)
    return exprs
