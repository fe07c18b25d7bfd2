"""Conv and ConvTranspose: the interpreter against onnxruntime over a grid of attributes, compiled
kernels (regions and loop bodies) against the interpreter, errors that name the node, and the
OpenVINO convolution layers against OpenVINO's CPU plugin.

Compiled cases are gathered into a few models of many convolutions each, so that one kernel compile
serves a whole grid.
"""

from __future__ import annotations

import itertools
import time
import warnings

import numpy as np
import onnx
import pytest
from helpers import IR_VERSION, assert_same, run_fused, run_onnxruntime, thin
from onnx import TensorProto, helper, numpy_helper

import rnnloop
from rnnloop.codegen import conv as codegen_conv
from rnnloop.codegen import conv_rt

# A compiled convolution that falls back to the interpreter at run time is a bug here, not a warning.
pytestmark = pytest.mark.filterwarnings("error::rnnloop.FallbackWarning")

RNG = np.random.default_rng(20260423)
F32 = TensorProto.FLOAT


def _attrs(**attrs) -> dict:
    return {k: v for k, v in attrs.items() if v is not None}


def conv_model(cases: list[dict], *, const_w: bool = True, dtype=np.float32, opset: int = 17,
               symbolic: bool = False) -> tuple[onnx.ModelProto, dict]:
    """One model holding a Conv or ConvTranspose per case (dict: op, x shape, w shape, bias, attrs,
    activation), each on its own input x<k> (and W<k> when not const_w), followed by the case's
    activation if it has one ("Relu", or ("Clip", min, max) with None for a bound left out); its feeds."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes, inputs, outputs, inits, feeds = [], [], [], [], {}
    for k, case in enumerate(cases):
        x = RNG.standard_normal(case["x"]).astype(dtype)
        # (scaled by the inputs each output sums, as initialised weights are: outputs of about 1)
        w = (RNG.standard_normal(case["w"]) / np.sqrt(max(1, np.prod(case["w"][1:])))).astype(dtype)
        channels = case["w"][0] if case["op"] == "Conv" else case["w"][1] * case.get("attrs", {}).get("group", 1)
        names = [f"x{k}", f"W{k}"]
        shape = [f"n{k}", f"c{k}"] + [f"s{k}_{a}" for a in range(len(case["x"]) - 2)] if symbolic else case["x"]
        inputs.append(helper.make_tensor_value_info(f"x{k}", elem, shape))
        feeds[f"x{k}"] = x
        if const_w:
            inits.append(numpy_helper.from_array(w, f"W{k}"))
        else:
            # (ONNX's shape inference needs W's kernel sizes, to know the output's rank)
            inputs.append(helper.make_tensor_value_info(f"W{k}", elem, [f"m{k}", f"g{k}"] + case["w"][2:]
                                                        if symbolic else case["w"]))
            feeds[f"W{k}"] = w
        if case.get("bias"):
            inits.append(numpy_helper.from_array(RNG.standard_normal(channels).astype(dtype), f"B{k}"))
            names.append(f"B{k}")
        activation = case.get("activation")
        y = f"c{k}" if activation else f"y{k}"
        nodes.append(helper.make_node(case["op"], names, [y], name=f"{case['op'].lower()}{k}", **case.get("attrs", {})))
        if activation == "Relu":
            nodes.append(helper.make_node("Relu", [y], [f"y{k}"], name=f"relu{k}"))
        elif activation:
            bounds = []
            for bound, value in zip(("min", "max"), activation[1:]):
                if value is not None:
                    inits.append(numpy_helper.from_array(np.array(value, dtype), f"{bound}{k}"))
                bounds.append("" if value is None else f"{bound}{k}")
            nodes.append(helper.make_node("Clip", [y, *bounds], [f"y{k}"], name=f"clip{k}"))
        outputs.append(helper.make_tensor_value_info(f"y{k}", elem, None))
    graph = helper.make_graph(nodes, "convs", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=IR_VERSION), feeds


def conv(x, w, bias=False, activation=None, **attrs) -> dict:
    return {"op": "Conv", "x": list(x), "w": list(w), "bias": bias, "attrs": _attrs(**attrs), "activation": activation}


def conv_t(x, w, bias=False, activation=None, **attrs) -> dict:
    return {"op": "ConvTranspose", "x": list(x), "w": list(w), "bias": bias, "attrs": _attrs(**attrs),
            "activation": activation}


def load_compiled(model) -> rnnloop.Session:
    """A numba session whose every op is compiled (strict: a region that does not compile fails)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", rnnloop.FallbackWarning)
        session = rnnloop.load(model, backend="numba", strict=True)
    assert "interpreted" not in session.explain(), session.explain()
    return session


