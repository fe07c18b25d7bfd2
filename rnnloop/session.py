"""Session: load a model, check feeds, run it, and explain how each loop runs."""

from __future__ import annotations

import bisect
import os
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import batching
from .codegen.emitter import debug_level
from .codegen.fused import FusedLoop
from .codegen.kernel import STATUS_SIZE
from .errors import FallbackWarning, InputError, RnnloopError, UnsupportedModelError
from .interp.graph import Options, run_graph
from .ir import (
    Graph,
    Loop,
    OptionalType,
    SequenceType,
    TensorType,
    Type,
    format_graph,
    iter_ops,
)
from .memory import keep_large_blocks
from .partition import compile_regions
from .passes import (cancel_unsqueezes, eliminate_dead_code, fold_batchnorm, fold_constants, fold_embedding_products,
                     forward_identities, stack_in_transposed_order)
from .plan import BACKENDS, plan_graph
from .threads import Splitter, available_cores, blas_threads
from .threads import resolve as resolve_threads
from .typeinfer import infer_types
from .verify import verify

_ONNX_TYPE_NAMES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double", np.dtype(np.float16): "float16",
                    np.dtype(np.bool_): "bool", np.dtype(object): "string"}


@dataclass(frozen=True)
class ValueInfo:
    """A model input or output as onnxruntime's NodeArg shows it: name, shape and type."""

    name: str
    shape: list[int | str | None] | None
    type: str


def _type_name(t: Type | None) -> str:
    if isinstance(t, SequenceType):
        return f"seq({_type_name(t.elem)})"
    if isinstance(t, OptionalType):
        return f"optional({_type_name(t.elem)})"
    if isinstance(t, TensorType) and t.dtype is not None:
        return f"tensor({_ONNX_TYPE_NAMES.get(t.dtype, t.dtype.name)})"
    return "tensor(unknown)"


def _info(graph: Graph, name: str) -> ValueInfo:
    t = graph.type_of(name)
    shape = list(t.shape) if isinstance(t, TensorType) and t.shape is not None else None
    return ValueInfo(name, shape, _type_name(t))


