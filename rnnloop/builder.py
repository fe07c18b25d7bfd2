"""The one way to construct IR: graphs, ops, constants, loops and branches, with fresh names."""

from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

from .ir import Graph, If, Loop, Op, Origin, Slice, Stack, TensorType, Type


class Builder:
    """Builds one closed graph; `sub()` starts a builder for a subgraph sharing the name counter."""

    def __init__(self, name: str, *, _counter: itertools.count | None = None, _used: set | None = None):
        self.graph = Graph(name)
        self._counter = _counter if _counter is not None else itertools.count()
        self._used = _used if _used is not None else set()
        self.origin: Origin | None = None  # stamped on every op added while set

    def sub(self, name: str) -> "Builder":
        """A builder for a nested graph; fresh names stay unique across the whole model."""
        return Builder(name, _counter=self._counter, _used=self._used)

    # names -----------------------------------------------------------------------------------
    def fresh(self, hint: str = "t") -> str:
        """A value name not used anywhere in the model yet."""
        while True:
            name = f"{hint}__{next(self._counter)}"
            if name not in self._used:
                self._used.add(name)
                return name

    def claim(self, name: str) -> str:
        self._used.add(name)
        return name

    # graph structure -------------------------------------------------------------------------
    def input(self, name: str, type_: Type | None = None) -> str:
        self.graph.inputs.append(self.claim(name))
        if type_ is not None:
            self.graph.types[name] = type_
        return name

    def output(self, name: str) -> None:
        self.graph.outputs.append(name)

    def set_type(self, name: str, type_: Type | None) -> None:
        if type_ is not None:
            self.graph.types[name] = type_

    def constant(self, value: Any, name: str | None = None, dtype: Any = None) -> str:
        """A constant value; returns its name."""
        name = self.claim(name) if name else self.fresh("const")
        value = self.graph.constants[name] = np.asarray(value, dtype=dtype)
        if value.dtype != object:
            self.graph.types.setdefault(name, TensorType(value.dtype, value.shape))
        return name

    def _outputs(self, outputs: int | Sequence[str], hint: str) -> list[str]:
        if isinstance(outputs, int):
            return [self.fresh(hint) for _ in range(outputs)]
        return [self.claim(n) if n else n for n in outputs]

    def op(self, op_type: str, inputs: Sequence[str], outputs: int | Sequence[str] = 1, **attrs) -> list[str]:
        """Append an op; returns its output names."""
        outs = self._outputs(outputs, op_type.lower())
        self.graph.ops.append(Op(op_type, list(inputs), outs, attrs, self.origin))
        return outs

    def op1(self, op_type: str, *inputs: str, **attrs) -> str:
        """Append a single-output op; returns its output name."""
        return self.op(op_type, inputs, 1, **attrs)[0]

    def loop(self, body: Graph, *, trip_count: str = "", cond: str = "", carried: Sequence[str] = (),
             sliced: Sequence[tuple[str, Slice]] = (), invariants: Sequence[str] = (),
             stacked: Sequence[Stack] = (), outputs: int | Sequence[str] | None = None,
             body_iteration: bool = False, body_cond_in: bool = False, body_cond_out: bool = False) -> list[str]:
        """Append a Loop; returns [*carried finals, *stacked outputs]."""
        n_out = len(carried) + len(stacked)
        outs = self._outputs(n_out if outputs is None else outputs, "loop")
        inputs = [trip_count, cond, *carried, *(src for src, _ in sliced), *invariants]
        self.graph.ops.append(Loop(
            "Loop", inputs, outs, {}, self.origin, body=body, n_carried=len(carried),
            sliced=[spec for _, spec in sliced], n_invariant=len(invariants), stacked=list(stacked),
            body_iteration=body_iteration, body_cond_in=body_cond_in, body_cond_out=body_cond_out))
        return outs

    def if_(self, cond: str, then_graph: Graph, else_graph: Graph, captures: Sequence[str],
            outputs: int | Sequence[str]) -> list[str]:
        """Append an If; both branches take `captures` as their inputs."""
        outs = self._outputs(outputs, "if")
        self.graph.ops.append(If("If", [cond, *captures], outs, {}, self.origin,
                                 then_graph=then_graph, else_graph=else_graph))
        return outs
