"""Pooling and normalisation: the interpreter (rnnloop/interp/nn_ops.py) against onnxruntime over a
grid of every attribute, the compiled rules (rnnloop/codegen/nn.py) against the interpreter (several
ops in one model: one kernel serves many cases), inside a loop body too, errors that name the node,
and the pass that folds an inference BatchNormalization into the Conv before it.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from helpers import IR_VERSION, assert_same, parse, run_onnxruntime, thin
from onnx import TensorProto, helper, numpy_helper

import rnnloop
from rnnloop.builder import Builder
from rnnloop.ir import TensorType
from rnnloop.passes import fold_batchnorm

RNG = np.random.default_rng(2311)
F32 = np.dtype(np.float32)
SHAPES = {1: (2, 3, 9), 2: (2, 3, 7, 8), 3: (1, 2, 5, 6, 7)}  # N, C and 1, 2 or 3 spatial axes
KERNELS = {1: [3], 2: [3, 2], 3: [2, 3, 2]}


def model(nodes: list, x_shape, initializers: dict | None = None, opset: int = 22,
          dtype=TensorProto.FLOAT, outputs: list[str] | None = None) -> onnx.ModelProto:
    """One input x, the nodes (helper.make_node), constants, and every node output a model output."""
    names = outputs or [o for n in nodes for o in n.output if o]
    kinds = {o: TensorProto.INT64 if n.op_type == "MaxPool" and k == 1 else dtype
             for n in nodes for k, o in enumerate(n.output)}
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", dtype, x_shape)],
        [helper.make_tensor_value_info(o, kinds[o], None) for o in names],
        [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION)


def data(shape, dtype=np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


def compiled(m: onnx.ModelProto) -> rnnloop.Session:
    """A numba session in which no op is left to the interpreter."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", rnnloop.FallbackWarning)
        session = rnnloop.load(m, backend="numba", strict=True)
    assert "interpreted" not in session.explain(), session.explain()
    return session


# ---------------------------------------------------------------------------------------------
# the interpreter against onnxruntime

def _pool_configs(nd: int) -> list[dict]:
    """Every attribute of the pools, one or two at a time, on nd spatial axes."""
    k = KERNELS[nd]
    two, one = [2] * nd, [1] * nd
    return [
        {},
        {"strides": two, "pads": one + one},
        {"strides": two, "pads": [1] + [0] * (nd - 1) + [0] * (nd - 1) + [1], "ceil_mode": 1},
        {"strides": [3] * nd, "pads": [0] * nd + one, "ceil_mode": 1},  # a last window that starts in the pads
        {"dilations": two, "pads": one + [0] * nd},
        {"dilations": two, "strides": two, "ceil_mode": 1},
        *({"auto_pad": pad, "strides": two} for pad in ("SAME_UPPER", "SAME_LOWER", "VALID")),
        {"auto_pad": "SAME_LOWER", "strides": [1] * nd, "kernel_shape": [2] * nd},
    ], k


def _pool_cases() -> list:
    cases = []
    for nd in (1, 2, 3):
        configs, kernel = _pool_configs(nd)
        for config in configs:
            attrs = {"kernel_shape": kernel, **config}
            name = f"{nd}d-" + "-".join(f"{a}{v}" for a, v in config.items() if a != "kernel_shape")
            cases.append(pytest.param("MaxPool", attrs, nd, 2, id=f"max-{name}"))
            for cip in (0, 1):
                cases.append(pytest.param("AveragePool", {**attrs, "count_include_pad": cip}, nd, 1,
                                          id=f"avg-cip{cip}-{name}"))
            cases.append(pytest.param("LpPool", {**attrs, "p": 2 if nd != 2 else 3}, nd, 1, id=f"lp-{name}"))
    return cases


@pytest.mark.parametrize("op, attrs, nd, outputs", _pool_cases())
def test_pool_interpreter_matches_onnxruntime(op, attrs, nd, outputs):
    m = model([helper.make_node(op, ["x"], ["y", "i"][:outputs], **attrs)], SHAPES[nd])
    x = data(SHAPES[nd])
    assert_same(rnnloop.load(m, backend="interp").run(None, {"x": x}), run_onnxruntime(m, {"x": x}), 1e-5, 1e-5)


