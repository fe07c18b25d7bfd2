"""Random but valid ONNX models with loops, built the way exporters build them (issue 21, item 5).

`build_model(seed)` returns (model, feeds, description); the seed makes every choice, so a failure
reproduces from its seed alone. A model has one top-level Loop or Scan:

- Loop in all five modes: trip count as a graph input, an initializer, a Constant node or computed
  from `Shape`, and condition-only while loops; trip counts 0, 1 and small; an initial condition
  that is false now and then; a body condition that is the incoming one passed through, an
  Identity of a Constant, or computed from the iteration number (and the data).
- Scan with one to three inputs of any axes and directions, outputs of any axes and directions.
- Carried values of float32/float64/int32/int64/bool, ranks 0-3, dims 0-4, initialised from feeds,
  initializers (numpy_helper.from_array: raw_data) and Constant nodes (value, value_int(s),
  value_float(s)); a carried sequence grown by SequenceInsert.
- Bodies of elementwise ops, MatMul/Gemm, Gather/Slice on the iteration number, Concat/Split,
  Reshape, Transpose, Squeeze/Unsqueeze, Expand, reductions, ArgMax/ArgMin, Where, Cast, If, a
  nested Loop or Scan; scan outputs that are the body's incoming condition, iteration number or a
  body input returned directly.
- Declared types with full shapes, with symbolic dims, with unknown dims, or with no shape at all
  (element type only), for body inputs and outputs, graph inputs and outputs, and sequences.

Every value's dtype and shape is tracked while generating, so every op is valid for the feeds; the
model passes onnx.checker (full_check) and onnxruntime runs it (see `for_onnxruntime`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper, numpy_helper

IR_VERSION = 8  # onnxruntime reads at most 13
OPSET = 17

DTYPES = [np.dtype(t) for t in ("float32", "float64", "int32", "int64", "bool")]
UNARY = {"f": ["Neg", "Abs", "Tanh", "Sigmoid", "Relu", "Sin", "Cos", "Floor", "Ceil", "Sign", "Softsign",
               "Erf", "Round", "Identity"],
         "i": ["Neg", "Abs", "Relu", "Sign", "Identity"],
         "b": ["Not", "Identity"]}
BINARY = {"f": ["Add", "Sub", "Mul", "Max", "Min"], "i": ["Add", "Sub", "Mul", "Max", "Min"],
          "b": ["And", "Or", "Xor"]}


def kind(dtype: np.dtype) -> str:
    """'f' float, 'i' integer, 'b' bool."""
    return {"f": "f", "i": "i", "b": "b"}[np.dtype(dtype).kind]


def onnx_type(dtype) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


@dataclass(frozen=True)
class Val:
    """A tensor value of the model, its dtype and its (concrete, per the feeds) shape."""

    name: str
    dtype: np.dtype
    shape: tuple

    @property
    def rank(self) -> int:
        return len(self.shape)


class Choices:
    """The random choices of one model, from its seed."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def integers(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return int(self.rng.integers(low, high, endpoint=True))

    def booleans(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)

    def choice(self, options: list):
        return options[int(self.rng.integers(len(options)))]

    def permutation(self, n: int) -> list[int]:
        return [int(a) for a in self.rng.permutation(n)]

    def dim(self) -> int:
        """Mostly 1-3, now and then 0 or 4."""
        return self.choice([0, 1, 1, 2, 2, 2, 3, 3, 4, 1, 2, 3]) if self.integers(0, 9) else 0

    def shape(self, max_rank: int = 3) -> tuple:
        return tuple(self.dim() for _ in range(self.integers(0, max_rank)))


def broadcast_operand_shape(c: Choices, shape: tuple) -> tuple:
    """A shape that broadcasts to `shape` without enlarging it: a suffix with some dims set to 1."""
    suffix = shape[len(shape) - c.integers(0, len(shape)):]
    return tuple(1 if c.booleans(0.3) else d for d in suffix)


class Model:
    """The model under construction: graph inputs and their feeds, initializers, the description."""

    def __init__(self, seed: int):
        self.c = Choices(seed)
        self.feeds: dict[str, np.ndarray] = {}
        self.inputs: list[onnx.ValueInfoProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.steps: list[str] = []
        self.count = 0
        self.main: Scope | None = None

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"{hint}_{self.count}"

    def note(self, depth: int, text: str) -> None:
        self.steps.append("  " * depth + text)

    def data(self, dtype, shape, low: float = -2.0, high: float = 2.0) -> np.ndarray:
        dtype = np.dtype(dtype)
        if dtype.kind == "b":
            return self.c.rng.integers(0, 2, shape).astype(bool)
        if dtype.kind == "i":
            return self.c.rng.integers(int(max(low, -4)), int(min(high, 4)) + 1, shape).astype(dtype)
        return self.c.rng.uniform(low, high, shape).astype(dtype)

    def declare(self, name: str, dtype, shape: tuple | None, style: str | None = None) -> onnx.ValueInfoProto:
        """A body value's declared type: with its full shape, symbolic dims, unknown dims, or no
        shape at all (the element type only, as exporters often declare body values)."""
        style = style or self.c.choice(["full", "full", "symbolic", "unknown", "none"])
        if shape is None or style == "none":
            return helper.make_tensor_value_info(name, onnx_type(dtype), None)
        if style == "symbolic":
            dims = [self.fresh("d") if d != 1 or self.c.booleans() else 1 for d in shape]
        elif style == "unknown":
            dims = [None] * len(shape)
        else:
            dims = list(shape)
        return helper.make_tensor_value_info(name, onnx_type(dtype), dims)

    def declare_io(self, name: str, dtype, shape: tuple, known: bool = True) -> onnx.ValueInfoProto:
        """A graph input's or output's declared type: the main graph's must have a shape (the
        checker says so), so its rank is always given, its dims maybe not."""
        styles = ["full", "full", "symbolic", "unknown"] if known else ["symbolic", "unknown"]
        return self.declare(name, dtype, shape, self.c.choice(styles))

    def declare_sequence(self, name: str, dtype, shape: tuple | None) -> onnx.ValueInfoProto:
        """A sequence's declared type: element shape known, unknown dims, or unknown."""
        style = self.c.choice(["full", "unknown", "none"])
        elem = None if shape is None or style == "none" else (list(shape) if style == "full" else [None] * len(shape))
        return helper.make_tensor_sequence_value_info(name, onnx_type(dtype), elem)

    def feed(self, array: np.ndarray, hint: str = "x") -> Val:
        name = self.fresh(hint)
        self.feeds[name] = array
        self.inputs.append(self.declare_io(name, array.dtype, array.shape))
        return Val(name, array.dtype, array.shape)

    def initializer(self, array: np.ndarray, hint: str = "w") -> Val:
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(array, name))  # raw_data, like exporters
        return Val(name, array.dtype, array.shape)

    def value(self, s: Scope, array: np.ndarray, hint: str = "v", where: str | None = None) -> Val:
        """`array` as a graph input, an initializer, or a Constant node in the main graph or in `s`."""
        where = where or self.c.choice(["feed", "initializer", "main constant", "constant"])
        if where == "feed":
            return self.feed(array, hint)
        if where == "initializer":
            return self.initializer(array, hint)
        return (self.main if where == "main constant" else s).const(array, hint)


