"""OpenVINO's pooling and normalisation layers (MaxPool-1/8/14, AvgPool-1/14, BatchNormInference-1/5,
MVN-2/6, NormalizeL2-1) against OpenVINO's own CPU plugin at f32.

Each case builds a one-layer model with OpenVINO's opset API, saves it as IR, and runs the same file
in rnnloop (backend="interp") and in OpenVINO. Where the plugin's answer is not the layer's (a
window of padding alone, which OpenVINO's ceil rounding makes), the case gives the expectation.
One model of every layer also runs compiled (backend="numba").
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import rnnloop

ov = pytest.importorskip("openvino", reason="the OpenVINO front end is checked against OpenVINO's CPU plugin")
import openvino.opset1 as ops1  # MaxPool-1, AvgPool-1, BatchNormInference-1, NormalizeL2-1
import openvino.opset2 as ops2  # MVN-2
import openvino.opset5 as ops5  # BatchNormInference-5
import openvino.opset6 as ops6  # MVN-6
import openvino.opset8 as ops8  # MaxPool-8
import openvino.opset14 as ops14  # MaxPool-14, AvgPool-14

CORE = ov.Core()
CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
RNG = np.random.default_rng(20261125)
X = RNG.standard_normal((2, 3, 7, 8)).astype(np.float32)  # N, C, H, W
X1 = RNG.standard_normal((2, 3, 9)).astype(np.float32)
X3 = RNG.standard_normal((1, 2, 5, 6, 7)).astype(np.float32)
RAMP = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
LOWEST = np.finfo(np.float32).min


def _save(tmp_path, build, x: np.ndarray) -> str:
    param = ops1.parameter(list(x.shape), ov.Type.f32, name="x")
    built = build(param)
    model = ov.Model(list(built.outputs()), [param])
    path = str(tmp_path / "m.xml")
    ov.save_model(model, path, compress_to_fp16=False)
    return path


def _openvino(path: str, x: np.ndarray) -> list[np.ndarray]:
    compiled = CORE.compile_model(path, "CPU", CONFIG)
    result = compiled({"x": x})
    return [np.asarray(result[out]) for out in compiled.outputs]


def check(tmp_path, build, x, expect=None, backend="interp", rtol=1e-5, atol=1e-5):
    """rnnloop's answer for `build`'s model on x against OpenVINO's (or `expect`)."""
    path = _save(tmp_path, build, x)
    with open(path) as f:
        layers = set(re.findall(r'\stype="(\w+)"', f.read())) - {"Parameter", "Const", "Result"}
    assert len(layers) == 1, f"save_model rewrote the layer: the IR holds {sorted(layers)}"
    got = rnnloop.load(path, backend=backend).run(None, {"x": x})
    expected = _openvino(path, x) if expect is None else expect
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert g.dtype == e.dtype and g.shape == e.shape, f"output {k}: {g.dtype}{g.shape} vs {e.dtype}{e.shape}"
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"output {k}")


def c(value, dtype=np.float32):
    return ops1.constant(np.asarray(value, dtype=dtype))


# ---------------------------------------------------------------------------------------------
# pools: (id, build, input)


def _max1(k, s, pb, pe, rounding="floor", auto_pad="explicit"):
    return lambda x: ops1.max_pool(x, s, pb, pe, k, rounding, auto_pad)


def _max8(k, s, pb, pe, rounding="floor", auto_pad="explicit", d=None, index_type="i64", axis=0, version=ops8):
    return lambda x: version.max_pool(x, s, d or [1] * len(k), pb, pe, k, rounding, auto_pad, index_type, axis)


def _avg(k, s, pb, pe, exclude, rounding="floor", auto_pad="explicit", version=ops1):
    return lambda x: version.avg_pool(x, s, pb, pe, k, exclude, rounding, auto_pad)


