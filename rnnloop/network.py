"""A network builder in the style of TensorRT's loop API: inputs, constants, ops as methods, loops.

Each op is checked as it is added (ONNX's shape inference, see infer.py) and lands in the scope of
its deepest input: an op reading a value computed inside a loop belongs to that loop's body; an op
reading only values from outside is computed once, outside. `compile()` lowers the network into the
same IR as the model front ends (lowering.py) and returns the same Session as `rnnloop.load`.

An LSTM layer in it::

    net = rnnloop.Network()
    x = net.add_input("x", np.float32, ("seq", "batch", 64))
    h0 = net.add_input("h0", np.float32, ("batch", 128))
    c0 = net.add_input("c0", np.float32, ("batch", 128))
    w, r = net.constant(W.T), net.constant(R.T)            # [64, 512], [128, 512]; gates i, o, f, c
    loop = net.add_loop()
    x_t = loop.add_iterator(x)                              # [batch, 64], one step per iteration
    h, c = loop.add_recurrence(h0), loop.add_recurrence(c0)
    gates = net.add(net.matmul(x_t, w), net.matmul(h, r))
    i, o, f, g = net.split(gates, axis=1, num_outputs=4)
    c_next = net.add(net.mul(net.sigmoid(f), c), net.mul(net.sigmoid(i), net.tanh(g)))
    h_next = net.mul(net.sigmoid(o), net.tanh(c_next))
    h.set_next(h_next)
    c.set_next(c_next)
    net.mark_output(loop.add_output(h_next, "concat"), "y")        # [seq, batch, 128]
    net.mark_output(loop.add_output(h, "last"), "h_n")
    y, h_n = net.compile().run(None, {"x": xs, "h0": h, "c0": c})
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from .errors import BuildError
from .ir import Dim, Op, Origin, TensorType, Type
from .ops import OPS

_KINDS = ("last", "concat", "reverse")


class Tensor:
    """A value of a Network. Operators and NumPy functions on it add ops (see tensor_math.py)."""

    def __init__(self, net: Network, name: str, type_: Type | None, scope: _Scope,
                 value: np.ndarray | None = None):
        self.net, self.name, self.type, self.scope, self.value = net, name, type_, scope, value

    @property
    def dtype(self) -> np.dtype | None:
        return self.type.dtype if isinstance(self.type, TensorType) else None

    @property
    def shape(self) -> tuple[Dim, ...] | None:
        """The shape: ints, names of dynamic sizes, or None where unknown (None when the rank is)."""
        return self.type.shape if isinstance(self.type, TensorType) else None

    @property
    def ndim(self) -> int | None:
        return None if self.shape is None else len(self.shape)

    def __repr__(self) -> str:
        return f"Tensor('{self.name}', {self.type})"


class Recurrence(Tensor):
    """A loop's carried value: its initial value in the first iteration, then what `set_next` gave."""

    def __init__(self, loop: Loop, name: str, initial: Tensor):
        super().__init__(loop.net, name, initial.type, loop)
        self.initial, self.next = initial, None

    def set_next(self, value: Tensor | Any) -> None:
        """The value this recurrence takes in the next iteration; it must keep the dtype and shape."""
        loop = self.scope
        value = loop.net._tensor(value, dtype=self.dtype)
        if not loop.within(value.scope):
            raise BuildError(f"recurrence '{self.name}' of loop '{loop.name}': its next value '{value.name}' is "
                             "computed inside another loop; bring it out with that loop's add_output first")
        problem = mismatch(value.type, self.type)
        if problem:
            raise BuildError(f"recurrence '{self.name}' of loop '{loop.name}': its next value '{value.name}' is "
                             f"{value.type} but its initial value is {self.type} ({problem}); a recurrence keeps "
                             "its dtype and shape, so cast or reshape the next value")
        self.next = value


def mismatch(got: Type | None, want: Type | None) -> str | None:
    """Why a value of type `got` cannot stand where `want` is expected (None when it can)."""
    if not isinstance(got, TensorType) or not isinstance(want, TensorType):
        return None if type(got) is type(want) or got is None or want is None else "not the same kind of value"
    if got.dtype is not None and want.dtype is not None and got.dtype != want.dtype:
        return f"dtype {got.dtype}, not {want.dtype}"
    if got.shape is not None and want.shape is not None:
        if len(got.shape) != len(want.shape):
            return f"rank {len(got.shape)}, not {len(want.shape)}"
        for axis, (a, b) in enumerate(zip(got.shape, want.shape)):
            if isinstance(a, int) and isinstance(b, int) and a != b:
                return f"size {a} on axis {axis}, not {b}"
    return None


