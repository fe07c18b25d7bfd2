"""Loops as functions in the style of jax.lax: scan, while_loop, fori_loop, cond, and trace.

Each traces the Python functions it is given over symbolic tensors (NumPy operators, ufuncs and
`rnnloop.op` functions work on them) into one loop of a Network. Called on NumPy arrays, it runs
eagerly: the first call with a function and an argument signature (structure, dtypes, shapes)
traces and compiles, later calls run the compiled Session. Called while another function is being
traced, it adds a loop nested in the one being traced. Arrays a function closes over are baked in
as constants when it is traced, as in JAX.
"""

from __future__ import annotations

import inspect
import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import BuildError, InputError
from .ir import TensorType
from .network import Network, Tensor, _Scope, mismatch

# ---------------------------------------------------------------------------------------------
# Trees of values: None, tuples, lists and dicts of leaves (arrays, scalars or Tensors).


def flatten(tree: Any) -> tuple[list[Any], Any]:
    """The leaves of a tree in order, and its structure (hashable)."""
    if tree is None:
        return [], None
    if isinstance(tree, (tuple, list)):
        parts = [flatten(x) for x in tree]
        return [leaf for p in parts for leaf in p[0]], (type(tree).__name__, tuple(p[1] for p in parts))
    if isinstance(tree, dict):
        keys = sorted(tree)
        parts = [flatten(tree[k]) for k in keys]
        return [leaf for p in parts for leaf in p[0]], ("dict", tuple(keys), tuple(p[1] for p in parts))
    return [tree], "*"


def unflatten(structure: Any, leaves: Any) -> Any:
    """The tree of `structure` holding `leaves` (an iterator or a list)."""
    leaves = iter(leaves)

    def build(s: Any) -> Any:
        if s is None:
            return None
        if s == "*":
            return next(leaves)
        if s[0] == "dict":
            return {k: build(c) for k, c in zip(s[1], s[2])}
        children = [build(c) for c in s[1]]
        return tuple(children) if s[0] == "tuple" else children

    return build(structure)


def _paths(structure: Any, prefix: str) -> list[str]:
    """A name per leaf, like carry[1][0], for error messages."""
    if structure is None:
        return []
    if structure == "*":
        return [prefix]
    if structure[0] == "dict":
        return [p for k, c in zip(structure[1], structure[2]) for p in _paths(c, f"{prefix}[{k!r}]")]
    return [p for k, c in enumerate(structure[1]) for p in _paths(c, f"{prefix}[{k}]")]


# ---------------------------------------------------------------------------------------------
# The scope being traced: loops built while a function is traced nest inside it.

_local = threading.local()


def _current() -> _Scope | None:
    stack = getattr(_local, "scopes", None)
    return stack[-1] if stack else None


def _traced_call(scope: _Scope, fn: Callable, *args: Any) -> Any:
    stack = _local.__dict__.setdefault("scopes", [])
    stack.append(scope)
    try:
        return fn(*args)
    finally:
        stack.pop()


def _symbolic(*trees: Any) -> bool:
    return _current() is not None or any(isinstance(x, Tensor) for t in trees for x in flatten(t)[0])


def _scope_of(*trees: Any) -> _Scope:
    """Where a loop built from these values goes: the scope being traced, else their network's top."""
    scope = _current()
    if scope is not None:
        return scope
    net = next(x.net for t in trees for x in flatten(t)[0] if isinstance(x, Tensor))
    return net.top


def _check_carry(what: str, structure: Any, new: Any, initial: list[Tensor], fix: str) -> list[Any]:
    """The leaves of `new`, which must match the initial carry leaf by leaf; else one error listing all."""
    leaves, got = flatten(new)
    if got != structure:
        raise BuildError(f"{what}: the carry returned has the structure {_show(got)}, but the initial carry has "
                         f"{_show(structure)}; return the same tuples, lists and dicts. {fix}")
    problems = []
    for path, leaf, init in zip(_paths(structure, "carry"), leaves, initial):
        t = leaf.type if isinstance(leaf, Tensor) else TensorType(np.asarray(leaf).dtype, np.shape(leaf))
        problem = mismatch(t, init.type)
        if problem:
            problems.append(f"  {path}: returned {t}, the initial value is {init.type} ({problem})")
    if problems:
        raise BuildError(f"{what}: the carry must keep its shape and dtype, but:\n" + "\n".join(problems)
                         + f"\n{fix}")
    return leaves


def _show(structure: Any) -> str:
    return str(unflatten(structure, itertools.repeat("x"))) if structure is not None else "None"


# ---------------------------------------------------------------------------------------------
# The loops


