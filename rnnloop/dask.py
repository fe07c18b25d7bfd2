"""Run a model over data larger than one machine on Dask: arrays split along the batch axis, bags
of variable-length items, dataframe columns of arrays, and streaming models over recordings.

    import rnnloop.dask as rd
    probs = rd.map_array("model.onnx", x)                   # a dask.array, one model call per block
    outputs = rd.map_bag("model.onnx", items)               # a dask.bag, in the input's order
    frame = rd.map_frame("model.onnx", df, inputs="audio")  # new columns, one per output
    per_file = rd.stream("vad.onnx", recordings, chunk=512, feeds={"sr": np.array(16000)})

`model` is a Session or anything `rnnloop.load` takes, with its load options (backend, strict,
max_iterations, base_dir, threads: 1 unless given, as Dask runs a task per worker thread; a Session
keeps its own). It travels to the workers as its bytes once per worker (one graph key
that every task depends on), and each worker process loads it once (rnnloop/portable.py): kernels
come from the worker's kernel cache, compiled once per machine. Everything returned is lazy; Dask's
progress bar and dashboard show the tasks, and a worker that dies has its tasks rerun, so every
item appears in the output once.

Batching never pads. Padding a sequence changes what a recurrent model computes (its state runs
over the padding), so items are batched only with items of exactly the same shape, up to
`batch_size` per model call; a model that takes the lengths of its sequences can be fed padded
items through map_array instead. Batches form within one partition: give partitions enough items
that lengths repeat (audio cut into chunks of a fixed length is the common case).

A task that fails with an RnnloopError raises one of the same class whose message names the item
(its index in the sequence given, or its partition and place there, or the dataframe row's index
label) and the original error. Numeric results are those of the same calls in one process, bit for
bit: only where the work runs changes, never how it is batched.

Requires the `dask` extra: pip install "rnnloop[dask]".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

try:
    import dask
    import dask.array as da
    import dask.bag as db
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError('rnnloop.dask needs Dask: pip install "rnnloop[dask]" (dask[distributed])') from e

from .errors import InputError, RnnloopError
from .portable import Portable, share, shared
from .session import Session, load

__all__ = ["map_array", "map_bag", "map_frame", "stream", "preload", "run_items", "run_stream", "PARTITION_SIZE",
           "BATCH_SIZE"]

# Items per partition when map_bag is given a plain sequence: tasks of a third of a second or more
# for small models, so that Dask's milliseconds a task stay a few percent. On a 2-core Xeon VM
# (benchmarks/bench_dask.py --persist --rounds 3, 2026-11-28), Dask spent about 6 ms between two tasks
# and a task computed 3-4 % longer than the same work alone: with 1024 items (a GRU, 96 ms a task) the
# overhead was 10.4 % (9.8-10.8) of a task, with 4096 4.7 % (4.6-5.3).
PARTITION_SIZE = 4096
BATCH_SIZE = 32  # items per model call in map_bag and map_frame


# ---------------------------------------------------------------------------------------------
# the model: what travels, and a local Session for its names and types

def _model(model: Any, options: dict[str, Any]) -> tuple[Portable, Session]:
    """The model as it travels, and a Session here that tells its inputs' and outputs' types."""
    if isinstance(model, Session):
        if options:
            raise RnnloopError(f"load options {sorted(options)} apply to a model source, not to a loaded "
                               "Session; pass them to rnnloop.load")
        return share(model), model
    unknown = sorted(set(options) - {"backend", "strict", "max_iterations", "base_dir", "threads"})
    if unknown:
        raise RnnloopError(f"unknown load option(s) {unknown}; rnnloop.load takes backend, strict, "
                           "max_iterations, base_dir and threads")
    from .plan import BACKENDS
    if options.get("backend", "numba") not in BACKENDS:  # (here, not in every worker)
        raise RnnloopError(f"backend must be one of {BACKENDS}, got {options['backend']!r}")
    local = load(model, backend="interp", base_dir=options.get("base_dir"))  # (types only: nothing compiles)
    # One thread per session by default: Dask already runs a task per worker thread, and a session
    # splitting its batch over more would oversubscribe the cores.
    wanted = {"backend": "numba", "threads": 1, **{k: v for k, v in options.items() if k != "base_dir"}}
    return share(local).with_options(**wanted), local


def preload(model: Any, client: Any = None, **load_options: Any) -> dict[str, str]:
    """Load the model on every worker of `client` (default: the current one) now, rather than
    in each worker's first task: before timing a job, or to see a compile failure at once.
    Returns each worker's backend."""
    if client is None:
        from distributed import get_client
        client = get_client()
    portable, _ = _model(model, load_options)
    return client.run(_preload, portable)


