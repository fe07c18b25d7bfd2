"""Interpreter functions for ONNX tensor ops: casts, shapes, indexing, padding and friends."""

from __future__ import annotations

import math

import numpy as np

from ..errors import OpError
from .args import as_axes, as_axis, as_int, as_ints, as_scalar
from .registry import interprets

# The float8 types (ml_dtypes, so known by name) that Cast clamps to +-max when saturate=1.
_FLOAT8_MAX = {"float8_e4m3fn": 448.0, "float8_e4m3fnuz": 240.0,
               "float8_e5m2": 57344.0, "float8_e5m2fnuz": 57344.0}
_REDUCTIONS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _indices(indices: np.ndarray, size: int, what: str) -> np.ndarray:
    """Indices checked against [-size, size-1], negative ones counted from the back."""
    indices = np.asarray(indices, dtype=np.int64)
    if indices.ndim == 0 and -size <= indices < size:  # the common case, without the array checks
        return indices + size if indices < 0 else indices
    if indices.size and (indices.min() < -size or indices.max() >= size):
        bad = indices[(indices < -size) | (indices >= size)].reshape(-1)[0]
        raise OpError(f"{what} {bad} is outside [{-size}, {size - 1}] for an axis of size {size}")
    return np.where(indices < 0, indices + size, indices)


def _check_shape(shape: list[int], what: str) -> tuple[int, ...]:
    if any(d < 0 for d in shape):
        raise OpError(f"{what} {shape} has a negative dimension; dimensions must be >= 0")
    return tuple(shape)


# ---------------------------------------------------------------------------------------------
# identity and casts


@interprets("Identity")
def run_identity(x):
    """y = x (tensors, sequences and optionals alike)"""
    return x


@interprets("Cast")
def run_cast(x: np.ndarray, *, to: np.dtype, saturate: int = 1, round_mode: str = "up") -> np.ndarray:
    """y = x converted to dtype `to` (strings parse/print numbers; float8 saturates unless saturate=0)"""
    to = np.dtype(to)
    if x.dtype == to:
        return x
    if x.dtype.kind in "OSU":
        return _cast_from_strings(x, to)
    if to.kind in "OSU":
        return _cast_to_strings(x)
    with np.errstate(all="ignore"):  # out-of-range values convert as the spec says, quietly
        if to.name == "float8_e8m0fnu":
            return _to_e8m0(x, saturate, round_mode).view(to)
        if to.name in _FLOAT8_MAX and saturate:
            wide = x.astype(np.float64 if x.dtype.itemsize > 4 or x.dtype.kind in "iu" else np.float32)
            limit = _FLOAT8_MAX[to.name]
            return np.clip(wide, -limit, limit).astype(to)
        return x.astype(to)


@interprets("CastLike")
def run_castlike(x: np.ndarray, target_type: np.ndarray, *, saturate: int = 1,
                 round_mode: str = "up") -> np.ndarray:
    """y = x converted to the dtype of target_type"""
    return run_cast(x, to=target_type.dtype, saturate=saturate, round_mode=round_mode)


def _cast_from_strings(x: np.ndarray, to: np.dtype) -> np.ndarray:
    # float() accepts "1e-5", "INF", "+inf", "NaN" in any case, as the spec's literals require.
    text = x.astype(object)
    if to.kind in "OSU":
        return text
    try:
        if to.kind in "iu":
            # Integers parse exactly (beyond float64's precision); "100.5" truncates to 100.
            values = [_parse_int(t) for t in text.reshape(-1)]
            wide = np.array(values, dtype=np.int64 if to.kind == "i" else np.uint64)
            return wide.reshape(x.shape).astype(to)
        if to.kind == "b":
            return text.astype(np.float64).astype(bool)
        return text.astype(to if to.kind == "f" else np.float64).astype(to)
    except (ValueError, TypeError, OverflowError) as e:
        raise OpError(f"cannot cast a string tensor to {to}: {e}; strings must spell numbers") from None


def _parse_int(text) -> int:
    try:
        return int(text)
    except ValueError:
        return int(float(text))