def scan(f: Callable, init: Any, xs: Any = None, reverse: bool = False, length: int | None = None) -> tuple:
    """`f(carry, x) -> (carry, y)` over the leading axis of xs; returns (final carry, stacked ys).

    As jax.lax.scan::

        carry, ys = init, []
        for x in (reversed(xs) if reverse else xs):     # length steps when xs is None
            carry, y = f(carry, x)
            ys.append(y)
        return carry, np.stack(ys if not reverse else ys[::-1])

    carry, xs and ys may be arrays or tuples (lists, dicts) of arrays; the carry f returns must
    have the structure, shapes and dtypes of init. Example, a cumulative sum::

        total, sums = rnnloop.scan(lambda c, x: (c + x, c + x), np.float32(0), np.arange(5, dtype=np.float32))
    """
    if not _symbolic(init, xs):
        return _eager(("scan", f, reverse, length), lambda i, x: scan(f, i, x, reverse, length), init, xs)
    scope = _scope_of(init, xs)
    net = scope.net
    x_leaves, x_tree = flatten(xs)
    if not x_leaves and length is None:
        raise BuildError("scan: give xs or a length")
    loop = scope.add_loop("scan")
    if length is not None:
        for x in x_leaves:
            n = np.shape(x)[0] if not isinstance(x, Tensor) else (x.shape or (None,))[0]
            if isinstance(n, int) and n != length:
                raise BuildError(f"scan: length is {length} but xs have {n} entries")
        loop.add_trip_limit(np.int64(length), "count")
    parts = [loop.add_iterator(x, 0, reverse) for x in x_leaves]
    init_leaves, init_tree = flatten(init)
    carry = [loop.add_recurrence(net._tensor(c)) for c in init_leaves]
    out = _traced_call(loop, f, unflatten(init_tree, carry), unflatten(x_tree, parts))
    if not isinstance(out, tuple) or len(out) != 2:
        raise BuildError("scan: f must return a pair (carry, y)")
    fix = "Make f return a carry like init (cast with .astype(...), reshape, or change init)."
    for r, value in zip(carry, _check_carry("scan", init_tree, out[0], carry, fix)):
        r.set_next(value)
    y_leaves, y_tree = flatten(out[1])
    finals = [loop.add_output(r, "last") for r in carry]
    ys = [loop.add_output(y, "reverse" if reverse else "concat") for y in y_leaves]
    return unflatten(init_tree, finals), unflatten(y_tree, ys)


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
    """Apply body_fun while cond_fun holds; as jax.lax.while_loop::

        val = init_val
        while cond_fun(val):
            val = body_fun(val)
        return val

    Example, Newton's iteration for sqrt(2)::

        x = rnnloop.while_loop(lambda x: np.abs(x * x - 2) > 1e-6, lambda x: x - (x * x - 2) / (2 * x),
                               np.float64(1.0))
    """
    if not _symbolic(init_val):
        return _eager(("while_loop", cond_fun, body_fun), lambda v: while_loop(cond_fun, body_fun, v), init_val)
    scope = _scope_of(init_val)
    net = scope.net
    leaves, tree = flatten(init_val)
    loop = scope.add_loop("while_loop")
    carry = [loop.add_recurrence(net._tensor(v)) for v in leaves]
    val = unflatten(tree, carry)
    cond = _traced_call(loop, cond_fun, val)
    cond = net._tensor(cond, dtype=np.bool_)
    if cond.dtype != np.bool_ or cond.ndim not in (0, None):
        raise BuildError(f"while_loop: cond_fun must return a boolean scalar, it returns {cond.type}")
    loop.add_trip_limit(cond, "while")
    fix = "Make body_fun return a value like init_val (cast with .astype(...), reshape, or change init_val)."
    new = _check_carry("while_loop", tree, _traced_call(loop, body_fun, val), carry, fix)
    for r, value in zip(carry, new):
        r.set_next(value)
    return unflatten(tree, [loop.add_output(r, "last") for r in carry])