def _preload(model: Portable) -> str:
    return shared(model).backend


def _ref(model: Portable):
    """The model as one key of the graph: sent to a worker once, not once per task."""
    return dask.delayed(model, pure=True, traverse=False)


def _outputs(session: Session, outputs: str | Sequence[str] | None,
             exclude: Sequence[str] = ()) -> tuple[list[str], bool]:
    """The outputs to compute, and whether each item's result is one array (else a dict)."""
    names = list(session.graph.outputs)
    if outputs is None:
        picked = [n for n in names if n not in exclude]
        return picked, len(picked) == 1
    single = isinstance(outputs, str)
    picked = [outputs] if single else list(outputs)
    unknown = [n for n in picked if n not in names]
    if unknown:
        raise InputError(f"unknown output name(s) {unknown}; the model's outputs are {names}")
    return picked, single


def _inputs(session: Session, given: Sequence[str], feeds: dict[str, Any], what: str) -> None:
    expected = [n for n in session.graph.inputs if n not in feeds]
    if sorted(given) != sorted(expected):
        raise InputError(f"{what} must feed the model's inputs {expected} (the others are in feeds=); "
                         f"got {sorted(given)}")


def _one_input(session: Session, feeds: dict[str, Any], also: Sequence[str] = ()) -> str:
    left = [n for n in session.graph.inputs if n not in feeds and n not in also]
    if len(left) != 1:
        raise InputError(f"the model has inputs {list(session.graph.inputs)}; give every one but the data "
                         f"in feeds=, or pass a dict of input name to data (left: {left})")
    return left[0]


def _batch_axes(session: Session, inputs: dict[str, int], output_axes: dict[str, int] | None,
                outputs: Sequence[str]) -> dict[str, int]:
    """Each output's batch axis: the one its type names like the first input's batch axis, or
    as output_axes says."""
    output_axes = dict(output_axes or {})
    name, axis = next(iter(inputs.items()))
    t = session.graph.type_of(name)
    symbol = t.shape[axis] if getattr(t, "shape", None) is not None and axis < len(t.shape) else None
    axes = {}
    for out in outputs:
        if out in output_axes:
            axes[out] = output_axes[out]
            continue
        shape = getattr(session.graph.type_of(out), "shape", None)
        found = [k for k, d in enumerate(shape or ()) if isinstance(d, str) and d == symbol]
        if len(found) != 1:
            raise RnnloopError(f"cannot tell which axis of output '{out}' (shape {shape and list(shape)}) is the "
                               f"batch axis: input '{name}' has {symbol!r} on axis {axis}; pass "
                               f"output_axes={{'{out}': axis}}")
        axes[out] = found[0]
    return axes


# ---------------------------------------------------------------------------------------------
# running: plain NumPy, the same in a task and in a single process

def _fail(error: RnnloopError, where: str) -> RnnloopError:
    """An error of the same class naming the item: the exception crosses processes as its message."""
    try:
        made = type(error)(f"{where}: {error}")
    except Exception:  # (a subclass that takes other arguments)
        made = RnnloopError(f"{where}: {type(error).__name__}: {error}")
    made.__cause__ = error
    return made


def _call(session: Session, outputs: list[str], feeds: dict[str, Any], batch: dict[str, np.ndarray]) -> dict:
    return dict(zip(outputs, session.run(outputs, {**feeds, **batch})))