class Scope:
    """One graph under construction (the main graph, a loop body, an If branch) and the values it sees."""

    def __init__(self, m: Model, parent: Scope | None = None, depth: int = 0):
        self.m, self.c, self.parent, self.depth = m, m.c, parent, depth
        self.nodes: list[onnx.NodeProto] = []
        self.pool: list[Val] = []  # values computed here, usable as operands here and in inner scopes
        self.i: Val | None = None  # the iteration number of the innermost Loop, if any
        self.max_runs = 0  # i < max_runs in every iteration

    def visible(self) -> list[Val]:
        scope, values = self, []
        while scope is not None:
            values += scope.pool
            scope = scope.parent
        return values

    def op(self, op_type: str, inputs: list, dtype, shape, /, **attrs) -> Val:
        return self.ops(op_type, inputs, [(dtype, shape)], **attrs)[0]

    def sequence_op(self, op_type: str, inputs: list, dtype, /, **attrs) -> Val:
        """An op whose output is a sequence (its Val's shape is meaningless: kept out of the pool)."""
        v = self.op(op_type, inputs, dtype, (), **attrs)
        self.pool.remove(v)
        return v

    def ops(self, op_type: str, inputs: list, outputs: list, /, **attrs) -> list[Val]:
        outs = [Val(self.m.fresh(op_type.lower()), np.dtype(d), tuple(sh)) for d, sh in outputs]
        names = [v.name if isinstance(v, Val) else v for v in inputs]
        node_name = f"/scope{self.depth}/{op_type}_{self.m.count}"
        self.nodes.append(helper.make_node(op_type, names, [o.name for o in outs], name=node_name, **attrs))
        self.pool += outs
        return outs

    def const(self, array, hint: str = "k") -> Val:
        """A Constant node, in the attribute form exporters use for its kind of value."""
        array = np.asarray(array)
        name = self.m.fresh(hint)
        form = self.c.integers(0, 2)
        if form and array.dtype == np.int64 and array.ndim == 1 and array.size:
            node = helper.make_node("Constant", [], [name], value_ints=[int(a) for a in array])
        elif form and array.dtype == np.int64 and array.ndim == 0:
            node = helper.make_node("Constant", [], [name], value_int=int(array))
        elif form and array.dtype == np.float32 and array.ndim == 1 and array.size:
            node = helper.make_node("Constant", [], [name], value_floats=[float(a) for a in array])
        elif form and array.dtype == np.float32 and array.ndim == 0:
            node = helper.make_node("Constant", [], [name], value_float=float(array))
        else:
            node = helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array, name))
        self.nodes.append(node)
        return Val(name, array.dtype, array.shape)

    def ints(self, values) -> Val:
        """A 1-D int64 constant (axes, shapes, split sizes) in this scope."""
        return self.const(np.array(values, np.int64), "ints")


# ---------------------------------------------------------------------------------------------
# operands


def operand(s: Scope, dtype, shape: tuple, low: float = -2.0, high: float = 2.0) -> Val:
    """A value of `dtype` that broadcasts to `shape` without enlarging it: an outer value (feed,
    initializer, constant), an earlier value of the body, or the iteration number cast."""
    c = s.c
    oshape = broadcast_operand_shape(c, shape)
    if low > 0:  # a divisor: a fresh positive value
        return s.m.value(s, s.m.data(dtype, oshape, low, high), "div")
    earlier = [v for v in s.visible() if v.dtype == dtype and len(v.shape) <= len(shape)
               and _broadcasts_to(v.shape, shape)]
    source = c.choice(["value", "value", "earlier", "iteration"])
    if source == "earlier" and earlier:
        return c.choice(earlier)
    if source == "iteration" and s.i is not None and kind(dtype) != "b":
        return s.op("Cast", [s.i], dtype, (), to=onnx_type(dtype))
    return s.m.value(s, s.m.data(dtype, oshape, low, high), "v")


def _broadcasts_to(a: tuple, b: tuple) -> bool:
    try:
        return np.broadcast_shapes(a, b) == tuple(b)
    except ValueError:
        return False


def combine(s: Scope, x: Val, v: Val) -> Val:
    """x op v (or v op x), elementwise, with v broadcasting to x's shape."""
    op = s.c.choice(BINARY[kind(x.dtype)])
    a, b = (v, x) if s.c.booleans() else (x, v)
    return s.op(op, [a, b], x.dtype, x.shape)


# ---------------------------------------------------------------------------------------------
# body steps: each takes a value x and returns a value of x's dtype and shape, or None when it
# does not apply to x


def step_unary(s: Scope, x: Val):
    op = s.c.choice(UNARY[kind(x.dtype)])
    s.m.note(s.depth, f"{op}")
    return s.op(op, [x], x.dtype, x.shape)


def step_binary(s: Scope, x: Val):
    if kind(x.dtype) == "f" and s.c.booleans(0.2):
        v = operand(s, x.dtype, x.shape, 0.5, 1.5)
        s.m.note(s.depth, f"Div(x, positive {list(v.shape)})")
        return s.op("Div", [x, v], x.dtype, x.shape)
    v = operand(s, x.dtype, x.shape)
    s.m.note(s.depth, f"binary with {v.name}{list(v.shape)}")
    return combine(s, x, v)