def test_maxpool_indices_count_the_first_maximum_and_storage_order():
    # ties everywhere: the first in row-major kernel order wins; storage_order=1 counts down columns
    # within each N, C plane (onnxruntime and the ONNX reference)
    x = np.floor(data((2, 2, 5, 6)) * 1.5)
    for order in (0, 1):
        m = model([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 2], strides=[2, 2],
                                    pads=[1, 1, 1, 0], storage_order=order)], x.shape, opset=12)
        assert_same(rnnloop.load(m, backend="interp").run(None, {"x": x}), run_onnxruntime(m, {"x": x}))


def test_maxpool_of_uint8_and_float64():
    for dtype, code in ((np.uint8, TensorProto.UINT8), (np.float64, TensorProto.DOUBLE)):
        x = (RNG.integers(0, 256, (2, 3, 7, 8)) if dtype == np.uint8 else data((2, 3, 7, 8))).astype(dtype)
        m = model([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])], x.shape,
                  dtype=code)
        assert_same(rnnloop.load(m, backend="interp").run(None, {"x": x}), run_onnxruntime(m, {"x": x}))


SCALE3, SHIFT3, MEAN3 = data(3), data(3), data(3)
VAR3 = RNG.uniform(0.5, 2.0, 3).astype(np.float32)


def _norm_cases() -> list:
    """(op, attributes, x shape, constants after x, outputs, opset)."""
    s4 = data(4)
    return [
        ("BatchNormalization", {"epsilon": 1e-3}, (2, 3, 4, 5), [SCALE3, SHIFT3, MEAN3, VAR3], 1, 15),
        ("BatchNormalization", {}, (2, 3), [SCALE3, SHIFT3, MEAN3, VAR3], 1, 14),
        ("BatchNormalization", {"momentum": 0.5}, (2, 3, 6), [SCALE3, SHIFT3, MEAN3, VAR3], 1, 9),
        ("BatchNormalization", {"spatial": 1}, (2, 3, 4), [SCALE3, SHIFT3, MEAN3, VAR3], 1, 7),
        ("BatchNormalization", {"spatial": 0}, (2, 3, 4), [data((3, 4)), data((3, 4)), data((3, 4)),
                                                           RNG.uniform(0.5, 2, (3, 4)).astype(np.float32)], 1, 7),
        ("InstanceNormalization", {"epsilon": 1e-2}, (2, 3, 4, 5), [SCALE3, SHIFT3], 1, 22),
        ("InstanceNormalization", {}, (2, 3, 7), [SCALE3, SHIFT3], 1, 6),
        ("LayerNormalization", {}, (2, 3, 5), [data(5), data(5)], 3, 17),
        ("LayerNormalization", {"axis": 1, "epsilon": 1e-3}, (2, 3, 4, 5), [data((3, 4, 5)), data(5)], 3, 17),
        ("LayerNormalization", {"axis": -2}, (2, 3, 4, 5), [data((1, 5))], 3, 17),  # Scale broadcasts, no B
        ("LayerNormalization", {"axis": 0}, (3, 4), [data((3, 4)), data(4)], 1, 17),
        ("GroupNormalization", {"num_groups": 2}, (2, 4, 3, 5), [s4, data(4)], 1, 21),
        ("GroupNormalization", {"num_groups": 4, "epsilon": 1e-2}, (2, 4, 6), [s4, data(4)], 1, 21),
        ("GroupNormalization", {"num_groups": 1}, (2, 4, 3, 5), [s4, data(4)], 1, 21),
        ("GroupNormalization", {"num_groups": 2}, (2, 4, 3, 5), [data(2), data(2)], 1, 18),  # per group
        ("LpNormalization", {}, (2, 3, 4), [], 1, 22),
        ("LpNormalization", {"axis": 0, "p": 1}, (2, 3, 4), [], 1, 22),
        ("LpNormalization", {"axis": 1, "p": 2}, (2, 3, 4), [], 1, 1),
        ("MeanVarianceNormalization", {}, (2, 3, 4, 5), [], 1, 13),
        ("MeanVarianceNormalization", {"axes": [1, 3]}, (2, 3, 4, 5), [], 1, 9),
        ("GlobalAveragePool", {}, (2, 3, 4, 5), [], 1, 22),
        ("GlobalMaxPool", {}, (2, 3, 4, 5, 2), [], 1, 1),
    ]


@pytest.mark.parametrize("op, attrs, shape, constants, outputs, opset",
                         [pytest.param(*c, id=f"{c[0]}-{k}") for k, c in enumerate(_norm_cases())])
