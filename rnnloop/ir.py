"""IR values, ops, graphs and the loop construct, with a stable text form.

Every IR graph is closed: an op only reads values defined in its own graph (graph inputs, constants
or earlier op outputs). Values captured from an enclosing scope are passed to loops and branches as
explicit inputs, so a graph can be interpreted, verified or compiled on its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

Dim = Union[int, str, None]  # a fixed size, a symbolic name, or unknown


@dataclass(frozen=True)
class TensorType:
    """A tensor of one dtype; shape None means the rank is unknown."""

    dtype: np.dtype | None = None
    shape: tuple[Dim, ...] | None = None

    def __str__(self) -> str:
        dtype = "?" if self.dtype is None else str(self.dtype)
        if self.shape is None:
            return f"{dtype}[...]"
        return f"{dtype}[{','.join('?' if d is None else str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class SequenceType:
    """A list of tensors of one element type."""

    elem: "Type"

    def __str__(self) -> str:
        return f"seq({self.elem})"


@dataclass(frozen=True)
class OptionalType:
    """A value that may be absent (None at run time)."""

    elem: "Type"

    def __str__(self) -> str:
        return f"optional({self.elem})"


Type = Union[TensorType, SequenceType, OptionalType]


@dataclass(frozen=True)
class Origin:
    """Where an IR op came from, for error messages: format, node name, op type, opset."""

    format: str
    name: str
    op_type: str
    opset: int | None = None
    domain: str = "ai.onnx"

    def __str__(self) -> str:
        version = f" ({self.domain} opset {self.opset})" if self.opset is not None else ""
        return f"{self.op_type} '{self.name}'{version}"


@dataclass
class Op:
    """One operation: ONNX-spelled op type, value names in and out, attributes as keyword values.

    An omitted optional input is the empty name "".
    """

    op_type: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    origin: Origin | None = None

    @property
    def subgraphs(self) -> list["Graph"]:
        return []

    def where(self) -> str:
        """The op's origin for messages, falling back to its IR spelling."""
        return str(self.origin) if self.origin else f"{self.op_type} -> {', '.join(self.outputs)}"


@dataclass
class Graph:
    """A closed graph: inputs, constants, ops in execution order, outputs, and known value types."""

    name: str
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    ops: list[Op] = field(default_factory=list)
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    types: dict[str, Type] = field(default_factory=dict)

    def type_of(self, name: str) -> Type | None:
        return self.types.get(name)


@dataclass(frozen=True)
class Slice:
    """How a sliced input yields one part per iteration.

    Parts are taken along `axis` from the window [start, end) (negative values count from the end;
    end None means the axis length): part k starts at start + k*stride and spans `part` elements.
    With `reverse` the parts are visited last first. `keep_axis` keeps the sliced axis (size `part`);
    otherwise it is dropped, which needs part == 1.
    """

    axis: int = 0
    reverse: bool = False
    start: int = 0
    end: int | None = None
    stride: int = 1
    part: int = 1
    keep_axis: bool = False


@dataclass(frozen=True)
class Stack:
    """How a stacked output joins the per-iteration values.

    Stacking adds a new axis at `axis` (negative counts from the end of the result); `concat` joins
    along the existing axis `axis` instead. With `reverse` the last iteration comes first. A `length`
    larger than the iteration count pads the result with zeros after the last written iteration.
    """

    axis: int = 0
    reverse: bool = False
    concat: bool = False
    length: int | None = None


@dataclass
class Loop(Op):
    """The one loop construct every front end lowers into.

    Inputs: [trip_count or "", cond or "", *carried_initial, *sliced_sources, *invariants].
    Outputs: [*carried_finals, *stacked].
    Body inputs: [iteration?, cond_in?, *carried, *slices, *invariants];
    body outputs: [cond_out?, *carried_next, *stacked_values]. Its meaning::

        i, cond = 0, initial_cond if given else True
        n = common part count of the sliced inputs (None if there are none)
        while (trip_count is None or i < trip_count) and (n is None or i < n) and cond:
            results = body(i, cond, *carried, *(part(s, i) for s in sliced), *invariants)
            cond = results.cond if the body has a cond output else cond
            carried = results.carried
            for buf, y in zip(stacked, results.stacked): buf.append(y)
            i += 1
        return carried, [join(buf) for buf in stacked]
    """

    body: Graph = field(default_factory=lambda: Graph("body"))
    n_carried: int = 0
    sliced: list[Slice] = field(default_factory=list)
    n_invariant: int = 0
    stacked: list[Stack] = field(default_factory=list)
    body_iteration: bool = False
    body_cond_in: bool = False
    body_cond_out: bool = False

    @property
    def subgraphs(self) -> list[Graph]:
        return [self.body]

    @property
    def trip_count(self) -> str:
        return self.inputs[0]

    @property
    def cond(self) -> str:
        return self.inputs[1]

    def input_groups(self) -> tuple[list[str], list[str], list[str]]:
        """(carried initial values, sliced sources, invariants)."""
        nc, ns = self.n_carried, len(self.sliced)
        rest = self.inputs[2:]
        return rest[:nc], rest[nc:nc + ns], rest[nc + ns:]

    def body_groups(self) -> tuple[list[str], list[str], list[str]]:
        """Body outputs split into (cond_out list, carried next values, stacked values)."""
        outs = self.body.outputs
        k = int(self.body_cond_out)
        return outs[:k], outs[k:k + self.n_carried], outs[k + self.n_carried:]


