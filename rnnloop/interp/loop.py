"""The interpreter of the loop construct: slicing, carried state and stacked outputs (see ir.Loop)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import RunError
from ..ir import Loop, Slice, Stack, TensorType
from .graph import Options, run_graph


def single_value(op: Loop, value: Any, role: str) -> Any:
    """The one element of a loop's trip count or condition (`role` names it in errors); FusedLoop uses it too."""
    array = np.asarray(value)
    if array.size != 1:
        raise RunError(f"{op.where()}: the {role} must hold exactly one value, got shape {array.shape}")
    return array.reshape(-1)[0]


class SlicedInput:
    """Yields the parts of one sliced input as views, by the rules of ir.Slice."""

    def __init__(self, op: Loop, source: np.ndarray, spec: Slice):
        if not isinstance(source, np.ndarray) or source.ndim == 0:
            raise RunError(f"{op.where()}: a sliced input must be a tensor of rank >= 1, got {np.shape(source)}")
        rank = source.ndim
        if not -rank <= spec.axis < rank:
            raise RunError(f"{op.where()}: slice axis {spec.axis} is out of range for rank {rank}")
        self.axis = spec.axis % rank
        size = source.shape[self.axis]
        start = _clamp(spec.start, size)
        end = size if spec.end is None else _clamp(spec.end, size)
        span = end - start
        self.count = 0 if span < spec.part else (span - spec.part) // spec.stride + 1
        self.source, self.spec, self.start = source, spec, start

    def part(self, i: int) -> np.ndarray:
        spec = self.spec
        k = self.count - 1 - i if spec.reverse else i
        offset = self.start + k * spec.stride
        index: list[Any] = [slice(None)] * self.source.ndim
        index[self.axis] = slice(offset, offset + spec.part) if spec.keep_axis else offset
        return self.source[(*index, ...)]  # the Ellipsis keeps a part of a vector a 0-d array


def _clamp(index: int, size: int) -> int:
    if index < 0:
        index += size
    return min(max(index, 0), size)


class StackedOutput:
    """Collects per-iteration values in one buffer that grows geometrically, then joins them."""

    def __init__(self, op: Loop, k: int, spec: Stack, capacity: int | None):
        self.op, self.k, self.spec = op, k, spec
        self.capacity = capacity
        self.buffer: np.ndarray | None = None
        self.count = 0

    def append(self, value: Any) -> None:
        if isinstance(value, np.generic):  # an element NumPy handed out as a scalar
            value = np.asarray(value)
        if not isinstance(value, np.ndarray):
            raise RunError(f"{self.op.where()}: stacked output {self.k} must be a tensor, got {type(value).__name__}")
        if self.buffer is None:
            self.buffer = np.empty((self.capacity or 4, *value.shape), value.dtype)
        elif value.shape != self.buffer.shape[1:] or value.dtype != self.buffer.dtype:
            raise RunError(
                f"{self.op.where()}: stacked output {self.k} ('{self.op.outputs[self.op.n_carried + self.k]}') "
                f"changes from {self.buffer.dtype}{list(self.buffer.shape[1:])} to {value.dtype}{list(value.shape)} "
                f"at iteration {self.count}; every iteration must produce the same shape and dtype")
        if self.count == len(self.buffer):
            grown = np.empty((2 * len(self.buffer), *self.buffer.shape[1:]), self.buffer.dtype)
            grown[:self.count] = self.buffer
            self.buffer = grown
        self.buffer[self.count] = value
        self.count += 1

    def result(self, empty_type: Any) -> np.ndarray:
        spec = self.spec
        if self.buffer is None:
            self.buffer = _empty_parts(empty_type)
        parts = self.buffer[:self.count]
        if spec.reverse:
            parts = parts[::-1]
        if spec.length is not None:
            if spec.length < self.count:
                raise RunError(f"{self.op.where()}: stacked output {self.k} has {self.count} iterations, "
                               f"more than its padded length {spec.length}")
            padded = np.zeros((spec.length, *parts.shape[1:]), parts.dtype)
            padded[:self.count] = parts
            parts = padded
        rank = parts.ndim - 1
        if spec.concat:
            axis = spec.axis + rank if spec.axis < 0 else spec.axis
            if not 0 <= axis < rank:
                raise RunError(f"{self.op.where()}: concat axis {spec.axis} is out of range for rank {rank}")
            moved = np.moveaxis(parts, 0, axis)
            shape = list(parts.shape[1:])
            shape[axis] *= parts.shape[0]
            return np.ascontiguousarray(moved).reshape(shape)
        axis = spec.axis + rank + 1 if spec.axis < 0 else spec.axis
        if not 0 <= axis <= rank:
            raise RunError(f"{self.op.where()}: stack axis {spec.axis} is out of range for rank {rank + 1}")
        return np.ascontiguousarray(np.moveaxis(parts, 0, axis)) if axis else parts.copy()