POOLS = [
    ("max1-2d", _max1([3, 3], [2, 2], [1, 1], [1, 1]), X),
    ("max1-2d-ceil", _max1([3, 2], [2, 2], [0, 1], [0, 0], "ceil"), X),
    ("max1-1d-same-upper", _max1([4], [2], [0], [0], auto_pad="same_upper"), X1),
    ("max1-2d-same-lower", _max1([3, 3], [2, 3], [0, 0], [0, 0], auto_pad="same_lower"), X),
    ("max1-2d-valid-ceil", _max1([2, 2], [2, 3], [0, 0], [0, 0], "ceil", "valid"), X),
    ("max8-2d-dilations", _max8([3, 2], [1, 2], [2, 1], [1, 0], d=[2, 3]), X),
    ("max8-2d-axis2-i32", _max8([2, 2], [2, 2], [0, 0], [1, 1], index_type="i32", axis=2), X),
    ("max8-2d-axis-minus1", _max8([2, 2], [2, 2], [0, 0], [0, 0], axis=-1), X),
    ("max8-3d-same-upper", _max8([2, 3, 2], [2, 2, 3], [0, 0, 0], [0, 0, 0], auto_pad="same_upper"), X3),
    ("max8-2d-ceil", _max8([3, 3], [2, 2], [1, 0], [1, 1], "ceil", d=[1, 2]), X),
    ("max14-2d-ceil-torch", _max8([2, 2], [2, 2], [0, 0], [1, 1], "ceil_torch", version=ops14), X),
    ("max14-2d-ceil-torch-dilations", _max8([3, 2], [2, 2], [1, 1], [1, 1], "ceil_torch", d=[2, 2],
                                            version=ops14), X),
    ("avg1-2d-exclude", _avg([3, 3], [2, 2], [1, 1], [1, 2], True), X),
    ("avg1-2d-include", _avg([3, 3], [2, 2], [1, 1], [1, 2], False), X),
    ("avg1-2d-ceil-exclude", _avg([3, 2], [2, 2], [1, 0], [0, 1], True, "ceil"), X),
    ("avg1-2d-ceil-include", _avg([3, 2], [2, 2], [1, 0], [0, 1], False, "ceil"), X),
    ("avg1-2d-ceil-include-crossing", _avg([3, 3], [2, 2], [0, 0], [1, 1], False, "ceil"), X),
    ("avg1-1d-same-upper-include", _avg([2], [2], [0], [0], False, auto_pad="same_upper"), X1),
    ("avg1-2d-same-lower-exclude", _avg([3, 3], [2, 2], [0, 0], [0, 0], True, auto_pad="same_lower"), X),
    ("avg1-3d-valid", _avg([2, 2, 3], [1, 2, 2], [0, 0, 0], [0, 0, 0], True, auto_pad="valid"), X3),
    ("avg14-2d-ceil-torch-include", _avg([3, 3], [2, 2], [1, 1], [1, 1], False, "ceil_torch", version=ops14), X),
    ("avg14-2d-ceil-torch-include-drops", _avg([2, 2], [2, 2], [0, 0], [1, 1], False, "ceil_torch", version=ops14), X),
    ("avg14-2d-ceil-torch-include-past-pads", _avg([3, 3], [2, 2], [1, 0], [0, 0], False, "ceil_torch",
                                                   version=ops14), X),
    ("avg14-2d-ceil-torch-exclude", _avg([2, 3], [2, 2], [0, 1], [1, 1], True, "ceil_torch", version=ops14), X),
]


@pytest.mark.parametrize("build, x", [pytest.param(b, x, id=name) for name, b, x in POOLS])
def test_pool_agrees_with_openvino(tmp_path, build, x):
    check(tmp_path, build, x)


def test_ceil_rounding_keeps_windows_of_padding_alone(tmp_path):
    # Rounding "ceil" (not ceil_torch) keeps a last window that starts in the end padding: here the
    # third of 4 entries, pads_end 1, stride 2. It holds no input: MaxPool gives the lowest value (the
    # plugin: -FLT_MAX and index 0; rnnloop: -inf and index -1, ONNX MaxPool's answer), AvgPool NaN
    # (0 / 0, as the plugin) or with exclude-pad=false 0 (no input, one pad counted).
    y = np.full((1, 1, 3, 3), -np.inf, np.float32)
    y[0, 0, :2, :2] = [[-1, -3], [-9, -11]]
    index = np.full((1, 1, 3, 3), -1, np.int64)
    index[0, 0, :2, :2] = [[0, 2], [8, 10]]
    check(tmp_path, _max8([2, 2], [2, 2], [0, 0], [1, 1], "ceil"), -RAMP, expect=[y, index])
    plugin = _openvino(_save(tmp_path, _max8([2, 2], [2, 2], [0, 0], [1, 1], "ceil"), -RAMP), -RAMP)
    assert plugin[0][0, 0, 2, 2] == LOWEST and plugin[1][0, 0, 2, 2] == 0  # (what the plugin gives)
    check(tmp_path, _avg([2, 2], [2, 2], [0, 0], [1, 1], True, "ceil"), RAMP)
    check(tmp_path, _avg([2, 2], [2, 2], [0, 0], [1, 1], False, "ceil"), RAMP)


# ---------------------------------------------------------------------------------------------
# normalisation