def run_items(session: Session, items: Sequence[Any], *, outputs: list[str], single: bool,
              feeds: dict[str, Any] | None = None, input: str | None = None, batch_axes: dict[str, int],
              output_axes: dict[str, int], batch_size: int = BATCH_SIZE,
              where: Callable[[int], str] = lambda k: f"item {k}") -> list[Any]:
    """Run items (arrays for `input`, or dicts of input name to array), each without its batch axis:
    items of equal shapes go through the model together, up to batch_size per call; results come
    back in the items' order, each one array (single) or a dict of output name to array."""
    feeds = feeds or {}
    arrays = [item if isinstance(item, dict) else {input: item} for item in items]
    groups: dict[tuple, list[int]] = {}
    for k, item in enumerate(arrays):
        key = tuple((name, np.shape(value), np.asarray(value).dtype.str) for name, value in sorted(item.items()))
        groups.setdefault(key, []).append(k)
    results: list[Any] = [None] * len(arrays)
    for members in groups.values():
        for start in range(0, len(members), batch_size):
            part = members[start:start + batch_size]
            batch = {name: np.stack([np.asarray(arrays[k][name]) for k in part], axis=batch_axes[name])
                     for name in arrays[part[0]]}
            try:
                got = _call(session, outputs, feeds, batch)
            except RnnloopError as e:
                _locate(session, outputs, feeds, arrays, part, batch_axes, where)
                raise _fail(e, f"a batch of {len(part)} from {where(part[0])} (each alone runs)") from e
            for j, k in enumerate(part):
                picked = {name: np.take(got[name], j, axis=output_axes[name]) for name in outputs}
                results[k] = picked[outputs[0]] if single else picked
    return results


def _locate(session, outputs, feeds, arrays, part, batch_axes, where) -> None:
    """A batch failed: run its items one by one and raise for the first that fails alone."""
    for k in part:
        one = {name: np.expand_dims(np.asarray(value), batch_axes[name]) for name, value in arrays[k].items()}
        try:
            _call(session, outputs, feeds, one)
        except RnnloopError as e:
            raise _fail(e, where(k)) from e


def _partition_where(partition: int, offset: int | None) -> Callable[[int], str]:
    if offset is None:
        return lambda k: f"item {k} of partition {partition}"
    return lambda k: f"item {offset + k}"


# ---------------------------------------------------------------------------------------------
# dask.array: blocks along the batch axis

def map_array(model: Any, x: Any, *, outputs: str | Sequence[str] | None = None, feeds: dict[str, Any] | None = None,
              batch_axis: int | dict[str, int] = 0, output_axes: dict[str, int] | None = None,
              **load_options: Any) -> Any:
    """The model over a dask.array (or a dict of input name to dask.array) split along the batch
    axis: one model call per block, the outputs' shapes and dtypes declared from the model's types
    (nothing runs until computed). Returns a dask.array for one output (`outputs` a name, or a
    model with one output), else a dict of them: compute them together (dask.compute) so that each
    block runs once. Sizes the model's types do not tell are unknown (nan) chunks."""
    portable, session = _model(model, load_options)
    feeds = dict(feeds or {})
    arrays = dict(x) if isinstance(x, dict) else {_one_input(session, feeds): x}
    _inputs(session, list(arrays), feeds, "the arrays")
    axes = {n: (batch_axis[n] if isinstance(batch_axis, dict) else batch_axis) for n in arrays}
    picked, single = _outputs(session, outputs)
    out_axes = _batch_axes(session, axes, output_axes, picked)
    first = next(iter(arrays))
    batch_chunks = da.asarray(arrays[first]).chunks[axes[first]]
    args, sizes = [], {}
    for j, (name, a) in enumerate(arrays.items()):
        a = da.asarray(a)
        if a.shape[axes[name]] != sum(batch_chunks):
            raise InputError(f"input '{name}' has {a.shape[axes[name]]} items on its batch axis {axes[name]}; "
                             f"'{first}' has {sum(batch_chunks)}")
        # one block per batch range: whole along every other axis, the batch split as the first input's
        a = a.rechunk({k: (batch_chunks if k == axes[name] else -1) for k in range(a.ndim)})
        index = tuple("b" if k == axes[name] else f"{j}.{k}" for k in range(a.ndim))
        args += [a, index]
        t = session.graph.type_of(name)
        for k, d in enumerate(getattr(t, "shape", None) or ()):
            if isinstance(d, str) and k != axes[name]:
                sizes.setdefault(d, a.shape[k])
    rows = da.arange(sum(batch_chunks), chunks=(batch_chunks,))
    runs = da.blockwise(_run_block, ("b",), rows, ("b",), *args, _ref(portable), None, axes, None,
                        feeds, None, picked, None, dtype=object, meta=np.empty((0,), object), concatenate=True)
    results = {}
    for name in picked:
        t = session.graph.type_of(name)
        if getattr(t, "dtype", None) is None or getattr(t, "shape", None) is None:
            raise RnnloopError(f"output '{name}' has no known dtype and rank; map_array declares them before "
                               "running: use map_bag, which needs neither")
        axis = out_axes[name]
        chunks = tuple(batch_chunks if k == axis else
                       ((d,) if isinstance(d, int) else (sizes.get(d, np.nan),)) for k, d in enumerate(t.shape))
        results[name] = runs.map_blocks(_pick, name, chunks=chunks, dtype=t.dtype,
                                        new_axis=[k for k in range(len(t.shape)) if k != axis],
                                        meta=np.empty((0,) * len(t.shape), t.dtype))
    return results[picked[0]] if single else results


