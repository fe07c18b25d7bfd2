"""The emitter: lines of generated Python with indentation, fresh names, and the values they hold."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass

import numpy as np


def debug_level() -> int:
    """RNNLOOP_DEBUG: 1 prints the plan at load, 2 also the kernel sources and raw kernel errors."""
    value = os.environ.get("RNNLOOP_DEBUG", "0")
    return int(value) if value.isdigit() else 1


def generator_failure(error: Exception) -> "NoRule":
    """A bug of the code generator (any error but NoRule) as a NoRule: it costs speed, not the answer."""
    first = (str(error).strip().splitlines() or [""])[0][:300]
    return NoRule(f"the code generator failed ({type(error).__name__}: {first}); please report it")


class NoRule(Exception):
    """The code generator has no rule for an op in this form; the loop runs in the interpreter.

    `op` is the op of the graph being generated that could not be (set by kernel.emit_ops)."""

    op = None


@dataclass(frozen=True)
class Var:
    """A value in generated code.

    `expr` is an identifier naming an array, or for kind "scalar" an expression of one element
    (a literal constant). `kind` says who owns the memory, which decides when it may be reused:
    "buffer" (written by one op, reused each iteration), "view" (aliases something else),
    "fresh" (allocated by this op, owned by nobody else), "invariant" (fixed before the loop
    starts: an input, a constant or a hoisted result; never written), "state" (a carried value),
    "param" (the iteration number or incoming condition), "scalar", and "lazy": an element
    computed inside a fused loop nest (fusion.py), which has no array but has a `shape`.
    """

    expr: str
    dtype: np.dtype
    rank: int
    kind: str = "view"
    shape: tuple[str, ...] | None = None  # dim expressions, for values with no array to ask
    value: str | None = None  # for a rank-0 array, an expression of its element that does not read it
    # For a view (a reshape, a squeeze) of an array this call allocated ("buffer" or "fresh"): that
    # array's expr. A region returns such a view as it is when no other output shares its memory.
    owner: str | None = None

    def memory(self) -> str | None:
        """The expr of the array this call allocated that holds this value's elements, if any."""
        return self.expr if self.kind in ("buffer", "fresh") else self.owner

    def item(self) -> str:
        """An expression for the single element of a rank-0 value."""
        assert self.rank == 0, self
        return self.value or (self.expr if self.kind == "scalar" else f"{self.expr}[()]")

    def dim(self, axis: int) -> str:
        """The size of `axis`, as an expression that is safe inside any other (a compound size, such
        as a Concat's `a + b`, in parentheses: rules print `-(-{n} // k)` and the like)."""
        if self.shape is None:
            return f"{self.expr}.shape[{axis}]"
        size = self.shape[axis]
        return size if _ATOM.fullmatch(size) or _wrapped(size) else f"({size})"


_ATOM = re.compile(r"[\w.]+(\[[\w.]+\])*")  # a name, a number, x.shape[0]: needs no parentheses


def _wrapped(expr: str) -> bool:
    """Whether `expr` is one parenthesised expression, e.g. (a + b), but not (a) + (b)."""
    if not (expr.startswith("(") and expr.endswith(")")):
        return False
    depth = 0
    for k, c in enumerate(expr):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth == 0 and k < len(expr) - 1:
            return False
    return True


def dtype_name(dtype: np.dtype) -> str:
    """The NumPy attribute naming `dtype` in generated code, e.g. np.float32."""
    return f"np.{np.dtype(dtype).name}" if np.dtype(dtype) != np.bool_ else "np.bool_"


def literal(value: np.generic | float | bool, dtype: np.dtype) -> str:
    """A generated-code literal of one value in exactly `dtype`."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "True" if bool(value) else "False"
    if dtype.kind == "f":
        v = float(value)
        text = "np.nan" if v != v else ("np.inf" if v == np.inf else "-np.inf" if v == -np.inf else repr(v))
        return f"{dtype_name(dtype)}({text})"
    return f"{dtype_name(dtype)}({int(value)})"


def int_argument(expr: str) -> str:
    """`expr` as an argument of one of rnnloop's helpers: an integer literal as np.int64(...), since
    Numba compiles a helper again for every literal value it is passed (18 of broadcast_dim's 19
    compiled versions after the tests were for sizes 2, 3, 4...)."""
    return f"np.int64({expr})" if re.fullmatch(r"-?\d+", expr.strip()) else expr


def code_text(text: str) -> str:
    """Text from a model (node names, origins) made safe to put in a generated comment or docstring:
    printable ASCII without quotes or backslashes, on one line, so that no model can end the comment
    and write code of its own into a kernel."""
    return "".join(c if " " <= c <= "~" and c not in "\\\"" else "?" for c in text)


def shape_tuple(dims: list[str]) -> str:
    """A tuple expression of dimension expressions."""
    return "()" if not dims else f"({', '.join(dims)},)"


def permuted(name: str, perm: list[int]) -> str:
    """A view of array `name` (an identifier) with its axes in the order `perm`.

    Numba's transpose() with an axis tuple takes 8.5 s to compile in every kernel that uses it
    (numba 0.68, a rank-3 array); as_strided with the permuted shape and strides takes 0.5 s, and
    `.T` (the full reversal) 0.2 s.
    """
    rank = len(perm)
    if perm == list(range(rank)):
        return name
    if perm == list(range(rank))[::-1]:
        return f"{name}.T"
    shape = shape_tuple([f"{name}.shape[{p}]" for p in perm])
    strides = shape_tuple([f"{name}.strides[{p}]" for p in perm])
    return f"np.lib.stride_tricks.as_strided({name}, {shape}, {strides})"


def copy_nest(emit: "Emitter", dst: str, src: str, dims: list[str], dst_at: list[str], src_at: list[str]) -> None:
    """Emit dst[dst_at] = src[src_at] element by element in loops over `dims` (the innermost last,
    so that it vectorises); in each index, "{k}" stands for the k-th loop's variable.

    Numba's assignment of one array to another compiles its broadcasting machinery into every
    kernel (5-7 s for rank 3); these loops compile in a fraction of a second.
    """
    names = [emit.fresh(f"i{k}") for k in range(len(dims))]
    with ExitStack() as nest:
        for name, dim in zip(names, dims):
            nest.enter_context(emit.block(f"for {name} in range({dim}):"))
        emit(f"{dst}[{', '.join(i.format(*names) for i in dst_at)}] = "
             f"{src}[{', '.join(i.format(*names) for i in src_at)}]")


class Emitter:
    """Collects lines of one function body at an indentation level; hands out unique names."""

    def __init__(self, names: set[str] | None = None):
        self.lines: list[str] = []
        self.depth = 0
        self.names = names if names is not None else set()

    def __call__(self, text: str) -> None:
        for line in text.splitlines() or [""]:
            self.lines.append("    " * self.depth + line if line else "")

    @contextmanager
    def block(self, header: str) -> Iterator[None]:
        """A header line ending in ':' and an indented body."""
        self(header)
        self.depth += 1
        yield
        self.depth -= 1

    def fresh(self, hint: str) -> str:
        """A unique identifier built from `hint` (any IR name)."""
        base = re.sub(r"[^0-9A-Za-z_]", "_", hint) or "v"
        if base[0].isdigit():
            base = "_" + base
        if base.startswith("K_"):  # the prefix of the module's constants (kernel.CONSTANT_PREFIX)
            base = "v" + base
        name, k = base, 1
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    def text(self) -> str:
        return "\n".join(self.lines)
