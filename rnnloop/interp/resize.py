"""Interpreter function for Resize (opset 19's form, which every older form is rewritten to).

Resizing is separable: each resized axis in turn maps its output positions to source coordinates
(coordinate_transformation_mode), and each output position reads a few source positions with
weights (`axis_table`: one-hot for nearest, the linear or cubic kernel, stretched when antialias
downsamples). rnnloop/codegen/resize_rt.py computes the same tables in compiled code.

Semantics the ONNX text leaves open, as the ONNX reference implementation and its node tests decide:
- `length_resized` in the coordinate formulas is, for `sizes`, the size; for `scales`, the fractional
  output length scale * length_original (the spec defines scale = length_resized / length_original);
  onnxruntime uses the integer length in align_corners, which differs when scale * length is not
  an integer.
- Coordinates are computed in float32, as onnxruntime and OpenVINO compute them (in float64, the
  reference's, 8 / float32(1.6) is 4.99999993: the nearest pixel at 5 becomes 4).
- The output length from `scales` is floor(length * scale) with the product rounded to float32, as
  onnxruntime and OpenVINO compute it (PyTorch's export of scale_factor=0.7 on 10 means 7; exactly,
  10 * float32(0.7) is 6.99999988; the reference computes in float64). Also for tf_crop_and_resize:
  the spec's text multiplies by roi_end - roi_start; neither onnxruntime nor the reference does.
- pytorch_half_pixel maps a resized length <= 1 to coordinate 0, as the spec's text says (the
  reference uses -0.5, which differs only in cubic mode).

Two values beyond opset 19, for the forms rewritten into it: nearest_mode "simple" (Resize-10 and
OpenVINO: ceil when the axis shrinks, floor otherwise) and coordinate_transformation_mode
"tf_half_pixel_for_nn" (Resize-11: x_original = (x_resized + 0.5) / scale).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import OpError
from .args import as_axes, as_ints
from .registry import interprets

MODES = ("nearest", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize", "tf_half_pixel_for_nn")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")
ASPECT_POLICIES = ("stretch", "not_larger", "not_smaller")


def check_attributes(mode: str, coordinate_transformation_mode: str, nearest_mode: str,
                     keep_aspect_ratio_policy: str, antialias: int, exclude_outside: int) -> str | None:
    """What is wrong with Resize's attribute values (the first problem), or None."""
    for name, value, allowed in (("mode", mode, MODES),
                                 ("coordinate_transformation_mode", coordinate_transformation_mode, COORDINATE_MODES),
                                 ("nearest_mode", nearest_mode, NEAREST_MODES),
                                 ("keep_aspect_ratio_policy", keep_aspect_ratio_policy, ASPECT_POLICIES)):
        if value not in allowed:
            return f"{name} '{value}' is not one of {', '.join(allowed)}"
    if antialias not in (0, 1) or exclude_outside not in (0, 1):
        return f"antialias ({antialias}) and exclude_outside ({exclude_outside}) must be 0 or 1"
    return None