class _Scope:
    """Where ops live: the network's top level, or one loop's body (a child of its parent scope)."""

    def __init__(self, net: Network, parent: _Scope | None, name: str):
        self.net, self.parent, self.name = net, parent, name
        self.items: list[Op | Loop] = []  # ops and nested loops, in the order they were added

    def within(self, other: _Scope) -> bool:
        """Whether this scope is `other` or nested inside it."""
        scope = self
        while scope is not None:
            if scope is other:
                return True
            scope = scope.parent
        return False

    def add_loop(self, name: str | None = None) -> Loop:
        """A loop whose body is nested in this scope."""
        loop = Loop(self.net, self, self.net._fresh(name or "loop"))
        self.items.append(loop)
        return loop

    def add_if(self, condition: Tensor | bool, name: str | None = None) -> Conditional:
        """A conditional nested in this scope, choosing by `condition` (a boolean scalar)."""
        conditional = Conditional(self.net, self, self.net._fresh(name or "if"), condition)
        self.items.append(conditional)
        return conditional


class Loop(_Scope):
    """A loop, as TensorRT's ILoop: trip limits, iterators, recurrences and outputs.

    It runs until any of its limits fires: a count of iterations, a `while` condition that is
    false, or the end of its iterators (which must all have the same length). Values from outside
    the loop are used inside directly.
    """

    def __init__(self, net: Network, parent: _Scope, name: str):
        super().__init__(net, parent, name)
        self.trip: Tensor | None = None
        self.condition: Tensor | None = None
        self.iterators: list[tuple[Tensor, int, bool, Tensor]] = []  # (source, axis, reverse, part)
        self.recurrences: list[Recurrence] = []
        self.outputs: list[tuple[Tensor, str, int, int | None, Tensor]] = []  # (value, kind, axis, length, out)
        self._iteration: Tensor | None = None

    def _outside(self, value: Any, what: str, dtype: Any = None) -> Tensor:
        tensor = self.net._tensor(value, dtype=dtype)
        if not self.parent.within(tensor.scope):
            raise BuildError(f"loop '{self.name}': {what} '{tensor.name}' must come from outside the loop "
                             f"(it is computed in {tensor.scope.name})")
        return tensor

    def add_trip_limit(self, limit: Tensor | int, kind: str = "count") -> None:
        """Limit the loop: kind "count", an integer scalar from outside (at most that many iterations),
        or kind "while", a boolean scalar computed in the loop from its recurrences (the loop runs
        while it is true; it is checked before every iteration, the first included)."""
        if kind == "count":
            if self.trip is not None:
                raise BuildError(f"loop '{self.name}' already has a count limit")
            tensor = self._outside(limit, "the trip count", np.int64)
            if tensor.dtype is None or tensor.dtype.kind not in "iu" or tensor.ndim not in (0, None):
                raise BuildError(f"loop '{self.name}': the trip count must be an integer scalar, "
                                 f"'{tensor.name}' is {tensor.type}")
            self.trip = tensor
        elif kind == "while":
            if self.condition is not None:
                raise BuildError(f"loop '{self.name}' already has a while limit")
            tensor = self.net._tensor(limit, dtype=np.bool_)
            if tensor.dtype != np.bool_ or tensor.ndim not in (0, None):
                raise BuildError(f"loop '{self.name}': the while condition must be a boolean scalar, "
                                 f"'{tensor.name}' is {tensor.type}")
            if not self.within(tensor.scope):
                raise BuildError(f"loop '{self.name}': the while condition '{tensor.name}' is computed in "
                                 f"another loop ({tensor.scope.name})")
            self.condition = tensor
        else:
            raise BuildError(f"loop '{self.name}': trip limit kind '{kind}' is not 'count' or 'while'")

    def add_iterator(self, tensor: Tensor | Any, axis: int = 0, reverse: bool = False) -> Tensor:
        """One slice of `tensor` (from outside the loop) along `axis` per iteration, first to last
        or, with `reverse`, last to first; the slice drops that axis."""
        source = self._outside(tensor, "an iterator's tensor")
        shape = source.shape
        if shape is not None:
            if not -len(shape) <= axis < len(shape):
                raise BuildError(f"loop '{self.name}': iterator axis {axis} is out of range for "
                                 f"'{source.name}' of rank {len(shape)}")
            axis %= len(shape)
            shape = shape[:axis] + shape[axis + 1:]
        elif axis < 0:
            raise BuildError(f"loop '{self.name}': the rank of '{source.name}' is unknown, so the iterator "
                             "axis must not be negative")
        part = self.net._add(Tensor(self.net, self.net._fresh(f"{source.name}_t"), TensorType(source.dtype, shape),
                                    self))
        self.iterators.append((source, axis, reverse, part))
        return part

    def add_recurrence(self, initial: Tensor | Any) -> Recurrence:
        """A carried value starting at `initial` (from outside the loop); give its next value with
        `set_next`."""
        tensor = self._outside(initial, "a recurrence's initial value")
        r = self.net._add(Recurrence(self, self.net._fresh(f"{tensor.name}_r"), tensor))
        self.recurrences.append(r)
        return r

    @property
    def iteration(self) -> Tensor:
        """The iteration number, an int64 scalar counting from 0."""
        if self._iteration is None:
            self._iteration = self.net._add(Tensor(self.net, self.net._fresh(f"{self.name}_i"),
                                                   TensorType(np.dtype(np.int64), ()), self))
        return self._iteration

    def add_output(self, value: Tensor | Any, kind: str = "last", axis: int = 0, length: int | None = None) -> Tensor:
        """A value of the loop made available after it.

        kind "last": the value in the last iteration; for a recurrence, its final value (after the
        last update; the initial value when the loop runs zero times). kind "concat": the values of
        all iterations stacked along a new axis `axis`, first iteration first; "reverse": the same,
        last iteration first. A `length` larger than the iteration count pads the stacked result
        with zeros after the last written entry (a loop running more iterations is an error).
        """
        if kind not in _KINDS:
            raise BuildError(f"loop '{self.name}': output kind '{kind}' is not one of {', '.join(_KINDS)}")
        value = self.net._tensor(value)
        if not self.within(value.scope) and not value.scope.within(self):
            raise BuildError(f"loop '{self.name}': '{value.name}' is computed in another loop "
                             f"({value.scope.name}); bring it out with that loop's add_output first")
        if not self.within(value.scope):
            raise BuildError(f"loop '{self.name}': '{value.name}' is computed in the nested loop "
                             f"'{value.scope.name}'; add an output to that loop first")
        type_ = value.type
        if kind != "last":
            if length is not None and (not isinstance(length, (int, np.integer)) or length < 0):
                raise BuildError(f"loop '{self.name}': output length must be a non-negative int, got {length!r}")
            type_ = self._stacked_type(value, axis, length)
        elif length is not None:
            raise BuildError(f"loop '{self.name}': a 'last' output has no length")
        out = self.net._add(Tensor(self.net, self.net._fresh(f"{self.name}_{kind}"), type_, self.parent))
        self.net._producer[out.name] = self
        self.outputs.append((value, kind, axis, None if length is None else int(length), out))
        return out

    def _stacked_type(self, value: Tensor, axis: int, length: int | None) -> TensorType:
        shape = value.shape
        if shape is None:
            return TensorType(value.dtype, None)
        if not -len(shape) - 1 <= axis <= len(shape):
            raise BuildError(f"loop '{self.name}': output axis {axis} is out of range for a stack of "
                             f"'{value.name}' (rank {len(shape)} + 1)")
        axis %= len(shape) + 1
        count = length if length is not None else self._static_count()
        return TensorType(value.dtype, shape[:axis] + (count,) + shape[axis:])

    def _static_count(self) -> Dim:
        """The iteration count when it is known before running (else None)."""
        if self.condition is not None:
            return None
        counts = {src.shape[axis] if src.shape is not None else None for src, axis, _, _ in self.iterators}
        if self.trip is not None:
            trip = None if self.trip.value is None else max(int(self.trip.value), 0)
            ints = [c for c in counts if isinstance(c, int)]
            return min([trip, *ints]) if trip is not None and len(ints) == len(counts) else None
        return counts.pop() if len(counts) == 1 else None