def fori_loop(lower: Any, upper: Any, body_fun: Callable, init_val: Any) -> Any:
    """`body_fun(i, val)` for i from lower up to (not including) upper; as jax.lax.fori_loop::

        val = init_val
        for i in range(lower, upper):
            val = body_fun(i, val)
        return val
    """
    if not _symbolic(lower, upper, init_val):
        return _eager(("fori_loop", body_fun), lambda lo, hi, v: fori_loop(lo, hi, body_fun, v),
                      np.int64(lower), np.int64(upper), init_val)
    scope = _scope_of(lower, upper, init_val)
    net = scope.net
    lower, upper = net._tensor(lower, dtype=np.int64), net._tensor(upper, dtype=np.int64)
    for bound in (lower, upper):
        if bound.dtype is None or bound.dtype.kind not in "iu" or bound.ndim not in (0, None):
            raise BuildError(f"fori_loop: the bounds must be integer scalars, '{bound.name}' is {bound.type}")
    leaves, tree = flatten(init_val)
    loop = scope.add_loop("fori_loop")
    dtype = np.result_type(lower.dtype, upper.dtype)
    loop.add_trip_limit(net.sub(net.cast(upper, to=dtype), net.cast(lower, to=dtype)), "count")
    i = net.add(net.cast(lower, to=dtype), net.cast(loop.iteration, to=dtype))
    carry = [loop.add_recurrence(net._tensor(v)) for v in leaves]
    fix = "Make body_fun return a value like init_val (cast with .astype(...), reshape, or change init_val)."
    new = _check_carry("fori_loop", tree, _traced_call(loop, body_fun, i, unflatten(tree, carry)), carry, fix)
    for r, value in zip(carry, new):
        r.set_next(value)
    return unflatten(tree, [loop.add_output(r, "last") for r in carry])


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any) -> Any:
    """`true_fun(*operands)` if pred else `false_fun(*operands)`; as jax.lax.cond. Both functions must
    return the same structure with the same dtypes and ranks; only the one taken runs (ops that read
    no operand run before the choice)."""
    if not _symbolic(pred, operands):
        return _eager(("cond", true_fun, false_fun), lambda p, *o: cond(p, true_fun, false_fun, *o),
                      np.asarray(pred, np.bool_), *operands)
    scope = _scope_of(pred, operands)
    conditional = scope.add_if(scope.net._tensor(pred, dtype=np.bool_))
    leaves, tree = flatten(operands)
    args = unflatten(tree, [conditional.add_input(x) for x in leaves])
    (a, a_tree), (b, b_tree) = (flatten(_traced_call(conditional, fn, *args)) for fn in (true_fun, false_fun))
    if a_tree != b_tree:
        raise BuildError(f"cond: true_fun returns the structure {_show(a_tree)}, false_fun {_show(b_tree)}; "
                         "both must return the same tuples, lists and dicts")
    net = scope.net
    a, b = [net._tensor(x) for x in a], [net._tensor(x) for x in b]
    problems = [f"  {path}: true_fun gives {x.type}, false_fun {y.type}" for path, x, y in
                zip(_paths(a_tree, "output"), a, b) if x.dtype != y.dtype or x.ndim != y.ndim]
    if problems:
        raise BuildError("cond: the branches must give the same dtypes and ranks, but:\n" + "\n".join(problems))
    return unflatten(a_tree, [conditional.add_output(x, y) for x, y in zip(a, b)])


# ---------------------------------------------------------------------------------------------
# Tracing whole functions


class Traced:
    """A function traced into a Network: call it on arrays, compile it, or export it to ONNX."""

    def __init__(self, network: Network, in_tree: Any, out_tree: Any):
        self.network, self._in_tree, self._out_tree = network, in_tree, out_tree
        self._session = None

    @property
    def session(self):
        """The compiled Session (numba backend), made on first use."""
        if self._session is None:
            self._session = self.network.compile()
        return self._session

    def __call__(self, *args: Any) -> Any:
        leaves, tree = flatten(args)
        if tree != self._in_tree:
            raise InputError(f"'{self.network.name}' was traced for arguments shaped like {_show(self._in_tree)}, "
                             f"got {_show(tree)}")
        feeds = {t.name: leaf for t, leaf in zip(self.network.inputs, leaves)}
        return unflatten(self._out_tree, self.session.run(None, feeds))

    def to_onnx(self, path: Any = None):
        """The traced function as an ONNX model, saved to `path` when given."""
        return self.network.to_onnx(path)


def trace(f: Callable, *example_args: Any) -> Traced:
    """Trace `f` on arguments like these (arrays or trees of arrays): their structure, dtypes and
    shapes become the model's inputs."""
    net = Network(getattr(f, "__name__", "traced").strip("<>") or "traced")
    leaves, tree = flatten(example_args)
    names = _input_names(f, tree, len(example_args))
    inputs = []
    for name, leaf in zip(names, leaves):
        array = np.asarray(leaf)
        inputs.append(net.add_input(name, array.dtype, array.shape))
    result = _traced_call(net.top, f, *unflatten(tree, inputs))
    out_leaves, out_tree = flatten(result)
    for k, leaf in enumerate(out_leaves):
        name = f"output_{k}" if len(out_leaves) > 1 else "output"
        net.mark_output(net._tensor(leaf), net._fresh(name) if name in net.tensors else name)
    return Traced(net, tree, out_tree)


def _input_names(f: Callable, tree: Any, n_args: int) -> list[str]:
    """An input name per leaf: the parameter's name, with the leaf's position inside it."""
    try:
        params = [p.name for p in inspect.signature(f).parameters.values()][:n_args]
    except (TypeError, ValueError):
        params = []
    params += [f"arg{k}" for k in range(len(params), n_args)]
    names = []
    for name, sub in zip(params, tree[1]):
        paths = _paths(sub, name)
        names += [p.replace("[", "_").replace("]", "").replace("'", "") for p in paths]
    return names


_CACHE: OrderedDict = OrderedDict()
_CACHE_SIZE = 128
_cache_lock = threading.Lock()


def _eager(key: tuple, fn: Callable, *args: Any) -> Any:
    """Run `fn` traced and compiled once per key and argument signature."""
    leaves, tree = flatten(args)
    arrays = [np.asarray(x) for x in leaves]
    signature = (key, tree, tuple((a.dtype, a.shape) for a in arrays))
    with _cache_lock:
        traced = _CACHE.get(signature)
        if traced is not None:
            _CACHE.move_to_end(signature)
    if traced is None:
        traced = trace(fn, *args)
        with _cache_lock:
            _CACHE[signature] = traced
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    return traced(*unflatten(tree, arrays))
