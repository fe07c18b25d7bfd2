"""Every OpenVINO layer converter (rnnloop/frontends/openvino_ops.py) against OpenVINO's own CPU plugin.

Each case builds a one-layer model with OpenVINO's opset API, saves it as IR, and runs the same file
in rnnloop (backend="interp") and in OpenVINO (f32 inference precision: the CPU plugin would pick
bf16 here). Where the plugin itself is wrong, the case gives a NumPy expectation instead, and says why.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import rnnloop

ov = pytest.importorskip("openvino", reason="the OpenVINO front end is checked against OpenVINO's CPU plugin")
import openvino.opset1 as ops1  # Softmax-1, TopK-1, ShapeOf-1, Broadcast-1, Gather-1
import openvino.opset2 as ops2  # Gelu-2
import openvino.opset3 as ops3  # TopK-3, Broadcast-3, ShapeOf-3
import openvino.opset6 as ops6  # ReadValue-6, Assign-6
import openvino.opset7 as ops7  # Gather-7
import openvino.opset8 as ops8  # Slice-8, Gather-8, Softmax-8
import openvino.opset13 as ops
import openvino.opset15 as ops15  # Squeeze-15: axes optional
from openvino.utils.node_factory import NodeFactory

CORE = ov.Core()
CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
I64_MAX, I64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min

RNG = np.random.default_rng(20260401)
F = RNG.standard_normal((2, 3, 4)).astype(np.float32)  # the usual float input
F34 = RNG.standard_normal((3, 4)).astype(np.float32)
F31 = RNG.standard_normal((3, 1)).astype(np.float32)
F4 = RNG.standard_normal(4).astype(np.float32)
POS = RNG.uniform(0.1, 3.0, (2, 3, 4)).astype(np.float32)  # for Log, Sqrt, Power's base
WIDE = np.linspace(-5, 5, 24, dtype=np.float32).reshape(2, 3, 4)  # crosses every activation's knees
SMALL = np.array([[-2.0, -1.0, 0.0, 1.0], [2.0, 1.0, 0.0, -3.0], [0.0, 2.0, -1.0, 1.0]], np.float32)
I = np.arange(-7, 8, dtype=np.int32).reshape(3, 5)
I64 = I.astype(np.int64)
U8 = np.arange(0, 240, 20, dtype=np.uint8)
D = np.array([-3, -2, 2, 3, 5], np.int32)  # divisors of both signs, none zero
FRAC = np.array([-2.7, -1.5, -0.5, 0.0, 0.4, 1.5, 2.5, 3.9], np.float32)
B34 = RNG.random((3, 4)) < 0.5
B4 = np.array([True, False, True, False])
B31 = np.array([[True], [False], [True]])
TIES = np.array([[1, 3, 3, 2, 1, 3], [0, 0, 0, 0, 0, 0]], np.float32)  # ties: only stable TopK fixes the order
PERM = RNG.permutation(24).astype(np.float32).reshape(2, 3, 4)  # distinct values: TopK has no ties


def c(value, dtype=np.int64):
    """A Const layer (axes, orders, lengths, bounds: the inputs converters need at load)."""
    return ops.constant(np.asarray(value, dtype=dtype))


def _param(name: str, value: np.ndarray):
    return ops.parameter(list(value.shape), ov.Type.boolean if value.dtype == bool else ov.Type(value.dtype),
                         name=name)


def _outputs(built) -> list:
    built = built if isinstance(built, (list, tuple)) else [built]
    return [out for b in built for out in (b.outputs() if hasattr(b, "outputs") else [b])]


def _save(tmp_path, build, inputs) -> tuple[str, dict]:
    feeds = {f"x{i}": np.asarray(v) for i, v in enumerate(inputs)}
    params = [_param(name, value) for name, value in feeds.items()]
    model = ov.Model(_outputs(build(*params)), params)
    path = str(tmp_path / "m.xml")
    ov.save_model(model, path, compress_to_fp16=False)
    return path, feeds


def _openvino(path: str, feeds: dict) -> list[np.ndarray]:
    compiled = CORE.compile_model(path, "CPU", CONFIG)
    result = compiled(feeds)
    return [np.asarray(result[out]) for out in compiled.outputs]


def _compare(got: list, expected: list, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected)):
        e = np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape, f"output {k}: {g.dtype}{g.shape} vs {e.dtype}{e.shape}"
        if e.dtype.kind == "f":
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=f"output {k}")
        else:
            np.testing.assert_array_equal(g, e, err_msg=f"output {k}")


def check(tmp_path, build, *inputs, expect=None, edit=None, **tolerance):
    """Run `build`'s one-layer model in rnnloop and compare with OpenVINO (or with `expect`, a list of arrays).

    `edit` rewrites the saved .xml text (for what the opset API does not expose).
    """
    path, feeds = _save(tmp_path, build, inputs)
    with open(path) as f:
        xml = f.read()
    if edit is not None:
        xml = edit(xml)
        with open(path, "w") as f:
            f.write(xml)
    layers = set(re.findall(r'\stype="(\w+)"', xml)) - {"Parameter", "Const", "Result"}
    assert len(layers) == 1, f"save_model rewrote the layer: the IR holds {sorted(layers)}"
    got = rnnloop.load(path, backend="interp").run(None, feeds)
    _compare(got, _openvino(path, feeds) if expect is None else expect, **tolerance)


def _cases(*rows):
    """pytest params from (id, build, inputs..., [check's keyword arguments]) rows."""
    params = []
    for name, build, *inputs in rows:
        opts = inputs.pop() if inputs and isinstance(inputs[-1], dict) else {}
        params.append(pytest.param(build, inputs, opts, id=name))
    return params


# ---------------------------------------------------------------------------------------------
# elementwise

BINARY = _cases(
    ("add", ops.add, F, F31),
    ("add-i32", ops.add, I, D),
    ("subtract", ops.subtract, F, F4),
    ("multiply", ops.multiply, F31, F4),
    ("multiply-i64", ops.multiply, I64, I64[:1]),
    ("divide", ops.divide, F, F31 + 3),
    # the CPU plugin truncates integer division though m_pythondiv is true (its constant folding floors)
    ("divide-i32-floors", ops.divide, I, D, {"expect": [I // D]}),
    ("divide-i64-floors", ops.divide, I64.T, D.astype(np.int64)[:3], {"expect": [I64.T // D[:3]]}),
    ("power", ops.power, POS, F4),
    ("power-i32", ops.power, I, np.array([0, 1, 2, 3, 2], np.int32)),
    ("maximum", ops.maximum, F, F31),
    ("minimum", ops.minimum, F, F4),
    ("maximum-i32", ops.maximum, I, D),
    ("squared-difference", ops.squared_difference, F, F31),
    ("floor-mod", ops.floor_mod, F * 4, F31 + 0.5),
    ("floor-mod-i32", ops.floor_mod, I, D),
    ("mod", ops.mod, F * 4, F31 + 0.5),
    ("mod-i32", ops.mod, I, D),
    ("equal", ops.equal, SMALL, SMALL[:1]),
    ("not-equal", ops.not_equal, SMALL, SMALL[:, :1]),
    ("equal-i32", ops.equal, I % 3, D % 3),
    ("less", ops.less, SMALL, SMALL[1]),
    ("less-equal", ops.less_equal, SMALL, SMALL[1]),
    ("greater", ops.greater, SMALL, SMALL[:, 1:2]),
    ("greater-equal", ops.greater_equal, I, D),
    ("logical-and", ops.logical_and, B34, B4),
    ("logical-or", ops.logical_or, B34, B31),
    ("logical-xor", ops.logical_xor, B31, B4),
)


@pytest.mark.parametrize("build, inputs, opts", BINARY)
def test_binary(tmp_path, build, inputs, opts):
    check(tmp_path, build, *inputs, **opts)


def test_divide_truncates_without_python_division(tmp_path):
    # the opset API does not expose m_pythondiv; without it integers divide C-style, truncating toward zero
    check(tmp_path, ops.divide, I, D, edit=lambda xml: xml.replace('m_pythondiv="true"', 'm_pythondiv="false"'))


UNARY = _cases(
    ("sigmoid", ops.sigmoid, WIDE),
    ("tanh", ops.tanh, WIDE),
    ("relu", ops.relu, WIDE),
    ("exp", ops.exp, F),
    ("log", ops.log, POS),
    ("sqrt", ops.sqrt, POS),
    ("abs", ops.abs, F),
    ("abs-i32", ops.abs, I),
    ("negative", ops.negative, F),
    ("negative-i32", ops.negative, I),
    ("floor", ops.floor, FRAC),
    ("ceiling", ops.ceiling, FRAC),
    ("sin", ops.sin, WIDE),
    ("cos", ops.cos, WIDE),
    ("erf", ops.erf, WIDE),
    ("sign", ops.sign, SMALL),
    ("sign-i32", ops.sign, I),
    ("logical-not", ops.logical_not, B34),
    ("softplus", ops.softplus, WIDE),
    # the plugin's SoftPlus is off by 2e-6 in absolute terms, below zero at x = -20
    ("softplus-far", ops.softplus, WIDE * 4, {"expect": [np.logaddexp(WIDE * 4, np.float32(0))]}),
    ("clamp", lambda x: ops.clamp(x, -0.75, 1.25), WIDE),
    ("clamp-i32-rounds-inwards", lambda x: ops.clamp(x, 1.5, 5.5), I),
    ("clamp-i32-rounds-inwards-negative", lambda x: ops.clamp(x, -5.5, -1.5), I),
    ("clamp-i32-beyond-range", lambda x: ops.clamp(x, -1e10, 1e10), np.array([-2**31, -5, 0, 2**31 - 1], np.int32)),
    # the plugin truncates min for u8 (2.2 -> 2) where the spec and its reference implementation take the ceiling
    ("clamp-u8", lambda x: ops.clamp(x, 2.2, 300), U8, {"expect": [np.clip(U8, 3, 255)]}),
    ("elu", lambda x: ops.elu(x, 0.5), WIDE),
    ("hsigmoid", ops.hsigmoid, WIDE),
    ("hswish", ops.hswish, WIDE),
    # (ops.swish always adds a beta input: the node factory makes the one-input form)
    ("swish-no-beta", lambda x: NodeFactory("opset4").create("Swish", [x.output(0)]), WIDE),
    ("swish-beta", lambda x: ops.swish(x, c(0.7, np.float32)), WIDE),
    ("gelu-erf", lambda x: ops.gelu(x, "erf"), WIDE),
    ("gelu-tanh", lambda x: ops.gelu(x, "tanh"), WIDE),
    ("gelu-2", ops2.gelu, WIDE),
)


@pytest.mark.parametrize("build, inputs, opts", UNARY)
def test_unary(tmp_path, build, inputs, opts):
    check(tmp_path, build, *inputs, **opts)


OTHER = _cases(
    ("select", lambda c_, a, b: ops.select(c_, a, b), B31, F34, F4),
    ("select-i32", lambda c_, a, b: ops.select(c_, a, b), B4, I[:, :4], np.int32(9)),
    ("convert-f32-i32", lambda x: ops.convert(x, "i32"), FRAC),
    ("convert-i64-f32", lambda x: ops.convert(x, "f32"), I64 * 1000003),
    ("convert-f32-boolean", lambda x: ops.convert(x, "boolean"), FRAC),
    ("convert-like-f32-i64", lambda x, y: ops.convert_like(x, y), FRAC, I64[0]),
    ("convert-like-i32-f32", lambda x, y: ops.convert_like(x, y), I, F4),
)


@pytest.mark.parametrize("build, inputs, opts", OTHER)
def test_select_and_convert(tmp_path, build, inputs, opts):
    check(tmp_path, build, *inputs, **opts)


# ---------------------------------------------------------------------------------------------
# matrix products and reductions


def _mm(ta: bool, tb: bool):
    return lambda a, b: ops.matmul(a, b, ta, tb)


def _r(shape):
    return RNG.standard_normal(shape).astype(np.float32)


MATMUL = _cases(
    ("2d", _mm(False, False), _r((2, 3)), _r((3, 4))),
    ("2d-ta", _mm(True, False), _r((3, 2)), _r((3, 4))),
    ("2d-tb", _mm(False, True), _r((2, 3)), _r((4, 3))),
    ("2d-ta-tb", _mm(True, True), _r((3, 2)), _r((4, 3))),
    ("3d", _mm(False, False), _r((2, 3, 4)), _r((2, 4, 5))),
    ("3d-ta-tb", _mm(True, True), _r((2, 4, 3)), _r((2, 5, 4))),
    ("3d-by-2d-tb", _mm(False, True), _r((2, 3, 4)), _r((5, 4))),
    ("batch-broadcast", _mm(False, False), _r((2, 1, 3, 4)), _r((3, 4, 5))),
    ("1d-by-2d", _mm(False, False), _r(4), _r((4, 5))),
    ("1d-ta-ignored", _mm(True, False), _r(4), _r((4, 5))),
    ("3d-by-1d", _mm(False, False), _r((2, 3, 4)), _r(4)),
    ("2d-by-1d-tb-ignored", _mm(True, True), _r((4, 3)), _r(4)),
    ("1d-by-1d", _mm(False, False), _r(4), _r(4)),
)


@pytest.mark.parametrize("build, inputs, opts", MATMUL)
def test_matmul(tmp_path, build, inputs, opts):
    check(tmp_path, build, *inputs, rtol=1e-5, atol=1e-5, **opts)


def _reduce(fn, axes, keep):
    return lambda x: fn(x, c(axes), keep)


REDUCE = _cases(
    ("sum", _reduce(ops.reduce_sum, [1], False), F),
    ("sum-keep-negative", _reduce(ops.reduce_sum, [-1, 0], True), F),
    ("sum-scalar-axis", _reduce(ops.reduce_sum, 2, False), F),
    ("sum-i32", _reduce(ops.reduce_sum, [0], False), I),
    ("mean", _reduce(ops.reduce_mean, [-1], False), F),
    ("mean-keep", _reduce(ops.reduce_mean, [0, 2], True), F),
    ("max", _reduce(ops.reduce_max, [0, -1], False), F),
    ("max-keep", _reduce(ops.reduce_max, [1], True), F),
    ("min", _reduce(ops.reduce_min, [-2], True), F),
    ("min-i32", _reduce(ops.reduce_min, [1], False), I),
    ("prod", _reduce(ops.reduce_prod, [2], False), F),
    ("prod-keep-all", _reduce(ops.reduce_prod, [0, 1, 2], True), F / 2 + 1),
    # empty axes reduce nothing; the plugin rejects the layer
    ("sum-empty-axes", _reduce(ops.reduce_sum, np.zeros(0, np.int64), False), F, {"expect": [F]}),
)


@pytest.mark.parametrize("build, inputs, opts", REDUCE)
def test_reduce(tmp_path, build, inputs, opts):
    check(tmp_path, build, *inputs, **opts)


SOFTMAX = _cases(
    ("softmax-1", lambda x: ops1.softmax(x, 1), F),
    ("softmax-8-last", lambda x: ops8.softmax(x, -1), F),
    ("softmax-8-first", lambda x: ops8.softmax(x, 0), F),
    ("log-softmax", lambda x: ops.log_softmax(x, -1), F),
    ("log-softmax-axis-1", lambda x: ops.log_softmax(x, 1), F),
)


@pytest.mark.parametrize("build, inputs, opts", SOFTMAX)
def test_softmax(tmp_path, build, inputs, opts):
    check(tmp_path, build, *inputs, **opts)


def _topk(module, k, axis, mode, sort, index_type=None):
    extra = {} if index_type is None else {"index_element_type": index_type}
    return lambda x: module.topk(x, c(k), axis, mode, sort, **extra)


TOPK = _cases(
    ("11-max-value-i32", _topk(ops, 2, -1, "max", "value", "i32"), PERM),
    ("11-min-value-i64", _topk(ops, 3, 1, "min", "value", "i64"), PERM),
    ("11-max-index", _topk(ops, 3, -1, "max", "index", "i64"), PERM),
    ("11-min-index-axis-0", _topk(ops, 1, 0, "min", "index", "i32"), PERM),
    ("3-max-value", _topk(ops3, 2, 2, "max", "value", "i64"), PERM),
    ("3-min-index", _topk(ops3, 2, 1, "min", "index", "i32"), PERM),
    ("1-max-value", _topk(ops1, 4, -1, "max", "value"), PERM),
    ("k-all", _topk(ops, 4, 2, "min", "value", "i32"), PERM),
    ("k-parameter", lambda x, k: ops.topk(x, k, -1, "max", "value", "i32"), PERM, np.int32(3)),
    ("stable-ties-max", lambda x: ops.topk(x, c(3), -1, "max", "value", "i32", stable=True), TIES),
    ("stable-ties-min-index", lambda x: ops.topk(x, c(4), 1, "min", "index", "i64", stable=True), TIES),
)


@pytest.mark.parametrize("build, inputs, opts", TOPK)
def test_topk(tmp_path, build, inputs, opts):
    check(tmp_path, build, *inputs, **opts)


# ---------------------------------------------------------------------------------------------
# shapes and data movement

F2345 = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
F1314 = RNG.standard_normal((1, 3, 1, 4)).astype(np.float32)

MOVEMENT = _cases(
    ("concat", lambda a, b, d: ops.concat([a, b, d], 1), F, F[:, :1], F[:, :2]),
    ("concat-negative-axis", lambda a, b: ops.concat([a, b], -1), F, F[..., :2]),
    ("concat-i32", lambda a, b: ops.concat([a, b], 0), I, D[None]),
    ("split", lambda x: ops.split(x, c(1), 3), F),
    ("split-negative-axis", lambda x: ops.split(x, c(-1), 2), F),
    ("variadic-split", lambda x: ops.variadic_split(x, c(1), c([1, 2, 0])), F),
    ("variadic-split-minus-one", lambda x: ops.variadic_split(x, c(2), c([1, -1, 1])), F),
    ("variadic-split-minus-one-i32", lambda x: ops.variadic_split(x, c(0, np.int32), c([-1, 1], np.int32)), F),
    ("variadic-split-minus-one-negative-axis", lambda x: ops.variadic_split(x, c(-1), c([-1, 3])), F),
    ("variadic-split-axis-of-shape-1", lambda x: ops.variadic_split(x, c([1]), c([2, 1])), F),
    ("squeeze-axes", lambda x: ops.squeeze(x, c([0, 2])), F1314),
    ("squeeze-negative-scalar-axis", lambda x: ops.squeeze(x, c(-2)), F1314),
    ("squeeze-no-axes", lambda x: ops15.squeeze(x), F1314),
    ("squeeze-keeps-a-wider-axis", lambda x: ops.squeeze(x, c([0, 1])), F1314),
    ("squeeze-15-allow-axis-skip", lambda x: ops15.squeeze(x, c([-1, -2]), allow_axis_skip=True), F1314),
    ("unsqueeze", lambda x: ops.unsqueeze(x, c([0, 3])), F),
    ("unsqueeze-negative", lambda x: ops.unsqueeze(x, c([-1])), F),
    ("unsqueeze-scalar-axis", lambda x: ops.unsqueeze(x, c(1)), F34),
    ("unsqueeze-repeated-axis", lambda x: ops.unsqueeze(x, c([0, 0])), F34),
    ("unsqueeze-repeated-negative-axis", lambda x: ops.unsqueeze(x, c([-1, 3])), F34),
    ("reshape-special-zero", lambda x: ops.reshape(x, c([0, -1]), True), F),
    ("reshape-special-zero-copies", lambda x: ops.reshape(x, c([0, 0, 2, 2]), True), F),
    ("reshape-no-special-zero", lambda x: ops.reshape(x, c([4, -1]), False), F),
    ("reshape-no-special-zero-i32", lambda x: ops.reshape(x, c([3, 2, 4], np.int32), False), F),
    ("transpose", lambda x: ops.transpose(x, c([2, 0, 1])), F),
    ("transpose-empty-order-reverses", lambda x: ops.transpose(x, c([], np.int64)), F),
    ("gather-8", lambda x: ops8.gather(x, c([2, 0, -1]), c(0)), F34),
    ("gather-8-axis-1", lambda x: ops8.gather(x, c([[0, -1], [-3, 1]]), c(1)), F),
    ("gather-8-scalar-index", lambda x: ops8.gather(x, c(-2), c(-1)), F),
    ("gather-8-axis-of-shape-1", lambda x: ops8.gather(x, c([1, 0]), c([-1])), F),
    ("gather-8-parameter-indices", lambda x, i: ops8.gather(x, i, c(1)), F, np.array([2, -1, 0, -3], np.int32)),
    ("gather-1", lambda x: ops1.gather(x, c([1, 0, 1]), c(1)), F),
    ("gather-7", lambda x: ops7.gather(x, c([[3], [0]]), c(-1)), F),
    ("shape-of-i64", lambda x: ops.shape_of(x, "i64"), F),
    ("shape-of-i32", lambda x: ops.shape_of(x, "i32"), F),
    ("shape-of-1", lambda x: ops1.shape_of(x), F),
    ("broadcast-numpy", lambda x: ops.broadcast(x, c([2, 3, 4])), F31),
    ("broadcast-bidirectional", lambda x: ops.broadcast(x, c([2, 1, 4]), broadcast_spec="BIDIRECTIONAL"), F31),
    ("broadcast-explicit", lambda x: ops.broadcast(x, c([2, 3, 4]), c([1]), "EXPLICIT"), F31[:, 0]),
    ("broadcast-explicit-two-axes", lambda x: ops.broadcast(x, c([2, 3, 4]), c([0, 2]), "EXPLICIT"), F[:, 0]),
    ("broadcast-explicit-ones", lambda x: ops.broadcast(x, c([2, 3, 5]), c([1, 2]), "EXPLICIT"), F31),
    ("broadcast-1-numpy", lambda x: ops1.broadcast(x, c([2, 3, 4])), F4),
    ("slice", lambda x: ops8.slice(x, c([1]), c([3]), c([1]), c([1])), F),
    ("slice-no-axes", lambda x: ops8.slice(x, c([1, 0]), c([2, 3]), c([1, 2])), F),
    ("slice-negative-step", lambda x: ops8.slice(x, c([-1]), c([I64_MIN]), c([-1]), c([2])), F),
    ("slice-negative-step-2", lambda x: ops8.slice(x, c([10, 2]), c([-10, 0]), c([-2, -1]), c([-1, 1])), F),
    ("slice-negative-axis-i32", lambda x: ops8.slice(x, c([-3], np.int32), c([I64_MAX]), c([1]), c([-1])), F),
    ("tile", lambda x: ops.tile(x, c([2, 1, 3])), F),
    ("tile-shorter-repeats", lambda x: ops.tile(x, c([2, 3])), F),
    ("tile-longer-repeats", lambda x: ops.tile(x, c([2, 1, 1, 2])), F),
    ("tile-i32", lambda x: ops.tile(x, c([1, 2])), I),
    ("tile-scalar", lambda x: ops.tile(x, c([2, 3], np.int32)), np.float32(1.5)),
)


@pytest.mark.parametrize("build, inputs, opts", MOVEMENT)
def test_movement(tmp_path, build, inputs, opts):
    check(tmp_path, build, *inputs, **opts)


def _range(output_type):
    return lambda a, b, s: ops.range(a, b, s, output_type)


RANGE = _cases(
    ("i32", _range("i32"), np.int32(2), np.int32(11), np.int32(3)),
    ("i64-negative-step", _range("i64"), np.int64(5), np.int64(-4), np.int64(-2)),
    ("f32", _range("f32"), np.float32(0.5), np.float32(3.2), np.float32(0.75)),
    ("f32-negative-step", _range("f32"), np.float32(1), np.float32(-1.1), np.float32(-0.5)),
    # the plugin's Range is wrong where OpenVINO's reference implementation (its constant folding) is right:
    # it gives [4, 5, 6] for an empty range, and counts and rounds fractional inputs where the reference first
    # truncates them to the (integer) output type
    ("empty", _range("i32"), np.int32(4), np.int32(1), np.int32(1), {"expect": [np.zeros(0, np.int32)]}),
    ("empty-f32", _range("f32"), np.float32(1), np.float32(4), np.float32(-1), {"expect": [np.zeros(0, np.float32)]}),
    ("f32-to-i32", _range("i32"), np.float32(0.5), np.float32(5.5), np.float32(1.5),
     {"expect": [np.arange(0, 5, 1, np.int32)]}),
    ("i32-to-f32", _range("f32"), np.int32(1), np.int32(6), np.int32(2)),
    ("mixed-input-types", _range("i64"), np.int32(1), np.float32(7.9), np.int64(2), {"expect": [np.array([1, 3, 5])]}),
)


@pytest.mark.parametrize("build, inputs, opts", RANGE)
def test_range(tmp_path, build, inputs, opts):
    check(tmp_path, build, *inputs, **opts)


def _ss(begin, end, stride, begin_mask=(), end_mask=(), new=(), shrink=(), ellipsis=()):
    masks = [list(m) + [0] * (len(begin) - len(m)) for m in (begin_mask, end_mask, new, shrink, ellipsis)]
    return lambda x: ops.strided_slice(x, c(begin), c(end), c(stride), *masks)


STRIDED_SLICE = _cases(
    ("plain", _ss([0, 1], [2, 3], [1, 1]), F2345),
    ("begin-mask", _ss([1, 2], [2, 3], [1, 1], begin_mask=[1, 0]), F2345),
    ("end-mask", _ss([1, 1], [0, 0], [1, 2], end_mask=[1, 1]), F2345),
    ("stride-2-clamped", _ss([0, -9, 1], [9, 9, -1], [1, 2, 2]), F2345),
    ("negative-stride", _ss([-1, 2], [0, 0], [-1, -1]), F2345),
    ("negative-stride-masks", _ss([0, 0, 0], [0, 0, 0], [-1, 1, -2], begin_mask=[1, 1, 1], end_mask=[1, 1, 1]),
     F2345),
    ("negative-stride-past-start", _ss([3, 10], [-10, -20], [-1, -2]), F2345[0]),
    ("new-axis", _ss([0, 0, 1], [1, 0, 3], [1, 1, 1], new=[0, 1, 0]), F2345),
    ("new-axis-first", _ss([0, 1], [0, 2], [1, 1], new=[1, 0]), F2345),
    ("shrink", _ss([1, 0, 2], [2, 0, 3], [1, 1, 1], end_mask=[0, 1, 0], shrink=[1, 0, 1]), F2345),
    ("shrink-last-index", _ss([0, -1], [0, 0], [1, 1], begin_mask=[1, 0], end_mask=[1, 0], shrink=[0, 1]), F2345),
    ("shrink-negative", _ss([-2, -3], [0, 0], [1, 1], shrink=[1, 1]), F2345),
    ("ellipsis", _ss([1, 0, 0], [2, 0, 2], [1, 1, 1], ellipsis=[0, 1, 0]), F2345),
    ("ellipsis-first", _ss([0, 1], [0, 4], [1, 2], ellipsis=[1, 0]), F2345),
    ("ellipsis-new-axis-shrink", _ss([0, 0, 2], [0, 0, 3], [1, 1, 1], new=[0, 1, 0], shrink=[0, 0, 1],
                                     ellipsis=[1, 0, 0]), F2345),
    ("ellipsis-covers-nothing", _ss([1, 0, 0, 0, 1], [2, 3, 0, 4, 5], [1, 1, 1, 1, 2], ellipsis=[0, 0, 1, 0, 0]),
     F2345),
    ("fewer-entries", _ss([1], [0], [-1], end_mask=[1]), F2345),
    # the plugin returns garbage when a new axis, a negative stride and a shrunk axis meet (its reference
    # implementation agrees with NumPy)
    ("all-masks", _ss([0, 0, 1, 0], [0, 0, 0, 0], [1, 1, -1, 1], begin_mask=[0, 1, 0, 1], end_mask=[0, 1, 1, 0],
                      new=[1, 0, 0, 0], shrink=[0, 0, 0, 1]), F2345, {"expect": [F2345[None, :, 1::-1, 0]]}),
)


@pytest.mark.parametrize("build, inputs, opts", STRIDED_SLICE)
def test_strided_slice(tmp_path, build, inputs, opts):
    check(tmp_path, build, *inputs, **opts)


# ---------------------------------------------------------------------------------------------
# unsupported layers


def test_unsupported_layers_are_listed_in_one_error(tmp_path):
    boxes, scores, x, rois = (ops.parameter(shape, ov.Type.f32, name=name) for shape, name in (
        ([1, 4, 4], "boxes"), ([1, 1, 4], "scores"), ([1, 1, 4, 4], "x"), ([1, 5], "rois")))
    nms = ops.non_max_suppression(boxes, scores, c([2]), c(0.5, np.float32), name="my_nms")
    pool = ops.roi_pooling(x, rois, output_roi=[2, 2], spatial_scale=1.0, name="my_pool")
    state = ops6.read_value(x, "state", name="my_state")
    total = ops.add(state, x)
    model = ov.Model([ops.result(nms.output(0)), ops.result(pool), ops.result(total)], [ops6.assign(total, "state")],
                     [boxes, scores, x, rois])
    path = str(tmp_path / "m.xml")
    ov.save_model(model, path, compress_to_fp16=False)
    with open(path) as f:
        layers = {t: (i, name) for i, name, t in re.findall(r'<layer id="(\d+)" name="([^"]+)" type="(\w+)"', f.read())}
    with pytest.raises(rnnloop.UnsupportedModelError) as info:
        rnnloop.load(path, backend="interp")
    message = str(info.value)
    assert "4 unsupported layer(s)" in message, message
    for type_ in ("NonMaxSuppression", "ROIPooling", "ReadValue", "Assign"):
        layer_id, name = layers[type_]
        assert re.search(rf"{type_} '{re.escape(name)}' \(layer {layer_id}, opset\d+\)", message), message