@dataclass
class If(Op):
    """Runs one of two closed branches; inputs are [cond, *captures], both branches take the captures."""

    then_graph: Graph = field(default_factory=lambda: Graph("then"))
    else_graph: Graph = field(default_factory=lambda: Graph("else"))

    @property
    def subgraphs(self) -> list[Graph]:
        return [self.then_graph, self.else_graph]


@dataclass
class Region(Op):
    """Ops of a graph compiled into one kernel (see partition.py). It means exactly its body: a
    closed graph of those ops, whose inputs are the values they read from outside and whose
    outputs are the values read after them; the interpreter runs it as that graph."""

    body: Graph = field(default_factory=lambda: Graph("region"))

    @property
    def subgraphs(self) -> list[Graph]:
        return [self.body]


# ---------------------------------------------------------------------------------------------
# Stable text form


def _fmt_attr(value: Any) -> str:
    if isinstance(value, np.ndarray):
        if value.size <= 8:
            return f"{value.dtype}{list(value.shape)}{value.ravel().tolist()}"
        return f"{value.dtype}{list(value.shape)}"
    if isinstance(value, np.dtype):
        return str(value)
    return repr(value)


def _fmt_port(obj: Slice | Stack) -> str:
    defaults = type(obj)()
    parts = [f"{k}={v!r}" for k, v in vars(obj).items() if v != getattr(defaults, k) or k == "axis"]
    return f"{type(obj).__name__.lower()}({', '.join(parts)})"


def format_graph(graph: Graph, indent: str = "") -> str:
    """The graph as deterministic text, one op per line, subgraphs indented beneath their op."""

    def typed(name: str) -> str:
        t = graph.types.get(name)
        return f"%{name}: {t}" if t is not None else f"%{name}"

    lines = [f"{indent}graph {graph.name}({', '.join(typed(n) for n in graph.inputs)}) {{"]
    for name in sorted(graph.constants):
        value = graph.constants[name]
        lines.append(f"{indent}  %{name} = const {_fmt_attr(value)}")
    for op in graph.ops:
        args = ", ".join(f"%{n}" if n else "_" for n in op.inputs)
        outs = ", ".join(f"%{n}" for n in op.outputs)
        attrs = {k: _fmt_attr(v) for k, v in sorted(op.attrs.items())}
        if isinstance(op, Loop):
            attrs["carried"], attrs["invariant"] = str(op.n_carried), str(op.n_invariant)
            if op.sliced:
                attrs["sliced"] = f"[{', '.join(_fmt_port(s) for s in op.sliced)}]"
            if op.stacked:
                attrs["stacked"] = f"[{', '.join(_fmt_port(s) for s in op.stacked)}]"
            params = [p for p, on in (("iteration", op.body_iteration), ("cond_in", op.body_cond_in),
                                      ("cond_out", op.body_cond_out)) if on]
            attrs["body"] = "+".join(params) or "-"
        text = ", ".join(f"{k}={v}" for k, v in attrs.items())
        text = f"[{text}]" if text else ""
        origin = f"  # {op.origin}" if op.origin else ""
        lines.append(f"{indent}  {outs} = {op.op_type}{text}({args}){origin}")
        for sub in op.subgraphs:
            lines.append(format_graph(sub, indent + "    "))
    lines.append(f"{indent}  return {', '.join(f'%{n}' for n in graph.outputs)}")
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def iter_ops(graph: Graph):
    """Every op of the graph and of its subgraphs, depth first."""
    for op in graph.ops:
        yield op
        for sub in op.subgraphs:
            yield from iter_ops(sub)
