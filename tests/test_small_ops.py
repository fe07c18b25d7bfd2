"""Front-end activations and small ops (issue 23 item 3): Gelu, HardSwish, Mish, Celu, Shrink, Hardmax,
Resize, DepthToSpace, SpaceToDepth, ReverseSequence, and the compiled GatherElements, ScatterElements
and Pad with pads computed at run time.

The interpreter (rnnloop/interp/small_ops.py, resize.py) against onnxruntime over thinned grids of
their attributes; the compiled rules (codegen/small_ops.py, resize.py, scalar.py, shapes.py' Pad)
against the interpreter, many ops in one model so that one kernel serves many cases, inside a loop
body too; indices and sizes out of range at run time are errors that name the node under both
backends; unsupported attribute values are rejected at load by name.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from helpers import IR_VERSION, assert_same, run_onnxruntime, thin
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import rnnloop

RNG = np.random.default_rng(2323)
ONNX_TYPES = {np.dtype(t): helper.np_dtype_to_tensor_dtype(np.dtype(t))
              for t in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_)}


def model(nodes: list, inputs: dict[str, np.ndarray], outputs: list[str], opset: int = 19,
          constants: dict[str, np.ndarray] | None = None, out_dtype=np.float32) -> onnx.ModelProto:
    """A graph of `nodes` with the given inputs (by example value) and outputs of `out_dtype` (None:
    not declared), of unknown shape."""
    kind = TensorProto.UNDEFINED if out_dtype is None else ONNX_TYPES[np.dtype(out_dtype)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(k, ONNX_TYPES[v.dtype], v.shape) for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, kind, None) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in (constants or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)


def compiled(m: onnx.ModelProto) -> rnnloop.Session:
    """A numba session in which no op is left to the interpreter."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", rnnloop.FallbackWarning)
        session = rnnloop.load(m, backend="numba", strict=True)
    assert "interpreted" not in session.explain(), session.explain()
    return session


def interp(m: onnx.ModelProto, feeds: dict) -> list:
    return rnnloop.load(m, backend="interp").run(None, feeds)


# ---------------------------------------------------------------------------------------------
# the interpreter against onnxruntime: activations

SWEEP = np.concatenate([np.linspace(-12, 12, 241), [-80.0, -30.0, -1e-4, 0.0, 1e-4, 30.0, 80.0]]).astype(np.float32)
ACTIVATIONS = [
    ("Gelu", {}, 20), ("Gelu", {"approximate": "tanh"}, 20), ("HardSwish", {}, 14), ("Mish", {}, 18),
    ("Celu", {}, 12), ("Celu", {"alpha": 0.4}, 12), ("Celu", {"alpha": 2.5}, 12),
    ("Shrink", {}, 9), ("Shrink", {"lambd": 1.5, "bias": 0.25}, 9), ("Shrink", {"lambd": 0.0, "bias": -2.0}, 9),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op, attrs, opset", ACTIVATIONS)
def test_activation_interpreter_matches_onnxruntime(op, attrs, opset, dtype):
    x = SWEEP.astype(dtype)
    if op in ("Celu", "Gelu", "HardSwish") and dtype == np.float64:
        pytest.skip(f"onnxruntime has no float64 {op} (the interpreter's float64 is checked against the compiled "
                    "one in test_codegen_scalar)")
    m = model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset, out_dtype=dtype)
    assert_same(interp(m, {"x": x}), run_onnxruntime(m, {"x": x}), rtol=2e-6, atol=1e-6)


def test_shrink_of_integers_computes_in_float64_and_truncates():
    x = np.arange(-6, 7, dtype=np.int32)
    m = model([helper.make_node("Shrink", ["x"], ["y"], lambd=1.5, bias=0.75)], {"x": x}, ["y"], 9, out_dtype=np.int32)
    expected = [np.where(x < -1.5, x + 0.75, np.where(x > 1.5, x - 0.75, 0)).astype(np.int32)]
    assert_same(interp(m, {"x": x}), expected)
    assert_same(interp(m, {"x": x}), run_onnxruntime(m, {"x": x}))