def source_coordinates(y: np.ndarray, n_in: int, n_out: int, scale: float, length: float, ctm: str,
                       roi: tuple[float, float]) -> np.ndarray:
    """x_original of the output positions y of one axis, computed in float32 (as onnxruntime and
    OpenVINO compute it), returned as float64. `length` is length_resized (see the module docstring)."""
    f = np.float32
    y, scale, n_in, n_out, length = y.astype(f), f(scale), f(n_in), f(n_out), f(length)
    one, half = f(1), f(0.5)
    if ctm == "half_pixel":
        x = (y + half) / scale - half
    elif ctm == "half_pixel_symmetric":
        offset = n_in / f(2) * (one - n_out / length)
        x = offset + (y + half) / scale - half
    elif ctm == "pytorch_half_pixel":
        x = (y + half) / scale - half if length > one else np.zeros_like(y)
    elif ctm == "align_corners":
        x = y * (n_in - one) / (length - one) if length != one else np.zeros_like(y)
    elif ctm == "asymmetric":
        x = y / scale
    elif ctm == "tf_half_pixel_for_nn":
        x = (y + half) / scale
    else:
        start, end = f(roi[0]), f(roi[1])  # tf_crop_and_resize
        if length > one:
            x = start * (n_in - one) + y * (end - start) * (n_in - one) / (length - one)
        else:
            x = np.full_like(y, half * (start + end) * (n_in - one))
    return x.astype(np.float64)


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def axis_table(n_in: int, n_out: int, scale: float, length: float, *, mode: str, ctm: str, nearest_mode: str,
               cubic_coeff_a: float, exclude_outside: int, antialias: int,
               roi: tuple[float, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For one resized axis: (indices, weights, extrapolated). Output position i is the sum over k of
    weights[i, k] * source[indices[i, k]] (indices clamped into [0, n_in)), or the extrapolation
    value where extrapolated[i] (tf_crop_and_resize only)."""
    y = np.arange(n_out, dtype=np.float64)
    x = source_coordinates(y, n_in, n_out, scale, length, ctm, roi)
    outside = (x < 0) | (x > n_in - 1) if ctm == "tf_crop_and_resize" else np.zeros(n_out, bool)
    base = np.floor(x)
    integral = x == base
    if mode == "nearest":
        ratio = x - base
        up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": np.zeros(n_out, bool),
              "ceil": ratio > 0, "simple": ratio > 0 if scale < 1 else np.zeros(n_out, bool)}[nearest_mode]
        index = np.clip(base + up, 0, n_in - 1).astype(np.int64)
        return index[:, None], np.ones((n_out, 1)), outside
    # The n taps nearest to x (ties to the lower ones), each weighted by the kernel at its distance.
    stretch = min(scale, 1.0) if antialias else 1.0
    half = 1 if mode == "linear" else 2  # the kernel's support: (-half, half)
    taps = 2 * half if not antialias else 2 - 2 * (math.floor(-half / stretch) + 1)
    first = np.where(integral, x - taps // 2, base + 1 - taps // 2)
    index = first[:, None] + np.arange(taps)[None, :]
    t = (index - x[:, None]) * stretch
    weights = np.clip(1 - np.abs(t), 0, 1) if mode == "linear" else _cubic(t, cubic_coeff_a)
    if antialias:
        weights = weights / _total(weights)
    if exclude_outside:
        weights = np.where((index < 0) | (index >= n_in), 0.0, weights)
        total = _total(weights)
        weights = weights / np.where(total == 0, 1.0, total)
    return np.clip(index, 0, n_in - 1).astype(np.int64), weights, outside


def _total(weights: np.ndarray) -> np.ndarray:
    """The sum of each row, added left to right (the order compiled code adds in, so that both round
    alike: NumPy's sum adds in another order)."""
    total = weights[:, :1].copy()
    for k in range(1, weights.shape[1]):
        total += weights[:, k:k + 1]
    return total


def output_plan(shape: tuple[int, ...], axes: list[int], scales: np.ndarray | None, sizes: list[int] | None,
                policy: str) -> tuple[list[int], list[float], list[float]]:
    """(output shape, scale, length_resized) of each axis from scales or sizes on `axes` (other axes
    keep their size, scale 1). Products and quotients in float32, as onnxruntime computes them."""
    f = np.float32
    out, scale, length = list(shape), [1.0] * len(shape), [float(d) for d in shape]
    if scales is not None:
        for a, s in zip(axes, scales):
            s = float(s)
            if not s > 0 or not math.isfinite(s):
                raise OpError(f"scales must be positive and finite, got {s} for axis {a}")
            scale[a], length[a] = s, float(f(s) * f(shape[a]))
            out[a] = int(math.floor(length[a]))
        return out, scale, length
    if any(s < 0 for s in sizes):
        raise OpError(f"sizes {sizes} has a negative size")
    if any(shape[a] == 0 for a in axes):
        raise OpError(f"cannot resize the empty axes of shape {list(shape)} to sizes {sizes}")
    ratios = [float(f(s) / f(shape[a])) for a, s in zip(axes, sizes)]
    if policy == "stretch":
        for a, s, r in zip(axes, sizes, ratios):
            out[a], scale[a], length[a] = s, r, float(s)
        return out, scale, length
    r = min(ratios) if policy == "not_larger" else max(ratios)
    for a in axes:
        length[a] = float(f(r) * f(shape[a]))
        out[a], scale[a] = int(length[a] + 0.5), r  # round half up
    return out, scale, length


@interprets("Resize")
def run_resize(X: np.ndarray, roi: np.ndarray | None = None, scales: np.ndarray | None = None,
               sizes: np.ndarray | None = None, *, antialias: int = 0, axes: list[int] | None = None,
               coordinate_transformation_mode: str = "half_pixel", cubic_coeff_a: float = -0.75,
               exclude_outside: int = 0, extrapolation_value: float = 0.0,
               keep_aspect_ratio_policy: str = "stretch", mode: str = "nearest",
               nearest_mode: str = "round_prefer_floor") -> np.ndarray:
    """Y = X resized on `axes` (all by default) to sizes, or by scales, interpolated by mode"""
    problem = check_attributes(mode, coordinate_transformation_mode, nearest_mode, keep_aspect_ratio_policy,
                               antialias, exclude_outside)
    if problem:
        raise OpError(problem)
    rank = X.ndim
    axes = list(range(rank)) if axes is None else as_axes(axes, rank)
    scales = None if scales is None or np.size(scales) == 0 else np.asarray(scales, np.float64).reshape(-1)
    sizes = None if sizes is None or np.size(sizes) == 0 else as_ints(sizes, "sizes")
    if (scales is None) == (sizes is None):
        raise OpError("give exactly one of scales and sizes (the other omitted or empty)")
    given = scales if scales is not None else sizes
    if len(given) != len(axes):
        raise OpError(f"{'scales' if scales is not None else 'sizes'} has {len(given)} values for "
                      f"{len(axes)} axes; give one per resized axis")
    ranges = [(0.0, 1.0)] * rank
    if roi is not None and np.size(roi) and coordinate_transformation_mode == "tf_crop_and_resize":
        bounds = np.asarray(roi, np.float64).reshape(-1)
        if bounds.size != 2 * len(axes):
            raise OpError(f"roi has {bounds.size} values; it needs a start and an end for each of {len(axes)} axes")
        for k, a in enumerate(axes):
            ranges[a] = (float(bounds[k]), float(bounds[k + len(axes)]))
    elif coordinate_transformation_mode == "tf_crop_and_resize":
        raise OpError("coordinate_transformation_mode 'tf_crop_and_resize' needs the roi input")
    out_shape, scale, length = output_plan(X.shape, axes, scales, sizes, keep_aspect_ratio_policy)
    exact = mode == "nearest"  # a pure selection: no arithmetic, any dtype
    if not exact and X.dtype.kind not in "iuf" and X.dtype.name != "bfloat16":
        raise OpError(f"mode '{mode}' interpolates numbers; the input is {X.dtype}")
    result = X if exact else X.astype(np.float64)
    extrapolate = np.asarray(extrapolation_value).astype(X.dtype if exact else np.float64)
    for a in axes:
        if scale[a] == 1.0 and out_shape[a] == X.shape[a] and ranges[a] == (0.0, 1.0):
            continue  # identity along this axis
        if out_shape[a] and not X.shape[a]:
            raise OpError(f"cannot resize the empty axis {a} to {out_shape[a]} entries")
        index, weights, outside = axis_table(
            X.shape[a], out_shape[a], scale[a], length[a], mode=mode, ctm=coordinate_transformation_mode,
            nearest_mode=nearest_mode, cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside,
            antialias=antialias, roi=ranges[a])
        result = _apply(result, a, index, weights, exact)
        if outside.any():
            mask = outside.reshape((1,) * a + (-1,) + (1,) * (rank - a - 1))
            result = np.where(mask, extrapolate, result)
    return _cast_back(result, X.dtype)


def _apply(data: np.ndarray, axis: int, index: np.ndarray, weights: np.ndarray, exact: bool) -> np.ndarray:
    if not data.size or not index.size:
        shape = list(data.shape)
        shape[axis] = index.shape[0]
        return np.empty(shape, data.dtype)
    if exact:
        return np.take(data, index[:, 0], axis=axis)
    # Tap by tap, left to right, in the order compiled code adds them
    shape = (1,) * axis + (-1,) + (1,) * (data.ndim - axis - 1)
    result = None
    for k in range(index.shape[1]):
        term = np.take(data, index[:, k], axis=axis) * weights[:, k].reshape(shape)
        result = term if result is None else result + term
    return result


def _cast_back(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """float64 results in the input's dtype: integers rounded (half to even) and saturated."""
    if y.dtype == dtype:
        return y
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return np.clip(np.round(y), info.min, info.max).astype(dtype)
    return y.astype(dtype)