def _cast_to_strings(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "V":  # ml_dtypes floats do not print through numpy's str conversion
        x = x.astype(np.float32)
    if x.dtype == bool:  # "1"/"0", as booleans cast to numbers, so that they read back
        x = x.astype(np.uint8)
    text = x.astype(np.str_).astype(object)
    if x.dtype.kind == "f":
        # Print special values as the literals the spec reads back.
        text[np.isnan(x)] = "NaN"
        text[np.isposinf(x)] = "INF"
        text[np.isneginf(x)] = "-INF"
    return text


def _to_e8m0(x: np.ndarray, saturate: int, round_mode: str) -> np.ndarray:
    """float8e8m0 bits (a biased power-of-two exponent, 0xFF is NaN) per the spec's rounding modes."""
    x32 = np.asarray(x, dtype=np.float32)
    bits = x32.view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    fraction = bits & 0x7FFFFF
    if round_mode == "up":
        bump = fraction > 0
    elif round_mode == "nearest":
        bump = fraction >= 0x400000  # halfway between two powers of two rounds up
    elif round_mode == "down":
        bump = np.zeros(x32.shape, bool)
    else:
        raise OpError(f"round_mode '{round_mode}' is not one of 'up', 'down', 'nearest'")
    special = exponent == 0xFF
    if saturate:
        exponent = np.where(special & ~np.isnan(x32), 0xFE, exponent + (bump & (exponent < 0xFE)))
    else:
        exponent = np.where(special | (x32 == 0), 0xFF, exponent + bump)
    return exponent.astype(np.uint8)


# ---------------------------------------------------------------------------------------------
# shapes


@interprets("ConstantOfShape")
def run_constantofshape(shape: np.ndarray, *, value: np.ndarray | None = None) -> np.ndarray:
    """y = a tensor of the given shape filled with value (default float32 0)"""
    if value is None:
        value = np.zeros(1, np.float32)
    value = np.asarray(value)
    if value.size != 1:
        raise OpError(f"value must hold exactly one element, got shape {value.shape}")
    return np.full(_check_shape(as_ints(shape, "shape"), "shape"), value.reshape(()), dtype=value.dtype)


@interprets("Shape")
def run_shape(data: np.ndarray, *, start: int = 0, end: int | None = None) -> np.ndarray:
    """y = data.shape[start:end] as int64 (start and end clamped to [0, rank])"""
    # Python slicing clamps exactly as the spec does, negative bounds included.
    return np.array(np.shape(data)[start:end], dtype=np.int64)


@interprets("Size")
def run_size(data: np.ndarray) -> np.ndarray:
    """y = the element count of data, int64"""
    return np.asarray(np.size(data), dtype=np.int64)


@interprets("Reshape")
def run_reshape(data: np.ndarray, shape: np.ndarray, *, allowzero: int = 0) -> np.ndarray:
    """y = data with a new shape; 0 copies the input dimension (unless allowzero), -1 is inferred"""
    dims = as_ints(shape, "shape")
    if dims.count(-1) > 1:
        raise OpError(f"shape {dims} has more than one -1; at most one dimension can be inferred")
    if any(d < -1 for d in dims):
        raise OpError(f"shape {dims} has a dimension below -1")
    if allowzero and 0 in dims and -1 in dims:
        raise OpError(f"shape {dims} has both 0 and -1, which allowzero=1 makes ambiguous")
    if not allowzero:
        if any(d == 0 and i >= data.ndim for i, d in enumerate(dims)):
            raise OpError(f"shape {dims} copies (0) a dimension the input of shape {data.shape} does not have")
        dims = [data.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or data.size % known:
            raise OpError(f"cannot infer the -1 in shape {dims} for {data.size} elements")
        dims[dims.index(-1)] = data.size // known
    if math.prod(dims) != data.size:
        raise OpError(f"cannot reshape {data.size} elements (shape {data.shape}) to {dims}")
    return data.reshape(dims)


@interprets("Flatten")
def run_flatten(input: np.ndarray, *, axis: int = 1) -> np.ndarray:
    """y = input as 2-D: (prod(shape[:axis]), prod(shape[axis:]))"""
    rank = input.ndim
    if not -rank <= axis <= rank:
        raise OpError(f"axis {axis} is outside [{-rank}, {rank}] for a tensor of rank {rank}")
    axis = axis + rank if axis < 0 else axis
    return input.reshape(math.prod(input.shape[:axis]), math.prod(input.shape[axis:]))


@interprets("Squeeze")
def run_squeeze(data: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
    """y = data without the listed size-1 axes (all size-1 axes when axes is omitted)"""
    if axes is None:
        return data.reshape([d for d in data.shape if d != 1])
    axes = as_axes(as_ints(axes, "axes"), data.ndim)
    wide = [a for a in axes if data.shape[a] != 1]
    if wide:
        raise OpError(f"cannot squeeze axis {wide[0]} of size {data.shape[wide[0]]} (shape {data.shape}); "
                      "only size-1 axes can be removed")
    return data.reshape([d for i, d in enumerate(data.shape) if i not in axes])


@interprets("Unsqueeze")
def run_unsqueeze(data: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """y = data with size-1 axes inserted at the listed positions of the output"""
    axes = as_ints(axes, "axes")
    shape = list(data.shape)
    for axis in sorted(as_axes(axes, data.ndim + len(axes))):  # ascending, so each lands where it belongs
        shape.insert(axis, 1)
    return data.reshape(shape)


@interprets("Transpose")
def run_transpose(data: np.ndarray, *, perm: list[int] | None = None) -> np.ndarray:
    """y = data with its axes permuted (reversed when perm is omitted)"""
    if perm is None:
        return data.transpose()
    if sorted(int(p) for p in perm) != list(range(data.ndim)):
        raise OpError(f"perm {list(perm)} is not a permutation of the {data.ndim} axes of the input")
    return data.transpose(perm)


@interprets("Expand")
def run_expand(input: np.ndarray, shape: np.ndarray) -> np.ndarray:
    """y = input broadcast bidirectionally with shape"""
    dims = _check_shape(as_ints(shape, "shape"), "shape")
    try:
        out = np.broadcast_shapes(input.shape, dims)
    except ValueError:
        raise OpError(f"cannot broadcast an input of shape {input.shape} with shape {list(dims)}") from None
    return np.array(np.broadcast_to(input, out))  # a real array: a zero-stride view is a trap for writers


@interprets("Tile")
def run_tile(input: np.ndarray, repeats: np.ndarray) -> np.ndarray:
    """y = input repeated repeats[i] times along axis i"""
    reps = as_ints(repeats, "repeats")
    if len(reps) != input.ndim:
        raise OpError(f"repeats has {len(reps)} values for an input of rank {input.ndim}; give one per axis")
    return np.tile(input, _check_shape(reps, "repeats"))


@interprets("Concat")
def run_concat(*inputs: np.ndarray, axis: int) -> np.ndarray:
    """y = the inputs joined along axis"""
    if not inputs:
        raise OpError("Concat needs at least one input")
    rank = inputs[0].ndim
    axis = as_axis(axis, rank)
    for x in inputs:
        if x.ndim != rank or x.dtype != inputs[0].dtype:
            raise OpError(f"inputs must share rank and dtype: got {inputs[0].dtype}{list(inputs[0].shape)} "
                          f"and {x.dtype}{list(x.shape)}")
        if x.shape[:axis] + x.shape[axis + 1:] != inputs[0].shape[:axis] + inputs[0].shape[axis + 1:]:
            raise OpError(f"shapes {list(inputs[0].shape)} and {list(x.shape)} differ outside axis {axis}")
    return np.concatenate(inputs, axis=axis)


# ---------------------------------------------------------------------------------------------
# slicing and splitting


@interprets("Split")
def run_split(input: np.ndarray, split: np.ndarray | None = None, *, axis: int = 0,
              num_outputs: int | None = None) -> tuple[np.ndarray, ...]:
    """y_i = consecutive parts of input along axis, sized by split or in num_outputs parts (last may be smaller)"""
    axis = as_axis(axis, input.ndim)
    dim = input.shape[axis]
    if split is not None:
        if num_outputs is not None:
            raise OpError("give either the split input or num_outputs, not both")
        sizes = as_ints(split, "split")
        if any(s < 0 for s in sizes) or sum(sizes) != dim:
            raise OpError(f"split {sizes} must be non-negative and sum to the axis size {dim}")
    elif num_outputs is None or num_outputs < 1:
        raise OpError(f"num_outputs must be at least 1 when split is omitted, got {num_outputs}")
    else:
        chunk = -(-dim // num_outputs)
        last = dim - chunk * (num_outputs - 1)
        if last < 0:
            raise OpError(f"an axis of size {dim} cannot be split into {num_outputs} parts of {chunk} "
                          "with a smaller last part")
        sizes = [chunk] * (num_outputs - 1) + [last]
    return tuple(np.split(input, np.cumsum(sizes)[:-1], axis=axis))


@interprets("Slice")
def run_slice(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, axes: np.ndarray | None = None,
              steps: np.ndarray | None = None) -> np.ndarray:
    """y = data[starts:ends:steps] on the given axes, bounds clamped as the spec says"""
    starts, ends = as_ints(starts, "starts"), as_ints(ends, "ends")
    axes = list(range(len(starts))) if axes is None else as_ints(axes, "axes")
    steps = [1] * len(starts) if steps is None else as_ints(steps, "steps")
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise OpError(f"starts, ends, axes and steps must have one value each per sliced axis, got "
                      f"{len(starts)}, {len(ends)}, {len(axes)}, {len(steps)}")
    index = [slice(None)] * data.ndim
    for axis, start, end, step in zip(as_axes(axes, data.ndim), starts, ends, steps):
        if step == 0:
            raise OpError(f"steps must not be 0 (axis {axis})")
        dim = data.shape[axis]
        start, end = start + dim if start < 0 else start, end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
        # end = -1 with a negative step means "past index 0", which a Python slice spells None.
        index[axis] = slice(start, None if end < 0 else end, step)
    return data[tuple(index)]


# ---------------------------------------------------------------------------------------------
# gather and scatter


@interprets("Gather")
def run_gather(data: np.ndarray, indices: np.ndarray, *, axis: int = 0) -> np.ndarray:
    """y = entries of data along axis at indices (negative indices count from the back)"""
    axis = as_axis(axis, data.ndim)
    return np.take(data, _indices(indices, data.shape[axis], "index"), axis=axis)


@interprets("GatherElements")
def run_gatherelements(data: np.ndarray, indices: np.ndarray, *, axis: int = 0) -> np.ndarray:
    """y[i][j][k] = data[indices[i][j][k]][j][k] (for axis 0; likewise for other axes)"""
    axis = as_axis(axis, data.ndim)
    if indices.ndim != data.ndim or any(i > d for a, (i, d) in enumerate(zip(indices.shape, data.shape))
                                        if a != axis):
        raise OpError(f"indices of shape {indices.shape} do not fit data of shape {data.shape}: same rank, "
                      "and no larger than data outside axis")
    window = tuple(slice(None) if a == axis else slice(0, n) for a, n in enumerate(indices.shape))
    return np.take_along_axis(data[window], _indices(indices, data.shape[axis], "index"), axis=axis)


@interprets("GatherND")
def run_gathernd(data: np.ndarray, indices: np.ndarray, *, batch_dims: int = 0) -> np.ndarray:
    """y = slices of data at the index tuples in the last axis of indices, per batch"""
    b, k = batch_dims, indices.shape[-1] if indices.ndim else -1
    if not (indices.ndim >= 1 and data.ndim >= 1 and 0 <= b < min(indices.ndim, data.ndim)
            and data.shape[:b] == indices.shape[:b] and 1 <= k <= data.ndim - b):
        raise OpError(f"indices of shape {indices.shape} with batch_dims={b} do not fit data of shape "
                      f"{data.shape}: the batch dimensions must match and indices.shape[-1] be in [1, rank-b]")
    batches = math.prod(data.shape[:b])
    flat = indices.reshape(batches, math.prod(indices.shape[b:-1]), k)
    coords = [_indices(flat[..., j], data.shape[b + j], f"index (axis {b + j})") for j in range(k)]
    picked = data.reshape((batches,) + data.shape[b:])[(np.arange(batches)[:, None], *coords)]
    return picked.reshape(indices.shape[:-1] + data.shape[b + k:])


@interprets("ScatterND")
def run_scatternd(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                  reduction: str = "none") -> np.ndarray:
    """y = a copy of data with the slices at the index tuples of indices replaced (or reduced) by updates"""
    k = indices.shape[-1] if indices.ndim else -1
    if not (indices.ndim >= 1 and 0 <= k <= data.ndim
            and updates.shape == indices.shape[:-1] + data.shape[k:]):
        raise OpError(f"indices of shape {indices.shape} and updates of shape {updates.shape} do not fit data "
                      f"of shape {data.shape}: updates must have shape indices.shape[:-1] + data.shape[k:]")
    count = math.prod(indices.shape[:-1])
    flat, slices = indices.reshape(count, k), updates.reshape((count,) + data.shape[k:])
    if k == 0:  # every update covers the whole tensor: scatter into a leading axis of size 1
        return _scatter(data[None], (np.zeros(count, np.int64),), slices, reduction)[0]
    coords = tuple(_indices(flat[:, j], data.shape[j], f"index (axis {j})") for j in range(k))
    return _scatter(data, coords, slices, reduction)


@interprets("ScatterElements")
def run_scatterelements(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *, axis: int = 0,
                        reduction: str = "none") -> np.ndarray:
    """y = a copy of data with y[indices[i][j]][j] = updates[i][j] (for axis 0), or reduced into it"""
    axis = as_axis(axis, data.ndim)
    if (indices.shape != updates.shape or indices.ndim != data.ndim
            or any(i > d for a, (i, d) in enumerate(zip(indices.shape, data.shape)) if a != axis)):
        raise OpError(f"indices {indices.shape} and updates {updates.shape} must have one shape, of the rank "
                      f"of data {data.shape} and no larger than it outside axis")
    coords = list(np.indices(indices.shape, sparse=True))
    coords[axis] = _indices(indices, data.shape[axis], "index")
    return _scatter(data, tuple(coords), updates, reduction)


def _scatter(data: np.ndarray, coords: tuple, updates: np.ndarray, reduction: str) -> np.ndarray:
    out = data.copy()
    if reduction == "none":
        out[coords] = updates
    elif reduction in _REDUCTIONS:
        _REDUCTIONS[reduction].at(out, coords, updates)  # .at applies every duplicate index in turn
    else:
        raise OpError(f"reduction '{reduction}' is not one of none, add, mul, max, min")
    return out


# ---------------------------------------------------------------------------------------------
# generators and selections


@interprets("Range")
def run_range(start: np.ndarray, limit: np.ndarray, delta: np.ndarray, *, stash_type: int = 1) -> np.ndarray:
    """y[i] = start + i * delta for i < max(ceil((limit - start) / delta), 0)"""
    start, limit, delta = (as_scalar(v, name) for v, name in ((start, "start"), (limit, "limit"), (delta, "delta")))
    dtype = start.dtype
    if dtype.kind in "iu":
        first, stop, step = int(start), int(limit), int(delta)
        if step == 0:
            raise OpError("delta must not be 0")
        count = max(-((first - stop) // step), 0)  # exact ceiling division on Python ints
        return (first + np.arange(count, dtype=np.int64) * step).astype(dtype)
    # float16 and bfloat16 compute in float32 unless stash_type names another type.
    wide = dtype.name in ("float16", "bfloat16") and stash_type == 1
    work = np.dtype(np.float32) if wide else dtype
    first, stop, step = (v.astype(work) for v in (start, limit, delta))
    span = (float(stop) - float(first)) / float(step) if float(step) else math.nan
    if not math.isfinite(span):
        raise OpError(f"Range({float(first)}, {float(stop)}, {float(step)}) has no finite length")
    count = max(math.ceil(span), 0)
    return (first + np.arange(count, dtype=work) * step).astype(dtype)


@interprets("Where")
def run_where(condition: np.ndarray, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """y = X where condition else Y (broadcast)"""
    return np.asarray(np.where(condition, X, Y))


@interprets("Pad")
def run_pad(data: np.ndarray, pads: np.ndarray, constant_value: np.ndarray | None = None,
            axes: np.ndarray | None = None, *, mode: str = "constant") -> np.ndarray:
    """y = data padded on each axis by pads (begin values, then end values); negative pads crop"""
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise OpError(f"mode '{mode}' is not one of constant, reflect, edge, wrap")
    axes = list(range(data.ndim)) if axes is None else as_axes(as_ints(axes, "axes"), data.ndim)
    amounts = as_ints(pads, "pads")
    if len(amounts) != 2 * len(axes):
        raise OpError(f"pads has {len(amounts)} values; it needs two (begin, end) for each of {len(axes)} axes")
    width = [(0, 0)] * data.ndim
    crop = [slice(None)] * data.ndim
    for i, axis in enumerate(axes):
        begin, end = amounts[i], amounts[i + len(axes)]
        if -min(begin, 0) - min(end, 0) > data.shape[axis]:
            raise OpError(f"pads {begin}, {end} remove more than the {data.shape[axis]} entries of axis {axis}")
        crop[axis] = slice(-min(begin, 0), data.shape[axis] + min(end, 0))
        width[axis] = (max(begin, 0), max(end, 0))
    data = data[tuple(crop)]
    if not any(begin or end for begin, end in width):
        return data
    if mode == "constant":
        if constant_value is None or np.size(constant_value) == 0:
            value = "" if data.dtype == object else np.zeros((), data.dtype)
        else:
            value = np.asarray(constant_value).reshape(-1)[0]
        return np.pad(data, width, mode="constant", constant_values=value)
    for axis, (begin, end) in enumerate(width):
        if (begin or end) and data.shape[axis] == 0:
            raise OpError(f"cannot pad the empty axis {axis} in mode '{mode}'")
    return np.pad(data, width, mode=mode)


@interprets("CumSum")
def run_cumsum(x: np.ndarray, axis: np.ndarray, *, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
    """y = cumulative sum of x along axis (optionally exclusive of the current entry, or from the end)"""
    axis = as_axis(as_int(axis, "axis"), x.ndim)
    if reverse:
        x = np.flip(x, axis)
    total = np.cumsum(x, axis=axis, dtype=x.dtype)  # numpy would widen small integers otherwise
    if exclusive:
        shifted = np.zeros_like(total)
        head = (slice(None),) * axis
        shifted[head + (slice(1, None),)] = total[head + (slice(None, -1),)]
        total = shifted
    return np.flip(total, axis) if reverse else total


@interprets("TopK")
def run_topk(X: np.ndarray, K: np.ndarray, *, axis: int = -1, largest: int = 1,
             sorted: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(values, int64 indices) of the K largest (or smallest) entries along axis; ties favour the lower index"""
    axis = as_axis(axis, X.ndim)
    k, n = as_int(K, "K"), X.shape[axis]
    if not 0 <= k <= n:
        raise OpError(f"K={k} is outside [0, {n}], the size of axis {axis}")
    if largest:
        # A stable ascending sort of the reversed axis, read backwards, is descending with ties in index order.
        order = np.argsort(np.flip(X, axis), axis=axis, kind="stable")
        order = (n - 1) - np.flip(order, axis)
    else:
        order = np.argsort(X, axis=axis, kind="stable")
    indices = np.take(order, np.arange(k), axis=axis).astype(np.int64)
    return np.take_along_axis(X, indices, axis=axis), indices


@interprets("NonZero")
def run_nonzero(X: np.ndarray) -> np.ndarray:
    """y = int64 indices of the non-zero entries of X, shape (rank, count); (0, count) for a scalar"""
    if X.ndim == 0:
        return np.zeros((0, int(bool(X))), dtype=np.int64)
    return np.array(np.nonzero(X), dtype=np.int64).reshape(X.ndim, -1)


@interprets("Trilu")
def run_trilu(input: np.ndarray, k: np.ndarray | None = None, *, upper: int = 1) -> np.ndarray:
    """y = the upper (or lower) triangle of the last two axes, from the k-th diagonal on, zeros elsewhere"""
    if input.ndim < 2:
        raise OpError(f"Trilu needs a tensor of rank >= 2, got shape {input.shape}")
    offset = 0 if k is None else as_int(k, "k")
    limit = sum(input.shape[-2:])
    offset = min(max(offset, -limit), limit)  # beyond the matrix every offset acts alike
    return np.triu(input, offset) if upper else np.tril(input, offset)


@interprets("OneHot")
def run_onehot(indices: np.ndarray, depth: np.ndarray, values: np.ndarray, *, axis: int = -1) -> np.ndarray:
    """y = values[1] where the new axis position equals indices (mod depth), values[0] elsewhere"""
    if np.size(depth) != 1 or np.size(values) != 2:
        raise OpError(f"depth must hold one value and values two (off, on), got {np.shape(depth)} and "
                      f"{np.shape(values)}")
    size = int(as_scalar(depth, "depth"))
    if size < 1:
        raise OpError(f"depth must be positive, got {size}")
    rank = indices.ndim + 1
    if not -rank <= axis < rank:
        raise OpError(f"axis {axis} is outside [{-rank}, {rank - 1}] for an output of rank {rank}")
    axis = axis + rank if axis < 0 else axis
    where = np.asarray(indices).astype(np.int64)
    where = np.where(where < 0, where + size, where)  # out-of-range indices match no position
    positions = np.arange(size).reshape([size if a == axis else 1 for a in range(rank)])
    off, on = np.asarray(values).reshape(2)
    return np.where(np.expand_dims(where, axis) == positions, on, off)


@interprets("Dropout")
def run_dropout(data: np.ndarray, ratio: np.ndarray | None = None, training_mode: np.ndarray | None = None, *,
                seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(data, an all-True mask): inference-mode dropout keeps every element"""
    if training_mode is not None and bool(np.asarray(training_mode).reshape(-1)[0]):
        raise OpError("training-mode dropout is not supported; run the model with training_mode false")
    return data, np.ones(data.shape, dtype=bool)