def step_where(s: Scope, x: Val):
    if kind(x.dtype) == "b":
        y = operand(s, x.dtype, x.shape)
        z = s.op("Not", [x], x.dtype, x.shape)
        s.m.note(s.depth, "Where(x, y, Not(x))")
        return s.op("Where", [x, y, z], x.dtype, x.shape)
    v = operand(s, x.dtype, x.shape)
    cond = s.op(s.c.choice(["Greater", "Less", "GreaterOrEqual", "Equal"]), [x, v], np.bool_, x.shape)
    y = operand(s, x.dtype, x.shape)
    s.m.note(s.depth, "Where(compare(x, v), x, y)")
    return s.op("Where", [cond, x, y], x.dtype, x.shape)


def step_cast(s: Scope, x: Val):
    """A round trip through another dtype that keeps every value: ints and bools through floats,
    floats through float64."""
    if kind(x.dtype) == "f":
        wide = s.op("Cast", [x], np.float64, x.shape, to=onnx_type(np.float64))
        wide = s.op(s.c.choice(["Tanh", "Neg", "Abs"]), [wide], np.float64, x.shape)
        s.m.note(s.depth, "Cast to float64, an op, Cast back")
        return s.op("Cast", [wide], x.dtype, x.shape, to=onnx_type(x.dtype))
    to = s.c.choice([np.float32, np.float64])
    f = s.op("Cast", [x], to, x.shape, to=onnx_type(to))
    f = s.op(s.c.choice(["Neg", "Abs", "Identity"]), [f], to, x.shape)
    s.m.note(s.depth, f"Cast to {np.dtype(to)}, an op, Cast back")
    return s.op("Cast", [f], x.dtype, x.shape, to=onnx_type(x.dtype))


def step_iteration(s: Scope, x: Val):
    """x + i (the iteration number cast to x's dtype), as exporters write `x + i`."""
    if s.i is None or kind(x.dtype) == "b":
        return None
    i = s.op("Cast", [s.i], x.dtype, (), to=onnx_type(x.dtype))
    s.m.note(s.depth, "Add(x, Cast(i))")
    return s.op("Add", [x, i], x.dtype, x.shape)


def step_matmul(s: Scope, x: Val):
    if x.rank < 1 or kind(x.dtype) == "b":
        return None
    n = x.shape[-1]
    if kind(x.dtype) == "f":
        w = s.m.value(s, s.m.data(x.dtype, (n, n), -1.0 / max(n, 1), 1.0 / max(n, 1)), "W")
    else:
        w = s.m.value(s, s.m.data(x.dtype, (n, n), -1, 1), "W")
    s.m.note(s.depth, f"MatMul(x, W[{n}, {n}])")
    return s.op("MatMul", [x, w], x.dtype, x.shape)


def step_gemm(s: Scope, x: Val):
    if x.rank != 2 or kind(x.dtype) != "f":
        return None
    c, (b, n) = s.c, x.shape
    trans_a, trans_b = c.booleans(), c.booleans()
    a = s.op("Transpose", [x], x.dtype, (n, b), perm=[1, 0]) if trans_a else x
    w = s.m.value(s, s.m.data(x.dtype, (n, n), -1.0 / max(n, 1), 1.0 / max(n, 1)), "W")
    inputs = [a, w]
    if c.booleans(0.7):
        inputs.append(s.m.value(s, s.m.data(x.dtype, broadcast_operand_shape(c, (b, n))), "bias"))
    alpha, beta = c.choice([1.0, 0.5]), c.choice([1.0, 2.0])
    s.m.note(s.depth, f"Gemm(x{'ᵀ' if trans_a else ''}, W, transA={int(trans_a)}, transB={int(trans_b)}, "
                      f"bias={len(inputs) == 3}, alpha={alpha}, beta={beta})")
    return s.op("Gemm", inputs, x.dtype, x.shape, transA=int(trans_a), transB=int(trans_b), alpha=alpha, beta=beta)


def _table(s: Scope, x: Val, axis: int, rows: int) -> Val:
    shape = x.shape[:axis] + (rows,) + x.shape[axis:]
    return s.m.value(s, s.m.data(x.dtype, shape), "table", s.c.choice(["feed", "initializer", "main constant"]))


def step_gather(s: Scope, x: Val):
    """x combined with table[i] along any axis: i directly, as [i] then squeezed, or i mod rows."""
    if s.i is None:
        return None
    c = s.c
    axis = c.integers(0, x.rank)
    rows = s.max_runs + c.integers(0, 1) if c.booleans(0.7) else c.integers(1, 3)
    rows = max(rows, 1)
    table = _table(s, x, axis, rows)
    index = s.i if rows >= s.max_runs else s.op("Mod", [s.i, s.const(np.array(rows, np.int64))], np.int64, ())
    if c.booleans(0.3):
        index = s.op("Unsqueeze", [index, s.ints([0])], np.int64, (1,))
        g = s.op("Gather", [table, index], x.dtype, x.shape[:axis] + (1,) + x.shape[axis:], axis=axis)
        g = s.op("Squeeze", [g, s.ints([axis])], x.dtype, x.shape)
    else:
        g = s.op("Gather", [table, index], x.dtype, x.shape, axis=axis)
    wrapped = " mod rows" if rows < s.max_runs else ""
    s.m.note(s.depth, f"combine with Gather(table[{rows} rows on axis {axis}], i{wrapped})")
    return combine(s, x, g)


def step_slice(s: Scope, x: Val):
    """x combined with table[i:i+1] (or table[-1-i:-2-i:-1]) along any axis, squeezed."""
    if s.i is None:
        return None
    c = s.c
    axis = c.integers(0, x.rank)
    table = _table(s, x, axis, max(s.max_runs, 1))
    backwards = c.booleans()
    first = s.op("Unsqueeze", [s.i, s.ints([0])], np.int64, (1,))
    if backwards:
        first = s.op("Sub", [s.ints([-1]), first], np.int64, (1,))
    step = s.ints([-1 if backwards else 1])
    end = s.op("Add", [first, step], np.int64, (1,))
    axes = s.ints([axis if c.booleans() else axis - x.rank - 1])
    part = s.op("Slice", [table, first, end, axes, step], x.dtype, x.shape[:axis] + (1,) + x.shape[axis:])
    part = s.op("Squeeze", [part, s.ints([axis])], x.dtype, x.shape)
    s.m.note(s.depth, f"combine with Slice(table, i, axis {axis}{', backwards' if backwards else ''}) squeezed")
    return combine(s, x, part)