class Conditional(_Scope):
    """An if-then-else, as TensorRT's IIfConditional: `add_input` brings values in, ops on them
    belong to the conditional, and `add_output(then_value, else_value)` gives the value of the
    branch the condition selects. Only the ops each output needs run in its branch; ops reading
    only values from outside run before the conditional, whichever branch is taken.
    """

    def __init__(self, net: Network, parent: _Scope, name: str, condition: Tensor | bool):
        super().__init__(net, parent, name)
        self.condition = net._tensor(condition, dtype=np.bool_)
        if self.condition.dtype != np.bool_ or self.condition.ndim not in (0, None):
            raise BuildError(f"conditional '{name}': the condition must be a boolean scalar, "
                             f"'{self.condition.name}' is {self.condition.type}")
        if not parent.within(self.condition.scope):
            raise BuildError(f"conditional '{name}': the condition '{self.condition.name}' must come from "
                             "outside the conditional")
        self.outputs: list[tuple[Tensor, Tensor, Tensor]] = []  # (then value, else value, out)

    def add_input(self, value: Tensor | Any) -> Tensor:
        """`value` (from outside) as a value of the conditional: ops on it run in its branches."""
        tensor = self.net._tensor(value)
        if not self.parent.within(tensor.scope):
            raise BuildError(f"conditional '{self.name}': an input must come from outside it, "
                             f"'{tensor.name}' is computed in {tensor.scope.name}")
        name = self.net._fresh(f"{tensor.name}_in")
        op = Op("Identity", [tensor.name], [name], {}, Origin("rnnloop", name, "Identity"))
        self.items.append(op)
        self.net._producer[name] = op
        return self.net._add(Tensor(self.net, name, tensor.type, self))

    def add_output(self, then_value: Tensor | Any, else_value: Tensor | Any) -> Tensor:
        """The value of the branch taken: `then_value` when the condition holds, else `else_value`;
        both of one dtype and rank."""
        values = [self.net._tensor(v) for v in (then_value, else_value)]
        for v in values:
            if not self.within(v.scope):
                raise BuildError(f"conditional '{self.name}': '{v.name}' is computed in {v.scope.name}, "
                                 "not in this conditional or outside it")
        a, b = values[0].type, values[1].type
        if isinstance(a, TensorType) and isinstance(b, TensorType):
            problem = mismatch(TensorType(a.dtype, _rank_only(a.shape)), TensorType(b.dtype, _rank_only(b.shape)))
            if problem:
                raise BuildError(f"conditional '{self.name}': the branches give {a} and {b} ({problem}); "
                                 "both must have one dtype and rank")
            shape = None if a.shape is None or b.shape is None else \
                tuple(x if x == y else None for x, y in zip(a.shape, b.shape))
            type_ = TensorType(a.dtype or b.dtype, shape)
        else:
            type_ = a or b
        out = self.net._add(Tensor(self.net, self.net._fresh(f"{self.name}_out"), type_, self.parent))
        self.net._producer[out.name] = self
        self.outputs.append((values[0], values[1], out))
        return out