def _run_block(rows: np.ndarray, *args: Any) -> dict[str, np.ndarray]:
    *blocks, model, axes, feeds, outputs = args
    session = shared(model)
    batch = dict(zip(axes, blocks))
    try:
        return _call(session, outputs, feeds, batch)
    except RnnloopError as e:
        for j, row in enumerate(rows):  # the first item that fails alone, if one does
            one = {name: np.take(block, [j], axis=axes[name]) for name, block in batch.items()}
            try:
                _call(session, outputs, feeds, one)
            except RnnloopError as alone:
                raise _fail(alone, f"item {row}") from alone
        raise _fail(e, f"items {rows[0]} to {rows[-1]} (one block; each alone runs)") from e


def _pick(results: dict[str, np.ndarray], name: str) -> np.ndarray:
    return results[name]


# ---------------------------------------------------------------------------------------------
# dask.bag: variable-length items, batched by shape, order kept

def _as_bag(items: Any, partition_size: int | None, default: int) -> tuple[Any, list[int] | None]:
    """A bag of the items, and each partition's first item's index when it is known."""
    if isinstance(items, db.Bag):
        if partition_size is not None:
            raise RnnloopError("partition_size applies to a sequence; repartition the bag instead")
        return items, None
    items = list(items)
    size = partition_size or default
    bag = db.from_sequence(items, partition_size=size)
    return bag, [k * size for k in range(bag.npartitions)]


def _per_partition(function: Callable, bag: Any, offsets: list[int] | None, model: Portable,
                   options: dict[str, Any]) -> Any:
    """A bag of function(items, model, where=(partition, first item's index or None), options=) over
    the partitions of `bag`, one task a partition."""
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph
    ref = _ref(model)
    name = f"rnnloop-{function.__name__.strip('_')}-" + tokenize(bag, model, options, offsets)
    # (a partial is opaque to Dask's graph traversal: the options are never taken for keys or tasks)
    layer = {(name, p): (partial(function, where=(p, None if offsets is None else offsets[p]), options=options),
                         (bag.name, p), ref.key) for p in range(bag.npartitions)}
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[bag, ref])
    return db.Bag(graph, name, bag.npartitions)


def map_bag(model: Any, items: Any, *, outputs: str | Sequence[str] | None = None, feeds: dict[str, Any] | None = None,
            input: str | None = None, batch_axis: int | dict[str, int] = 0, output_axes: dict[str, int] | None = None,
            batch_size: int = BATCH_SIZE, partition_size: int | None = None, **load_options: Any) -> Any:
    """The model over a dask.bag (or a sequence, made into a bag of `partition_size` items per
    partition) of items, each one sequence without its batch axis: an array for the model's input,
    or a dict of input name to array. Returns a bag of results in the items' order: one array per
    item (`outputs` a name, or a one-output model), else a dict of output name to array."""
    portable, session = _model(model, load_options)
    feeds = dict(feeds or {})
    input = input or (_one_input(session, feeds) if len(session.graph.inputs) - len(feeds) == 1 else None)
    names = [input] if input else [n for n in session.graph.inputs if n not in feeds]
    axes = {n: (batch_axis[n] if isinstance(batch_axis, dict) else batch_axis) for n in names}
    picked, single = _outputs(session, outputs)
    out_axes = _batch_axes(session, axes, output_axes, picked)
    bag, offsets = _as_bag(items, partition_size, PARTITION_SIZE)
    options = dict(outputs=picked, single=single, feeds=feeds, input=input, batch_axes=axes,
                   output_axes=out_axes, batch_size=batch_size)
    return _per_partition(_run_partition, bag, offsets, portable, options)


def _run_partition(items: Any, model: Portable, *, where: tuple, options: dict[str, Any]) -> list[Any]:
    return run_items(shared(model), list(items), where=_partition_where(*where), **options)


# ---------------------------------------------------------------------------------------------
# dask.dataframe: a column of arrays in, a column per output out