def test_gelu_keeps_its_tail_where_one_plus_erf_cancels():
    """0.5 x (1 + erf(x / sqrt 2)) at x = -10 is -7.6e-23; the textbook form rounds it to 0 in float32."""
    import scipy.special
    x = np.array([-10.0, -6.0, -3.0], np.float32)
    y = interp(model([helper.make_node("Gelu", ["x"], ["y"])], {"x": x}, ["y"], 20), {"x": x})[0]
    exact = 0.5 * x.astype(np.float64) * scipy.special.erfc(-x.astype(np.float64) / np.sqrt(2))
    np.testing.assert_allclose(y, exact, rtol=1e-5)  # (x / sqrt 2 rounded to float32: erfc's slope there)


# ---------------------------------------------------------------------------------------------
# Hardmax, DepthToSpace, SpaceToDepth, ReverseSequence

@pytest.mark.parametrize("axis, opset", [(-1, 13), (0, 13), (1, 13), (2, 13), (-2, 13), (1, 11), (0, 11), (2, 11),
                                         (-1, 11)])
def test_hardmax_matches_onnxruntime(axis, opset):
    x = RNG.integers(0, 3, (3, 4, 5)).astype(np.float32)  # ties: the first maximum wins
    m = model([helper.make_node("Hardmax", ["x"], ["y"], axis=axis)], {"x": x}, ["y"], opset)
    assert_same(interp(m, {"x": x}), run_onnxruntime(m, {"x": x}))


BLOCKS = [("DepthToSpace", "DCR", 2, (2, 8, 3, 4)), ("DepthToSpace", "CRD", 2, (2, 8, 3, 4)),
          ("DepthToSpace", "DCR", 3, (1, 18, 2, 3)), ("DepthToSpace", "CRD", 1, (1, 3, 2, 2)),
          ("SpaceToDepth", "DCR", 2, (2, 3, 4, 6)), ("SpaceToDepth", "DCR", 3, (1, 2, 6, 3)),
          ("SpaceToDepth", "CRD", 2, (2, 3, 4, 6))]


@pytest.mark.parametrize("op, mode, blocksize, shape", BLOCKS)
def test_depth_and_space_moves_match_onnxruntime(op, mode, blocksize, shape):
    x = RNG.standard_normal(shape).astype(np.float32)
    attrs = {"mode": mode} if op == "DepthToSpace" or mode != "DCR" else {}
    opset = 28 if op == "SpaceToDepth" and mode == "CRD" else 13
    m = model([helper.make_node(op, ["x"], ["y"], blocksize=blocksize, **attrs)], {"x": x}, ["y"], opset)
    # (onnxruntime knows SpaceToDepth up to opset 13, before its mode: CRD against onnx's reference)
    expected = ReferenceEvaluator(m).run(None, {"x": x}) if opset == 28 else run_onnxruntime(m, {"x": x})
    assert_same(interp(m, {"x": x}), expected)


@pytest.mark.parametrize("batch_axis, time_axis, shape, lengths", [
    (1, 0, (4, 3, 2), [4, 0, 2]), (0, 1, (3, 5), [1, 5, 3]), (1, 0, (6, 2, 2, 3), [6, 1])])
def test_reversesequence_matches_onnxruntime(batch_axis, time_axis, shape, lengths):
    x, lens = RNG.standard_normal(shape).astype(np.float32), np.array(lengths, np.int64)
    m = model([helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=batch_axis, time_axis=time_axis)],
              {"x": x, "lens": lens}, ["y"], 10)
    assert_same(interp(m, {"x": x, "lens": lens}), run_onnxruntime(m, {"x": x, "lens": lens}))


# ---------------------------------------------------------------------------------------------
# Resize: the interpreter against onnxruntime

IMAGE = RNG.standard_normal((1, 2, 4, 6)).astype(np.float32)
COORDINATES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric")
NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
# (scales or sizes of H and W; every one gives whole output lengths: onnxruntime's align_corners
# differs from the spec where scale * length is fractional, see rnnloop/interp/resize.py)
TARGETS = [("scales", [1.5, 0.5]), ("scales", [0.5, 2.0]), ("sizes", [7, 5]), ("sizes", [3, 13])]


