"""Threads: how many a session uses, the pool that runs the parts of a split batch, and the BLAS
threads of rnnloop's products (issue 25).

A session splits a batch over threads when batching.plan proves its rows independent and the call
is long enough to gain (see Splitter); each part runs the whole model on its rows, in a thread of
one pool per process (Python threads: the kernels release the GIL). A part's products run on one
BLAS thread, so the parts and BLAS never oversubscribe the cores; a call that is not split lets
BLAS use the session's threads. NumPy's OpenBLAS takes a thread count per calling thread
(openblas_set_num_threads_local), so none of this changes what NumPy does in the user's threads.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import glob
import os
import threading
from typing import Any, Callable

import numpy as np

from .errors import RnnloopError

ENV = "RNNLOOP_NUM_THREADS"
# A call is split when its split inputs hold at least this many elements in all: a rough bound on
# the work below which handing parts to the pool and joining their outputs (tens of µs) costs about
# what a second core saves. It depends on the feeds' shapes alone, never on timings, so a session
# splits the same feeds the same way every call and its results never change from call to call
# (a split call's results differ from the unsplit call's by rounding: BLAS orders a row's sums by
# the block of rows it falls in).
SPLIT_MIN_ELEMENTS = 16384


def available_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def resolve(threads: int | None) -> int:
    """A session's thread count: `threads`, else RNNLOOP_NUM_THREADS, else the cores available."""
    if threads is None:
        value = os.environ.get(ENV, "").strip()
        if not value:
            return available_cores()
        try:
            threads = int(value)
        except ValueError:
            raise RnnloopError(f"{ENV} must be a whole number of threads, got {value!r}") from None
    if isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 0:
        raise RnnloopError(f"threads must be a whole number >= 0 (0: the cores available), got {threads!r}")
    return int(threads) or available_cores()


# ---------------------------------------------------------------------------------------------
# the pool

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


class _Local(threading.local):
    in_part = False  # this thread runs a part of a split call (never split again). (A class default:
    #                  getattr of a thread's missing attribute with a default took 0.4 µs a call.)


_local = _Local()


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads do not exist there; the next split makes a pool."""
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _executor(workers: int) -> concurrent.futures.ThreadPoolExecutor:
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < workers:
            old = _pool
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rnnloop")
            _pool_size = workers
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def in_part() -> bool:
    return _local.in_part


def run_parts(work: Callable[[int], Any], count: int) -> list[Any]:
    """work(0..count-1): part 0 in this thread, the others in the pool; each on one BLAS thread.
    An error of any part is raised (the first by part number) once every part has finished."""
    def part(k: int) -> Any:
        _local.in_part = True
        previous = blas_threads(1)
        try:
            return work(k)
        finally:
            blas_threads(previous)
            _local.in_part = False

    futures = [_executor(count - 1).submit(part, k) for k in range(1, count)]
    results, errors = [None] * count, [None] * count
    try:
        results[0] = part(0)
    except BaseException as e:  # (the other parts still finish before anything is raised)
        errors[0] = e
    for k, f in enumerate(futures, start=1):
        try:
            results[k] = f.result()
        except BaseException as e:
            errors[k] = e
    for e in errors:
        if e is not None:
            raise e
    return results


# ---------------------------------------------------------------------------------------------
# BLAS threads

def _openblas_local() -> Callable[[int], int] | None:
    """NumPy's OpenBLAS openblas_set_num_threads_local (0.3.27+: the calling thread's count, returns
    the previous one), or None (another BLAS, an older OpenBLAS)."""
    here = os.path.dirname(np.__file__)
    for path in sorted(glob.glob(os.path.join(here, "..", "numpy.libs", "*openblas*"))
                       + glob.glob(os.path.join(here, ".dylibs", "*openblas*"))):
        try:
            function = ctypes.CDLL(path).openblas_set_num_threads_local  # (already loaded by NumPy)
        except (OSError, AttributeError):
            continue
        function.argtypes, function.restype = [ctypes.c_int], ctypes.c_int
        return function
    return None


_set_local = _openblas_local()


def blas_threads(count: int) -> int:
    """Set this thread's BLAS thread count (0: OpenBLAS's process-wide setting); returns the previous
    one, for restoring. Does nothing (returns 0) where NumPy's BLAS has no per-thread count."""
    return _set_local(count) if _set_local is not None else 0


# ---------------------------------------------------------------------------------------------
# splitting a call

class Splitter:
    """Session.run with the batch split in up to `threads` parts of rows (batching.Split says along
    which axes), each part the whole model on its rows, when the split inputs hold at least
    SPLIT_MIN_ELEMENTS. Returns None for whatever it does not split (one row, a small call, feeds of
    other kinds, a part of a split call), which the caller runs as it is."""

    def __init__(self, graph, splits, threads: int, run: Callable[[list[str], dict], list[Any]]):
        self.inputs, self.outputs = list(graph.inputs), list(graph.outputs)
        self.splits, self.threads, self.run = splits, threads, run

    def _size(self, split, feeds: dict) -> int | None:
        """The batch size of `feeds` along `split`'s axes if they are arrays that agree on it and hold
        enough elements to split, else None."""
        size, elements = None, 0
        for name, axis in zip(self.inputs, split.inputs):
            if axis is None:
                continue
            value = feeds.get(name)
            if value.__class__ is not np.ndarray or value.ndim <= axis or (size is not None and value.shape[axis] != size):
                return None
            size = value.shape[axis]
            elements += value.size
        return size if elements >= SPLIT_MIN_ELEMENTS else None

    def __call__(self, output_names, feeds) -> list[Any] | None:
        if in_part() or type(feeds) is not dict or isinstance(output_names, str):
            return None
        wanted = self.outputs if output_names is None else list(output_names)
        if any(n not in self.outputs for n in wanted) or set(feeds) != set(self.inputs):
            return None
        for split in self.splits:
            size = self._size(split, feeds)
            if size is not None and size >= 2:
                break
        else:
            return None
        count = min(self.threads, size)
        bounds = [size * k // count for k in range(count + 1)]

        def part(k: int) -> list[Any]:
            rows = slice(bounds[k], bounds[k + 1])
            fed = {}
            for name, axis in zip(self.inputs, split.inputs):
                value = feeds[name]
                fed[name] = value if axis is None else np.ascontiguousarray(value[(slice(None),) * axis + (rows,)])
            return self.run(wanted, fed)

        parts = run_parts(part, count)
        axes = dict(zip(self.outputs, split.outputs))
        return [parts[0][j] if axes[n] is None else np.concatenate([p[j] for p in parts], axis=axes[n])
                for j, n in enumerate(wanted)]