def step_concat(s: Scope, x: Val):
    """[x, v] joined on an axis, then x taken back by Split (sizes as an input or equal parts) or Slice."""
    if x.rank < 1:
        return None
    c = s.c
    axis = c.integers(0, x.rank - 1)
    n = x.shape[axis]
    m = n if c.booleans() else c.dim()
    other = s.m.value(s, s.m.data(x.dtype, x.shape[:axis] + (m,) + x.shape[axis + 1:]), "other")
    first = c.booleans()
    joined_shape = x.shape[:axis] + (n + m,) + x.shape[axis + 1:]
    attr_axis = axis if c.booleans() else axis - x.rank
    j = s.op("Concat", [x, other] if first else [other, x], x.dtype, joined_shape, axis=attr_axis)
    how = c.choice(["split", "slice"] + (["equal split"] if m == n else []))
    parts = [(x.dtype, x.shape[:axis] + (k,) + x.shape[axis + 1:]) for k in ((n, m) if first else (m, n))]
    s.m.note(s.depth, f"Concat({'x, v' if first else 'v, x'}, axis={attr_axis}) then {how}")
    if how == "split":
        a, b = s.ops("Split", [j, s.ints([p[1][axis] for p in parts])], parts, axis=attr_axis)
        return a if first else b
    if how == "equal split":
        a, b = s.ops("Split", [j], parts, axis=attr_axis)
        return combine(s, a, b) if m == n else (a if first else b)
    start, end = (0, n) if first else (m, m + n)
    return s.op("Slice", [j, s.ints([start]), s.ints([end]), s.ints([attr_axis])], x.dtype, x.shape)


def step_reshape(s: Scope, x: Val):
    """Flattened, an elementwise op, and back: to Shape(x), or to the dims (allowzero=1 where a dim is 0)."""
    size = int(np.prod(x.shape))
    flat = s.op("Reshape", [x, s.ints([-1])], x.dtype, (size,))
    flat = combine(s, flat, operand(s, x.dtype, (size,)))
    how = s.c.choice(["shape", "dims", "minus one"])
    attrs = {"allowzero": 1} if 0 in x.shape else {}  # else a 0 in the target copies the input's dim
    if how == "shape":
        target = s.op("Shape", [x], np.int64, (x.rank,))
    elif how == "minus one" and x.rank and size:
        dims = list(x.shape)
        dims[s.c.integers(0, x.rank - 1)] = -1
        target = s.ints(dims)
    else:
        target = s.ints(list(x.shape))
    s.m.note(s.depth, f"Reshape(x, [-1]), op, Reshape back ({how}{', allowzero' if attrs else ''})")
    return s.op("Reshape", [flat, target], x.dtype, x.shape, **attrs)


def step_transpose(s: Scope, x: Val):
    if x.rank < 2:
        return None
    perm = s.c.permutation(x.rank)
    t = s.op("Transpose", [x], x.dtype, tuple(x.shape[a] for a in perm), perm=perm)
    t = combine(s, t, operand(s, x.dtype, t.shape))
    inverse = [int(a) for a in np.argsort(perm)]
    s.m.note(s.depth, f"Transpose(x, {perm}), op, Transpose back")
    return s.op("Transpose", [t], x.dtype, x.shape, perm=inverse)


def step_unsqueeze(s: Scope, x: Val):
    """New axes of size 1, an op, squeezed again (axes negative now and then)."""
    c = s.c
    n = c.integers(1, 2)
    out_rank = x.rank + n
    axes = sorted(c.rng.choice(out_rank, n, replace=False).tolist())
    shape = list(x.shape)
    for a in axes:
        shape.insert(a, 1)
    spelled = [a - out_rank if c.booleans(0.3) else a for a in axes]
    u = s.op("Unsqueeze", [x, s.ints(spelled)], x.dtype, tuple(shape))
    u = combine(s, u, operand(s, x.dtype, tuple(shape)))
    s.m.note(s.depth, f"Unsqueeze(x, {spelled}), op, Squeeze")
    return s.op("Squeeze", [u, s.ints(spelled)], x.dtype, x.shape)


def step_expand(s: Scope, x: Val):
    """A small value expanded to x's shape (given as a constant or by Shape(x)), then combined."""
    v = s.m.value(s, s.m.data(x.dtype, broadcast_operand_shape(s.c, x.shape)), "small")
    target = s.op("Shape", [x], np.int64, (x.rank,)) if s.c.booleans() else s.ints(list(x.shape))
    e = s.op("Expand", [v, target], x.dtype, x.shape)
    s.m.note(s.depth, f"combine with Expand(v{list(v.shape)}, {list(x.shape)})")
    return combine(s, x, e)


def step_reduce(s: Scope, x: Val):
    """x combined with a reduction of itself over some axes (keepdims=1)."""
    if x.rank < 1 or kind(x.dtype) == "b":
        return None
    c = s.c
    axes = sorted(c.rng.choice(x.rank, c.integers(1, x.rank), replace=False).tolist())
    empty = any(x.shape[a] == 0 for a in axes)
    ops = ["ReduceSum", "ReduceSum"] + (["ReduceMax", "ReduceMin"] if not empty else [])
    ops += ["ReduceMean", "ReduceL2"] if kind(x.dtype) == "f" else []
    op = c.choice(ops)
    shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape))
    spelled = [a - x.rank if c.booleans(0.3) else a for a in axes]
    if op == "ReduceSum":
        r = s.op(op, [x, s.ints(spelled)], x.dtype, shape, keepdims=1)
    else:
        r = s.op(op, [x], x.dtype, shape, axes=spelled, keepdims=1)
    s.m.note(s.depth, f"combine with {op}(x, axes={spelled}, keepdims=1)")
    return combine(s, x, r)


