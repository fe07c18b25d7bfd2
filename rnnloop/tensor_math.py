"""NumPy on symbolic tensors: operators, ufuncs, a few array functions and indexing add IR ops.

These follow NumPy's meaning, type promotion included (`x * 0.5` stays float32, float32 with
float64 gives float64, `/` on integers gives floats), so a function written for arrays traces into
the same computation. The Network's op methods, by contrast, are ONNX ops with ONNX's exact types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import BuildError
from .network import Tensor

_INT64_MAX, _INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min

# ufunc -> (ONNX op, kind): "math" keeps the promoted dtype, "compare" gives bool, "logic" takes
# bools, "divide" gives floats for integer inputs.
_UFUNCS: dict[str, tuple[str, str]] = {
    "add": ("Add", "math"), "subtract": ("Sub", "math"), "multiply": ("Mul", "math"),
    "true_divide": ("Div", "divide"), "matmul": ("MatMul", "math"), "power": ("Pow", "math"),
    "maximum": ("Max", "math"), "minimum": ("Min", "math"), "negative": ("Neg", "math"),
    "positive": ("Identity", "math"), "absolute": ("Abs", "math"), "sqrt": ("Sqrt", "math"),
    "exp": ("Exp", "math"), "log": ("Log", "math"), "tanh": ("Tanh", "math"), "sin": ("Sin", "math"),
    "cos": ("Cos", "math"), "floor": ("Floor", "math"), "ceil": ("Ceil", "math"), "sign": ("Sign", "math"),
    "rint": ("Round", "math"), "reciprocal": ("Reciprocal", "math"),
    "less": ("Less", "compare"), "less_equal": ("LessOrEqual", "compare"), "greater": ("Greater", "compare"),
    "greater_equal": ("GreaterOrEqual", "compare"), "equal": ("Equal", "compare"),
    "logical_and": ("And", "logic"), "logical_or": ("Or", "logic"), "logical_xor": ("Xor", "logic"),
    "logical_not": ("Not", "logic"), "isnan": ("IsNaN", "test"), "isinf": ("IsInf", "test"),
}


def _net(args: tuple) -> Any:
    return next(a.net for a in args if isinstance(a, Tensor))


def _dtype_of(value: Any) -> Any:
    """What NumPy promotes with: a Tensor's dtype, an array's, or a Python scalar itself (weak)."""
    if isinstance(value, Tensor):
        if value.dtype is None:
            raise BuildError(f"'{value.name}' has no known dtype, so NumPy's type rules cannot apply to it")
        return value.dtype
    if isinstance(value, (bool, int, float)):
        return value
    return np.asarray(value).dtype


def _as(net: Any, value: Any, dtype: np.dtype) -> Tensor:
    """`value` as a Tensor of `dtype`, cast when it has another."""
    if isinstance(value, Tensor):
        return value if value.dtype == dtype else net.cast(value, to=dtype)
    return net.constant(np.asarray(value, dtype=dtype))


def apply_ufunc(name: str, *args: Any) -> Tensor:
    """The NumPy ufunc `name` on symbolic (and constant) arguments, with NumPy's type promotion."""
    if name == "square":
        return apply_ufunc("multiply", args[0], args[0])
    if name == "not_equal":
        return apply_ufunc("logical_not", apply_ufunc("equal", *args))
    if name not in _UFUNCS:
        raise BuildError(f"np.{name} is not supported on traced values; supported: "
                         f"{', '.join(sorted([*_UFUNCS, 'square', 'not_equal']))}")
    op_type, kind = _UFUNCS[name]
    net = _net(args)
    if kind == "logic":
        dtype = np.dtype(np.bool_)
    elif kind == "test":
        dtype = _dtype_of(args[0]) if isinstance(args[0], Tensor) else np.asarray(args[0]).dtype
    else:
        dtype = np.result_type(*(_dtype_of(a) for a in args))
        if kind == "divide" and dtype.kind in "biu":
            dtype = np.dtype(np.float64)
        if op_type == "Pow" and isinstance(args[1], (int, float)):  # x ** 2 keeps x's dtype
            return net.op("Pow", _as(net, args[0], dtype), _as(net, args[1], dtype))
    return net.op(op_type, *(_as(net, a, dtype) for a in args))