def map_frame(model: Any, frame: Any, inputs: str | dict[str, str], *,
              outputs: str | Sequence[str] | dict[str, str] | None = None, feeds: dict[str, Any] | None = None,
              batch_axis: int | dict[str, int] = 0, output_axes: dict[str, int] | None = None,
              batch_size: int = BATCH_SIZE, **load_options: Any) -> Any:
    """The model over a dask.dataframe whose cells hold arrays (one item each, without the batch
    axis): `inputs` names the column of the model's one input, or maps input names to columns;
    returns the frame with one new column of arrays per output (`outputs` maps output names to
    column names; default: every output under its own name).

    Dask turns columns of Python objects into strings unless told not to: make such frames under
    dask.config.set({"dataframe.convert-string": False})."""
    import pandas as pd
    portable, session = _model(model, load_options)
    feeds = dict(feeds or {})
    columns = {_one_input(session, feeds): inputs} if isinstance(inputs, str) else dict(inputs)
    _inputs(session, list(columns), feeds, "inputs=")
    for column in columns.values():
        dtype = frame[column].dtype
        if dtype != object:
            raise InputError(f"column '{column}' holds {dtype}, not arrays: make the frame under "
                             "dask.config.set({'dataframe.convert-string': False}), or Dask turns arrays "
                             "into strings")
    named = dict(outputs) if isinstance(outputs, dict) else None
    picked, _ = _outputs(session, list(named) if named else outputs)
    named = named or {n: n for n in picked}
    axes = {n: (batch_axis[n] if isinstance(batch_axis, dict) else batch_axis) for n in columns}
    out_axes = _batch_axes(session, axes, output_axes, picked)
    options = dict(outputs=picked, single=False, feeds=feeds, batch_axes=axes, output_axes=out_axes,
                   batch_size=batch_size)
    meta = frame._meta.assign(**{named[n]: pd.Series([], dtype=object) for n in picked})
    return frame.map_partitions(_run_frame, _ref(portable), columns, named, options, meta=meta)


def _run_frame(part: Any, model: Portable, columns: dict[str, str], named: dict[str, str],
               options: dict[str, Any]) -> Any:
    import pandas as pd
    labels = list(part.index)
    items = [{name: part[column].iloc[k] for name, column in columns.items()} for k in range(len(part))]
    results = run_items(shared(model), items, where=lambda k: f"row {labels[k]!r}", **options)
    part = part.copy()
    for output, column in named.items():
        part[column] = pd.Series([r[output] for r in results], index=part.index, dtype=object)
    return part


# ---------------------------------------------------------------------------------------------
# streaming models: each recording in order within one task, its state fed back

def _state_pairs(session: Session, state: dict[str, str] | None) -> dict[str, str]:
    """State input -> the output that feeds it at the next call (default: every input `s` whose
    model has an output `s_out`, as the built-in streaming models name them)."""
    inputs, outputs = list(session.graph.inputs), list(session.graph.outputs)
    if state is None:
        return {n: n + "_out" for n in inputs if n + "_out" in outputs}
    bad = [f"{i} -> {o}" for i, o in state.items() if i not in inputs or o not in outputs]
    if bad:
        raise InputError(f"state pairs {bad} do not name an input and an output of the model "
                         f"(inputs {inputs}, outputs {outputs})")
    return dict(state)


def _initial_state(session: Session, pairs: dict[str, str], given: dict[str, Any] | None) -> dict[str, np.ndarray]:
    given = dict(given or {})
    state = {}
    for name in pairs:
        if name in given:
            state[name] = np.asarray(given.pop(name))
            continue
        t = session.graph.type_of(name)
        shape = getattr(t, "shape", None)
        if shape is None or not all(isinstance(d, int) for d in shape):
            raise InputError(f"state input '{name}' has no fixed shape ({shape and list(shape)}): give its "
                             f"starting value in initial_state=")
        state[name] = np.zeros(shape, t.dtype)
    if given:
        raise InputError(f"initial_state names {sorted(given)}, which are not state inputs {sorted(pairs)}")
    return state


