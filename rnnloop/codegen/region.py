"""The kernel of a region (partition.py): its ops as straight-line code in one function, loops and the
layers of a stack (outlined) as functions it calls and Ifs as native `if`s; compiled at load and
called like the interpreter's run_region."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..interp.graph import Options, run_region
from ..ir import Graph, Loop, Op, Origin, Region
from .emitter import NoRule, Var, code_text, dtype_name
from .fused import Compiled
from .kernel import ENTRY, HELPER, KernelModule, LoopFunction, LoopGen, ModuleGen, _any_layout, drop_unused, emit_ops


def generate_region(body: Graph, label: str, at_once: bool = True) -> KernelModule:
    """The kernel module of a region's body; with `at_once`, loops that can run at once do
    (concurrent_loops), and large loop nests share their work with a worker (kernel.emit_shared_call).
    Raises NoRule, with `op` set to the op that cannot be compiled when there is one.

    The layers of a stack become one function the kernel calls once per layer (outlined): a
    layer's part that no other layer shares is generated again inline, since a function of its own
    would only add a call and a compile."""
    inline: set[int] = set()
    while True:
        try:
            module, kernel = _generate(body, label, at_once, inline)
        except NoRule as e:
            if not isinstance(e.op, Region):
                raise
            # A part refused, or an op in it (inline, the refusal then names that op): its ops inline.
            inline.add(id(e.op.body.ops[0]))
            continue
        alone = {id(parts[0].body.ops[0]) for parts in module.parts.values() if len(parts) == 1}
        if not alone:
            return kernel
        inline |= alone


def _generate(body: Graph, label: str, at_once: bool, inline: set[int]) -> tuple[ModuleGen, KernelModule]:
    module = ModuleGen(label)
    module.loops = 1  # (the loops it calls are inner loops: `kernel` is the region's function)
    module.at_once = at_once
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
    body, g.partners = outlined(body, g.partners, inline)
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
    return module, replace(module.kernel_module("kernel", g.constants), bound=bool(bind))


def outlined(graph: Graph, partners: dict[int, Loop], inline: set[int]) -> tuple[Graph, dict[int, Loop]]:
    """The graph with each run of ops lowered from one model node that holds a loop (an LSTM, GRU or
    RNN layer: its directions, their loops and the glue that joins them) as a nested Region, which
    the kernel calls as a function (emit_part). Layers of one kind are then one function, compiled
    once: Numba took 4-5 s to compile each layer's part of a 3-layer bidirectional LSTM encoder's
    kernel. Runs whose first op's id is in `inline` stay as they are. Returns the graph and the pairs
    of loops run at once (concurrent_loops) that are still both in one function."""
    ops, result, k = graph.ops, [], 0
    function: dict[int, int] = {}  # id(op) -> the part holding it (0: none)
    while k < len(ops):
        node = _node(ops[k])
        end = k + 1
        while node is not None and end < len(ops) and _node(ops[end]) == node:
            end += 1
        run = ops[k:end]
        if len(run) > 1 and id(run[0]) not in inline and any(isinstance(op, Loop) for op in run):
            result.append(_part(graph, run, node))
            function.update((id(op), len(result)) for op in run)
        else:
            result.extend(run)
        k = end
    if len(result) == len(ops):
        return graph, partners
    return replace(graph, ops=result), {first: second for first, second in partners.items()
                                        if function.get(first, 0) == function.get(id(second), 0)}


def _node(op: Op) -> tuple | None:
    """The model node `op` was lowered from (both directions of a bidirectional one alike), if known."""
    o = op.origin
    return None if o is None else (o.format, o.name, o.op_type, o.opset, o.domain)


def _part(graph: Graph, ops: list[Op], node: tuple) -> Region:
    """A nested Region of `ops`: a closed graph reading what they read from outside (the region's
    constants as inputs too: the kernel holds them already) and giving what is read after them."""
    made = {n for op in ops for n in op.outputs if n}
    inputs = list(dict.fromkeys(n for op in ops for n in op.inputs if n and n not in made))
    members = {id(op) for op in ops}
    read_after = {n for op in graph.ops if id(op) not in members for n in op.inputs} | set(graph.outputs)
    outputs = [n for op in ops for n in op.outputs if n and n in read_after]
    body = Graph(f"{graph.name}/part", inputs, outputs, list(ops), {}, graph.types)
    return Region("Region", inputs, outputs, origin=Origin(*node), body=body)


def emit_part(g: LoopGen, op: Region) -> list[Var]:
    """A nested Region (outlined) as a call of its function, which returns arrays of its own."""
    ins = [g.var(n) for n in op.inputs]
    if any(v is None or v.kind in ("sequence", "lazy") for v in ins):
        raise NoRule(f"{op.where()}: an input of its part is not an array the kernel holds")
    known = {**g.known, **{n: v for n, v in g.graph.constants.items() if isinstance(v, np.ndarray)}}
    fn = _part_function(g.module, op, ins, known, g.partners)
    g.module.parts.setdefault(fn.name, []).append(op)
    g.module.loop_calls[fn.name] = g.module.loop_calls.get(fn.name, 0) + 1
    args = [_any_layout(fn.name, v) for v in ins if v.kind != "scalar"]
    args += [g.pass_constant(value, "k_part") for value in fn.constants]
    results = g.body.fresh("results")
    g.body(f"# {code_text(op.where())}")
    g.body(f"{results} = {fn.name}(status, np.int64({g.code(fn.first_code)}), max_iter, {', '.join(args)})")
    outs = []
    for k, (name, (dtype, rank)) in enumerate(zip(op.outputs, fn.out_types)):
        var = g.body.fresh(f"v_{name}")
        g.body(f"{var} = {results}[{k}]")
        outs.append(Var(var, dtype, rank, "fresh"))  # (its own: see _returned)
    return outs


def _part_function(module: ModuleGen, op: Region, ins: list[Var], known: dict[str, np.ndarray],
                   partners: dict[int, Loop]) -> LoopFunction:
    """Emit the function of a nested Region: status, eb, max_iter, its array inputs, then the constants
    its ops need (inner loops' packed weights); it returns its outputs, each an array of its own.
    Errors are relative to eb, as an inner loop's, so that parts of one text share one function
    (ModuleGen.add_loop_function), each with its own messages."""
    name = f"part{len(module.parts) + 1}"
    body = op.body
    g = LoopGen(module, body, {n: v for n, v in known.items() if n in body.inputs}, op.where())
    g.code_base = len(module.errors) + 1
    g.params = ["status", "eb", "max_iter"]
    g.partners = partners
    for n, v in zip(body.inputs, ins):
        if v.kind == "scalar":  # a literal in the caller: the same literal here
            g.define(n, v)
            continue
        arg = g.pre.fresh(f"in_{n}")
        g.params.append(arg)
        g.define(n, Var(arg, v.dtype, v.rank, "invariant"))
    g.pre("t = 0")
    emit_ops(g, body, set(), hoist=False)
    returned: set[str] = set()
    outputs = [_returned(g, n, returned) for n in body.outputs]
    lines = [HELPER, f"def {name}({', '.join(g.params)}):", f'    """{code_text(op.where())}"""',
             *g.pre.lines, *g.body.lines,
             f"    return ({', '.join(v.expr for v in outputs)}{',' if len(outputs) == 1 else ''})"]
    text = "\n".join(drop_unused(lines, g.owned))
    out_types = [(v.dtype, 0 if v.kind == "scalar" else v.rank) for v in outputs]
    return LoopFunction(module.add_loop_function(name, text), g.constants, out_types, g.code_base, None)


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
        shared = "".join(f"; {', '.join(layers)} share one function" for layers in self.kernel.layers)
        return f"{self.label}: {len(ops)} op(s) compiled into one kernel ({names}){shared}"