def step_argmax(s: Scope, x: Val):
    """x combined with ArgMax/ArgMin of itself along a non-empty axis, cast to x's dtype."""
    if x.rank < 1 or kind(x.dtype) == "b":
        return None
    axes = [a for a in range(x.rank) if x.shape[a] > 0]
    if not axes:
        return None
    c = s.c
    axis = c.choice(axes)
    op, last = c.choice(["ArgMax", "ArgMin"]), c.integers(0, 1)
    shape = x.shape[:axis] + (1,) + x.shape[axis + 1:]
    a = s.op(op, [x], np.int64, shape, axis=axis, keepdims=1, select_last_index=last)
    a = s.op("Cast", [a], x.dtype, shape, to=onnx_type(x.dtype))
    s.m.note(s.depth, f"combine with Cast({op}(x, axis={axis}, select_last_index={last}))")
    return combine(s, x, a)


def _condition(s: Scope, x: Val) -> Val:
    """A scalar bool: from the iteration number, from x's values, or an earlier bool scalar."""
    c = s.c
    bools = [v for v in s.visible() if v.dtype == np.bool_ and v.shape == ()]
    how = c.choice(["iteration", "data", "earlier"])
    if how == "iteration" and s.i is not None:
        parity = s.op("Mod", [s.i, s.const(np.array(2, np.int64))], np.int64, ())
        return s.op("Equal", [parity, s.const(np.array(0, np.int64))], np.bool_, ())
    if how == "earlier" and bools:
        return c.choice(bools)
    if kind(x.dtype) == "b":
        return s.m.value(s, np.array(c.booleans()), "flag")
    total = s.op("ReduceSum", [x], x.dtype, (), keepdims=0)
    return s.op("Greater", [total, s.const(np.zeros((), x.dtype))], np.bool_, ())


def step_if(s: Scope, x: Val):
    """If on a scalar condition; each branch does a step of its own on x (captured) and returns it."""
    if s.depth >= 3:
        return None
    cond = _condition(s, x)
    s.m.note(s.depth, f"If({cond.name}):")
    branches = []
    for label in ("then", "else"):
        b = Scope(s.m, s, s.depth + 1)
        b.i, b.max_runs = s.i, s.max_runs
        s.m.note(s.depth + 1, f"{label}:")
        y = apply_steps(b, x, s.c.integers(0, 1), simple=True)
        if y.name == x.name or s.c.booleans(0.3):
            y = b.op("Identity", [y], x.dtype, x.shape)
        out = s.m.declare(y.name, x.dtype, x.shape)
        branches.append(helper.make_graph(b.nodes, s.m.fresh(label), [], [out]))
    return s.op("If", [cond], x.dtype, x.shape, then_branch=branches[0], else_branch=branches[1])


def step_loop(s: Scope, x: Val):
    """A nested Loop carrying x (trip count 0-3), or a nested Scan over a table with x as its state."""
    if s.depth >= 2:
        return None
    if s.c.booleans(0.3):
        return nested_scan(s, x)
    spec = loop_spec(s, s.m.c.choice(["constant", "initializer", "feed", "shape"]))
    finals, scans = loop_node(s, spec, [x], [], s.depth + 1)
    y = finals[0]
    if scans:  # fold one stacked output back into x's shape
        ys = scans[0]
        if ys.shape[1:] == x.shape and ys.dtype == x.dtype and kind(x.dtype) != "b" and spec.exact:
            folded = s.op("ReduceSum", [ys, s.ints([0])], x.dtype, x.shape, keepdims=0)
            y = combine(s, y, folded)
    return y


def nested_scan(s: Scope, x: Val):
    rows = s.c.integers(0, 3)
    axis = s.c.integers(0, x.rank)
    table = _table(s, x, axis, rows)
    s.m.note(s.depth, f"nested Scan over {rows} steps of a table on axis {axis}, x as its state:")
    b = Scope(s.m, s, s.depth + 1)
    state = Val(s.m.fresh("state_in"), x.dtype, x.shape)
    piece = Val(s.m.fresh("piece"), x.dtype, x.shape)
    b.pool += [state, piece]
    y = combine(b, state, piece)
    y = apply_steps(b, y, s.c.integers(0, 1), simple=True)
    out = y if y.name not in (state.name, piece.name) else b.op("Identity", [y], x.dtype, x.shape)
    body = helper.make_graph(b.nodes, s.m.fresh("scan_body"),
                             [s.m.declare(state.name, x.dtype, x.shape), s.m.declare(piece.name, x.dtype, x.shape)],
                             [s.m.declare(out.name, x.dtype, x.shape)])
    return s.op("Scan", [x, table], x.dtype, x.shape, body=body, num_scan_inputs=1, scan_input_axes=[axis])


STEPS = [step_unary, step_binary, step_binary, step_where, step_cast, step_iteration, step_matmul, step_gemm,
         step_gather, step_slice, step_concat, step_reshape, step_transpose, step_unsqueeze, step_expand,
         step_reduce, step_argmax, step_if, step_loop]
SIMPLE_STEPS = [step_unary, step_binary, step_iteration, step_matmul, step_gather, step_reduce]


def apply_steps(s: Scope, x: Val, count: int, simple: bool = False) -> Val:
    """`count` random steps on x, each keeping its dtype and shape."""
    for _ in range(count):
        y = None
        while y is None:
            y = s.c.choice(SIMPLE_STEPS if simple else STEPS)(s, x)
        x = y
    return x


# ---------------------------------------------------------------------------------------------
# scan outputs: per-iteration values of any shape


