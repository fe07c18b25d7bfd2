"""Small compiled helpers that generated kernels call for index arithmetic."""

from __future__ import annotations

from numba import njit


@njit(cache=True, nogil=True, error_model="numpy")
def slice_range(start, end, step, n):
    """ONNX Slice on one axis of size n: the first index and the element count (step != 0)."""
    start, end = int(start), int(end)
    if start < 0:
        start += n
    if end < 0:
        end += n
    if step > 0:
        start = min(max(start, 0), n)
        end = min(max(end, 0), n)
        return start, max(0, (end - start + step - 1) // step)
    start = min(max(start, 0), n - 1)
    end = min(max(end, -1), n - 1)
    return start, max(0, (start - end - step - 1) // -step)