def test_normalisation_interpreter_matches_onnxruntime(op, attrs, shape, constants, outputs, opset):
    names = [f"c{k}" for k in range(len(constants))]
    node = helper.make_node(op, ["x", *names], ["y", "mean", "inv"][:outputs], **attrs)
    m = model([node], shape, dict(zip(names, constants)), opset=opset)
    x = data(shape)
    assert_same(rnnloop.load(m, backend="interp").run(None, {"x": x}), run_onnxruntime(m, {"x": x}), 1e-5, 1e-5)


def test_lpnormalization_of_a_zero_lane_is_zero():
    # the ONNX test data's answer (onnxruntime gives NaN: 0 / 0)
    x = np.zeros((2, 3), np.float32)
    x[1] = [3, 4, 0]
    m = model([helper.make_node("LpNormalization", ["x"], ["y"], axis=1)], x.shape)
    y = rnnloop.load(m, backend="interp").run(None, {"x": x})[0]
    np.testing.assert_array_equal(y, np.array([[0, 0, 0], [0.6, 0.8, 0]], np.float32))


# ---------------------------------------------------------------------------------------------
# compiled against the interpreter: several ops in one model, one kernel


def _compare_backends(m: onnx.ModelProto, xs: list[np.ndarray], rtol=1e-5, atol=1e-5) -> None:
    session, reference = compiled(m), rnnloop.load(m, backend="interp")
    for x in xs:
        assert_same(session.run(None, {"x": x}), reference.run(None, {"x": x}), rtol, atol)


def _pool_nodes(nd: int, part: int) -> list:
    """Every pool in a few forms on nd spatial axes (part 0: every third form, and so on), each node a
    model output."""
    configs, kernel = _pool_configs(nd)
    nodes = []
    for k, config in enumerate(configs):
        if k % 3 != part:
            continue
        attrs = {"kernel_shape": kernel, **config}
        op = ("MaxPool", "AveragePool", "LpPool")[(k + k // 3) % 3]
        extra = {"AveragePool": {"count_include_pad": k % 2}, "LpPool": {"p": 1 + k % 3}}.get(op, {})
        outputs = [f"y{k}", f"i{k}"] if op == "MaxPool" and k % 2 == 0 else [f"y{k}"]
        nodes.append(helper.make_node(op, ["x"], outputs, **attrs, **extra))
    return nodes


@pytest.mark.parametrize("nd, part", thin([(2, 0), (1, 1), (3, 2), (2, 1), (2, 2), (1, 0), (1, 2), (3, 0), (3, 1)], 100))
# (the default run compiles MaxPool in the test below and in a loop body; each part here is tens of seconds cold)
def test_compiled_pools_match_the_interpreter(nd, part):
    globals_ = [helper.make_node("GlobalAveragePool", ["x"], ["g"]), helper.make_node("GlobalMaxPool", ["x"], ["h"])]
    m = model(_pool_nodes(nd, part) + (globals_ if part == 0 else []), [None, None, *[None] * nd])
    shape = SHAPES[nd]
    bigger = tuple(d + 3 for d in shape)  # the same kernel serves every size
    _compare_backends(m, [data(shape), data(bigger)])


def test_compiled_maxpool_handles_ties_nan_and_integers():
    m = model([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 3], pads=[1, 1, 0, 1],
                                strides=[1, 2], storage_order=1)], [None, None, None, None], opset=12)
    x = np.floor(data((2, 2, 5, 7)))
    x[0, 0, 1, 2] = np.nan
    x[1, 1, 3, :] = -np.inf
    _compare_backends(m, [x])
    m = model([helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                strides=[2, 2])], [None, None, None, None], dtype=TensorProto.INT8)
    session = compiled(m)
    x = RNG.integers(-128, 128, (2, 3, 6, 7)).astype(np.int8)
    assert_same(session.run(None, {"x": x}), run_onnxruntime(m, {"x": x}))