def scan_output(s: Scope, x: Val, direct: list[Val]) -> Val:
    """A per-iteration output derived from x, or a body input returned as it is."""
    c = s.c
    kinds = ["identity", "transpose", "unsqueeze", "concat", "flatten", "argmax", "reduce", "shape", "squeeze",
             "direct", "direct"]
    how = c.choice(kinds)
    if how == "direct" and direct:
        v = c.choice(direct)
        s.m.note(s.depth, f"scan output: body input {v.name} returned directly")
        return v
    if how == "transpose" and x.rank >= 2:
        perm = c.permutation(x.rank)
        s.m.note(s.depth, f"scan output: Transpose(x, {perm})")
        return s.op("Transpose", [x], x.dtype, tuple(x.shape[a] for a in perm), perm=perm)
    if how == "unsqueeze":
        axis = c.integers(0, x.rank)
        s.m.note(s.depth, f"scan output: Unsqueeze(x, [{axis}])")
        return s.op("Unsqueeze", [x, s.ints([axis])], x.dtype, x.shape[:axis] + (1,) + x.shape[axis:])
    if how == "concat" and x.rank >= 1:
        axis = c.integers(-x.rank, x.rank - 1)
        shape = list(x.shape)
        shape[axis] *= 2
        s.m.note(s.depth, f"scan output: Concat(x, x, axis={axis})")
        return s.op("Concat", [x, x], x.dtype, tuple(shape), axis=axis)
    if how == "flatten":
        s.m.note(s.depth, "scan output: Reshape(x, [-1])")
        return s.op("Reshape", [x, s.ints([-1])], x.dtype, (int(np.prod(x.shape)),))
    if how == "argmax" and kind(x.dtype) != "b" and any(x.shape):
        axis = c.choice([a for a in range(x.rank) if x.shape[a] > 0])
        s.m.note(s.depth, f"scan output: ArgMax(x, axis={axis}, keepdims=0)")
        return s.op("ArgMax", [x], np.int64, x.shape[:axis] + x.shape[axis + 1:], axis=axis, keepdims=0)
    if how == "reduce" and kind(x.dtype) != "b" and x.rank >= 1:
        axis = c.integers(0, x.rank - 1)
        s.m.note(s.depth, f"scan output: ReduceSum(x, [{axis}], keepdims=0)")
        return s.op("ReduceSum", [x, s.ints([axis])], x.dtype, x.shape[:axis] + x.shape[axis + 1:], keepdims=0)
    if how == "shape":
        s.m.note(s.depth, "scan output: Shape(x)")
        return s.op("Shape", [x], np.int64, (x.rank,))
    if how == "squeeze" and 1 in x.shape:
        axis = x.shape.index(1)
        s.m.note(s.depth, f"scan output: Squeeze(x, [{axis}])")
        return s.op("Squeeze", [x, s.ints([axis])], x.dtype, x.shape[:axis] + x.shape[axis + 1:])
    s.m.note(s.depth, "scan output: Identity(x)")
    return s.op("Identity", [x], x.dtype, x.shape)


def unique_outputs(s: Scope, values: list[Val]) -> list[Val]:
    """The body's outputs, an Identity wherever a name would repeat."""
    seen, outs = set(), []
    for v in values:
        if v.name in seen:
            v = s.op("Identity", [v], v.dtype, v.shape)
        seen.add(v.name)
        outs.append(v)
    return outs


# ---------------------------------------------------------------------------------------------
# Loop


@dataclass
class LoopSpec:
    """How a Loop runs: its trip count and condition inputs, its body's condition, how often it runs."""

    trip: Val | None
    cond: Val | None
    body_cond: str  # "pass", "identity", "true", "false", "less", "data"
    stop_after: int  # for "less" and "data": the body continues while i < stop_after
    runs: int  # iterations, exactly (for "data": an upper bound, see exact)
    exact: bool = True
    describe: str = ""


def loop_spec(s: Scope, trip_mode: str | None = None) -> LoopSpec:
    """Draw the trip count and condition of a Loop placed in scope s."""
    c, m = s.c, s.m
    mode = trip_mode or c.choice(["feed", "initializer", "constant", "shape", "while"])
    trip_value = c.choice([0, 1, 1, 2, 3, 4, 5]) if s.depth == 0 else c.choice([0, 1, 2, 3])
    trip = None
    if mode in ("feed", "initializer"):
        trip = m.value(s, np.array(trip_value, np.int64), "M", "feed" if mode == "feed" else "initializer")
    elif mode == "constant":
        trip = s.const(np.array(trip_value, np.int64), "M")
    elif mode == "shape":  # M = Shape(x)[axis], as exporters compute sequence lengths
        shape = list(c.shape(2))
        axis = c.integers(0, len(shape))
        shape.insert(axis, trip_value)
        source = m.value(s, m.data(np.float32, tuple(shape)), "lengths", c.choice(["feed", "initializer"]))
        if c.booleans():
            dims = s.op("Shape", [source], np.int64, (len(shape),))
            trip = s.op("Gather", [dims, s.const(np.array(axis, np.int64))], np.int64, (), axis=0)
        else:
            dims = s.op("Shape", [source], np.int64, (1,), start=axis, end=axis + 1)
            trip = s.op("Squeeze", [dims, s.ints([0])], np.int64, ())
    with_cond = mode == "while" or c.booleans(0.3)
    initial = c.integers(0, 6) > 0
    cond = None
    if with_cond:
        cond = m.value(s, np.array(initial), "cond", c.choice(["feed", "initializer", "constant"]))
    if mode == "while":
        body_cond = c.choice(["less", "less", "data"])
    else:
        body_cond = c.choice(["pass", "identity", "true", "false", "less", "data"])
    stop_after = c.integers(0, 4)
    runs = trip_value if trip is not None else 10**9
    if cond is not None and not initial:
        runs = 0
    elif body_cond == "false":
        runs = min(runs, 1)
    elif body_cond in ("less", "data"):
        runs = min(runs, stop_after + 1)
    describe = (f"Loop: trip count {'-' if trip is None else trip_value} ({mode}), "
                f"initial cond {'-' if cond is None else initial}, body cond {body_cond}"
                f"{f' i < {stop_after}' if body_cond in ('less', 'data') else ''}; runs "
                f"{'at most ' if body_cond == 'data' else ''}{runs}")
    return LoopSpec(trip, cond, body_cond, stop_after, runs, body_cond != "data", describe)


def body_condition(b: Scope, spec: LoopSpec, cond_in: Val, carried: list[Val]) -> Val:
    """The body's condition output, per spec.body_cond."""
    kind_ = spec.body_cond
    if kind_ == "pass":
        return cond_in
    if kind_ == "identity":
        return b.op("Identity", [cond_in], np.bool_, ())
    if kind_ in ("true", "false"):
        return b.op("Identity", [b.const(np.array(kind_ == "true"))], np.bool_, ())
    less = b.op("Less", [b.i, b.const(np.array(spec.stop_after, np.int64))], np.bool_, ())
    if kind_ == "less":
        return less
    # "data": also stop when an integer or bool carried value says so (never on floats: a rounding
    # difference between backends must not change the number of iterations)
    exact = [v for v in carried if kind(v.dtype) in "ib"]
    if not exact:
        return less
    v = b.c.choice(exact)
    if kind(v.dtype) == "b":
        count = b.op("Cast", [v], np.int64, v.shape, to=onnx_type(np.int64))
        total = b.op("ReduceSum", [count], np.int64, (), keepdims=0)
    else:
        total = b.op("ReduceSum", [v], v.dtype, (), keepdims=0)
    data = b.op("Greater", [total, b.const(np.array(b.c.integers(-3, 3), total.dtype))], np.bool_, ())
    return b.op("And", [less, data], np.bool_, ())


