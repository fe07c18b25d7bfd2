"""A Network lowered into the loop IR: scopes become graphs, builder loops become ir.Loop ops.

A loop's body graph takes, in order, the iteration number (when the body reads it), its
recurrences, its iterators' parts and every other outside value the body reads (invariants);
constants are copied into the body so that the compiler sees their values. A `while` condition
is checked before each iteration; the IR's condition gates the *next* one, so the ops computing
the condition run twice: once outside on the initial values (the loop's initial condition) and
once at the end of the body on the next values (the body's condition output).
"""

from __future__ import annotations

import numpy as np

from .builder import Builder
from .errors import BuildError
from .ir import Graph, Op, Origin, Slice, Stack
from .network import Conditional, Loop, Network, Recurrence, Tensor, _Scope


def lower(net: Network) -> Graph:
    """The network as one closed IR graph."""
    b = Builder(net.name)
    for name in net.tensors:
        b.claim(name)
    env: dict[str, str] = {}
    for t in net.inputs:
        env[t.name] = b.input(t.name, t.type)
    _lower_scope(net, net.top, b, env)
    for tensor, name in net.outputs:
        value = _value(net, b, env, tensor.name)
        if value != name:
            b.claim(name)
            b.op("Identity", [value], [name])
            b.set_type(name, tensor.type)
        b.output(name)
    return b.graph


def _lower_scope(net: Network, scope: _Scope, b: Builder, env: dict[str, str]) -> None:
    for item in _ordered(net, scope):
        _lower_item(net, item, b, env)


def _lower_item(net: Network, item: Op | _Scope, b: Builder, env: dict[str, str]) -> None:
    if isinstance(item, Loop):
        _lower_loop(net, item, b, env)
    elif isinstance(item, Conditional):
        _lower_if(net, item, b, env)
    else:
        _lower_op(net, item, b, env)


def _value(net: Network, b: Builder, env: dict[str, str], name: str) -> str:
    """The graph's name for a network value; a constant is added to the graph where it is first read,
    so that every loop body holds the constants it uses (the compiler sees their values)."""
    if name not in env:
        env[name] = b.constant(net.tensors[name].value, name=b.fresh(name))
    return env[name]


def _lower_op(net: Network, op: Op, b: Builder, env: dict[str, str], fresh: bool = False) -> None:
    """Append `op` reading its inputs through env; `fresh` names its outputs anew (a clone)."""
    outputs = [b.fresh(n) if fresh else n for n in op.outputs]
    b.origin = op.origin
    b.op(op.op_type, [_value(net, b, env, n) if n else "" for n in op.inputs], outputs, **op.attrs)
    b.origin = None
    for name, out in zip(op.outputs, outputs):
        env[name] = out
        b.set_type(out, net.tensors[name].type)


def _ordered(net: Network, scope: _Scope) -> list:
    """The scope's items in an order that computes every value before its use (creation order where
    free: a loop may read values added to its scope after the loop itself)."""
    items = scope.items
    made = {}
    for k, item in enumerate(items):
        for name in _made(item):
            made[name] = k
    deps = [{made[n] for n in _reads(net, item) if n in made} - {k} for k, item in enumerate(items)]
    done: list[int] = []
    placed = set()
    while len(done) < len(items):
        ready = next((k for k in range(len(items)) if k not in placed and deps[k] <= placed), None)
        if ready is None:
            stuck = [items[k].name if isinstance(items[k], _Scope) else items[k].outputs[0]
                     for k in range(len(items)) if k not in placed]
            raise BuildError(f"{scope.name}: {', '.join(stuck)} depend on each other in a cycle (a loop reads "
                             "a value computed from its own outputs)")
        done.append(ready)
        placed.add(ready)
    return [items[k] for k in done]


def _made(item: Op | _Scope) -> list[str]:
    return [out.name for *_, out in item.outputs] if isinstance(item, _Scope) else item.outputs


