"""A fused loop: its generated kernel, compiled through the cache, called like the interpreter's run_loop."""

from __future__ import annotations

import re
import sys
import threading
import time
import warnings
from contextlib import contextmanager
from typing import Any

import numpy as np

from ..errors import FallbackWarning, RunError
from ..interp.graph import Options
from ..interp.loop import run_loop, single_value
from ..interp.sequence_ops import RowSequence
from ..ir import Loop, Op, SequenceType, TensorType
from ..threads import in_part
from .cache import load_source
from .emitter import NoRule, debug_level
from .kernel import STATUS_POOL, STATUS_SIZE, STATUS_THREADS, KernelModule, generate


class Compiled:
    """A generated kernel compiled at load for one signature, called with a fallback: the
    interpreter runs a call the kernel cannot (inputs of other types, a kernel that stops on an
    error it does not check for), with a warning. Subclasses set `kernel`, `expected` (the dtype
    and rank of each input), `label`, then call setup()."""

    kernel: KernelModule
    expected: list[tuple[np.dtype, int]]
    label: str

    def setup(self) -> None:
        # Every array reaches the kernel C-contiguous and writable (see _argument), constants too,
        # so one signature, compiled here, serves every call.
        self.constants = [_argument(c) for c in self.kernel.constants]
        # What the kernel takes after its inputs: the constants, or the one table of them (bind).
        self.arguments = [bind(self.constants)] if self.kernel.bound else self.constants
        self.fallbacks = 0
        # Only packed products, loops run as jobs and Winograd's convolutions (shared through a job too)
        # share with the workers (pool.py): another kernel leaves them asleep.
        self.shares = any(call in self.kernel.source for call in ("_s.matmul_packed_", "_p.post_job(",
                                                                  "_cv.conv_winograd_float"))
        function = self._dispatcher = self._compile()
        # The compiled function itself: it unboxes its arguments as the signature says without
        # Numba's dispatch (typing each argument: a microsecond for a few arrays). Arguments must
        # then have exactly those types, which fits() and _argument() ensure.
        self.function = function.overloads[function.signatures[0]].entry_point

    @property
    def source(self) -> str:
        return self.kernel.source

    def compile(self):
        """The kernel's dispatcher (compiled at load)."""
        return self._dispatcher

    def prefix_types(self) -> tuple:
        """The Numba types of the parameters before the inputs."""
        raise NotImplementedError

    def signature(self) -> tuple:
        """The Numba types of the kernel's parameters: the prefix, the inputs as the model declares
        them, then the constants."""
        import numba
        from numba import types
        arrays = [types.Array(numba.from_dtype(dtype), rank, "C") for dtype, rank in self.expected]
        return (*self.prefix_types(), *arrays, *(numba.typeof(c) for c in self.arguments))

    def _compile(self):
        """Import the kernel's module from the cache and compile it for its one signature, now, at
        load: a failure here (a bad line of generated code, a Numba typing or lowering error) is
        a NoRule, so the code runs in the interpreter and never fails a run."""
        try:
            with _progress(self.label):
                module = load_source(self.kernel.source, label=self.label)
                function = getattr(module, self.kernel.entry)
                function.compile(self.signature())
        except Exception as e:  # noqa: BLE001 - whatever the code generator got wrong
            if debug_level() >= 2:
                raise
            raise NoRule(compile_failure(e, self.kernel.source)) from e
        return function

    def fits(self, arrays: list[Any]) -> bool:
        return all(isinstance(value, np.ndarray) and (value.dtype, value.ndim) == expected
                   for value, expected in zip(arrays, self.expected))

    def call(self, op: Op, values: list[Any], options: Options, scalars: tuple, arrays: list[Any]) -> tuple:
        """The kernel's results for `arrays` after the `scalars` of its prefix; an error it checks
        for is a RunError, any other failure runs this call in the interpreter."""
        return self.call_ready(op, values, options, scalars, list(map(_argument, arrays)))

    def call_ready(self, op: Op, values: list[Any], options: Options, scalars: tuple, arrays: list[Any]) -> tuple:
        """call(), for arrays the caller has already made C-contiguous, aligned and writable."""
        status = np.zeros(STATUS_SIZE, np.int64)
        workers = options.pool
        if workers is not None and self.shares and not in_part():  # (a part of a split call has one thread)
            workers.wake()
            status[STATUS_THREADS], status[STATUS_POOL] = options.threads, workers.address
        try:
            return self.function(status, *scalars, *arrays, *self.arguments)
        except Exception as e:
            return self.failed(e, status, op, values, options)

    def failed(self, e: Exception, status: np.ndarray, op: Op, values: list[Any], options: Options) -> tuple:
        """After the kernel raised `e`: a RunError for an error it checks for, else this call's
        results from the interpreter."""
        if int(status[0]) in self.kernel.fallbacks:
            return self.interpret(op, values, options, self.kernel.error(status, e))
        if debug_level() >= 2:
            raise e
        from .runtime import INTERNAL  # (numba is imported only once a kernel runs)
        message = self.kernel.error(status, e)
        if message and str(e) != INTERNAL:
            raise RunError(message) from None
        # Not an error the kernel checks for: a bug of ours, which costs this call its speed.
        return self.interpret(op, values, options, f"its kernel failed ({type(e).__name__}: {e}); "
                              "please report it")

    def interpret(self, op: Op, values: list[Any], options: Options, why: str) -> tuple:
        """Run this call in the interpreter, warning the first time."""
        if not self.fallbacks:
            warnings.warn(f"{op.where()}: {why}; it runs in the interpreter", FallbackWarning, stacklevel=3)
        self.fallbacks += 1
        with np.errstate(all="ignore"):  # (as Session.run: ONNX math is IEEE, without warnings)
            return self.run_interpreted(op, values, options)

    def run_interpreted(self, op: Op, values: list[Any], options: Options) -> tuple:
        raise NotImplementedError