def loop_node(s: Scope, spec: LoopSpec, inits: list[Val], seq_inits: list[tuple[Val, tuple]], depth: int):
    """A Loop in s carrying `inits` (tensors) and `seq_inits` ((sequence, element shape)); returns
    (final values, stacked outputs) with their concrete shapes."""
    m, c = s.m, s.c
    m.note(depth - 1, spec.describe)
    b = Scope(m, s, depth)
    i = Val(m.fresh("iter"), np.dtype(np.int64), ())
    cond_in = Val(m.fresh("cond_in"), np.dtype(np.bool_), ())
    b.i, b.max_runs = i, max(min(spec.runs, 10), 1)
    carried_in = [Val(m.fresh("carried_in"), v.dtype, v.shape) for v in inits]
    seq_in = [Val(m.fresh("seq_in"), v.dtype, v.shape) for v, _ in seq_inits]
    b.pool += [i, cond_in, *carried_in]
    outs = []
    for v in carried_in:
        m.note(depth, f"carried {v.dtype}{list(v.shape)}:")
        outs.append(v if c.booleans(0.1) else apply_steps(b, v, c.integers(1, 3)))
        if outs[-1].name == v.name:
            m.note(depth, "returned as it is")
    seq_outs = []
    for (seq, elem_shape), sin in zip(seq_inits, seq_in):
        element = _element(b, seq.dtype, elem_shape, outs + carried_in)
        inputs = [sin, element] + ([b.const(np.array(0, np.int64))] if c.booleans(0.2) else [])
        m.note(depth, f"SequenceInsert(seq, {element.name}{' at 0' if len(inputs) == 3 else ''})")
        seq_outs.append(b.sequence_op("SequenceInsert", inputs, seq.dtype))
    scans = [scan_output(b, c.choice(outs or [i]), [i, cond_in, *carried_in]) for _ in range(c.integers(0, 2))]
    cond_out = body_condition(b, spec, cond_in, outs)
    declared_outs = unique_outputs(b, [cond_out, *outs, *scans])
    cond_out, outs, scans = declared_outs[0], declared_outs[1:1 + len(outs)], declared_outs[1 + len(outs):]
    body_inputs = [m.declare(i.name, np.int64, ()), m.declare(cond_in.name, np.bool_, ())]
    body_inputs += [m.declare(v.name, v.dtype, v.shape) for v in carried_in]
    body_inputs += [m.declare_sequence(v.name, v.dtype, shape) for v, (_, shape) in zip(seq_in, seq_inits)]
    body_outputs = [m.declare(cond_out.name, np.bool_, ())] + [m.declare(v.name, v.dtype, v.shape) for v in outs]
    body_outputs += [m.declare_sequence(v.name, v.dtype, shape) for v, (_, shape) in zip(seq_outs, seq_inits)]
    body_outputs += [m.declare(v.name, v.dtype, v.shape) for v in scans]
    body = helper.make_graph(b.nodes, m.fresh("loop_body"), body_inputs, body_outputs)
    runs = spec.runs
    finals = [Val(m.fresh("final"), v.dtype, v.shape) for v in inits]
    seq_finals = [Val(m.fresh("seq_final"), v.dtype, ()) for v, _ in seq_inits]
    stacked = [Val(m.fresh("stacked"), v.dtype, (runs,) + v.shape) for v in scans]
    names = [spec.trip.name if spec.trip else "", spec.cond.name if spec.cond else ""]
    names += [v.name for v in inits] + [v.name for v, _ in seq_inits]
    s.nodes.append(helper.make_node("Loop", names, [v.name for v in finals + seq_finals + stacked],
                                    name=f"/scope{s.depth}/Loop_{m.count}", body=body))
    s.pool += finals + (stacked if spec.exact else [])  # a stacked length known only at run time is no operand
    return finals + seq_finals, stacked


def _element(b: Scope, dtype, shape: tuple, values: list[Val]) -> Val:
    """A value to append to a sequence of `dtype` elements of `shape`: a carried value, or i cast."""
    same = [v for v in values if v.dtype == dtype and v.shape == shape]
    if same and b.c.booleans(0.7):
        return b.c.choice(same)
    if kind(dtype) != "b":
        i = b.op("Cast", [b.i], dtype, (), to=onnx_type(dtype))
        return b.op("Expand", [i, b.ints(list(shape))], dtype, shape)
    return b.op("Expand", [b.const(np.array(True)), b.ints(list(shape))], dtype, shape)


# ---------------------------------------------------------------------------------------------
# Scan