def _reduce(op_type: str) -> Callable:
    def reduce(x: Tensor, axis: Any = None, keepdims: bool = False, **unused: Any) -> Tensor:
        _no_extra(f"np.{op_type[6:].lower()}", unused)
        axes = None if axis is None else np.atleast_1d(np.asarray(axis, np.int64))
        return x.net.op(op_type, x, axes, keepdims=int(keepdims))
    return reduce


def _no_extra(what: str, unused: dict) -> None:
    extra = {k: v for k, v in unused.items() if v is not None}
    if extra:
        raise BuildError(f"{what} on traced values does not take {', '.join(extra)}")


def _where(cond: Any, a: Any, b: Any) -> Tensor:
    net = _net((cond, a, b))
    dtype = np.result_type(_dtype_of(a), _dtype_of(b))
    return net.where(_as(net, cond, np.dtype(np.bool_)), _as(net, a, dtype), _as(net, b, dtype))


def _concatenate(arrays: Any, axis: int = 0, **unused: Any) -> Tensor:
    _no_extra("np.concatenate", unused)
    arrays = list(arrays)
    net = _net(tuple(arrays))
    dtype = np.result_type(*(_dtype_of(a) for a in arrays))
    return net.concat(*(_as(net, a, dtype) for a in arrays), axis=axis)


def _stack(arrays: Any, axis: int = 0, **unused: Any) -> Tensor:
    _no_extra("np.stack", unused)
    arrays = list(arrays)
    net = _net(tuple(arrays))
    dtype = np.result_type(*(_dtype_of(a) for a in arrays))
    return net.concat(*(net.unsqueeze(_as(net, a, dtype), [axis]) for a in arrays), axis=axis)


def _reshape(x: Tensor, *shape: Any, **unused: Any) -> Tensor:
    _no_extra("reshape", {k: v for k, v in unused.items() if k != "order" or v != "C"})
    shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
    return x.net.reshape(x, np.asarray(shape, np.int64).reshape(-1))


def _transpose(x: Tensor, *axes: Any) -> Tensor:
    axes = axes[0] if len(axes) == 1 and axes[0] is not None and not isinstance(axes[0], int) else axes
    if axes and axes[0] is not None:
        return x.net.transpose(x, perm=[int(a) for a in axes])
    return x.net.transpose(x)


def _clip(x: Tensor, a_min: Any = None, a_max: Any = None, **unused: Any) -> Tensor:
    _no_extra("np.clip", unused)
    net, dtype = x.net, x.dtype
    return net.clip(x, *(None if v is None else _as(net, v, dtype) for v in (a_min, a_max)))


def _full_like(fill: int) -> Callable:
    def full_like(x: Tensor, dtype: Any = None, **unused: Any) -> Tensor:
        _no_extra("np.zeros_like / np.ones_like", unused)
        value = np.asarray([fill], dtype=dtype or x.dtype)
        return x.net.constant_of_shape(x.net.shape(x), value=value)
    return full_like


_FUNCTIONS: dict[Any, Callable] = {
    np.where: _where, np.concatenate: _concatenate, np.stack: _stack, np.reshape: _reshape,
    np.transpose: _transpose, np.clip: _clip, np.dot: lambda a, b: apply_ufunc("matmul", a, b),
    np.sum: _reduce("ReduceSum"), np.mean: _reduce("ReduceMean"), np.max: _reduce("ReduceMax"),
    np.min: _reduce("ReduceMin"), np.prod: _reduce("ReduceProd"),
    np.zeros_like: _full_like(0), np.ones_like: _full_like(1),
}