def _empty_parts(t: Any) -> np.ndarray:
    """The buffer of a stacked output after zero iterations: right dtype and rank, no parts (sizes
    that make no array were refused at load: verify._check_loop)."""
    if isinstance(t, TensorType) and t.shape is not None:
        dims = [d if isinstance(d, int) else 0 for d in t.shape]
        return np.empty((0, *dims), t.dtype or np.float32)
    return np.empty((0,), getattr(t, "dtype", None) or np.float32)


def run_loop(op: Loop, values: list[Any], options: Options) -> tuple:
    """Run the loop construct, following the reference semantics in ir.Loop's docstring."""
    nc = op.n_carried
    carried = list(values[2:2 + nc])
    sources = values[2 + nc:2 + nc + len(op.sliced)]
    invariants = values[2 + nc + len(op.sliced):]
    limit = None if values[0] is None else int(single_value(op, values[0], "trip count"))
    cond = True if values[1] is None else bool(single_value(op, values[1], "condition"))
    sliced = [SlicedInput(op, src, spec) for src, spec in zip(sources, op.sliced)]
    if sliced:
        counts = {s.count for s in sliced}
        if len(counts) > 1:
            raise RunError(f"{op.where()}: the sliced inputs give different numbers of iterations "
                           f"({', '.join(str(s.count) for s in sliced)}); they must all agree")
        limit = sliced[0].count if limit is None else min(limit, sliced[0].count)
    # Known trip counts preallocate, up to a bound: a condition may end the loop long before.
    capacity = min(max(limit, 0), 1 << 16) if limit is not None else None
    stacks = [StackedOutput(op, k, spec, capacity) for k, spec in enumerate(op.stacked)]
    # The loop owns copies of carried lists, so SequenceInsert in the body can append in place.
    owned_carried = []
    for k, value in enumerate(carried):
        if isinstance(value, list):
            carried[k] = list(value)
        owned_carried.append(isinstance(value, list))
    n_params = op.body_iteration + op.body_cond_in
    owned = [False] * n_params + owned_carried + [False] * (len(sliced) + len(invariants))
    cap = options.max_iterations
    i = 0
    while (limit is None or i < limit) and cond:
        if cap is not None and i >= cap:
            raise RunError(f"{op.where()}: still running after {cap} iterations, the session's max_iterations; "
                           "raise max_iterations if the loop is meant to run longer")
        params = []
        if op.body_iteration:
            params.append(np.asarray(i, np.int64))
        if op.body_cond_in:
            params.append(np.asarray(cond))
        args = [*params, *carried, *(s.part(i) for s in sliced), *invariants]
        outputs, handed = run_graph(op.body, args, options, owned)
        if op.body_cond_out:
            cond = bool(single_value(op, outputs[0], "body condition"))
        k0 = int(op.body_cond_out)
        next_carried = outputs[k0:k0 + nc]
        _check_carried(op, carried, next_carried, i)
        carried = next_carried
        owned[n_params:n_params + nc] = handed[k0:k0 + nc]
        for stack, value in zip(stacks, outputs[k0 + nc:]):
            stack.append(value)
        i += 1
    body_types = [op.body.type_of(n) for n in op.body_groups()[2]]
    return (*carried, *(s.result(t) for s, t in zip(stacks, body_types)))


def _check_carried(op: Loop, before: list[Any], after: list[Any], i: int) -> None:
    for k, (old, new) in enumerate(zip(before, after)):
        if isinstance(old, np.ndarray) and isinstance(new, np.ndarray) and old.dtype != new.dtype:
            raise RunError(f"{op.where()}: carried value {k} changes dtype from {old.dtype} to {new.dtype} "
                           f"in iteration {i}; a carried value must keep its dtype")
