"""A fused loop: its generated kernel, compiled through the cache, called like the interpreter's run_loop."""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np

from ..errors import FallbackWarning, RunError
from ..interp.graph import Options
from ..interp.loop import run_loop, single_value
from ..interp.sequence_ops import RowSequence
from ..ir import Loop, SequenceType, TensorType
from .cache import load_source
from .kernel import STATUS_SIZE, KernelModule, generate


def debug_level() -> int:
    """RNNLOOP_DEBUG: 1 prints the plan at load, 2 also the kernel sources and raw kernel errors."""
    value = os.environ.get("RNNLOOP_DEBUG", "0")
    return int(value) if value.isdigit() else 1


class FusedLoop:
    """Runs one loop through its kernel; falls back to the interpreter for inputs of another type.

    The kernel was generated for the dtypes and ranks the model declares; a feed of another rank
    (a model whose declared types are loose) runs in the interpreter rather than miscompiling.
    """

    def __init__(self, loop: Loop, label: str, known: dict[str, np.ndarray]):
        self.loop = loop
        self.kernel: KernelModule = generate(loop, label, known)
        self.label = label
        self._function = None
        body_inputs = loop.body.inputs[loop.body_iteration + loop.body_cond_in:]
        # (dtype, rank) of each input the kernel takes: a sliced input has the sliced axis too.
        ranks_added = [0] * loop.n_carried + [0 if s.keep_axis else 1 for s in loop.sliced]
        ranks_added += [0] * (len(body_inputs) - len(ranks_added))
        self.expected = []
        self.sequences = []  # positions of carried sequences: passed stacked, returned as lists
        for k, (name, added) in enumerate(zip(body_inputs, ranks_added)):
            t = loop.body.type_of(name)
            if isinstance(t, SequenceType):  # passed stacked: one more axis than an element
                t, added = t.elem, 1
                self.sequences.append(k)
            ok = isinstance(t, TensorType) and t.dtype is not None and t.shape is not None
            self.expected.append((t.dtype, len(t.shape) + added) if ok else None)
        self.fallbacks = 0

    @property
    def source(self) -> str:
        return self.kernel.source

    def compile(self):
        """The kernel's dispatcher, imported from the cache (numba compiles on the first call)."""
        if self._function is None:
            module = load_source(self.kernel.source, label=self.label)
            self._function = getattr(module, self.kernel.entry)
        return self._function

    def __call__(self, op: Loop, values: list[Any], options: Options) -> tuple:
        arrays = list(values[2:])
        for k in self.sequences:  # a sequence whose elements share one shape goes in stacked
            arrays[k] = _stacked(arrays[k], *self.expected[k])
        if not self._fits(arrays):
            return self._interpret(op, values, options, "inputs of other dtypes or ranks than the model "
                                   f"declares ({_describe(values[2:])})")
        trip = -1 if values[0] is None else max(int(single_value(op, values[0], "trip count")), 0)
        cond = True if values[1] is None else bool(single_value(op, values[1], "condition"))
        cap = -1 if options.max_iterations is None else int(options.max_iterations)
        status = np.zeros(STATUS_SIZE, np.int64)
        function = self.compile()
        try:
            results = function(status, cap, trip, cond, *arrays, *self.kernel.constants)
        except Exception as e:
            if int(status[0]) in self.kernel.fallbacks:
                return self._interpret(op, values, options, self.kernel.error(status, e))
            if debug_level() >= 2:
                raise
            message = self.kernel.error(status, e)
            if message:
                raise RunError(message) from None
            raise RunError(f"{op.where()}: the fused kernel failed ({type(e).__name__}: {e}); "
                           "run with backend='interp' to compare, and please report it") from e
        if self.sequences:
            results = tuple(RowSequence(r) if k in self.sequences else r for k, r in enumerate(results))
        return results

    def _interpret(self, op: Loop, values: list[Any], options: Options, why: str) -> tuple:
        """Run this call in the interpreter, warning the first time."""
        if not self.fallbacks:
            warnings.warn(f"{op.where()}: {why}; this loop runs in the interpreter", FallbackWarning,
                          stacklevel=3)
        self.fallbacks += 1
        return run_loop(op, values, options)

    def _fits(self, arrays: list[Any]) -> bool:
        return all(isinstance(value, np.ndarray) and (value.dtype, value.ndim) == expected
                   for value, expected in zip(arrays, self.expected))


def _stacked(sequence: Any, dtype: np.dtype, rank: int) -> Any:
    """A list of arrays of one dtype and shape as one array of `rank` (empty: all sizes 0); else
    as it is, for _fits to refuse."""
    if not isinstance(sequence, list):
        return sequence
    if not sequence:
        return np.empty((0,) * rank, dtype)
    first = sequence[0]
    if all(isinstance(v, np.ndarray) and v.dtype == dtype and v.shape == first.shape for v in sequence):
        return np.stack(sequence)
    return sequence


def _describe(values: list[Any]) -> str:
    return ", ".join(f"{v.dtype}[rank {v.ndim}]" if isinstance(v, np.ndarray) else type(v).__name__
                     for v in values)