class Session:
    """A loaded model, ready to run; shaped like onnxruntime's InferenceSession."""

    def __init__(self, graph: Graph, *, backend: str = "numba", strict: bool = False,
                 max_iterations: int | None = None, threads: int | None = None):
        if backend not in BACKENDS:  # before the work of loading
            raise RnnloopError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.threads, self._threads_option = resolve_threads(threads), threads  # (the option travels: portable.py)
        verify(infer_types(graph))  # types first: exporters leave loop bodies untyped
        graph = stack_in_transposed_order(forward_identities(cancel_unsqueezes(fold_constants(graph))))
        self.graph = graph = eliminate_dead_code(fold_embedding_products(fold_batchnorm(graph)))
        for g in _graphs(graph):  # (ONNX's raw data arrives read-only; a kernel takes writable arrays)
            g.constants = {n: _writable(c) for n, c in g.constants.items()}
        self.backend, self.strict = backend, strict
        keep_large_blocks()  # the large arrays a call frees, kept for the next call (memory.py)
        # The program: the graph with its compiled regions in place of their ops.
        self.partition = compile_regions(graph) if backend == "numba" else None
        self.program = program = self.partition.graph if self.partition else graph
        if self.partition:
            self._report(self.partition, strict)
        compiled = {id(c.op): c for c in (self.partition.compiled if self.partition else ())}
        plan = plan_graph(program, backend, strict, compiled)
        self.plans = plan.loops
        # Every partition: the main graph's, then those of the loop bodies and If branches it interprets.
        self.partitions = ([self.partition] if self.partition else []) + plan.partitions
        for partition in plan.partitions:
            compiled.update((id(c.op), c) for c in partition.compiled)
            self._report(partition, strict)
        # Arrays a run may hand back without computing them: results must never alias these.
        self._constants = _Memory(c for g in _graphs(graph) for c in g.constants.values() if isinstance(c, np.ndarray))
        if max_iterations is None and os.environ.get("RNNLOOP_MAX_ITERATIONS"):
            max_iterations = int(os.environ["RNNLOOP_MAX_ITERATIONS"])
        kernels = {id(p.op): p.fused for p in self.plans if isinstance(p.fused, FusedLoop)}
        kernels.update(compiled)
        self.options = Options(max_iterations=max_iterations, kernels=kernels, programs=plan.programs,
                               threads=self.threads, pool=_workers(self.threads) if kernels else None)
        whole = self.partition.whole() if self.partition else None
        typed = all(isinstance(t, TensorType) and t.dtype is not None and t.shape is not None
                    for t in map(graph.type_of, graph.inputs))
        self._direct = _Direct(self, whole) if whole is not None and typed else None
        # Threads: a batch split in parts where the rows are proved independent (batching.py), and
        # BLAS held to the session's threads where that is not what OpenBLAS does by itself.
        self._splits = batching.plan(graph) if self.threads > 1 else ([], "the session has one thread")
        if self._splits[0] and self.options.pool is not None and any(k.kernel.concurrent for k in kernels.values()):
            # Its kernel runs loops at once, a core each (the directions of a bidirectional layer),
            # every row in each, where a split runs both on half the rows in each part: the stacked
            # bidirectional LSTM encoder at batch 12 took 0.90-0.93 of the split call's time on 2
            # cores (three rounds of 20 calls, 2026-12-02).
            self._splits = ([], "its kernel runs loops at once on the cores instead (the directions of "
                                "a bidirectional layer)")
        self._splitter = Splitter(graph, self._splits[0], self.threads, self._run) if self._splits[0] else None
        # BLAS on one thread where the kernels share with the pool's workers: OpenBLAS's own threads spin
        # for a while after a product, and fought the workers for the cores. The CRNN at batch 1 (BLAS's
        # products in two of its convolutions, shared ones in the others and its LSTMs) took 5.4 ms a
        # call on two threads against 4.25 on one, and 3.04 with BLAS on one thread (ad hoc, 2026-12-02).
        shares = self.options.pool is not None and any(k.shares for k in kernels.values())
        blas = 1 if shares else self.threads
        self._blas = blas if blas != available_cores() and self._calls_blas() else None
        self._fast = self._direct if self._splitter is None and self._blas is None else None

    def _calls_blas(self) -> bool:
        """Whether a run may call BLAS: an op that can, run by the interpreter (NumPy's products), or a
        kernel whose code can (blas.py, the convolutions' im2col, or a packed product of more rows than
        its panels serve: simd.MAX_ROWS). Holding BLAS to the session's threads costs 2-3 µs a call
        (OpenBLAS's thread count set and restored), which a model whose products all run on panels
        (with AVX-512, any number of rows) need not pay."""
        if not self.partition:
            return _uses_blas(self.graph)
        interpreted = (op for partition in self.partitions for op, _ in partition.interpreted)
        if any(op.op_type in _BLAS_OPS or any(map(_uses_blas, op.subgraphs)) for op in interpreted):
            return True
        from .codegen import simd
        calls = ("_b.", "_cv.") + (("_s.matmul_packed",) if simd.MAX_ROWS < np.iinfo(np.int64).max else ())
        return any(call in source for _, source in self.kernel_sources() for call in calls)

    @staticmethod
    def _report(partition, strict: bool) -> None:
        """Regions that did not compile: an error under strict, else a warning each; with
        RNNLOOP_DEBUG, the regions that did (2: with their sources)."""
        if partition.failed:
            if strict:
                raise UnsupportedModelError("strict=True and some regions do not compile:\n" +
                                            "\n".join("  " + f for f in partition.failed))
            for failure in partition.failed:
                warnings.warn(failure, FallbackWarning, stacklevel=4)
        level = debug_level()  # RNNLOOP_DEBUG: 1 the regions, 2 their sources too (plan_graph: the loops)
        for compiled in partition.compiled if level else ():
            print(f"rnnloop: {compiled.describe()}", file=sys.stderr)
            if level >= 2:
                print(compiled.source, file=sys.stderr)

    def get_inputs(self) -> list[ValueInfo]:
        return [_info(self.graph, n) for n in self.graph.inputs]

    def get_outputs(self) -> list[ValueInfo]:
        return [_info(self.graph, n) for n in self.graph.outputs]

    def run(self, output_names: Sequence[str] | None, feeds: dict[str, Any]) -> list[Any]:
        """Run the model on `feeds`; returns the named outputs (all when None): arrays, lists for sequences."""
        if self._fast is not None:  # (one compiled region, nothing to set around it: see _Direct)
            results = self._fast(output_names, feeds)
            if results is not None:
                return results
        if self._splitter is not None:
            results = self._splitter(output_names, feeds)
            if results is not None:
                return results
        if self._blas is None:
            return self._run(output_names, feeds)
        previous = blas_threads(self._blas)
        try:
            return self._run(output_names, feeds)
        finally:
            blas_threads(previous)

    def _run(self, output_names: Sequence[str] | None, feeds: dict[str, Any]) -> list[Any]:
        if self._direct is not None:
            results = self._direct(output_names, feeds)
            if results is not None:
                return results
        graph = self.graph
        if isinstance(output_names, str):
            raise InputError(f"output_names must be a list of names (or None for all), got the string "
                             f"{output_names!r}; pass [{output_names!r}]")
        wanted = list(graph.outputs) if output_names is None else list(output_names)
        unknown = [n for n in wanted if n not in graph.outputs]
        if unknown:
            raise InputError(f"unknown output name(s) {unknown}; the model's outputs are {graph.outputs}")
        args = check_feeds(graph, feeds)
        with np.errstate(all="ignore"):  # ONNX math is IEEE: 1/0 is inf, log(0) is -inf, no warnings
            outputs, _ = run_graph(self.program, args, self.options)
        by_name = dict(zip(graph.outputs, outputs))
        # A result that shares memory with a constant or a feed (an Identity of it, a loop that ran zero
        # times) is copied, so the caller owns every result and a later run never changes it.
        shared = [self._constants, _Memory(_arrays(args))]
        return [_own(by_name[n], shared) for n in wanted]

    def explain(self) -> str:
        """How the model runs: its compiled regions with their ops, each op left to the interpreter
        and why, and each loop (fused, or interpreted and why)."""
        lines = []
        for partition in self.partitions:
            lines += [c.describe() for c in partition.compiled]
            lines += [f"{op.where()}: interpreted ({why})" for op, why in partition.interpreted
                      if not isinstance(op, Loop)]  # (a loop's line follows)
        lines += [p.describe() for p in self.plans]
        lines.append(batching.describe(*self._splits, self.graph))
        return "\n".join(lines)

    def kernel_sources(self) -> list[tuple[str, str]]:
        """(what it runs, generated source) for every kernel: each compiled region, each loop fused on
        its own."""
        regions = [(c.label, c.source) for partition in self.partitions for c in partition.compiled]
        return regions + [(p.op.where(), p.fused.source) for p in self.plans if isinstance(p.fused, FusedLoop)]

    def ir_text(self) -> str:
        """The model's IR in its stable text form."""
        return format_graph(self.graph)

    _source = None  # what rnnloop.load was given (portable.Source); None for a graph built in Python

    def __reduce__(self):
        """A Session pickles as its model's bytes and load options, never as kernels or arrays; the
        unpickling process loads it again, once per process (rnnloop/portable.py)."""
        from .portable import reduce
        return reduce(self)