def _resize_cases():
    for ctm in COORDINATES:
        for k, (kind, target) in enumerate(TARGETS):
            yield ("nearest", ctm, {"nearest_mode": NEAREST[k]}, kind, target)
            yield ("linear", ctm, {}, kind, target)
            yield ("cubic", ctm, {"cubic_coeff_a": -0.5 if k % 2 else -0.75, "exclude_outside": k // 2}, kind, target)
    for kind, target in TARGETS[:2] + [("scales", [0.4, 0.3]), ("sizes", [2, 5])]:
        for mode in ("linear", "cubic"):
            yield (mode, "half_pixel", {"antialias": 1}, kind, target)
    for policy in ("not_larger", "not_smaller"):
        for target in ([9, 5], [2, 10]):
            yield ("nearest", "half_pixel", {"keep_aspect_ratio_policy": policy}, "sizes", target)
            yield ("linear", "pytorch_half_pixel", {"keep_aspect_ratio_policy": policy}, "sizes", target)


def resize_node(name: str, mode: str, ctm: str, attrs: dict, kind: str, target: str, roi: str = "") -> onnx.NodeProto:
    inputs = ["x", roi, target, ""] if kind == "scales" else ["x", roi, "", target]
    return helper.make_node("Resize", inputs, [name], mode=mode, coordinate_transformation_mode=ctm, axes=[2, 3],
                            **attrs)


@pytest.mark.parametrize("mode, ctm, attrs, kind, target", thin(list(_resize_cases()), 3))
def test_resize_interpreter_matches_onnxruntime(mode, ctm, attrs, kind, target):
    value = np.array(target, np.float32 if kind == "scales" else np.int64)
    m = model([resize_node("y", mode, ctm, attrs, kind, "t")], {"x": IMAGE, "t": value}, ["y"], 19)
    feeds = {"x": IMAGE, "t": value}
    assert_same(interp(m, feeds), run_onnxruntime(m, feeds), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_tf_crop_and_resize_matches_onnxruntime(mode):
    roi = np.array([0.1, 0.3, 0.9, 0.8], np.float32)  # H from 0.1 to 0.9, W from 0.3 to 0.8 (axes 2, 3)
    for kind, target in (("sizes", np.array([5, 4], np.int64)), ("scales", np.array([2.0, 0.5], np.float32))):
        node = resize_node("y", mode, "tf_crop_and_resize", {"extrapolation_value": -3.0}, kind, "t", roi="roi")
        m = model([node], {"x": IMAGE, "roi": roi, "t": target}, ["y"], 19)
        feeds = {"x": IMAGE, "roi": roi, "t": target}
        assert_same(interp(m, feeds), run_onnxruntime(m, feeds), rtol=1e-5, atol=1e-5)
        outside = np.array([-0.2, -0.5, 1.3, 1.1], np.float32)  # past the input: the extrapolation value
        assert_same(interp(m, {**feeds, "roi": outside}), run_onnxruntime(m, {**feeds, "roi": outside}),
                    rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode, scales", [("nearest", [1, 1, 2.5, 1.7]), ("nearest", [1, 1, 0.6, 0.35]),
                                          ("linear", [1, 1, 1.75, 0.6]), ("nearest", [1, 1, 1.0, 2.0])])
def test_resize_10_matches_onnxruntime(mode, scales):
    """Resize-10: asymmetric coordinates; nearest is the floor, the ceiling where an axis shrinks."""
    s = np.array(scales, np.float32)
    m = model([helper.make_node("Resize", ["x", "s"], ["y"], mode=mode)], {"x": IMAGE, "s": s}, ["y"], 10)
    assert_same(interp(m, {"x": IMAGE, "s": s}), run_onnxruntime(m, {"x": IMAGE, "s": s}), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_11_tf_half_pixel_for_nn_and_empty_scales_match_onnxruntime(mode):
    sizes = np.array([1, 2, 7, 9], np.int64)
    empty = numpy_helper.from_array(np.zeros(0, np.float32), "empty")
    for ctm in ("tf_half_pixel_for_nn", "half_pixel"):
        node = helper.make_node("Resize", ["x", "empty", "empty", "sizes"], ["y"], mode=mode,
                                coordinate_transformation_mode=ctm)
        m = model([node], {"x": IMAGE, "sizes": sizes}, ["y"], 11)
        m.graph.initializer.append(empty)
        feeds = {"x": IMAGE, "sizes": sizes}
        assert_same(interp(m, feeds), run_onnxruntime(m, feeds), rtol=1e-5, atol=1e-6)


def test_resize_of_integers_rounds_as_the_spec_reference_does():
    """Integer inputs interpolate in float64 and round half to even, saturating (onnx's reference;
    onnxruntime truncates instead: 2.5 becomes 2 there, 2 here too, but 3.4 becomes 3 and 6.6 becomes 6
    where the reference gives 7)."""
    x = np.array([[[[0, 1, 2, 3, 4], [9, 8, 7, 6, 5], [10, 20, 30, 40, 250]]]], np.uint8)
    s = np.array([1, 1, 2, 1.7], np.float32)
    m = model([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear")], {"x": x, "s": s}, ["y"], 19,
              out_dtype=np.uint8)
    assert_same(interp(m, {"x": x, "s": s}), ReferenceEvaluator(m).run(None, {"x": x, "s": s}))


def test_resize_output_length_is_a_float32_product_as_onnxruntime_computes_it():
    """10 * float32(0.7) is 6.99999988 exactly, 7 in float32 arithmetic: PyTorch's scale_factor=0.7 means 7."""
    x = RNG.standard_normal((1, 10)).astype(np.float32)
    s = np.array([1, 0.7], np.float32)
    m = model([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="nearest")], {"x": x, "s": s}, ["y"], 19)
    got = interp(m, {"x": x, "s": s})
    assert got[0].shape == (1, 7)
    assert_same(got, run_onnxruntime(m, {"x": x, "s": s}))


# ---------------------------------------------------------------------------------------------
# compiled against the interpreter

def _loop_body_model() -> tuple[onnx.ModelProto, dict]:
    """A Loop (trip count 3) whose body applies each small op to values it captures or carries; every
    result is stacked. Pads come from Shape arithmetic, as exporters build them."""
    f32 = TensorProto.FLOAT
    body_nodes = [
        helper.make_node("Identity", ["cond"], ["cond_out"]),
        helper.make_node("Add", ["carry", "x"], ["carry_out"]),
        helper.make_node("Gelu", ["carry_out"], ["gelu"]),
        helper.make_node("Gelu", ["carry_out"], ["gelu_tanh"], approximate="tanh"),
        helper.make_node("HardSwish", ["gelu"], ["hswish"]),
        helper.make_node("Mish", ["hswish"], ["mish"]),
        helper.make_node("Celu", ["mish"], ["celu"], alpha=0.5),
        helper.make_node("Shrink", ["celu"], ["shrink"], lambd=0.3, bias=0.1),
        helper.make_node("Hardmax", ["carry_out"], ["hardmax"], axis=1),
        helper.make_node("DepthToSpace", ["carry_out"], ["d2s"], blocksize=2, mode="CRD"),
        helper.make_node("SpaceToDepth", ["d2s"], ["s2d"], blocksize=2),
        helper.make_node("ReverseSequence", ["carry_out", "lens"], ["rev"], batch_axis=0, time_axis=1),
        helper.make_node("GatherElements", ["carry_out", "idx"], ["gathered"], axis=1),
        helper.make_node("ScatterElements", ["carry_out", "idx", "upd"], ["scattered"], axis=1, reduction="add"),
        helper.make_node("ScatterElements", ["carry_out", "idx", "upd"], ["scattered_max"], axis=1, reduction="max"),
        # pads [0, 0, h - 2, 1, 0, 0, 1, h - 3] from the input's shape, in reflect mode
        helper.make_node("Shape", ["carry_out"], ["shape"], start=2, end=3),
        helper.make_node("Sub", ["shape", "two"], ["h2"]),
        helper.make_node("Sub", ["shape", "three"], ["h3"]),
        helper.make_node("Concat", ["zeros2", "h2", "one", "zeros2", "one", "h3"], ["pads"], axis=0),
        helper.make_node("Pad", ["carry_out", "pads"], ["padded"], mode="reflect"),
        helper.make_node("Resize", ["carry_out", "", "scales"], ["resized"], mode="linear", axes=[2, 3]),
    ]
    stacked = ["gelu", "gelu_tanh", "hswish", "mish", "celu", "shrink", "hardmax", "d2s", "s2d", "rev", "gathered",
               "scattered", "scattered_max", "padded", "resized"]
    consts = {"two": np.array([2], np.int64), "three": np.array([3], np.int64), "one": np.array([1], np.int64),
              "zeros2": np.zeros(2, np.int64)}
    body = helper.make_graph(
        body_nodes, "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []), helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("carry", f32, None)],
        [helper.make_tensor_value_info(n, TensorProto.UNDEFINED, None) for n in ["cond_out", "carry_out"] + stacked],
        [numpy_helper.from_array(v, k) for k, v in consts.items()])
    feeds = {"x": RNG.standard_normal((2, 4, 5, 6)).astype(np.float32), "init": np.zeros((2, 4, 5, 6), np.float32),
             "lens": np.array([3, 1], np.int64), "idx": RNG.integers(-4, 4, (2, 3, 5, 6)).astype(np.int64),
             "upd": RNG.standard_normal((2, 3, 5, 6)).astype(np.float32),
             "scales": np.array([1.6, 0.5], np.float32), "trip": np.array(3, np.int64)}
    loop = helper.make_node("Loop", ["trip", "", "init"], ["final"] + [f"all_{n}" for n in stacked], body=body,
                            name="small_ops")
    return model([loop], feeds, ["final"] + [f"all_{n}" for n in stacked], 20, out_dtype=None), feeds


@pytest.mark.slow  # (one large kernel: about a minute and a half cold)
def test_small_ops_compile_inside_a_loop_body_and_match_the_interpreter():
    m, feeds = _loop_body_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error", rnnloop.FallbackWarning)
        session = rnnloop.load(m, backend="numba", strict=True)
    assert session.plans and all(p.fused is not None for p in session.plans), session.explain()
    assert_same(session.run(None, feeds), interp(m, feeds), rtol=2e-6, atol=1e-6)


# Resize configurations, several per model (one kernel each); sizes and scales are inputs.
RESIZE_GROUPS = {
    "nearest": [("nearest", ctm, {"nearest_mode": nm}) for ctm in COORDINATES for nm in NEAREST],
    "linear": [("linear", ctm, {}) for ctm in COORDINATES] + [("linear", "half_pixel", {"antialias": 1}),
                                                             ("linear", "asymmetric", {"exclude_outside": 1})],
    "cubic": [("cubic", ctm, {"exclude_outside": k % 2, "cubic_coeff_a": -0.5 - 0.1 * k})
              for k, ctm in enumerate(COORDINATES)] + [("cubic", "half_pixel", {"antialias": 1})],
    "policies": [(mode, "half_pixel", {"keep_aspect_ratio_policy": p}) for mode in ("nearest", "linear")
                 for p in ("not_larger", "not_smaller")],
}


def _resize_model(group: str, kind: str, dtype=np.float32) -> onnx.ModelProto:
    configs = RESIZE_GROUPS[group]
    nodes = [resize_node(f"y{k}", mode, ctm, attrs, kind, "t") for k, (mode, ctm, attrs) in enumerate(configs)]
    if group == "nearest":  # with tf_crop_and_resize and an extrapolation value, from a roi input
        nodes.append(resize_node("crop", "linear", "tf_crop_and_resize", {"extrapolation_value": 7.0}, kind, "t", "roi"))
    target = np.array([1.0, 1.0], np.float32) if kind == "scales" else np.array([1, 1], np.int64)
    return model(nodes, {"x": IMAGE.astype(dtype), "t": target, "roi": np.zeros(4, np.float32)},
                 [o for n in nodes for o in n.output], 19, out_dtype=dtype)


RESIZE_FEEDS = {"scales": [[1.5, 0.5], [0.6, 1.7], [2.0, 2.0], [1.0, 1.0], [0.25, 0.4]],
                "sizes": [[7, 5], [3, 13], [4, 6], [1, 2], [9, 1]]}


# (each case is one kernel of up to 21 Resize nodes, a minute to compile cold: the default run keeps
# the smallest, of four)
@pytest.mark.parametrize("group, kind, dtype", thin([("policies", "sizes", np.float32)]
                                                    + [(g, k, np.float32) for g in RESIZE_GROUPS for k in ("scales", "sizes")
                                                       if g != "policies"]
                                                    + [("linear", "scales", np.int32), ("nearest", "sizes", np.uint8)], 100))
def test_compiled_resize_matches_the_interpreter(group, kind, dtype):
    m = _resize_model(group, kind, dtype)
    session = compiled(m)
    x = (IMAGE * 40).astype(dtype) if dtype != np.float32 else IMAGE
    for target in RESIZE_FEEDS[kind]:
        feeds = {"x": x, "t": np.array(target, np.float32 if kind == "scales" else np.int64),
                 "roi": np.array([0.2, -0.1, 0.7, 1.2], np.float32)}
        assert_same(session.run(None, feeds), interp(m, feeds), rtol=1e-6, atol=1e-6)


def _pad_model() -> onnx.ModelProto:
    """Pad in every mode with pads (and axes) given at run time."""
    nodes = [helper.make_node("Pad", ["x", "pads"], [f"full_{mode}"], mode=mode)
             for mode in ("constant", "reflect", "edge", "wrap")]
    nodes += [helper.make_node("Pad", ["x", "pads2", "value", "axes"], [f"axes_{mode}"], mode=mode)
              for mode in ("constant", "reflect", "edge", "wrap")]
    return model(nodes, {"x": RNG.standard_normal((2, 3, 5)).astype(np.float32), "pads": np.zeros(6, np.int64),
                         "pads2": np.zeros(4, np.int64), "value": np.array(2.5, np.float32), "axes": np.zeros(2, np.int64)},
                 [o for n in nodes for o in n.output], 19)


@pytest.mark.slow  # (eight Pads in one kernel; the streaming models' reflect Pad compiles in every run)
def test_compiled_pad_with_pads_and_axes_at_run_time_matches_the_interpreter():
    m = _pad_model()
    session = compiled(m)
    x = RNG.standard_normal((2, 3, 5)).astype(np.float32)
    for pads, pads2, axes in [([0, 1, 2, 1, 0, 4], [1, 2, 0, 3], [2, 0]), ([1, -1, -2, 0, 2, 3], [-2, 1, 1, -1], [-1, 1]),
                              ([0, 0, 0, 0, 0, 0], [0, 0, 0, 0], [0, 2]), ([0, 2, 9, 0, 1, 9], [7, 0, 8, 1], [2, -3])]:
        feeds = {"x": x, "pads": np.array(pads, np.int64), "pads2": np.array(pads2, np.int64),
                 "value": np.array(2.5, np.float32), "axes": np.array(axes, np.int64)}
        assert_same(session.run(None, feeds), interp(m, feeds))


# ---------------------------------------------------------------------------------------------
# errors: out-of-range values at run time name the node, under both backends

def _checked_model() -> onnx.ModelProto:
    nodes = [helper.make_node("GatherElements", ["x", "idx"], ["g"], axis=1, name="gather"),
             helper.make_node("ScatterElements", ["x", "sidx", "upd"], ["s"], axis=1, reduction="mul", name="scatter"),
             helper.make_node("ReverseSequence", ["x", "lens"], ["r"], batch_axis=0, time_axis=1, name="reverse"),
             helper.make_node("Pad", ["x", "pads"], ["p"], mode="edge", name="pad"),
             helper.make_node("Resize", ["x", "", "scales"], ["z"], mode="linear", name="resize")]
    return model(nodes, GOOD, ["g", "s", "r", "p", "z"], 19)  # (all float32)


GOOD = {"x": np.arange(12, dtype=np.float32).reshape(3, 4), "idx": np.array([[0, 3], [-4, 1], [2, -1]], np.int64),
        "sidx": np.array([[1, 3], [-4, 0], [2, 2]], np.int64),
        "upd": np.ones((3, 2), np.float32), "lens": np.array([4, 0, 2], np.int64), "pads": np.array([0, 1, 1, 2], np.int64),
        "scales": np.array([1.0, 0.5], np.float32)}
BAD = [("gather", "idx", np.array([[0, 4], [0, 1], [2, 3]], np.int64), r"GatherElements 'gather'.*\b4\b"),
       ("scatter", "sidx", np.array([[0, 1], [-5, 1], [2, 3]], np.int64), r"ScatterElements 'scatter'.*-5\b"),
       ("reverse", "lens", np.array([4, 5, 1], np.int64), r"ReverseSequence 'reverse'.*\b5\b"),
       ("pad", "pads", np.array([-2, 0, -2, 0], np.int64), r"Pad 'pad'.*remove more than"),
       ("resize", "scales", np.array([1.0, -2.0], np.float32), r"Resize 'resize'.*scales must be positive")]


@pytest.fixture(scope="module")
def checked_sessions() -> dict:
    m = _checked_model()
    return {"interp": rnnloop.load(m, backend="interp"), "numba": compiled(m)}


@pytest.mark.parametrize("node, name, value, match", BAD, ids=[b[0] for b in BAD])
def test_values_out_of_range_at_run_time_are_errors_naming_the_node(checked_sessions, backend, node, name, value, match):
    session = checked_sessions[backend]
    session.run(None, GOOD)  # (good values run)
    with pytest.raises(rnnloop.RunError, match=match):
        session.run(None, {**GOOD, name: value})


# ---------------------------------------------------------------------------------------------
# attribute values rnnloop does not take are rejected at load, by name

@pytest.mark.parametrize("op, attrs, opset, inputs, match", [
    ("Gelu", {"approximate": "erf"}, 20, ["x"], "approximate 'erf'"),
    ("Resize", {"mode": "area"}, 19, ["x", "", "s"], "mode 'area'"),
    ("Resize", {"coordinate_transformation_mode": "tf_half_pixel_for_nn"}, 13, ["x", "", "s"],
     "coordinate_transformation_mode 'tf_half_pixel_for_nn'"),
    ("Resize", {"coordinate_transformation_mode": "half_pixel_symmetric"}, 18, ["x", "", "s"],
     "coordinate_transformation_mode 'half_pixel_symmetric'"),
    ("Resize", {"nearest_mode": "simple"}, 19, ["x", "", "s"], "nearest_mode 'simple'"),
    ("Resize", {"keep_aspect_ratio_policy": "fit"}, 19, ["x", "", "s"], "keep_aspect_ratio_policy 'fit'"),
    ("Resize", {"mode": "cubic"}, 10, ["x", "s"], "mode 'cubic'"),
    ("DepthToSpace", {"blocksize": 2, "mode": "DRC"}, 13, ["x"], "mode 'DRC'"),
    ("SpaceToDepth", {"blocksize": 2, "mode": "CDR"}, 28, ["x"], "mode 'CDR'"),
])
def test_unsupported_attribute_values_are_rejected_by_name(op, attrs, opset, inputs, match):
    feeds = {"x": IMAGE, "s": np.ones(4, np.float32)}
    m = model([helper.make_node(op, inputs, ["y"], **attrs)], {k: feeds[k] for k in inputs if k}, ["y"], opset)
    with pytest.raises(rnnloop.UnsupportedModelError, match=match):
        rnnloop.load(m, backend="interp")


def test_celu_with_alpha_zero_and_reversesequence_with_wrong_axes_are_model_errors():
    for node, opset in ((helper.make_node("Celu", ["x"], ["y"], alpha=0.0), 12),
                        (helper.make_node("ReverseSequence", ["x", "lens"], ["y"], batch_axis=2, time_axis=0), 10)):
        feeds = {"x": IMAGE, "lens": np.ones(1, np.int64)}
        m = model([node], {k: feeds[k] for k in node.input}, ["y"], opset)
        with pytest.raises(rnnloop.ModelError, match="alpha must not be 0|batch_axis 2"):
            rnnloop.load(m, backend="interp")
