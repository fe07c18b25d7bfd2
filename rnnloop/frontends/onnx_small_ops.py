"""Converters for ONNX activations and small data movers of front ends (Gelu, HardSwish, Mish, Celu,
Shrink, Hardmax, DepthToSpace, SpaceToDepth, ReverseSequence) and every form of Resize.

Attribute values the IR does not support are rejected here, at load, by name."""

from __future__ import annotations

from ..errors import ModelError, UnsupportedModelError
from ..interp import resize
from .onnx_ops import convert_as_is
from .registry import converts

for _op, _since in (("HardSwish", 14), ("Mish", 18), ("Shrink", 9), ("Hardmax", 13)):
    converts(_op, since=_since)(convert_as_is)


def _unsupported(n, message: str) -> UnsupportedModelError:
    return UnsupportedModelError(f"{n.origin}: {message}")


def _one_of(n, name: str, value, allowed) -> None:
    if value not in allowed:
        raise _unsupported(n, f"{name} '{value}' is not supported (supported: {', '.join(map(str, allowed))})")


@converts("Gelu", since=20)
def convert_gelu(n, x, *, approximate="none"):
    _one_of(n, "approximate", approximate, ("none", "tanh"))
    n.emit("Gelu", [x], approximate=approximate)


@converts("Celu", since=12)
def convert_celu(n, x, *, alpha=1.0):
    if alpha == 0:
        raise ModelError(f"{n.origin}: alpha must not be 0 (Celu divides by it)")
    n.emit("Celu", [x], alpha=alpha)


@converts("Hardmax", since=1)
def convert_hardmax_1(n, x, *, axis=1):
    """Before 13 the input was coerced to 2-D at `axis`, the maximum taken over the flattened tail."""
    flat = n.b.op1("Flatten", x, axis=axis)
    n.emit("Reshape", [n.b.op1("Hardmax", flat, axis=-1), n.b.op1("Shape", x)])


def _blocksize(n, blocksize) -> int:
    if blocksize is None or blocksize < 1:
        raise ModelError(f"{n.origin}: blocksize must be a positive integer, got {blocksize}")
    return blocksize


@converts("DepthToSpace", since=1)
def convert_depthtospace_1(n, x, *, blocksize=None):
    n.emit("DepthToSpace", [x], blocksize=_blocksize(n, blocksize), mode="DCR")


@converts("DepthToSpace", since=11)
def convert_depthtospace(n, x, *, blocksize=None, mode="DCR"):
    _one_of(n, "mode", mode, ("DCR", "CRD"))
    n.emit("DepthToSpace", [x], blocksize=_blocksize(n, blocksize), mode=mode)


@converts("SpaceToDepth", since=1)
def convert_spacetodepth(n, x, *, blocksize=None, mode="DCR"):
    """(mode arrived in opset 28; before it the order is DCR)"""
    _one_of(n, "mode", mode, ("DCR", "CRD"))
    n.emit("SpaceToDepth", [x], blocksize=_blocksize(n, blocksize), mode=mode)


@converts("ReverseSequence", since=10)
def convert_reversesequence(n, x, sequence_lens, *, batch_axis=1, time_axis=0):
    if {batch_axis, time_axis} != {0, 1}:
        raise ModelError(f"{n.origin}: batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1, "
                         "one each")
    n.emit("ReverseSequence", [x, sequence_lens], batch_axis=batch_axis, time_axis=time_axis)


# ---------------------------------------------------------------------------------------------
# Resize: every form becomes opset 19's (inputs X, roi, scales, sizes)

_COORDINATES_11 = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
                   "tf_crop_and_resize")
_COORDINATES_13 = tuple(m for m in _COORDINATES_11 if m != "tf_half_pixel_for_nn")
_COORDINATES_19 = _COORDINATES_13 + ("half_pixel_symmetric",)
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _resize(n, inputs, coordinates, *, mode, coordinate_transformation_mode, nearest_mode, cubic_coeff_a,
            exclude_outside, extrapolation_value, antialias=0, axes=None, keep_aspect_ratio_policy="stretch"):
    _one_of(n, "mode", mode, resize.MODES)
    _one_of(n, "coordinate_transformation_mode", coordinate_transformation_mode, coordinates)
    _one_of(n, "nearest_mode", nearest_mode, _NEAREST)
    _one_of(n, "keep_aspect_ratio_policy", keep_aspect_ratio_policy, resize.ASPECT_POLICIES)
    _one_of(n, "antialias", antialias, (0, 1))
    _one_of(n, "exclude_outside", exclude_outside, (0, 1))
    attrs = dict(mode=mode, coordinate_transformation_mode=coordinate_transformation_mode, nearest_mode=nearest_mode,
                 cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside, extrapolation_value=extrapolation_value,
                 antialias=antialias, keep_aspect_ratio_policy=keep_aspect_ratio_policy)
    if axes is not None:
        attrs["axes"] = list(axes)
    inputs = list(inputs)
    while inputs and not inputs[-1]:
        inputs.pop()
    n.emit("Resize", inputs, **attrs)


@converts("Resize", since=10)
def convert_resize_10(n, x, scales, *, mode="nearest"):
    """Resize-10 (Upsample's successor) maps coordinates asymmetrically; its nearest pixel is the
    floor, or the ceiling where the axis shrinks, as onnxruntime computes it (nearest_mode 'simple')."""
    _one_of(n, "mode", mode, ("nearest", "linear"))
    n.emit("Resize", [x, "", scales], mode=mode, coordinate_transformation_mode="asymmetric",
           nearest_mode="simple")


def _form(coordinates):
    def convert(n, x, roi="", scales="", sizes="", *, mode="nearest", coordinate_transformation_mode="half_pixel",
                nearest_mode="round_prefer_floor", cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0):
        _resize(n, [x, roi, scales, sizes], coordinates, mode=mode,
                coordinate_transformation_mode=coordinate_transformation_mode, nearest_mode=nearest_mode,
                cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside,
                extrapolation_value=extrapolation_value)
    return convert


convert_resize_11 = converts("Resize", since=11)(_form(_COORDINATES_11))
convert_resize_13 = converts("Resize", since=13)(_form(_COORDINATES_13))


def _form_18(coordinates):
    def convert(n, x, roi="", scales="", sizes="", *, mode="nearest", coordinate_transformation_mode="half_pixel",
                nearest_mode="round_prefer_floor", cubic_coeff_a=-0.75, exclude_outside=0, extrapolation_value=0.0,
                antialias=0, axes=None, keep_aspect_ratio_policy="stretch"):
        _resize(n, [x, roi, scales, sizes], coordinates, mode=mode,
                coordinate_transformation_mode=coordinate_transformation_mode, nearest_mode=nearest_mode,
                cubic_coeff_a=cubic_coeff_a, exclude_outside=exclude_outside, extrapolation_value=extrapolation_value,
                antialias=antialias, axes=axes, keep_aspect_ratio_policy=keep_aspect_ratio_policy)
    return convert


convert_resize_18 = converts("Resize", since=18)(_form_18(_COORDINATES_13))
convert_resize_19 = converts("Resize", since=19)(_form_18(_COORDINATES_19))
