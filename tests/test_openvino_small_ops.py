"""OpenVINO front-end layers of issue 23 item 3 (Pad, Interpolate, Mish, DepthToSpace, SpaceToDepth,
ReverseSequence, Identity; Gelu and HSwish inside compiled regions) against OpenVINO's CPU plugin.

As in test_openvino_ops.py: each case builds a one-layer model with OpenVINO's opset API, saves it as
IR and runs the same file in rnnloop (backend="interp") and in OpenVINO at f32. One model holding a
layer of each kind then runs as one compiled region (backend="numba", strict) against the plugin.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_openvino_ops import _cases, _openvino, _save, c, check

import rnnloop

ov = pytest.importorskip("openvino", reason="the OpenVINO front end is checked against OpenVINO's CPU plugin")
import openvino.opset1 as ops1  # Pad-1, Interpolate-1, DepthToSpace-1, SpaceToDepth-1, ReverseSequence-1
import openvino.opset2 as ops2  # Gelu-2
import openvino.opset4 as ops4  # Mish-4, HSwish-4
import openvino.opset7 as ops7  # Gelu-7
import openvino.opset11 as ops11  # Interpolate-11
import openvino.opset12 as ops12  # Pad-12
import openvino.opset16 as ops16  # Identity-16
from openvino.utils.node_factory import NodeFactory

RNG = np.random.default_rng(20260402)
IMAGE = RNG.standard_normal((1, 2, 5, 7)).astype(np.float32)  # N, C, H, W
DEEP = RNG.standard_normal((2, 8, 3, 4)).astype(np.float32)  # channels for 2x2 blocks
SEQ = RNG.standard_normal((4, 3, 5)).astype(np.float32)
WIDE = np.linspace(-6, 6, 48, dtype=np.float32).reshape(2, 4, 6)


def pad(module, begin, end, mode, value=None):
    def build(x):
        extra = [c(value, np.float32)] if value is not None else []
        return module.pad(x, c(begin), c(end), mode, *extra)
    return build


PAD = _cases(
    *[(f"pad1_{mode}", pad(ops1, [0, 1, 2, 0], [0, 0, 1, 3], mode), IMAGE)
      for mode in ("constant", "edge", "reflect", "symmetric")],
    ("pad1_constant_value", pad(ops1, [0, 0, 1, 1], [1, 0, 2, 0], "constant", 2.5), IMAGE),
    *[(f"pad12_negative_{mode}", pad(ops12, [0, -1, 2, -2], [0, 1, -1, 3], mode), IMAGE)
      for mode in ("constant", "edge", "reflect", "symmetric")],
    ("pad12_symmetric_whole_axis", pad(ops12, [0, 0, 5, 0], [0, 2, 0, 7], "symmetric"), IMAGE),
    ("pad12_crop_only", pad(ops12, [0, 0, -2, -3], [0, 0, -1, 0], "reflect"), IMAGE),
)


@pytest.mark.parametrize("build, inputs, opts", PAD)
def test_pad(tmp_path, build, inputs, opts):
    check(tmp_path, build, *inputs, **opts)


def test_pad_with_pads_computed_at_run_time(tmp_path):
    """Pads from a Parameter: joined in the graph, read by the Pad rule at run time."""
    for mode in ("constant", "reflect", "symmetric"):
        check(tmp_path, lambda x, b, e: ops12.pad(x, b, e, mode), IMAGE, np.array([0, 1, -1, 2], np.int64),
              np.array([0, 0, 2, -3], np.int64))


def v4(mode, calculation, target, axes=None, **attrs):
    """Interpolate-4: sizes and scales are both inputs; shape_calculation_mode picks one."""
    def build(x):
        sizes, scales = (target, [1.0] * len(target)) if calculation == "sizes" else ([1] * len(target), target)
        inputs = [x, c(sizes), c(scales, np.float32)] + ([c(axes)] if axes is not None else [])
        base = dict(mode=mode, shape_calculation_mode=calculation, coordinate_transformation_mode="half_pixel",
                    nearest_mode="round_prefer_floor", antialias=False, pads_begin=[0], pads_end=[0], cube_coeff=-0.75)
        base.update(attrs)
        return NodeFactory("opset4").create("Interpolate", inputs, base)
    return build


def v11(mode, calculation, target, axes=None, **attrs):
    def build(x):
        dtype = np.int64 if calculation == "sizes" else np.float32
        return ops11.interpolate(x, c(target, dtype), mode, calculation, axes=None if axes is None else c(axes),
                                 **attrs)
    return build


def v1(mode, sizes, axes, **attrs):
    def build(x):
        return ops1.interpolate(x, c(sizes), {"axes": axes, "mode": mode, "align_corners": False, "antialias": False,
                                              "pads_begin": [0], "pads_end": [0], **attrs})
    return build


def _triangle(x: np.ndarray, axis: int, scale: float) -> np.ndarray:
    """OpenVINO's linear mode with antialias along one axis (half_pixel): each output is the mean of the
    inputs weighted by max(0, 1 - scale * |distance|) from its source coordinate."""
    n = x.shape[axis]
    out = int(np.floor(np.float32(n) * np.float32(scale)))
    centres = (np.arange(out) + 0.5) / scale - 0.5
    weights = np.maximum(0.0, 1 - scale * np.abs(centres[:, None] - np.arange(n)[None, :]))
    weights /= weights.sum(axis=1, keepdims=True)
    return np.moveaxis(np.tensordot(weights, np.moveaxis(x, axis, 0), axes=1), 0, axis).astype(x.dtype)


COORDINATES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn", "align_corners")
INTERPOLATE = _cases(
    *[(f"v4_nearest_{nearest}_{ctm}", v4("nearest", "scales", [2.0, 1.6], [2, 3], coordinate_transformation_mode=ctm,
                                         nearest_mode=nearest), IMAGE)
      for ctm in COORDINATES for nearest in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")],
    ("v4_nearest_simple_shrinks", v4("nearest", "scales", [0.6, 0.45], [2, 3], nearest_mode="simple",
                                     coordinate_transformation_mode="asymmetric"), IMAGE),
    *[(f"v4_linear_onnx_{ctm}", v4("linear_onnx", "sizes", [9, 4], [2, 3], coordinate_transformation_mode=ctm), IMAGE)
      for ctm in COORDINATES],
    *[(f"v4_cubic_{ctm}", v4("cubic", "scales", [1.5, 0.6], [2, 3], coordinate_transformation_mode=ctm), IMAGE,
       {"rtol": 1e-4, "atol": 1e-5}) for ctm in COORDINATES],
    ("v4_cubic_coeff", v4("cubic", "sizes", [8, 10], [2, 3], cube_coeff=-0.5), IMAGE, {"rtol": 1e-4, "atol": 1e-5}),
    ("v4_linear_upsample", v4("linear", "sizes", [1, 2, 9, 12], None), IMAGE, {"rtol": 1e-5, "atol": 1e-5}),
    # The CPU plugin ignores antialias in linear mode (its output equals antialias=False's): the
    # expectation is the spec's triangle filter, stretched by 1 / scale, taps outside left out.
    ("v4_linear_antialias_downsample", v4("linear", "scales", [0.5, 0.4], [2, 3], antialias=True), IMAGE,
     {"expect": [_triangle(_triangle(IMAGE, 2, 0.5), 3, 0.4)], "rtol": 1e-5, "atol": 1e-6}),
    ("v4_pads", v4("linear_onnx", "sizes", [10, 12], [2, 3], pads_begin=[0, 0, 1, 0], pads_end=[0, 0, 0, 2]), IMAGE),
    ("v11_scales_nearest", v11("nearest", "scales", [2.0, 3.0], [2, 3]), IMAGE),
    ("v11_sizes_linear_onnx", v11("linear_onnx", "sizes", [3, 11], [2, 3], coordinate_transformation_mode="align_corners"),
     IMAGE),
    ("v11_sizes_cubic_all_axes", v11("cubic", "sizes", [1, 2, 7, 5]), IMAGE, {"rtol": 1e-4, "atol": 1e-5}),
    ("v11_scales_1d", v11("linear_onnx", "scales", [1.75], [2]), SEQ),
    ("v1_nearest", v1("nearest", [9, 10], [2, 3]), IMAGE),
    ("v1_nearest_shrinks", v1("nearest", [3, 4], [2, 3]), IMAGE),
    ("v1_linear", v1("linear", [8, 13], [2, 3]), IMAGE),
    ("v1_linear_align_corners", v1("linear", [8, 13], [2, 3], align_corners=True), IMAGE),
    ("v1_cubic", v1("cubic", [8, 5], [2, 3]), IMAGE, {"rtol": 1e-4, "atol": 1e-5}),
)


@pytest.mark.parametrize("build, inputs, opts", INTERPOLATE)
def test_interpolate(tmp_path, build, inputs, opts):
    check(tmp_path, build, *inputs, **opts)


MOVERS = _cases(
    ("mish", ops4.mish, WIDE),
    ("identity", ops16.identity, WIDE),
    *[(f"depth_to_space_{mode}", lambda x, mode=mode: ops1.depth_to_space(x, mode, 2), DEEP)
      for mode in ("blocks_first", "depth_first")],
    *[(f"space_to_depth_{mode}", lambda x, mode=mode: ops1.space_to_depth(x, mode, 2),
       RNG.standard_normal((2, 3, 4, 6)).astype(np.float32)) for mode in ("blocks_first", "depth_first")],
    *[(f"depth_to_space_rank{r}_{mode}", lambda x, mode=mode: ops1.depth_to_space(x, mode, 2),
       RNG.standard_normal((2, 2 ** (r - 2) * 3) + (3,) * (r - 2)).astype(np.float32))
      for r in (3, 5) for mode in ("blocks_first", "depth_first")],
    *[(f"space_to_depth_rank{r}_{mode}", lambda x, mode=mode: ops1.space_to_depth(x, mode, 2),
       RNG.standard_normal((2, 3) + (4,) * (r - 2)).astype(np.float32))
      for r in (3, 5) for mode in ("blocks_first", "depth_first")],
    ("reverse_sequence_0_1", lambda x: ops1.reverse_sequence(x, c([3, 1, 2, 0], np.int32), 0, 1), SEQ),
    ("reverse_sequence_1_0", lambda x: ops1.reverse_sequence(x, c([2, 3, 1]), 1, 0), SEQ),
    ("reverse_sequence_2_0", lambda x: ops1.reverse_sequence(x, c([4, 1, 2, 3, 0]), 2, 0), SEQ),
    ("reverse_sequence_negative_axes", lambda x: ops1.reverse_sequence(x, c([5, 2, 0]), -2, -1), SEQ),
)


@pytest.mark.parametrize("build, inputs, opts", MOVERS)
def test_activation_and_data_movers(tmp_path, build, inputs, opts):
    check(tmp_path, build, *inputs, **opts)


def test_unsupported_interpolate_and_pad_modes_are_named(tmp_path):
    def area(x):
        return ops1.interpolate(x, c([3, 3]), {"axes": [2, 3], "mode": "area", "align_corners": False,
                                               "antialias": False, "pads_begin": [0], "pads_end": [0]})

    def pillow(x):
        return ops11.interpolate(x, c([2.0, 2.0], np.float32), "bilinear_pillow", "scales", axes=c([2, 3]))

    for build, message in ((area, "mode 'area' is not supported"), (pillow, "mode 'bilinear_pillow' is not supported")):
        path, _ = _save(tmp_path, build, [IMAGE])
        with pytest.raises(rnnloop.UnsupportedModelError, match=message):
            rnnloop.load(path, backend="interp")


def _front_end(x, lengths, begin, end):
    """Gelu (both forms), HSwish, Mish, Pad, Interpolate, DepthToSpace and ReverseSequence in one graph."""
    y = ops7.gelu(x, "tanh")
    y = ops1.add(ops2.gelu(y), ops4.hswish(x))
    y = ops1.multiply(ops4.mish(y), ops16.identity(x))
    y = ops12.pad(y, begin, end, "reflect")
    y = v11("linear_onnx", "scales", [2.0, 1.5], [2, 3])(y)
    y = ops1.depth_to_space(ops1.concat([y, y, y, y], 1), "blocks_first", 2)
    return ops1.reverse_sequence(y, lengths, 0, 2)


@pytest.mark.slow
def test_front_end_layers_compile_into_one_region_and_match_openvino(tmp_path):
    feeds = [IMAGE, np.array([5], np.int32), np.array([0, 0, 1, 2], np.int64), np.array([0, 0, 2, 1], np.int64)]
    path, named = _save(tmp_path, _front_end, feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("error", rnnloop.FallbackWarning)
        session = rnnloop.load(path, backend="numba", strict=True)
    assert session.explain().count("compiled into one kernel") == 1, session.explain()
    assert "interpreted" not in session.explain(), session.explain()
    expected = _openvino(path, named)
    for got, want in zip(session.run(None, named), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    for got, want in zip(rnnloop.load(path, backend="interp").run(None, named), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