def _rank_only(shape: tuple | None) -> tuple | None:
    return None if shape is None else (None,) * len(shape)


class Network:
    """A model built op by op; `compile()` gives a Session, `to_onnx()` an ONNX model."""

    def __init__(self, name: str = "network"):
        self.name = name
        self.top = _Scope(self, None, name)
        self.inputs: list[Tensor] = []
        self.outputs: list[tuple[Tensor, str]] = []
        self.tensors: dict[str, Tensor] = {}
        self._producer: dict[str, Op | _Scope] = {}  # what computes each value: an op, a loop or a conditional
        self._counter = 0

    # values ----------------------------------------------------------------------------------
    def _fresh(self, hint: str) -> str:
        while True:
            self._counter += 1
            name = f"{hint}_{self._counter}"
            if name not in self.tensors:
                return name

    def _add(self, tensor: Tensor) -> Tensor:
        self.tensors[tensor.name] = tensor
        return tensor

    def add_input(self, name: str, dtype: Any, shape: Sequence[int | str | None]) -> Tensor:
        """A model input; a dimension may be a name (a size given at run time) or None."""
        if name in self.tensors:
            raise BuildError(f"network '{self.name}': the name '{name}' is already used")
        dims = tuple(d if isinstance(d, str) or d is None else int(d) for d in shape)
        tensor = self._add(Tensor(self, name, TensorType(np.dtype(dtype), dims), self.top))
        self.inputs.append(tensor)
        return tensor

    def constant(self, value: Any, dtype: Any = None, name: str | None = None) -> Tensor:
        """A constant tensor (copied), usable anywhere in the network, loops included."""
        array = np.array(value, dtype=dtype)
        if array.dtype.kind not in "biuf":
            raise BuildError(f"network '{self.name}': a constant must be numeric or boolean, got {array.dtype}")
        if name is not None and name in self.tensors:
            raise BuildError(f"network '{self.name}': the name '{name}' is already used")
        return self._add(Tensor(self, name or self._fresh("const"), TensorType(array.dtype, array.shape), self.top,
                                value=array))

    def _tensor(self, value: Any, dtype: Any = None) -> Tensor:
        """`value` as a Tensor of this network: a Tensor as it is, anything else as a constant
        (of `dtype` when given, for Python scalars and lists)."""
        if isinstance(value, Tensor):
            if value.net is not self:
                raise BuildError(f"'{value.name}' belongs to network '{value.net.name}', not '{self.name}'")
            return value
        if isinstance(value, np.ndarray) or dtype is None:
            return self.constant(value)
        return self.constant(value, dtype=dtype)

    def mark_output(self, tensor: Tensor, name: str | None = None) -> None:
        """Make `tensor` (computed outside every loop) an output of the model, named `name`."""
        tensor = self._tensor(tensor)
        name = name or tensor.name
        if tensor.scope is not self.top:
            raise BuildError(f"network '{self.name}': '{tensor.name}' is computed inside "
                             f"'{tensor.scope.name}'; bring it out with add_output and mark that")
        taken = {n for _, n in self.outputs} | {t.name for t in self.inputs}
        if name in taken or (name in self.tensors and self.tensors[name] is not tensor):
            raise BuildError(f"network '{self.name}': the output name '{name}' is already used")
        self.outputs.append((tensor, name))

    # ops -------------------------------------------------------------------------------------
    def op(self, op_type: str, *inputs: Any, name: str | None = None, **attrs: Any) -> Tensor | tuple[Tensor, ...]:
        """Add any op the IR knows (ONNX spelling, ONNX inputs and attributes); returns its output,
        or a tuple when it has several. An omitted optional input is None."""
        from .infer import infer  # imports onnx, which `import rnnloop` does not need
        if op_type not in OPS or op_type in ("Loop", "If"):
            raise BuildError(f"network '{self.name}': '{op_type}' is not an op to add with op(); "
                             + {"Loop": "use add_loop()", "If": "use add_if()"}.get(op_type, "see rnnloop.ops.OPS"))
        if name is not None and name in self.tensors:
            raise BuildError(f"{op_type} '{name}': the name is already used in network '{self.name}'")
        attrs = {k: np.dtype(v) if k in ("to", "dtype") else np.asarray(v) if k == "value" else v
                 for k, v in attrs.items()}
        tensors = self._op_inputs(op_type, inputs)
        scope = self._deepest(op_type, name, [t for t in tensors if t is not None])
        count = _output_count(op_type, attrs, tensors)
        first = name or self._fresh(_method_name(op_type))
        outputs = [first] + [self._fresh(first) for _ in range(1, count)]
        op = Op(op_type, [t.name if t is not None else "" for t in tensors], outputs, attrs,
                Origin("rnnloop", first, op_type))
        values = {t.name: t.value for t in tensors if t is not None and t.value is not None}
        types = infer(op, [t.type if t is not None else None for t in tensors], values)
        scope.items.append(op)
        results = []
        for out, t in zip(outputs, types):
            self._producer[out] = op
            results.append(self._add(Tensor(self, out, t, scope)))
        return results[0] if count == 1 else tuple(results)

    def _op_inputs(self, op_type: str, inputs: Sequence[Any]) -> list[Tensor | None]:
        """Inputs as Tensors: a Python scalar or list takes the dtype of a Tensor input of the same
        type parameter (so `net.mul(x, 0.5)` is float32 for a float32 x); arrays keep theirs."""
        from .infer import schema
        found = schema(op_type)
        formals = list(found.inputs) if found is not None else []
        type_strs = [formals[min(k, len(formals) - 1)].type_str if formals else "T" for k in range(len(inputs))]
        known = {s: x.dtype for s, x in zip(type_strs, inputs) if isinstance(x, Tensor) and x.dtype is not None}
        tensors = []
        for x, type_str in zip(inputs, type_strs):
            if x is None or isinstance(x, (Tensor, np.ndarray)):
                tensors.append(None if x is None else self._tensor(x))
                continue
            dtype = known.get(type_str) or _single_type(found, type_str)
            if dtype is None:  # ints stay int64; Python floats default to float32, the models' dtype
                dtype = np.float32 if np.asarray(x).dtype.kind == "f" else None
            tensors.append(self._tensor(np.asarray(x, dtype=dtype)))
        return tensors

    def _deepest(self, op_type: str, name: str | None, tensors: list[Tensor]) -> _Scope:
        scope = self.top
        for t in tensors:
            if t.scope.within(scope):
                scope = t.scope
            elif not scope.within(t.scope):
                raise BuildError(f"{op_type}{f' {name!r}' if name else ''}: its inputs come from two loops or "
                                 f"conditionals that are not nested ('{t.name}' from {t.scope.name}, others from {scope.name}); use a "
                                 "loop's value elsewhere through its add_output")
        return scope

    # results ---------------------------------------------------------------------------------
    def add_loop(self, name: str | None = None) -> Loop:
        """A new loop at the top level (nest loops with `loop.add_loop()`)."""
        return self.top.add_loop(name)

    def add_if(self, condition: Tensor | bool, name: str | None = None) -> Conditional:
        """A new if-then-else at the top level (nest with `loop.add_if()` inside a loop)."""
        return self.top.add_if(condition, name)

    def graph(self):
        """The network as an IR graph (checked: every loop complete, every output computed)."""
        from .lowering import lower
        return lower(self)

    def compile(self, **options: Any):
        """A Session running the network; options as for `rnnloop.load` (backend, strict, max_iterations)."""
        from .session import Session
        return Session(self.graph(), **options)

    def to_onnx(self, path: Any = None):
        """The network as an ONNX model (Loop for loops, opset 18), saved to `path` when given."""
        from .export import to_onnx
        return to_onnx(self.graph(), path)