class _Direct:
    """Session.run for a model that is one compiled region: feeds that need no conversion go
    straight to its kernel. Anything else (a missing or extra feed, another dtype, rank or fixed
    size, a name that is not an output) returns None, and the general path runs or explains it.
    The path is lean on purpose, since a streaming model's call lasts tens of microseconds: with
    the constants bound into one table (fused.bind), Session.run of a model of four inputs, three
    outputs and 16 constant arrays took 5.2 µs around a kernel that does almost nothing, against
    7.2 µs before this path called the kernel itself and 16 arrays were unboxed a call."""

    def __init__(self, session: Session, region):
        graph = session.graph
        self.session, self.region = session, region
        # (name, dtype, the shape if every size is fixed else the rank, the fixed sizes as (axis, size))
        self.inputs = []
        for name in graph.inputs:
            t = graph.type_of(name)
            fixed = tuple((a, d) for a, d in enumerate(t.shape) if isinstance(d, int))
            shape = tuple(t.shape) if len(fixed) == len(t.shape) else len(t.shape)
            self.inputs.append((name, np.dtype(t.dtype), shape, fixed))
        self.passed = [graph.inputs.index(n) for n in region.op.inputs]  # what the kernel takes
        produced = {name: k for k, name in enumerate(region.op.outputs)}
        self.index = {name: produced[name] for name in graph.outputs}
        self.all = [produced[name] for name in graph.outputs]
        self.cap = -1 if session.options.max_iterations is None else int(session.options.max_iterations)
        self.shares = session.options.pool is not None and region.shares

    def __call__(self, output_names, feeds) -> list[Any] | None:
        if type(feeds) is not dict or len(feeds) != len(self.inputs):
            return None
        arrays = []
        for name, dtype, shape, fixed in self.inputs:
            value = feeds.get(name)
            # (flags.carray: C-contiguous, aligned and writable, as the kernel's signature takes it)
            if value.__class__ is not np.ndarray or value.dtype != dtype or not value.flags.carray:
                return None
            if shape.__class__ is tuple:
                if value.shape != shape:
                    return None
            elif value.ndim != shape or any(value.shape[axis] != size for axis, size in fixed):
                return None
            arrays.append(value)
        if output_names is None:
            picked = self.all
        else:
            index = self.index
            if isinstance(output_names, str) or not all(name in index for name in output_names):
                return None
            picked = [index[name] for name in output_names]
        region = self.region
        values = [arrays[k] for k in self.passed]
        if self.shares:
            results = region.call_ready(region.op, values, self.session.options, (self.cap,), values)
        else:  # (call_ready, without the workers' part)
            status = np.zeros(STATUS_SIZE, np.int64)
            try:
                results = region.function(status, self.cap, *values, *region.arguments)
            except Exception as e:
                results = region.failed(e, status, region.op, values, self.session.options)
        return [results[k] for k in picked]  # (the kernel's own arrays: see region._returned)


