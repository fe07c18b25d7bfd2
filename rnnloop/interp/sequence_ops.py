"""Interpreter functions for ONNX sequence and optional ops: sequences are lists, an empty optional is None."""

from __future__ import annotations

import numpy as np

from ..errors import OpError
from .args import as_axis, as_int, as_ints
from .registry import interprets


class RowSequence(list):
    """A sequence whose tensors are the rows of one array, as a fused loop that appends to a
    sequence returns it: a list of the row views that also keeps the array, so that joining the
    tensors again (ConcatFromSequence) is one copy. Ops never modify a sequence in place (they make
    new lists), so the rows stay what the list holds."""

    def __init__(self, rows: np.ndarray):
        super().__init__(rows)
        self.rows = rows


def _position(seq: list, position, end: int) -> int:
    """A position checked against [-len(seq), len(seq) - 1 + end], made non-negative."""
    n = len(seq)
    index = as_int(position, "position")
    if not -n <= index < n + end:
        raise OpError(f"position {index} is outside [{-n}, {n - 1 + end}] for a sequence of {n} tensors")
    return index + n if index < 0 else index


@interprets("SequenceEmpty")
def run_sequenceempty(*, dtype: np.dtype = np.dtype(np.float32)) -> list:
    """y = an empty sequence (of dtype elements)"""
    return []


@interprets("SequenceConstruct")
def run_sequenceconstruct(*inputs: np.ndarray) -> list:
    """y = a sequence of the inputs, in order"""
    if any(x.dtype != inputs[0].dtype for x in inputs):
        dtypes = sorted({str(x.dtype) for x in inputs})
        raise OpError(f"the tensors of a sequence must share one dtype, got {dtypes}")
    return list(inputs)


@interprets("SequenceInsert")
def run_sequenceinsert(input_sequence: list, tensor: np.ndarray, position: np.ndarray | None = None) -> list:
    """y = a new sequence with tensor inserted before position (default: at the end)"""
    result = list(input_sequence)
    if position is None:
        result.append(tensor)
    else:
        result.insert(_position(input_sequence, position, end=1), tensor)
    return result


@interprets("SequenceAt")
def run_sequenceat(input_sequence: list, position: np.ndarray) -> np.ndarray:
    """y = the tensor at position (negative counts from the back)"""
    return input_sequence[_position(input_sequence, position, end=0)]


@interprets("SequenceErase")
def run_sequenceerase(input_sequence: list, position: np.ndarray | None = None) -> list:
    """y = a new sequence without the tensor at position (default: the last)"""
    if position is None:
        if not input_sequence:
            raise OpError("cannot erase from an empty sequence")
        return input_sequence[:-1]
    index = _position(input_sequence, position, end=0)
    return input_sequence[:index] + input_sequence[index + 1:]


@interprets("SequenceLength")
def run_sequencelength(input_sequence: list) -> np.ndarray:
    """y = the number of tensors in the sequence, int64 scalar"""
    return np.asarray(len(input_sequence), dtype=np.int64)


@interprets("ConcatFromSequence")
def run_concatfromsequence(input_sequence: list, *, axis: int, new_axis: int = 0) -> np.ndarray:
    """y = the tensors joined along axis (stacked on a new axis when new_axis=1)"""
    if not input_sequence:
        raise OpError("cannot concatenate an empty sequence: its result has no known shape")
    first = input_sequence[0]
    axis = as_axis(axis, first.ndim + (1 if new_axis else 0))
    if isinstance(input_sequence, RowSequence):
        stacked = np.array(np.moveaxis(input_sequence.rows, 0, axis))  # a C-ordered copy
        if new_axis:
            return stacked
        shape = stacked.shape  # concatenating merges the stacking axis into the next one
        return stacked.reshape(shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:])
    if all(x.dtype == first.dtype for x in input_sequence):  # NumPy would promote mixed dtypes
        try:
            return (np.stack if new_axis else np.concatenate)(input_sequence, axis=axis)
        except ValueError:
            pass
    # Only to name the culprit: the first tensor that does not match the first one.
    def fixed(shape: tuple) -> tuple:  # the dimensions that must agree
        return shape if new_axis else shape[:axis] + shape[axis + 1:]

    x = next(x for x in input_sequence
             if x.dtype != first.dtype or x.ndim != first.ndim or fixed(x.shape) != fixed(first.shape))
    raise OpError(f"tensors {first.dtype}{list(first.shape)} and {x.dtype}{list(x.shape)} cannot be "
                  f"{'stacked' if new_axis else 'concatenated'} along axis {axis}")


@interprets("SplitToSequence")
def run_splittosequence(input: np.ndarray, split: np.ndarray | None = None, *, axis: int = 0,
                        keepdims: int = 1) -> list:
    """y = parts of input along axis: sized by split (scalar: equal parts, last smaller), else of size 1"""
    axis = as_axis(axis, input.ndim)
    dim = input.shape[axis]
    if split is None:
        parts = np.split(input, dim, axis=axis) if dim else []
        return parts if keepdims else [np.squeeze(p, axis=axis) for p in parts]
    if np.ndim(split) == 0:
        size = as_int(split, "split")
        if size <= 0:
            raise OpError(f"split must be positive, got {size}")
        bounds = list(range(size, dim, size))
    else:
        sizes = as_ints(split, "split")
        if any(s <= 0 for s in sizes) or sum(sizes) != dim:
            raise OpError(f"split {sizes} must be positive and sum to the axis size {dim}")
        bounds = list(np.cumsum(sizes)[:-1])
    return np.split(input, bounds, axis=axis) if dim else []


@interprets("Optional")
def run_optional(input=None, *, type=None):
    """y = an optional holding input, or an empty optional (None) when input is absent"""
    return input


@interprets("OptionalHasElement")
def run_optionalhaselement(input=None) -> np.ndarray:
    """y = whether the optional holds a value, bool scalar"""
    return np.asarray(input is not None)


@interprets("OptionalGetElement")
def run_optionalgetelement(input):
    """y = the optional's value (a tensor or sequence passes through)"""
    if input is None:
        raise OpError("the optional is empty; check OptionalHasElement before OptionalGetElement")
    return input