def scan_node(s: Scope, inits: list[Val]):
    """A Scan in s with states `inits` and one to three scan inputs of any axes and directions."""
    m, c = s.m, s.c
    length = c.choice([0, 1, 1, 2, 3, 4])
    n_in = c.integers(1, 3)
    xs, axes, dirs, elems = [], [], [], []
    for k in range(n_in):
        if inits and c.booleans(0.6):  # an element that matches a state, to combine with it
            like = c.choice(inits)
            dtype, elem = like.dtype, broadcast_operand_shape(c, like.shape) if c.booleans(0.3) else like.shape
        else:
            dtype, elem = c.choice(DTYPES), c.shape(2)
        axis = c.integers(0, len(elem))
        full = elem[:axis] + (length,) + elem[axis:]
        xs.append(m.value(s, m.data(dtype, full), "xs", c.choice(["feed", "feed", "initializer", "main constant"])))
        axes.append(axis if c.booleans() else axis - len(elem) - 1)
        dirs.append(c.integers(0, 1))
        elems.append(Val(m.fresh("x_t"), dtype, elem))
    m.note(0, f"Scan over {length} steps: inputs {[f'{e.dtype}{list(e.shape)}' for e in elems]} axes {axes} "
              f"directions {dirs}")
    b = Scope(m, s, 1)
    states_in = [Val(m.fresh("state_in"), v.dtype, v.shape) for v in inits]
    b.pool += states_in + elems
    outs = []
    for v in states_in:
        m.note(1, f"state {v.dtype}{list(v.shape)}:")
        y = v
        for e in elems:
            if e.dtype == v.dtype and _broadcasts_to(e.shape, v.shape):
                m.note(1, f"combine with {e.name}")
                y = combine(b, y, e)
        outs.append(y if c.booleans(0.1) else apply_steps(b, y, c.integers(1, 2)))
    scans = [scan_output(b, c.choice(outs + elems), states_in + elems) for _ in range(c.integers(1, 2))]
    declared = unique_outputs(b, outs + scans)
    outs, scans = declared[:len(outs)], declared[len(outs):]
    out_axes = [c.integers(-v.rank - 1, v.rank) for v in scans]
    out_dirs = [c.integers(0, 1) for _ in scans]
    m.note(1, f"scan output axes {out_axes} directions {out_dirs}")
    body = helper.make_graph(
        b.nodes, m.fresh("scan_body"),
        [m.declare(v.name, v.dtype, v.shape) for v in states_in + elems],
        [m.declare(v.name, v.dtype, v.shape) for v in outs + scans])
    finals = [Val(m.fresh("final"), v.dtype, v.shape) for v in inits]
    stacked = []
    for v, a in zip(scans, out_axes):
        a %= v.rank + 1
        stacked.append(Val(m.fresh("stacked"), v.dtype, v.shape[:a] + (length,) + v.shape[a:]))
    s.nodes.append(helper.make_node("Scan", [v.name for v in inits + xs], [v.name for v in finals + stacked],
                                    name=f"/Scan_{m.count}", body=body, num_scan_inputs=n_in,
                                    scan_input_axes=axes, scan_input_directions=dirs,
                                    scan_output_axes=out_axes, scan_output_directions=out_dirs))
    return finals, stacked


# ---------------------------------------------------------------------------------------------
# the model


def carried_inits(m: Model, s: Scope, count: int) -> list[Val]:
    """Initial values of any dtype and rank 0-3, from feeds, initializers and Constant nodes."""
    values = []
    for _ in range(count):
        dtype, shape = m.c.choice(DTYPES), m.c.shape(3)
        data = m.data(dtype, shape)
        values.append(m.value(s, data, "init", m.c.choice(["feed", "feed", "initializer", "main constant"])))
    return values


def build_model(seed: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray], str]:
    """(model, feeds, description) of a random model with one top-level Loop or Scan."""
    m = Model(seed)
    c = m.c
    main = m.main = Scope(m)
    outputs: list[tuple[Val, bool]] = []  # (value, is a sequence)
    unknown: set[str] = set()  # outputs whose shape depends on a data-dependent trip count
    if c.booleans(0.65):
        spec = loop_spec(main)
        inits = carried_inits(m, main, c.integers(1, 3) if c.integers(0, 5) else 0)
        seq_inits = []
        if c.booleans(0.25) or not inits:
            dtype, shape = c.choice(DTYPES[:4]), c.shape(2)
            if c.booleans(0.7):
                seq = main.sequence_op("SequenceEmpty", [], dtype, dtype=onnx_type(dtype))
            else:
                seq = main.sequence_op("SequenceConstruct", [m.value(main, m.data(dtype, shape), "first")], dtype)
            seq_inits.append((seq, shape))
        finals, stacked = loop_node(main, spec, inits, seq_inits, 1)
        if not spec.exact:
            unknown.update(v.name for v in stacked)
        for v in finals[:len(inits)] + stacked:
            outputs.append((v, False))
        for (seq, shape), v in zip(seq_inits, finals[len(inits):]):
            nonempty = spec.exact and spec.runs > 0 or seq.name.startswith("sequenceconstruct")
            how = c.choice(["sequence", "concat", "length"] + (["at"] if nonempty else []))
            if how == "concat" and nonempty:
                new_axis = c.integers(0 if shape else 1, 1)
                rank = len(shape) + new_axis  # the dims are data-dependent where the trip count is
                joined = main.op("ConcatFromSequence", [v], v.dtype, (0,) * rank, axis=0, new_axis=new_axis)
                unknown.add(joined.name)
                outputs.append((joined, False))
            elif how == "length":
                outputs.append((main.op("SequenceLength", [v], np.int64, ()), False))
            elif how == "at":
                outputs.append((main.op("SequenceAt", [v, main.const(np.array(-1, np.int64))], v.dtype, shape), False))
            else:
                outputs.append((v, True))
            m.note(0, f"the sequence is returned as {how}")
    else:
        finals, stacked = scan_node(main, carried_inits(m, main, c.integers(1, 3)))
        outputs = [(v, False) for v in finals + stacked]
    graph_outputs = []
    for v, is_seq in outputs:
        if is_seq:
            graph_outputs.append(m.declare_sequence(v.name, v.dtype, None))
        else:  # a shape the generator does not know has its rank declared, not its dims
            graph_outputs.append(m.declare_io(v.name, v.dtype, v.shape, v.name not in unknown))
    graph = helper.make_graph(main.nodes, "fuzz", m.inputs, graph_outputs, m.initializers)
    model = helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="rnnloop-model-fuzz")
    return model, m.feeds, f"seed {seed}\n" + "\n".join(m.steps)


# ---------------------------------------------------------------------------------------------
# onnxruntime as a third opinion


def for_onnxruntime(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy in which no Loop/Scan body returns one of its inputs (or an outer value) directly:
    onnxruntime returns wrong values for such scan outputs, so each gets an Identity. (And a Loop
    body's iteration number and condition are declared scalars: onnxruntime refuses them unshaped.)"""
    model = onnx.ModelProto.FromString(model.SerializeToString())

    def fix(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    fix(attr.g)
                    if node.op_type in ("Loop", "Scan"):
                        _wrap_inputs(attr.g)
                    if node.op_type == "Loop":
                        for port in attr.g.input[:2]:
                            port.type.tensor_type.shape.Clear()
                            port.type.tensor_type.SetInParent()
                            port.type.tensor_type.shape.SetInParent()

    fix(model.graph)
    return model


def _wrap_inputs(body: onnx.GraphProto) -> None:
    produced = {o for n in body.node for o in n.output}
    for k, out in enumerate(body.output):
        if out.name not in produced:
            new = f"{out.name}__identity_{k}"
            body.node.append(helper.make_node("Identity", [out.name], [new]))
            out.name = new