class FusedLoop(Compiled):
    """Runs one loop through its kernel; falls back to the interpreter for inputs of another type.

    The kernel was generated for the dtypes and ranks the model declares; a feed of another rank
    (a model whose declared types are loose) runs in the interpreter rather than miscompiling.
    """

    def __init__(self, loop: Loop, label: str, known: dict[str, np.ndarray]):
        self.loop = loop
        self.label = label
        self.kernel = generate(loop, label, known)
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
            if not (isinstance(t, TensorType) and t.dtype is not None and t.shape is not None):
                raise NoRule(f"the type of loop input '{name}' is not a tensor of known dtype and rank ({t})")
            self.expected.append((np.dtype(t.dtype), len(t.shape) + added))
        self.setup()

    def prefix_types(self) -> tuple:
        """status, max_iter, trip, cond."""
        from numba import types
        return (types.Array(types.int64, 1, "C"), types.int64, types.int64, types.boolean)

    def __call__(self, op: Loop, values: list[Any], options: Options) -> tuple:
        arrays = list(values[2:])
        for k in self.sequences:  # a sequence whose elements share one shape goes in stacked
            arrays[k] = _stacked(arrays[k], *self.expected[k])
        if not self.fits(arrays):
            return self.interpret(op, values, options, "inputs of other dtypes or ranks than the model "
                                  f"declares ({_describe(values[2:])})")
        trip = -1 if values[0] is None else max(int(single_value(op, values[0], "trip count")), 0)
        cond = True if values[1] is None else bool(single_value(op, values[1], "condition"))
        cap = -1 if options.max_iterations is None else int(options.max_iterations)
        results = self.call(op, values, options, (cap, trip, cond), arrays)
        if self.sequences:
            results = tuple(RowSequence(r) if k in self.sequences and isinstance(r, np.ndarray) else r
                            for k, r in enumerate(results))
        return results

    def run_interpreted(self, op: Loop, values: list[Any], options: Options) -> tuple:
        return run_loop(op, values, options)


PROGRESS_SECONDS = 1.0


@contextmanager
def _progress(label: str):
    """A line on stderr when the work inside lasts over PROGRESS_SECONDS (a cold compile), and
    another with its time when it ends: a load that compiles for seconds says so."""
    start = time.perf_counter()
    said = threading.Event()

    def say() -> None:
        print(f"rnnloop: compiling {label} ...", file=sys.stderr, flush=True)
        said.set()

    timer = threading.Timer(PROGRESS_SECONDS, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if said.is_set():
            print(f"rnnloop: compiled {label} in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)


def bind(constants: list[np.ndarray]) -> np.ndarray:
    """The table a kernel reads its constants from (runtime.bound): a row each, of its address, sizes
    and byte strides. The caller keeps the arrays alive as long as the table."""
    rank = max((c.ndim for c in constants), default=0)
    table = np.zeros((len(constants), 1 + 2 * rank), np.int64)
    for row, c in zip(table, constants):
        row[0] = c.ctypes.data
        row[1:1 + c.ndim] = c.shape
        row[1 + c.ndim:1 + 2 * c.ndim] = c.strides
    return table


def _argument(array: np.ndarray) -> np.ndarray:
    """`array` as the kernel's signature takes it: C-contiguous, writable and aligned (a copy only
    when it is not; the kernel never writes its inputs, but Numba types a read-only array apart)."""
    flags = array.flags
    return array if flags.c_contiguous and flags.writeable and flags.aligned else np.array(array, order="C")


def compile_failure(error: BaseException, source: str) -> str:
    """Why a kernel did not compile, in one line: the first line of the error that says something,
    and the generated line it points at with the model op behind that line."""
    lines = source.splitlines()
    if isinstance(error, SyntaxError):
        number, what = error.lineno, f"{type(error).__name__}: {error.msg}"
    else:
        text = [ln.strip() for ln in str(error).splitlines()]
        said = [ln for ln in text if ln and not ln.startswith(("Failed in ", "During: ", "File ", ">>>"))
                and not set(ln) <= set("^ ")]
        what = f"{type(error).__name__}: {said[0] if said else text[0] if text else ''}"
        found = re.findall(r'File "[^"]*rnnloop_kernel_[0-9a-f]+\.py", line (\d+)', str(error))
        number = int(found[-1]) if found else None
    if number is None or not 0 < number <= len(lines):
        return f"its kernel did not compile ({what[:300]})"
    comments = [ln.strip()[2:] for ln in lines[:number] if ln.strip().startswith("# ") and "'" in ln]
    op = f" for {comments[-1]}" if comments else ""
    return f"its kernel did not compile ({what[:300]}; generated line {number}{op}: {lines[number - 1].strip()})"


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