def _norm_model(rank: int) -> onnx.ModelProto:
    c = 4
    constants = {"s": data(c), "b": data(c), "m": data(c), "v": RNG.uniform(0.5, 2, c).astype(np.float32),
                 "ls": data(5), "lb": data(5)}
    nodes = [
        helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"], epsilon=1e-3),
        helper.make_node("InstanceNormalization", ["x", "s", "b"], ["inorm"]),
        helper.make_node("LayerNormalization", ["x", "ls", "lb"], ["ln", "ln_mean", "ln_inv"]),
        helper.make_node("LayerNormalization", ["x", "ls"], ["ln1"], axis=1),
        helper.make_node("GroupNormalization", ["x", "s", "b"], ["gn"], num_groups=2),
        helper.make_node("LpNormalization", ["x"], ["l2"], axis=1),
        helper.make_node("LpNormalization", ["x"], ["l1"], p=1),
        helper.make_node("MeanVarianceNormalization", ["x"], ["mvn"], axes=[0, rank - 1]),
    ]
    return model(nodes, [None, c] + [None] * (rank - 3) + [5], constants, opset=21)


@pytest.mark.slow
@pytest.mark.parametrize("rank", [4, 3])
def test_compiled_normalisations_match_the_interpreter(rank):
    shapes = [(2, 4, 3, 5), (3, 4, 6, 5)] if rank == 4 else [(2, 4, 5), (1, 4, 5)]
    _compare_backends(_norm_model(rank), [data(shape) for shape in shapes])


@pytest.mark.slow
def test_compiled_float64_and_stash_types_match_the_interpreter():
    # float64 inputs, standardised in float32 (stash_type 1: Mean and InvStdDev float32) or float64 (11)
    constants = {"s": RNG.standard_normal(4), "b": RNG.standard_normal(4), "m": RNG.standard_normal(4),
                 "v": RNG.uniform(0.5, 2, 4), "ls": RNG.standard_normal(5)}
    nodes = [helper.make_node("LayerNormalization", ["x", "ls"], ["ln", "ln_mean", "ln_inv"], stash_type=1),
             helper.make_node("LayerNormalization", ["x", "ls"], ["ln64"], stash_type=11),
             helper.make_node("GroupNormalization", ["x", "s", "b"], ["gn"], num_groups=2, stash_type=11),
             helper.make_node("InstanceNormalization", ["x", "s", "b"], ["inorm"]),
             helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["bn"]),
             helper.make_node("MaxPool", ["x"], ["mp", "mi"], kernel_shape=[2, 2], pads=[1, 0, 0, 1]),
             helper.make_node("AveragePool", ["x"], ["ap"], kernel_shape=[3, 2], strides=[2, 1], pads=[1, 1, 1, 1],
                              count_include_pad=1),
             helper.make_node("LpNormalization", ["x"], ["lp"], axis=2),
             helper.make_node("MeanVarianceNormalization", ["x"], ["mvn"])]
    m = model(nodes, [None, 4, None, 5], constants, opset=21, dtype=TensorProto.DOUBLE)
    for out in m.graph.output:
        if out.name in ("ln_mean", "ln_inv"):
            out.type.tensor_type.elem_type = TensorProto.FLOAT
    _compare_backends(m, [RNG.standard_normal((2, 4, 3, 5)), RNG.standard_normal((1, 4, 6, 5))], 1e-6, 1e-6)


def test_normalisations_run_compiled_in_a_loop_body():
    # A Scan over time whose body normalises each step: one native loop with the ops in it.
    m = parse("""
    agraph (float[T, B, 6] xs, float[6] gamma, float[6] beta, float[6] s, float[6] b, float[6] m, float[6] v)
        => (float[B, 6] last, float[T, B, 6] ys) {
        zero = Constant <value = float[1, 6] {0, 0, 0, 0, 0, 0}> ()
        shape = Shape <start = 1> (xs)
        h0 = Expand (zero, shape)
        last, ys = Scan <num_scan_inputs = 1, body = step (float[B, 6] h, float[B, 6] x) => (float[B, 6] h2,
                                                                                            float[B, 6] y) {
            sum = Add (h, x)
            y = LayerNormalization <epsilon = 0.001> (sum, gamma, beta)
            axes = Constant <value = int64[1] {2}> ()
            y3 = Unsqueeze (y, axes)
            bn = BatchNormalization (y3, s, b, m, v)
            h2 = Squeeze (bn, axes)
        }> (h0, xs)
    }
    """, opset=17)
    feeds = {"xs": data((5, 3, 6)), "gamma": data(6), "beta": data(6), "s": data(6), "b": data(6), "m": data(6),
             "v": RNG.uniform(0.5, 2, 6).astype(np.float32)}
    session = compiled(m)
    assert_same(session.run(None, feeds), run_onnxruntime(m, feeds), 1e-5, 1e-5)


# ---------------------------------------------------------------------------------------------
# errors