def _reads(net: Network, item: Op | _Scope) -> list[str]:
    """Names an item reads from its scope or outside: an op's inputs; a loop's or conditional's ports
    and the names its insides read from outside it."""
    if not isinstance(item, _Scope):
        return [n for n in item.inputs if n]
    return _ports(item) + _free(net, item)


def _ports(scope: Loop | Conditional) -> list[str]:
    """The values a loop or If op takes from its scope: trip count, iterated tensors and initial values;
    or the condition."""
    if isinstance(scope, Conditional):
        return [scope.condition.name]
    return [*([scope.trip.name] if scope.trip is not None else []), *(src.name for src, *_ in scope.iterators),
            *(r.initial.name for r in scope.recurrences)]


def _free(net: Network, scope: Loop | Conditional) -> list[str]:
    """Names the scope's insides (nested scopes included) read from outside it, in first-use order."""
    found: dict[str, None] = {}
    for item in scope.items:
        found.update(dict.fromkeys(_reads(net, item)))
    if isinstance(scope, Loop):
        found.update(dict.fromkeys(r.next.name for r in scope.recurrences if r.next is not None))
        found.update(dict.fromkeys(value.name for value, *_ in scope.outputs))
        if scope.condition is not None:
            found[scope.condition.name] = None
    else:
        found.update(dict.fromkeys(v.name for *values, _ in scope.outputs for v in values))
    return [n for n in found if not net.tensors[n].scope.within(scope)]


def _lower_loop(net: Network, loop: Loop, b: Builder, env: dict[str, str]) -> None:
    for r in loop.recurrences:
        if r.next is None:
            raise BuildError(f"loop '{loop.name}': recurrence '{r.name}' has no next value; call set_next on it")
    if loop.trip is None and loop.condition is None and not loop.iterators:
        raise BuildError(f"loop '{loop.name}' has no limit: add a trip limit or an iterator, or it never ends")
    body = b.sub(loop.name)
    benv: dict[str, str] = {}
    if loop._iteration is not None:
        benv[loop._iteration.name] = body.input(body.fresh("iteration"), loop._iteration.type)
    for r in loop.recurrences:
        benv[r.name] = body.input(body.fresh(r.name), r.type)
    for _, _, _, part in loop.iterators:
        benv[part.name] = body.input(body.fresh(part.name), part.type)
    invariants = [n for n in _free(net, loop) if net.tensors[n].value is None]
    for name in invariants:
        benv[name] = body.input(body.fresh(name), net.tensors[name].type)
    _lower_scope(net, loop, body, benv)

    cone = _condition_ops(net, loop)
    if loop.condition is not None:
        after = dict(benv, **{r.name: _value(net, body, benv, r.next.name) for r in loop.recurrences})
        if loop._iteration is not None:
            after[loop._iteration.name] = body.op1("Add", benv[loop._iteration.name], body.constant(np.int64(1)))
            body.set_type(after[loop._iteration.name], loop._iteration.type)
        for op in cone:
            _lower_op(net, op, body, after, fresh=True)
        body.output(_value(net, body, after, loop.condition.name))
    for r in loop.recurrences:
        body.output(_value(net, body, benv, r.next.name))
    stacks, finals = [], {r.name: k for k, r in enumerate(loop.recurrences)}
    for value, kind, axis, length, _ in loop.outputs:
        if _final_of(loop, value, kind) is None:
            body.output(_value(net, body, benv, value.name))
            stacks.append(Stack(axis=0) if kind == "last" else Stack(axis=axis, reverse=kind == "reverse",
                                                                     length=length))

    cond = ""
    if loop.condition is not None:  # the condition on the initial values, before the first iteration
        before = dict(env, **{r.name: _value(net, b, env, r.initial.name) for r in loop.recurrences})
        if loop._iteration is not None:
            before[loop._iteration.name] = b.constant(np.int64(0))
        for op in cone:
            _lower_op(net, op, b, before, fresh=True)
        cond = _value(net, b, before, loop.condition.name)
    def outer(t: Tensor) -> str:
        return _value(net, b, env, t.name)

    b.origin = Origin("rnnloop", loop.name, "Loop")
    names = b.loop(body.graph, trip_count=outer(loop.trip) if loop.trip is not None else "", cond=cond,
                   carried=[outer(r.initial) for r in loop.recurrences],
                   sliced=[(outer(src), Slice(axis=axis, reverse=reverse)) for src, axis, reverse, _ in loop.iterators],
                   invariants=[env[n] for n in invariants], stacked=stacks,
                   body_iteration=loop._iteration is not None, body_cond_out=loop.condition is not None)
    b.origin = None
    for r, name in zip(loop.recurrences, names):
        b.set_type(name, r.type)
    stacked = iter(names[len(loop.recurrences):])
    for value, kind, _, _, out in loop.outputs:
        final = _final_of(loop, value, kind)
        if final is not None:
            env[out.name] = names[finals[final.name]]
            continue
        name = next(stacked)
        if kind == "last":  # the last entry of a stack on axis 0 (an error when the loop ran zero times)
            name = b.op1("Gather", name, b.constant(np.int64(-1)), axis=0)
        b.set_type(name, out.type)
        env[out.name] = name