def _getitem(x: Tensor, index: Any) -> Tensor:
    """Basic indexing: ints (or an integer scalar Tensor), slices with constant bounds, None, ...."""
    net = x.net
    index = index if isinstance(index, tuple) else (index,)
    if any(i is Ellipsis for i in index):
        if x.ndim is None:
            raise BuildError(f"'{x.name}': indexing with ... needs a known rank")
        k = index.index(Ellipsis)
        fill = x.ndim - (len(index) - 1 - sum(i is None for i in index))
        index = index[:k] + (slice(None),) * fill + index[k + 1:]
    starts, ends, axes, steps, picks, new_axes = [], [], [], [], [], []
    axis = 0
    for k, i in enumerate(index):
        if i is None:
            new_axes.append(k)
            continue
        if isinstance(i, slice):
            step = 1 if i.step is None else int(i.step)
            if i != slice(None):
                starts.append(int(i.start) if i.start is not None else (0 if step > 0 else _INT64_MAX))
                ends.append(int(i.stop) if i.stop is not None else (_INT64_MAX if step > 0 else _INT64_MIN))
                axes.append(axis)
                steps.append(step)
        elif isinstance(i, (int, np.integer, Tensor)):
            picks.append((axis, i))
        else:
            raise BuildError(f"'{x.name}': index {i!r} is not supported on traced values (ints, slices, None, ...)")
        axis += 1
    y = x
    if axes:
        y = net.slice(y, *(np.asarray(v, np.int64) for v in (starts, ends, axes, steps)))
    for ax, i in reversed(picks):  # from the last axis, so earlier axis numbers stay valid
        i = i if isinstance(i, Tensor) else np.asarray(int(i), np.int64)
        y = net.gather(y, i, axis=ax)
    if new_axes:
        # positions of the new axes in the result: each None counts among the kept axes before it
        kept = [j for j, i in enumerate(index) if isinstance(i, slice) or i is None]
        y = net.unsqueeze(y, np.asarray([kept.index(k) for k in new_axes], np.int64))
    return y


def _binary(name: str, swap: bool = False):
    if swap:
        return lambda self, other: apply_ufunc(name, other, self)
    return lambda self, other: apply_ufunc(name, self, other)


def _bool(self: Tensor) -> bool:
    raise BuildError(f"'{self.name}' is symbolic: it has no truth value while a function is traced. Use "
                     "np.where for a choice per element, or rnnloop.while_loop for a data-dependent loop")


def _array_ufunc(self: Tensor, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    if method != "__call__" or kwargs:
        return NotImplemented
    return apply_ufunc(ufunc.__name__, *inputs)


def _array_function(self: Tensor, func: Any, types: Any, args: tuple, kwargs: dict) -> Any:
    fn = _FUNCTIONS.get(func)
    if fn is None:
        names = sorted(f.__name__ for f in _FUNCTIONS)
        raise BuildError(f"np.{func.__name__} is not supported on traced values; supported: {', '.join(names)} "
                         "and the ufuncs")
    return fn(*args, **kwargs)


def _iter(self: Tensor):
    n = self.shape[0] if self.shape else None
    if not isinstance(n, int):
        raise BuildError(f"'{self.name}' has no fixed length to iterate over")
    return (self[k] for k in range(n))


def _len(self: Tensor) -> int:
    n = self.shape[0] if self.shape else None
    if not isinstance(n, int):
        raise BuildError(f"'{self.name}' has no fixed length")
    return n


_METHODS = {
    "__add__": _binary("add"), "__radd__": _binary("add", True), "__sub__": _binary("subtract"),
    "__rsub__": _binary("subtract", True), "__mul__": _binary("multiply"), "__rmul__": _binary("multiply", True),
    "__truediv__": _binary("true_divide"), "__rtruediv__": _binary("true_divide", True),
    "__matmul__": _binary("matmul"), "__rmatmul__": _binary("matmul", True), "__pow__": _binary("power"),
    "__rpow__": _binary("power", True), "__lt__": _binary("less"), "__le__": _binary("less_equal"),
    "__gt__": _binary("greater"), "__ge__": _binary("greater_equal"), "__eq__": _binary("equal"),
    "__ne__": _binary("not_equal"), "__and__": _binary("logical_and"), "__rand__": _binary("logical_and", True),
    "__or__": _binary("logical_or"), "__ror__": _binary("logical_or", True), "__xor__": _binary("logical_xor"),
    "__neg__": lambda self: apply_ufunc("negative", self), "__pos__": lambda self: self,
    "__abs__": lambda self: apply_ufunc("absolute", self), "__invert__": lambda self: apply_ufunc("logical_not", self),
    "__getitem__": _getitem, "__bool__": _bool, "__iter__": _iter, "__len__": _len,
    "__array_ufunc__": _array_ufunc, "__array_function__": _array_function,
    "__hash__": object.__hash__,  # == builds an op, so hashing stays by identity
    "T": property(lambda self: self.net.transpose(self)),
    "reshape": _reshape, "transpose": _transpose, "astype": lambda self, dtype: _as(self.net, self, np.dtype(dtype)),
    "sum": _reduce("ReduceSum"), "mean": _reduce("ReduceMean"), "max": _reduce("ReduceMax"),
    "min": _reduce("ReduceMin"),
}
for _name, _method in _METHODS.items():
    setattr(Tensor, _name, _method)