# ---------------------------------------------------------------------------------------------
# The grids: every auto_pad, groups (depthwise too), strides, dilations, pads, bias; 1 to 3 spatial axes

PADDINGS = [dict(pads=None), dict(auto_pad="SAME_UPPER"), dict(auto_pad="SAME_LOWER"), dict(auto_pad="VALID")]


def _conv_1d_grid() -> list[dict]:
    cases = []
    for k, (group, kernel, stride, dilation, padding) in enumerate(itertools.product(
            (1, 2, 4), (1, 3), (1, 2), (1, 2), PADDINGS + [dict(pads=[1, 2]), dict(pads=[2, 0])])):
        cases.append(conv([2, 4, 9], [8 if group == 4 else 6, 4 // group, kernel], bias=k % 2 == 0, group=group,
                          strides=[stride], dilations=[dilation], **padding))
    return cases


def _conv_2d_grid() -> list[dict]:
    cases = []
    for k, (group, stride, dilation, padding) in enumerate(itertools.product(
            (1, 2), ([1, 1], [2, 1]), ([1, 1], [1, 2]), PADDINGS + [dict(pads=[1, 0, 2, 1])])):
        cases.append(conv([1, 4, 7, 6], [6, 4 // group, 3, 2], bias=k % 2 == 1, group=group, strides=stride,
                          dilations=dilation, kernel_shape=[3, 2] if k % 3 == 0 else None, **padding))
    return cases


def _conv_3d_grid() -> list[dict]:
    return [conv([1, 2, 4, 5, 3], [3, 2, 2, 3, 2], bias=True, strides=[1, 2, 1], pads=[0, 1, 1, 1, 0, 0]),
            conv([2, 4, 3, 4, 5], [4, 2, 1, 2, 3], group=2, dilations=[1, 2, 1], auto_pad="SAME_UPPER"),
            conv([1, 3, 5, 4, 4], [3, 1, 3, 1, 2], group=3, strides=[2, 1, 2], auto_pad="SAME_LOWER"),
            conv([1, 2, 3, 3, 3], [2, 2, 3, 3, 3], bias=True, auto_pad="VALID")]


def _transpose_grid() -> list[dict]:
    cases = []
    for k, (group, stride, dilation, padding) in enumerate(itertools.product(
            (1, 2), (1, 2, 3), (1, 2), [dict(pads=None), dict(pads=[1, 0]), dict(output_padding=[1]),
                                        dict(auto_pad="SAME_UPPER"), dict(auto_pad="SAME_LOWER"),
                                        dict(auto_pad="VALID"), dict(output_shape=[11]),
                                        dict(output_shape=[7], auto_pad="SAME_UPPER")])):
        if "output_padding" in padding and padding["output_padding"][0] >= stride:
            continue  # the spec wants output_padding below the stride (onnxruntime insists)
        if "output_shape" in padding and stride == 1:
            continue  # onnxruntime rejects an output_shape past the full result by a stride or more
        cases.append(conv_t([2, 4, 5], [4, 6 // group, 3], bias=k % 2 == 0, group=group, strides=[stride],
                            dilations=[dilation], **padding))
    cases += [conv_t([1, 2, 3, 4], [2, 3, 3, 2], strides=[2, 3], dilations=[2, 1], pads=[1, 0, 0, 2]),
              conv_t([1, 2, 3, 4], [2, 3, 3, 3], bias=True, strides=[3, 2], output_shape=[10, 8]),
              conv_t([1, 2, 3, 4], [2, 3, 3, 3], strides=[3, 2], output_shape=[9, 9], output_padding=[1, 1]),
              conv_t([1, 4, 3, 4], [4, 1, 2, 2], group=4, strides=[2, 2], auto_pad="SAME_LOWER"),
              conv_t([1, 2, 2, 3, 2], [2, 2, 2, 3, 2], bias=True, strides=[1, 2, 2], group=2, output_padding=[0, 1, 1])]
    return cases


GRIDS = {"conv 1-d": _conv_1d_grid(), "conv 2-d": _conv_2d_grid(), "conv 3-d": _conv_3d_grid(),
         "conv_transpose": _transpose_grid()}


def _explicit_same(case: dict) -> dict:
    """A Conv with SAME padding and dilations as explicit pads, by the spec's formula: onnxruntime
    does not take dilations with SAME."""
    attrs = dict(case["attrs"])
    auto_pad = attrs.pop("auto_pad", "NOTSET")
    if case["op"] != "Conv" or auto_pad not in ("SAME_UPPER", "SAME_LOWER") or set(attrs.get("dilations", [1])) == {1}:
        return case
    begin, end = [], []
    for a, size in enumerate(case["x"][2:]):
        s, d, k = attrs.get("strides", [1] * 3)[a], attrs["dilations"][a], case["w"][2 + a]
        total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else large)
        end.append(large if auto_pad == "SAME_UPPER" else small)
    return {**case, "attrs": {**attrs, "pads": begin + end}}


@pytest.mark.parametrize("grid", list(GRIDS))
def test_the_interpreter_matches_onnxruntime(grid):
    cases = GRIDS[grid]
    state = RNG.bit_generator.state
    model, feeds = conv_model(cases)
    RNG.bit_generator.state = state  # the same weights
    expected = run_onnxruntime(conv_model([_explicit_same(case) for case in cases])[0], feeds)
    got = rnnloop.load(model, backend="interp").run(None, feeds)
    for case, g, e in zip(cases, got, expected):
        try:
            assert_same([g], [e], rtol=1e-4, atol=1e-5)
        except AssertionError as error:
            raise AssertionError(f"{case}: {error}") from None


def test_a_same_conv_transpose_narrower_than_its_stride_keeps_pads_at_zero():
    # The spec's text asks for in * strides outputs (here 4 * 3 = 12), which would take negative
    # pads; ONNX's own shape inference and onnxruntime give the full result (11): so do we.
    model, feeds = conv_model([conv_t([1, 1, 4], [1, 1, 2], strides=[3], auto_pad="SAME_UPPER")])
    [y] = rnnloop.load(model, backend="interp").run(None, feeds)
    assert y.shape == (1, 1, 11)
    assert_same([y], run_onnxruntime(model, feeds))


def test_conv_of_opset_1_and_11_forms_runs():
    case = conv([1, 2, 6], [3, 2, 3], bias=True, strides=[2], auto_pad="SAME_UPPER")
    for opset in (1, 11):
        model, feeds = conv_model([case], opset=opset)
        assert_same(rnnloop.load(model, backend="interp").run(None, feeds), run_onnxruntime(model, feeds), rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# Compiled: one kernel per grid, against the interpreter


PIECE = 12  # convolutions per compiled model (one kernel): a kernel of 144 took minutes to compile


def _pieces() -> list[tuple]:
    """(grid, piece, const_w): each grid dealt into pieces of about PIECE cases, every other one spread."""
    params = []
    for grid, cases in GRIDS.items():
        count = -(-len(cases) // PIECE)
        params += [(grid, k, count, const_w) for k in range(count) for const_w in (True, False)]
    return params


@pytest.mark.parametrize("grid, piece, pieces, const_w", thin(_pieces(), 1000))
def test_a_compiled_grid_matches_the_interpreter(grid, piece, pieces, const_w):
    model, feeds = conv_model(GRIDS[grid][piece::pieces], const_w=const_w)
    session = load_compiled(model)
    assert_same(session.run(None, feeds), rnnloop.load(model, backend="interp").run(None, feeds), rtol=1e-4, atol=1e-5)


# The paths of conv(): Winograd (3x3 or 3 taps, 16+ channels, constant W), im2col + BLAS (a computed W; large
# kernels; groups), a 1x1 read as it is, a constant W's panels (else gemv) for few output positions, direct
# loops for depthwise; each with and without an activation folded into it (codegen/activation.py).
PATHS = [conv([1, 16, 9, 7], [16, 16, 3, 3], bias=True, pads=[1, 1, 1, 1], activation="Relu"),
         conv([2, 17, 6, 5], [20, 17, 3, 3], pads=[0, 1, 2, 0]),
         conv([1, 16, 5, 6], [16, 16, 3, 3], auto_pad="SAME_LOWER", activation=("Clip", -0.5, 0.5)),
         conv([1, 16, 2, 2], [16, 16, 3, 3], bias=True, pads=[1, 1, 1, 1]),
         conv([1, 16, 9], [16, 16, 3], bias=True, pads=[1, 1], activation="Relu"),
         conv([2, 17, 10], [20, 17, 3], pads=[0, 2]),
         conv([1, 1, 576], [258, 1, 256], bias=True, strides=[128], activation=("Clip", None, 0.25)),
         conv([2, 8, 30], [10, 8, 5], strides=[2], activation="Relu"),
         conv([1, 32, 20], [24, 32, 1], bias=True, activation="Relu"),
         conv([2, 8, 6, 5], [12, 4, 1, 1], group=2),
         conv([1, 12, 30], [12, 1, 11], bias=True, group=12, pads=[5, 5], activation=("Clip", 0.0, None)),
         conv([1, 6, 30], [12, 1, 5], group=6, strides=[2], dilations=[2], auto_pad="SAME_UPPER"),
         conv([1, 1, 12, 20], [8, 1, 3, 3], bias=True, pads=[1, 1, 1, 1], activation="Relu"),
         conv([1, 2, 7, 5], [8, 1, 3, 3], group=2),
         conv([1, 20, 9, 9], [8, 20, 5, 5], activation="Relu"),
         conv_t([1, 6, 5, 4], [6, 4, 3, 3], bias=True, strides=[2, 2], activation="Relu"),
         # Winograd on panels (128 input channels or more): more tiles than a product's rows (T 132), a last
         # panel and vector of channels cut (M 20), an odd length cut from the last pair
         conv([1, 128, 24, 22], [20, 128, 3, 3], bias=True, pads=[1, 1, 1, 1], activation="Relu"),
         conv([2, 128, 5, 7], [20, 128, 3, 3], pads=[0, 1, 1, 0]),
         conv([1, 128, 9], [20, 128, 3], bias=True, pads=[1, 1], activation=("Clip", -0.1, 0.1))]


# (every path of both entries compiles: a minute and a half cold; the default run compiles the
# convolutions of tests/test_frontend_models.py's streaming model)
@pytest.mark.slow
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_path_of_the_compiled_convolution_matches_the_interpreter(dtype):
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    for const_w in (True, False):
        model, feeds = conv_model(PATHS, const_w=const_w, dtype=dtype)
        session = load_compiled(model)
        assert_same(session.run(None, feeds), rnnloop.load(model, backend="interp").run(None, feeds),
                    rtol=rtol, atol=rtol)


def test_winograd_on_panels_matches_the_interpreter():
    """128 input channels or more: the products run on panels made at load (conv_rt._winograd_products)."""
    assert conv_rt.PACKED_MIN_CHANNELS <= 128  # (else these cases would test BLAS's products again)
    model, feeds = conv_model(PATHS[-3:], const_w=True)
    session = load_compiled(model)
    [(_, source)] = session.kernel_sources()
    assert "conv_winograd_float32" in source and "conv_winograd_1d_float32" in source and "k_winograd" in source
    assert_same(session.run(None, feeds), rnnloop.load(model, backend="interp").run(None, feeds), rtol=1e-4, atol=1e-5)


def test_winograd_on_panels_shares_its_steps_with_a_worker_and_gives_one_threads_bits():
    """Issue 25: a convolution in a call that is not split (batch 1) uses the session's threads: the
    caller and an idle worker of the pool take the Winograd path's input channels, products and rows of
    tiles one at a time (conv_rt._winograd_shared). Each is the same either way: the same bits, also
    where the last row and column of tiles are cut (9 x 25) and the channels split unevenly (200)."""
    from rnnloop.codegen import pool

    cases = [conv([1, 256, 8, 25], [256, 256, 3, 3], bias=True, pads=[1, 1, 1, 1], activation="Relu"),
             conv([1, 200, 9, 25], [128, 200, 3, 3], pads=[1, 1, 1, 1])]
    assert 16 * 200 * 65 * 128 >= conv_rt.JOB_WORK  # (transforms x channels x tiles x output channels)
    model, feeds = conv_model(cases)
    one, two = rnnloop.load(model, threads=1), rnnloop.load(model, threads=2)
    want = one.run(None, feeds)
    block = two.options.pool.block
    jobs = int(block[pool.JOBS])
    # (A worker may be asleep when a call starts, late on a loaded machine, or left alone for up to
    # 0.1 s after it kept a caller waiting: pool.take_back.)
    until = time.monotonic() + 3
    while block[pool.JOBS] == jobs and time.monotonic() < until:
        for got, expected in zip(two.run(None, feeds), want):
            np.testing.assert_array_equal(got, expected)
    assert block[pool.JOBS] > jobs
    assert_same(want, rnnloop.load(model, backend="interp").run(None, feeds), rtol=1e-4, atol=1e-5)


def test_an_activation_is_folded_into_the_convolution_before_it():
    """A Relu or Clip that alone reads a Conv's output is applied as the Conv stores it
    (codegen/activation.py), NaN kept; one whose Conv output is also read elsewhere runs on its own.
    The paths: a short product, Winograd, direct loops and a constant W's panels (13 output positions)."""
    model, feeds = conv_model([conv([1, 1, 12, 20], [8, 1, 3, 3], bias=True, pads=[1, 1, 1, 1], activation="Relu"),
                               conv([1, 16, 6, 5], [16, 16, 3, 3], activation=("Clip", -0.5, None)),
                               conv([1, 12, 30], [12, 1, 11], group=12, activation="Relu"),
                               conv([2, 8, 30], [10, 8, 5], strides=[2], activation=("Clip", None, 0.25))])
    feeds["x0"][0, 0, 3, 4] = np.nan
    model.graph.output.append(helper.make_tensor_value_info("c2", F32, None))  # (the third Conv's output)
    session = load_compiled(model)
    [(_, source)] = session.kernel_sources()
    assert "Relu 'relu0'" not in source and "Clip 'clip1'" not in source and "Relu 'relu2'" in source
    assert "Clip 'clip3'" not in source and "k_panels" in source
    results = session.run(None, feeds)
    assert np.isnan(results[0]).any()
    assert_same(results, rnnloop.load(model, backend="interp").run(None, feeds), rtol=1e-4, atol=1e-5)


def test_winograd_is_taken_for_a_constant_3x3_or_3_tap_weight_of_16_channels():
    assert codegen_conv.winograd_fits((16, 16, 3, 3), [1, 1], [1, 1], 1)
    assert not codegen_conv.winograd_fits((16, 16, 3, 3), [2, 1], [1, 1], 1)
    assert not codegen_conv.winograd_fits((8, 16, 3, 3), [1, 1], [1, 1], 1)
    assert codegen_conv.winograd_fits((16, 16, 3), [1], [1], 1)
    assert not codegen_conv.winograd_fits((16, 16, 3), [1], [2], 1)
    model, _ = conv_model(PATHS[:1])
    [(_, source)] = load_compiled(model).kernel_sources()
    assert "k_winograd" in source  # the transformed kernels, passed in


def test_one_kernel_serves_every_size():
    """Dimensions are run-time values: a new batch, length or channel count does not recompile."""
    model, _ = conv_model([conv([1, 4, 9], [6, 2, 3], bias=True, group=2, strides=[2], auto_pad="SAME_UPPER"),
                           conv_t([1, 4, 5], [4, 3, 3], group=2, strides=[2], output_padding=[1])],
                          const_w=False, symbolic=True)
    session = load_compiled(model)
    interp = rnnloop.load(model, backend="interp")
    for n, c, length in ((1, 4, 9), (3, 4, 2), (2, 8, 17), (0, 4, 5)):
        feeds = {"x0": RNG.standard_normal((n, c, length)).astype(np.float32),
                 "W0": RNG.standard_normal((6, c // 2, 3)).astype(np.float32),
                 "x1": RNG.standard_normal((n, c, length)).astype(np.float32),
                 "W1": RNG.standard_normal((c, 3, 3)).astype(np.float32)}
        assert_same(session.run(None, feeds), interp.run(None, feeds), rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # (one large kernel: about a minute and a half cold)
def test_a_conv_in_a_loop_body_is_compiled_into_the_loop(backend):
    """A Scan over frames: each step convolves its [1, 4, 8] frame (types inferred in the body)."""
    body = helper.make_graph(
        [helper.make_node("Conv", ["frame", "W"], ["c"], pads=[1, 1]),
         helper.make_node("Add", ["acc", "c"], ["acc_out"]),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "body",
        [helper.make_tensor_value_info("acc", F32, None), helper.make_tensor_value_info("frame", F32, None)],
        [helper.make_tensor_value_info("acc_out", F32, None), helper.make_tensor_value_info("c_out", F32, None)])
    w = RNG.standard_normal((5, 4, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Scan", ["acc0", "frames"], ["acc", "cs"], body=body, num_scan_inputs=1)],
        "scan_conv",
        [helper.make_tensor_value_info("acc0", F32, [1, 5, 8]),
         helper.make_tensor_value_info("frames", F32, ["T", 1, 4, 8])],
        [helper.make_tensor_value_info("acc", F32, None), helper.make_tensor_value_info("cs", F32, None)],
        [numpy_helper.from_array(w, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    feeds = {"acc0": np.zeros((1, 5, 8), np.float32), "frames": RNG.standard_normal((6, 1, 4, 8)).astype(np.float32)}
    got = run_fused(model, feeds, backend)
    assert_same(got, run_onnxruntime(model, feeds), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Bad input: clear errors that name the node, under both backends


def _symbolic(case: dict, const_w: bool = False) -> tuple[onnx.ModelProto, dict]:
    return conv_model([case], const_w=const_w, symbolic=True)


@pytest.mark.parametrize("backend_name", ["interp", "numba"])
def test_a_weight_whose_channels_do_not_match_x_is_an_error_naming_the_node(backend_name):
    model, feeds = _symbolic(conv([1, 4, 9], [6, 4, 3]))
    session = rnnloop.load(model, backend=backend_name)
    feeds["W0"] = RNG.standard_normal((6, 3, 3)).astype(np.float32)  # 3 channels for x's 4
    with pytest.raises(rnnloop.RunError, match=r"Conv 'conv0'.*X has 4 channels but W expects 3"):
        session.run(None, feeds)


@pytest.mark.parametrize("backend_name", ["interp", "numba"])
def test_bad_sizes_are_errors_naming_the_node(backend_name):
    graph = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["y"], name="conv0", kernel_shape=[3])], "g",
                              [helper.make_tensor_value_info("x", F32, ["n", "c", "s"]),
                               helper.make_tensor_value_info("W", F32, ["m", "g", "k"])],
                              [helper.make_tensor_value_info("y", F32, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    session = rnnloop.load(model, backend=backend_name)
    bad = {"x": np.ones((1, 4, 9), np.float32), "W": np.ones((6, 4, 5), np.float32)}
    with pytest.raises(rnnloop.RunError, match=r"Conv 'conv0'.*kernel_shape \[3\] does not match W"):
        session.run(None, bad)
    model, feeds = _symbolic(conv([1, 4, 9], [6, 4, 3]))
    session = rnnloop.load(model, backend=backend_name)
    small = {**feeds, "x0": RNG.standard_normal((1, 4, 2)).astype(np.float32)}
    with pytest.raises(rnnloop.RunError, match=r"Conv 'conv0'.*kernel spans 3 elements"):
        session.run(None, small)
    model, feeds = _symbolic(conv_t([1, 4, 5], [4, 2, 3]))
    session = rnnloop.load(model, backend=backend_name)
    feeds["W0"] = RNG.standard_normal((3, 2, 3)).astype(np.float32)
    with pytest.raises(rnnloop.RunError, match=r"ConvTranspose 'convtranspose0'.*X has 4 channels but W has 3"):
        session.run(None, feeds)


def test_a_bias_of_the_wrong_length_is_an_error_naming_the_node():
    graph = helper.make_graph([helper.make_node("Conv", ["x", "W", "B"], ["y"], name="c")], "g",
                              [helper.make_tensor_value_info(n, F32, None) for n in ("x", "W", "B")],
                              [helper.make_tensor_value_info("y", F32, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    feeds = {"x": np.ones((1, 2, 5), np.float32), "W": np.ones((3, 2, 3), np.float32), "B": np.ones(2, np.float32)}
    with pytest.raises(rnnloop.RunError, match=r"Conv 'c'.*B has shape \[2\]; it must be \[3\]"):
        rnnloop.load(model, backend="interp").run(None, feeds)


# ---------------------------------------------------------------------------------------------
# OpenVINO's convolution layers against its CPU plugin (f32)

ov = pytest.importorskip("openvino", reason="the OpenVINO layers are checked against OpenVINO's CPU plugin")
import openvino.opset1 as ov1  # noqa: E402  Convolution-1, GroupConvolution-1 and their BackpropData

OV_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
X4 = RNG.standard_normal((1, 4, 5, 6)).astype(np.float32)
W_CONV = RNG.standard_normal((6, 4, 3, 2)).astype(np.float32)
W_GROUP = RNG.standard_normal((2, 3, 2, 3, 2)).astype(np.float32)
W_BACK = RNG.standard_normal((4, 3, 3, 2)).astype(np.float32)
W_GROUP_BACK = RNG.standard_normal((2, 2, 3, 3, 2)).astype(np.float32)
AUTO_PADS = ["explicit", "valid", "same_upper", "same_lower"]


def _ov_cases():
    cases = []
    for ap in AUTO_PADS:
        cases.append(pytest.param(X4, lambda p, ap=ap: ov1.convolution(p, ov1.constant(W_CONV), [2, 1], [1, 0], [0, 1],
                                                                          [1, 2], ap), id=f"Convolution-{ap}"))
        cases.append(pytest.param(X4, lambda p, ap=ap: ov1.group_convolution(
            p, ov1.constant(W_GROUP), [1, 2], [0, 1], [1, 0], [2, 1], ap), id=f"GroupConvolution-{ap}"))
    for ap, shape, op in itertools.product(AUTO_PADS, [None, [9, 9], [12, 14], [6, 5]], [[0, 0], [1, 1]]):
        def back(p, ap=ap, shape=shape, op=op, group=False):
            out = None if shape is None else ov1.constant(np.array(shape, np.int64))
            layer = ov1.group_convolution_backprop_data if group else ov1.convolution_backprop_data
            return layer(p, ov1.constant(W_GROUP_BACK if group else W_BACK), [2, 2], out, [1, 0], [0, 1], [1, 2],
                         ap, op)
        cases.append(pytest.param(X4, back, id=f"ConvolutionBackpropData-{ap}-{shape}-{op}"))
        cases.append(pytest.param(X4, lambda p, b=back: b(p, group=True),
                                  id=f"GroupConvolutionBackpropData-{ap}-{shape}-{op}"))
    x1 = RNG.standard_normal((2, 4, 9)).astype(np.float32)
    cases.append(pytest.param(x1, lambda p: ov1.group_convolution(
        p, ov1.constant(RNG.standard_normal((4, 1, 1, 3)).astype(np.float32)), [1], [1], [1], [1]), id="depthwise-1d"))
    x3 = RNG.standard_normal((1, 2, 4, 5, 3)).astype(np.float32)
    cases.append(pytest.param(x3, lambda p: ov1.convolution(
        p, ov1.constant(RNG.standard_normal((3, 2, 2, 3, 2)).astype(np.float32)), [1, 2, 1], [0, 1, 1], [1, 0, 0],
        [1, 1, 2]), id="Convolution-3d"))
    return cases


def _ov_model(tmp_path, x: np.ndarray, build) -> str:
    p = ov1.parameter(list(x.shape), ov.Type.f32, name="x0")
    path = str(tmp_path / "m.xml")
    ov.save_model(ov.Model([build(p)], [p]), path, compress_to_fp16=False)
    return path


@pytest.mark.parametrize("x, build", thin(_ov_cases(), 4))
def test_the_openvino_layer_matches_the_cpu_plugin(tmp_path, x, build):
    path = _ov_model(tmp_path, x, build)
    compiled = ov.Core().compile_model(path, "CPU", OV_CONFIG)
    expected = compiled({0: x})[compiled.outputs[0]]
    [got] = rnnloop.load(path, backend="interp").run(None, {"x0": x})
    assert_same([got], [expected], rtol=1e-4, atol=1e-4)


@pytest.mark.slow  # (the convolution entries compile in the default run with tests/test_frontend_models.py)
def test_openvino_convolution_layers_compile_into_one_region(tmp_path):
    def build(p):
        y = ov1.convolution(p, ov1.constant(W_CONV), [1, 1], [1, 1], [1, 0], [1, 1])
        return ov1.group_convolution_backprop_data(y, ov1.constant(RNG.standard_normal((2, 3, 2, 2, 2))
                                                                   .astype(np.float32)), [2, 2])
    path = _ov_model(tmp_path, X4, build)
    session = load_compiled(path)
    assert "compiled into one kernel" in session.explain()  # (and nothing interpreted: load_compiled)
    assert_same(session.run(None, {"x0": X4}), rnnloop.load(path, backend="interp").run(None, {"x0": X4}),
                rtol=1e-4, atol=1e-5)