def _final_of(loop: Loop, value: Tensor, kind: str) -> Recurrence | None:
    """The recurrence whose final value a 'last' output of `value` is: the recurrence itself, or the
    one whose next value it is."""
    if kind != "last":
        return None
    if isinstance(value, Recurrence) and value.scope is loop:
        return value
    return next((r for r in loop.recurrences if value is r.next), None)


def _condition_ops(net: Network, loop: Loop) -> list[Op]:
    """The loop's own ops that compute its while condition, in order; only recurrences, the iteration
    number and outside values may feed them, not an iterator or a nested loop."""
    if loop.condition is None:
        return []
    needed = _needed(net, loop, [loop.condition.name])
    items = [item for item in loop.items if id(item) in needed]
    parts = {part.name for *_, part in loop.iterators}
    read = [loop.condition.name, *(n for item in items if isinstance(item, Op) for n in item.inputs)]
    bad = next((f"'{n}', from an iterator" for n in read if n in parts), None) or \
        next((f"{type(item).__name__.lower()} '{item.name}'" for item in items if isinstance(item, _Scope)), None)
    if bad:
        raise BuildError(f"loop '{loop.name}': its while condition depends on {bad}; it is checked before each "
                         "iteration, so compute it from recurrences and outside values")
    return items


def _lower_if(net: Network, conditional: Conditional, b: Builder, env: dict[str, str]) -> None:
    """An ir.If whose branches take every outside value the conditional reads and each run only the
    items their outputs need."""
    captures = [n for n in _free(net, conditional) if net.tensors[n].value is None]
    branches = []
    for k, label in enumerate(("then", "else")):
        sub = b.sub(f"{conditional.name}/{label}")
        senv = {n: sub.input(sub.fresh(n), net.tensors[n].type) for n in captures}
        values = [v[k] for v in conditional.outputs]
        needed = _needed(net, conditional, [v.name for v in values])
        for item in _ordered(net, conditional):
            if id(item) in needed:
                _lower_item(net, item, sub, senv)
        for v in values:
            sub.output(_value(net, sub, senv, v.name))
        branches.append(sub.graph)
    b.origin = Origin("rnnloop", conditional.name, "If")
    names = b.if_(_value(net, b, env, conditional.condition.name), *branches,
                  [_value(net, b, env, n) for n in captures], len(conditional.outputs))
    b.origin = None
    for (*_, out), name in zip(conditional.outputs, names):
        env[out.name] = name
        b.set_type(name, out.type)


def _needed(net: Network, scope: _Scope, names: list[str]) -> set[int]:
    """id() of the scope's items that computing `names` needs."""
    needed: set[int] = set()
    todo = list(names)
    while todo:
        t = net.tensors[todo.pop()]
        producer = net._producer.get(t.name)
        if t.scope is scope and producer is not None and id(producer) not in needed:
            needed.add(id(producer))
            todo.extend(_reads(net, producer))
    return needed