def _workers(threads: int):
    """The workers that share the products of compiled code for a session of `threads` threads (none
    for one thread, or with RNNLOOP_SHARE_PRODUCTS=0). On the 2-core machine (benchmarks/bench_threads.py,
    2026-11-27), a batch-1 LSTM (1, 128, 256, 200) took 1.67 ms a call against 3.18 on one thread;
    with a busy process on the other core (--busy), 5.1 against 3.3 (onnxruntime at its default
    threads: 6.4 against 3.4; see the README's Threads)."""
    if os.environ.get("RNNLOOP_SHARE_PRODUCTS", "1") == "0":
        return None
    from .codegen import pool
    return pool.pool(threads)


def _graphs(graph: Graph):
    """The graph and every subgraph inside it."""
    yield graph
    for op in iter_ops(graph):
        yield from op.subgraphs


# Ops that may call BLAS (rnnloop's products, NumPy's in the interpreter).
_BLAS_OPS = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "MatMulInteger", "ConvInteger"})


def _uses_blas(graph: Graph) -> bool:
    return any(op.op_type in _BLAS_OPS for op in iter_ops(graph))


def _writable(value: Any) -> Any:
    return value.copy() if isinstance(value, np.ndarray) and not value.flags.writeable else value


def _arrays(values: Any):
    for v in values:
        if isinstance(v, np.ndarray):
            yield v
        elif isinstance(v, list):
            yield from _arrays(v)


def _span(array: np.ndarray) -> tuple[int, int] | None:
    """The bytes [lo, hi) an array's elements lie in; None when it has none."""
    if array.size == 0:
        return None
    lo = hi = array.__array_interface__["data"][0]
    for n, stride in zip(array.shape, array.strides):
        lo, hi = lo + min(0, (n - 1) * stride), hi + max(0, (n - 1) * stride)
    return lo, hi + array.itemsize


def _owner(array: np.ndarray) -> tuple[np.ndarray, bool]:
    """The array that owns `array`'s memory, and whether that memory was allocated for it alone
    (by NumPy, or by a Numba kernel: a MemInfo without a parent array); otherwise it is the last
    array before a foreign buffer (the bytes of np.frombuffer, a memoryview)."""
    while True:
        base = array.base
        if base is None:
            return array, True
        if isinstance(base, np.ndarray):
            array = base
        elif type(base).__name__ == "_MemInfo":  # a Numba result: a view of `parent`, or memory of its own
            if base.parent is None:
                return array, True
            array = base.parent
        else:
            return array, False


class _Memory:
    """The memory of some arrays: asks whether an array may overlap it, cheaply.

    Memory NumPy or a Numba kernel allocated belongs to one array, its owner, and every view of it
    leads back to that owner through .base, so two such arrays overlap only if they have the same
    owner: a set of owners answers (reading an address costs microseconds). Memory NumPy did not allocate (a foreign buffer) is compared by address range,
    as np.may_share_memory does, over spans merged once, in time logarithmic in the number of arrays.
    """

    def __init__(self, arrays):
        arrays = list(arrays)
        self.owners = {id(_owner(a)[0]) for a in arrays}
        self.arrays = arrays  # keeps the owners' ids valid
        self.starts: list[int] | None = None  # the merged spans, made when first needed
        self.ends: list[int] = []

    def overlaps(self, array: np.ndarray) -> bool:
        owner, allocated = _owner(array)
        if id(owner) in self.owners:
            return True
        if allocated:  # memory of its own, and none of these arrays leads to it
            return False
        span = _span(array)
        if span is None:
            return False
        if self.starts is None:
            self._merge()
        k = bisect.bisect_left(self.starts, span[1]) - 1  # the last span starting before this one ends
        return k >= 0 and self.ends[k] > span[0]

    def _merge(self) -> None:
        merged: list[list[int]] = []
        for lo, hi in sorted(s for s in map(_span, self.arrays) if s is not None):
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        self.starts = [lo for lo, _ in merged]
        self.ends = [hi for _, hi in merged]