def _batchnorm_with_scale_input() -> onnx.ModelProto:
    return parse("""
    agraph (float[N, 4, 5] x, float[S] scale) => (float[N, 4, 5] y) {
        b = Constant <value = float[4] {0, 0, 0, 0}> ()
        m = Constant <value = float[4] {0, 0, 0, 0}> ()
        v = Constant <value = float[4] {1, 1, 1, 1}> ()
        y = BatchNormalization <epsilon = 0.001> (x, scale, b, m, v)
    }
    """, opset=15)


def test_a_scale_of_the_wrong_length_names_the_node(backend):
    session = rnnloop.load(_batchnorm_with_scale_input(), backend=backend)
    with pytest.raises(rnnloop.RunError, match=r"BatchNormalization 'BatchNormalization_3' .*scale has 3 values; "
                                               r"it must hold one per channel.*4"):
        session.run(None, {"x": data((2, 4, 5)), "scale": data(3)})
    y = session.run(None, {"x": data((2, 4, 5)), "scale": np.ones(4, np.float32)})[0]  # and then runs on
    assert y.shape == (2, 4, 5)


def test_training_mode_batchnormalization_is_rejected_by_name():
    m = model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"],
                                training_mode=1)], (2, 3, 4), dict(zip("sbmv", (SCALE3, SHIFT3, MEAN3, VAR3))),
              opset=15)
    with pytest.raises(rnnloop.UnsupportedModelError, match="training_mode=1 is not supported.*eval mode"):
        rnnloop.load(m, backend="interp")
    m6 = model([helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], is_test=0)], (2, 3, 4),
               dict(zip("sbmv", (SCALE3, SHIFT3, MEAN3, VAR3))), opset=6)
    with pytest.raises(rnnloop.UnsupportedModelError, match="is_test=0 is not supported"):
        rnnloop.load(m6, backend="interp")


@pytest.mark.parametrize("op, attrs, match", [
    ("MaxPool", {"kernel_shape": [2, 2], "auto_pad": "SAME"}, "auto_pad 'SAME' is not one of"),
    ("MaxPool", {"kernel_shape": [2, 2], "storage_order": 2}, "storage_order 2"),
    ("AveragePool", {"kernel_shape": [2]}, r"kernel_shape \[2\] has 1 axes"),
    ("LpPool", {"kernel_shape": [9, 2]}, "the kernel spans 9 entries of spatial axis 0"),
    ("LpNormalization", {"p": 3}, "p=3 is not supported"),
])
def test_an_unsupported_attribute_value_is_named(op, attrs, match):
    m = model([helper.make_node(op, ["x"], ["y"], name="pool", **attrs)], (1, 2, 4, 4))
    with pytest.raises(rnnloop.RunError, match=f"{op} 'pool'.*{match}"):
        rnnloop.load(m, backend="interp").run(None, {"x": data((1, 2, 4, 4))})


# ---------------------------------------------------------------------------------------------
# BatchNormalization folded into Conv


def _folded_graph(with_bias: bool, readers: int = 1):
    b = Builder("main")
    x = b.input("x", TensorType(F32, (1, 2, 5, 5)))
    w = b.constant(data((3, 2, 3, 3)))
    inputs = [x, w] + ([b.constant(data(3))] if with_bias else [])
    conv = b.op1("Conv", *inputs, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    stats = [b.constant(v) for v in (data(3), data(3), data(3), RNG.uniform(0.5, 2, 3).astype(np.float32))]
    y = b.op1("BatchNormalization", conv, *stats, epsilon=1e-3)
    b.output(y)
    if readers > 1:
        b.output(b.op1("Relu", conv))
    return b.graph


@pytest.mark.parametrize("with_bias", [True, False])
def test_batchnormalization_folds_into_the_conv_before_it(with_bias):
    graph = _folded_graph(with_bias)
    folded = fold_batchnorm(graph)
    assert [op.op_type for op in folded.ops] == ["Conv"]
    conv = folded.ops[0]
    assert conv.outputs == graph.outputs and len(conv.inputs) == 3  # a B is added when the Conv had none
    w, b = (folded.constants[n] for n in conv.inputs[1:])
    assert w.shape == (3, 2, 3, 3) and b.shape == (3,) and w.dtype == b.dtype == F32
    from rnnloop.interp.graph import Options, run_graph
    x = data((1, 2, 5, 5))
    np.testing.assert_allclose(run_graph(folded, [x], Options())[0][0], run_graph(graph, [x], Options())[0][0],
                               rtol=1e-5, atol=1e-5)


def test_batchnormalization_stays_when_the_conv_output_has_other_readers():
    graph = _folded_graph(True, readers=2)
    assert fold_batchnorm(graph) is graph


def _conv_bn_model(with_bias: bool) -> onnx.ModelProto:
    constants = {"W": data((4, 3, 3, 3)), "s": data(4), "sh": data(4), "m": data(4),
                 "v": RNG.uniform(0.5, 2, 4).astype(np.float32)}
    if with_bias:
        constants["B"] = data(4)
    nodes = [helper.make_node("Conv", ["x", "W"] + (["B"] if with_bias else []), ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "sh", "m", "v"], ["bn"], epsilon=1e-3),
             helper.make_node("Relu", ["bn"], ["y"])]
    return model(nodes, [None, 3, 8, 8], constants, opset=15, outputs=["y"])