SCALE, SHIFT, MEAN = (RNG.standard_normal(3).astype(np.float32) for _ in range(3))
VAR = RNG.uniform(0.5, 2.0, 3).astype(np.float32)

NORMS = [
    ("batch-norm-1", lambda x: ops1.batch_norm_inference(x, c(SCALE), c(SHIFT), c(MEAN), c(VAR), 1e-3), X),
    ("batch-norm-5", lambda x: ops5.batch_norm_inference(x, c(SCALE), c(SHIFT), c(MEAN), c(VAR), 1e-2), X1),
    ("mvn-2-across", lambda x: ops2.mvn(x, True, True, 1e-3), X),
    ("mvn-2-per-channel", lambda x: ops2.mvn(x, False, True, 1e-9), X),
    ("mvn-2-mean-only", lambda x: ops2.mvn(x, False, False, 1e-9), X3),
    ("mvn-6-inside", lambda x: ops6.mvn(x, c([2, 3], np.int64), True, 1e-2, "inside_sqrt"), X),
    ("mvn-6-outside", lambda x: ops6.mvn(x, c([-1], np.int32), True, 1e-2, "outside_sqrt"), X),
    ("mvn-6-mean-only", lambda x: ops6.mvn(x, c([1, 2], np.int64), False, 1e-9, "inside_sqrt"), X1),
    ("normalize-l2-add", lambda x: ops1.normalize_l2(x, c([1], np.int64), 1e-6, "add"), X),
    ("normalize-l2-max", lambda x: ops1.normalize_l2(x, c([2, 3], np.int64), 5.0, "max"), X),
    ("normalize-l2-all", lambda x: ops1.normalize_l2(x, c([0, 1, 2], np.int64), 1e-6, "add"), X1),
    ("normalize-l2-none", lambda x: ops1.normalize_l2(x, ov.op.Constant(ov.Type.i64, ov.Shape([0]), []), 0.5, "max"),
     X1),
]


@pytest.mark.parametrize("build, x", [pytest.param(b, x, id=name) for name, b, x in NORMS])
def test_normalisation_agrees_with_openvino(tmp_path, build, x):
    check(tmp_path, build, x)


def test_mvn_2_without_reduction_axes_reads_across_channels(tmp_path):
    # The opset API always writes reduction_axes; IR files of older converters have only across_channels.
    path = _save(tmp_path, lambda x: ops2.mvn(x, False, True, 1e-9), X)
    with open(path) as f:
        xml = f.read()
    with open(path, "w") as f:
        f.write(re.sub(r' reduction_axes="[^"]*"', "", xml).replace('across_channels="false"',
                                                                      'across_channels="true"'))
    got = rnnloop.load(path, backend="interp").run(None, {"x": X})[0]
    mean = X.mean(axis=(1, 2, 3), keepdims=True)
    np.testing.assert_allclose(got, (X - mean) / np.sqrt(X.var(axis=(1, 2, 3), keepdims=True) + 1e-9),
                               rtol=1e-4, atol=1e-5)


def test_unsupported_rounding_is_rejected_by_name(tmp_path):
    path = _save(tmp_path, _max1([2, 2], [2, 2], [0, 0], [0, 0]), X)
    with open(path) as f:
        xml = f.read()
    with open(path, "w") as f:
        f.write(xml.replace('rounding_type="floor"', 'rounding_type="ceil_torch"'))
    with pytest.raises(rnnloop.UnsupportedModelError, match="rounding_type='ceil_torch' is not supported"):
        rnnloop.load(path, backend="interp")


@pytest.mark.slow
def test_every_layer_compiles_and_agrees_with_openvino(tmp_path):
    """One model of every layer, one compiled region (backend="numba")."""
    def build(x):
        y = ops1.batch_norm_inference(x, c(SCALE), c(SHIFT), c(MEAN), c(VAR), 1e-3)
        y = ops8.max_pool(y, [1, 1], [1, 1], [1, 1], [1, 1], [3, 3], "floor", "explicit", "i64", 0).output(0)
        y = ops14.avg_pool(y, [2, 2], [0, 0], [1, 1], [2, 2], False, "ceil_torch", "explicit")
        y = ops6.mvn(y, c([2, 3], np.int64), True, 1e-3, "inside_sqrt")
        return ops1.normalize_l2(y, c([1], np.int64), 1e-6, "add")

    path = _save(tmp_path, build, X)
    session = rnnloop.load(path, backend="numba", strict=True)
    assert "interpreted" not in session.explain(), session.explain()
    np.testing.assert_allclose(session.run(None, {"x": X})[0], _openvino(path, X)[0], rtol=1e-4, atol=1e-5)