def _own(value: Any, shared: list[_Memory]) -> Any:
    if isinstance(value, np.ndarray):
        return value.copy() if value.size and any(m.overlaps(value) for m in shared) else value
    if isinstance(value, list):
        return [_own(v, shared) for v in value]
    return value


def check_feeds(graph: Graph, feeds: dict[str, Any]) -> list[Any]:
    """The feeds in input order, converted where the type allows; a clear error for any mismatch."""
    if not isinstance(feeds, dict):
        raise InputError(f"feeds must be a dict of input name to value, got {type(feeds).__name__}")
    unknown = sorted(set(feeds) - set(graph.inputs))
    missing = [n for n in graph.inputs if n not in feeds]
    if unknown or missing:
        parts = ([f"unknown input(s) {unknown}"] if unknown else []) + ([f"missing input(s) {missing}"] if missing else [])
        raise InputError(f"{' and '.join(parts)}; the model's inputs are {graph.inputs}")
    return [_check_value(name, feeds[name], graph.type_of(name)) for name in graph.inputs]


def _check_value(name: str, value: Any, t: Type | None) -> Any:
    if isinstance(t, OptionalType):
        return None if value is None else _check_value(name, value, t.elem)
    if isinstance(t, SequenceType):
        if not isinstance(value, (list, tuple)):
            raise InputError(f"input '{name}' is a sequence: pass a list of arrays, not {type(value).__name__}")
        return [_check_value(f"{name}[{k}]", v, t.elem) for k, v in enumerate(value)]
    if value is None:
        raise InputError(f"input '{name}' is a tensor; None is only allowed for optional inputs")
    expected = t.dtype if isinstance(t, TensorType) else None
    if isinstance(value, np.ndarray):
        array = value
        if expected is not None and array.dtype != expected:
            raise InputError(f"input '{name}' must be {expected}, got {array.dtype}; "
                             f"convert it with .astype(np.{expected.name})")
    else:  # Python scalars and lists, NumPy scalars: convert when no value changes kind
        array = np.asarray(value)
        if expected is not None:
            if array.dtype != expected and not np.can_cast(array.dtype, expected, "same_kind") \
                    and not (array.dtype.kind in "biu" and expected.kind in "fiu"):
                raise InputError(f"input '{name}' must be {expected}; {value!r} cannot be converted to it")
            array = array.astype(expected)
    if isinstance(t, TensorType) and t.shape is not None:
        if array.ndim != len(t.shape):
            raise InputError(f"input '{name}' must have rank {len(t.shape)} (shape {list(t.shape)}), "
                             f"got shape {list(array.shape)}")
        for axis, (want, got) in enumerate(zip(t.shape, array.shape)):
            if isinstance(want, int) and want != got:
                raise InputError(f"input '{name}' must have size {want} on axis {axis} "
                                 f"(shape {list(t.shape)}), got shape {list(array.shape)}")
    return array


def load(model: Any, *, backend: str = "numba", strict: bool = False, base_dir: str | None = None,
         max_iterations: int | None = None, threads: int | None = None) -> Session:
    """Load a model into a Session: ONNX (a path, bytes or a ModelProto) or OpenVINO IR (the path of
    its .xml, with the .bin beside it).

    `backend` "numba" runs each loop it can as one compiled kernel and the rest in the interpreter,
    warning once per such loop (an error with `strict=True`); "interp" interprets everything.
    `max_iterations` (or RNNLOOP_MAX_ITERATIONS) stops any loop that runs longer with an error;
    `base_dir` locates external data of a model given as bytes or a ModelProto. `threads` (default
    RNNLOOP_NUM_THREADS, else the cores this process may use; 0 means that too) bounds the threads a
    run uses: a batch whose rows the model computes independently is split over them when a call is
    long enough to gain (`explain()` says whether and along which axes), and rnnloop's BLAS products
    run on at most that many; `threads=1` runs every call on the calling thread.
    """
    if isinstance(model, (str, os.PathLike)) and os.fspath(model).lower().endswith(".xml"):
        from .frontends.openvino import load_ir
        graph = load_ir(os.fspath(model))
    else:
        from .frontends.onnx import convert_model, read_model
        graph = convert_model(read_model(model, base_dir))
    session = Session(graph, backend=backend, strict=strict, max_iterations=max_iterations, threads=threads)
    from .portable import Source
    session._source = Source(model, base_dir)  # (so that the Session can travel: see __reduce__)
    return session
