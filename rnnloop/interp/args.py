"""Checked access to op arguments: axes, integer lists and scalars, with OpErrors that say what is wrong."""

from __future__ import annotations

import numpy as np

from ..errors import OpError


def as_axis(axis: int, rank: int, what: str = "axis") -> int:
    """`axis` (negative counts from the back) checked against [-rank, rank-1], made non-negative."""
    axis = int(axis)
    if not -rank <= axis < rank:
        raise OpError(f"{what} {axis} is outside [{-rank}, {rank - 1}] for a tensor of rank {rank}")
    return axis + rank if axis < 0 else axis


def as_axes(axes, rank: int, what: str = "axes") -> list[int]:
    """Several axes, each checked and made non-negative; repeats are an error."""
    result = [as_axis(a, rank, what) for a in axes]
    if len(set(result)) != len(result):
        raise OpError(f"{what} {list(map(int, axes))} name an axis twice")
    return result


def as_ints(x, what: str) -> list[int]:
    """A 1-D integer tensor (a shape, pads, axes, ...) as Python ints; a scalar counts as one entry,
    as onnxruntime accepts and the expanded node tests use."""
    x = np.asarray(x)
    if x.ndim == 0:
        x = x.reshape(1)
    if x.ndim != 1 or not (x.dtype.kind in "iu" or x.size == 0):
        raise OpError(f"{what} must be a 1-D integer tensor, got {x.dtype} of shape {x.shape}")
    return [int(v) for v in x]


def as_scalar(x, what: str) -> np.ndarray:
    """A scalar input (0-d or one element) as a 0-d array."""
    x = np.asarray(x)
    if x.size != 1:
        raise OpError(f"{what} must hold exactly one value, got shape {x.shape}")
    return x.reshape(())


def as_int(x, what: str) -> int:
    """A scalar input (0-d or one element) as a Python int."""
    return int(as_scalar(x, what))