def _single_type(found, type_str: str) -> np.dtype | None:
    """The dtype an input must have when its ONNX type constraint allows just one."""
    allowed = [type_str] if type_str.startswith("tensor(") else \
        next((c.allowed_type_strs for c in found.type_constraints if c.type_param_str == type_str), []) if found else []
    if len(allowed) == 1 and allowed[0].startswith("tensor("):
        name = allowed[0][7:-1]
        return np.dtype({"float": "float32", "double": "float64"}.get(name, name))
    return None


def _output_count(op_type: str, attrs: dict[str, Any], inputs: list[Tensor | None]) -> int:
    if op_type == "Split":
        if "num_outputs" in attrs:
            return int(attrs["num_outputs"])
        split = inputs[1] if len(inputs) > 1 else None
        if split is None or split.value is None:
            raise BuildError("Split: give num_outputs=, or the split sizes as a constant")
        return int(split.value.size)
    from .infer import schema
    found = schema(op_type)
    if found is None:
        return 1
    return sum(1 for o in found.outputs if o.option != o.option.Optional) or 1


# Method names: snake case of the ONNX name, with NumPy's spelling where it has one.
_NAMES = {"MatMul": "matmul", "PRelu": "prelu", "IsNaN": "isnan", "IsInf": "isinf", "GatherND": "gather_nd",
          "ScatterND": "scatter_nd", "TopK": "topk", "ArgMax": "argmax", "ArgMin": "argmin",
          "NonZero": "nonzero", "CumSum": "cumsum"}


def _method_name(op_type: str) -> str:
    return _NAMES.get(op_type) or re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", op_type).lower()


def _op_method(op_type: str):
    def method(self: Network, *inputs: Any, name: str | None = None, **attrs: Any):
        return self.op(op_type, *inputs, name=name, **attrs)
    method.__name__ = _method_name(op_type)
    method.__doc__ = f"{op_type}: {OPS[op_type]} (ONNX inputs and attributes)."
    return method


for _op_type in OPS:
    if _op_type not in ("Loop", "If"):
        setattr(Network, _method_name(_op_type), _op_method(_op_type))


from . import tensor_math  # noqa: F401  (gives Tensor its NumPy operators)