@pytest.mark.parametrize("with_bias, backend", [(True, "interp"), (False, "interp"), (False, "numba"),
                                               pytest.param(True, "numba", marks=pytest.mark.slow)])
def test_conv_and_batchnormalization_run_as_one_conv(with_bias, backend):
    m = _conv_bn_model(with_bias)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rnnloop.FallbackWarning)  # (Conv may not compile yet)
        session = rnnloop.load(m, backend=backend)
    assert "BatchNormalization" not in [op.op_type for op in session.graph.ops]
    x = data((2, 3, 8, 8))
    assert_same(session.run(None, {"x": x}), run_onnxruntime(m, {"x": x}), 1e-5, 1e-5)


# ---------------------------------------------------------------------------------------------
# every ONNX form of the pools passes through


@pytest.mark.parametrize("op, opset, attrs", [
    ("MaxPool", 1, {}), ("MaxPool", 8, {"storage_order": 1}), ("MaxPool", 10, {"ceil_mode": 1}),
    ("AveragePool", 1, {}), ("AveragePool", 7, {"count_include_pad": 1}), ("AveragePool", 10, {"ceil_mode": 1}),
    ("AveragePool", 19, {"dilations": [2, 1]}), ("LpPool", 2, {"p": 1}), ("LpPool", 11, {"p": 3}),
    ("LpPool", 18, {"ceil_mode": 1, "dilations": [1, 2]}),
])
def test_every_pool_form_converts(op, opset, attrs):
    # an older form means what the newest does with the same attributes (onnxruntime has no AveragePool-1)
    attrs = {"kernel_shape": [3, 2], "strides": [2, 2], **attrs}
    m = model([helper.make_node(op, ["x"], ["y"], **attrs)], (1, 2, 7, 8), opset=opset)
    newest = model([helper.make_node(op, ["x"], ["y"], **attrs)], (1, 2, 7, 8), opset=22)
    x = data((1, 2, 7, 8))
    assert_same(rnnloop.load(m, backend="interp").run(None, {"x": x}), run_onnxruntime(newest, {"x": x}),
                1e-5, 1e-5)


def test_lppool_1_takes_a_float_p():
    m = model([helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[2, 2], p=3.0)], (1, 2, 4, 4), opset=1)
    x = data((1, 2, 4, 4))
    y = rnnloop.load(m, backend="interp").run(None, {"x": x})[0]
    windows = np.lib.stride_tricks.sliding_window_view(x, (2, 2), axis=(2, 3))
    np.testing.assert_allclose(y, (np.abs(windows) ** 3).sum(axis=(-2, -1)) ** (1 / 3), rtol=1e-5)


def test_the_grid_covers_every_attribute():
    used = {a for c in _pool_cases() for a in c.values[1]}
    assert used >= {"kernel_shape", "strides", "pads", "ceil_mode", "dilations", "auto_pad", "count_include_pad", "p"}


def test_unread_indices_are_not_computed():
    # OpenVINO's MaxPool-8 always has an indices output: nothing reads it here, so the op drops it
    m = model([helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2]),
               helper.make_node("Relu", ["p"], ["y"])], (1, 2, 4, 4), outputs=["y"])
    session = rnnloop.load(m, backend="interp")
    pool = next(op for op in session.graph.ops if op.op_type == "MaxPool")
    assert pool.outputs[1] == ""
    x = data((1, 2, 4, 4))
    assert_same(session.run(None, {"x": x}), run_onnxruntime(m, {"x": x}))