def run_stream(session: Session, recording: np.ndarray, *, chunk: int, input: str, state: dict[str, str],
               initial_state: dict[str, np.ndarray], outputs: list[str], single: bool, feeds: dict[str, Any],
               context: int = 0, last: str = "pad", axis: int | None = None, return_state: bool = False,
               where: str = "the recording") -> Any:
    """One recording through a streaming model, chunk by chunk in order, each call's state outputs
    fed back as the next call's state inputs. Chunks are `chunk` steps of axis 0 of the recording,
    after `context` steps of the one before (zeros before the start), with leading axes of size 1
    added to the input's rank. The last, short chunk is padded with zeros ("pad"), dropped ("drop")
    or run short ("keep"). Each output is its per-chunk results stacked on a new axis 0, or
    concatenated along `axis`."""
    recording = np.asarray(recording)
    rank = len(session.graph.type_of(input).shape or ()) or recording.ndim + 1
    steps = len(recording)
    count = steps // chunk if last == "drop" else -(-steps // chunk)
    carried = dict(initial_state)
    per_chunk: dict[str, list[np.ndarray]] = {name: [] for name in outputs}
    wanted = list(dict.fromkeys(outputs + list(state.values())))
    for k in range(count):
        start, stop = k * chunk - context, (k + 1) * chunk
        piece = recording[max(start, 0):min(stop, steps)]
        lead = max(0, -start)
        tail = stop - steps if last == "pad" and stop > steps else 0
        if lead or tail:
            piece = np.concatenate([np.zeros((lead,) + recording.shape[1:], recording.dtype), piece,
                                    np.zeros((tail,) + recording.shape[1:], recording.dtype)])
        piece = np.ascontiguousarray(piece).reshape((1,) * (rank - piece.ndim) + piece.shape)
        try:
            got = _call(session, wanted, feeds, {input: piece, **carried})
        except RnnloopError as e:
            raise _fail(e, f"{where}, chunk {k} (steps {max(start, 0)} to {min(stop, steps)})") from e
        carried = {i: got[o] for i, o in state.items()}
        for name in outputs:
            per_chunk[name].append(got[name])
    joined = {}
    for name, parts in per_chunk.items():
        if not parts:
            t = session.graph.type_of(name)
            joined[name] = np.zeros((0,), getattr(t, "dtype", None) or np.float32)
        else:
            joined[name] = np.stack(parts) if axis is None else np.concatenate(parts, axis=axis)
    result = joined[outputs[0]] if single else joined
    return (result, carried) if return_state else result


def stream(model: Any, recordings: Any, *, chunk: int, input: str | None = None, state: dict[str, str] | None = None,
           initial_state: dict[str, Any] | None = None, feeds: dict[str, Any] | None = None,
           outputs: str | Sequence[str] | None = None, context: int = 0, last: str = "pad",
           axis: int | None = None, return_state: bool = False, partition_size: int | None = None,
           **load_options: Any) -> Any:
    """A streaming model (state carried from call to call) over recordings: a dask.bag of arrays,
    or a sequence (one recording per partition by default). Each recording runs in order within
    one task, see run_stream; recordings spread over the workers. `state` maps state inputs to the
    outputs that feed them (default: `s` <- `s_out`); they start at zeros or at `initial_state`.
    Returns a bag of per-recording results in order: an array per output (`outputs` a name, or
    one output besides the state), else a dict; with return_state, (result, final state) pairs."""
    if last not in ("pad", "drop", "keep"):
        raise RnnloopError(f"last must be 'pad', 'drop' or 'keep', got {last!r}")
    if chunk < 1 or context < 0:
        raise RnnloopError(f"chunk must be positive and context not negative, got chunk={chunk}, context={context}")
    portable, session = _model(model, load_options)
    feeds = dict(feeds or {})
    pairs = _state_pairs(session, state)
    input = input or _one_input(session, feeds, also=list(pairs))
    _inputs(session, [input, *pairs], feeds, "the recording and the state")
    picked, single = _outputs(session, outputs, exclude=list(pairs.values()))
    options = dict(chunk=chunk, input=input, state=pairs, initial_state=_initial_state(session, pairs, initial_state),
                   outputs=picked, single=single, feeds=feeds, context=context, last=last, axis=axis,
                   return_state=return_state)
    bag, offsets = _as_bag(recordings, partition_size, 1)
    return _per_partition(_stream_partition, bag, offsets, portable, options)


def _stream_partition(recordings: Any, model: Portable, *, where: tuple, options: dict[str, Any]) -> list[Any]:
    name = _partition_where(*where)
    session = shared(model)
    return [run_stream(session, r, where=name(k).replace("item", "recording"), **options)
            for k, r in enumerate(recordings)]
