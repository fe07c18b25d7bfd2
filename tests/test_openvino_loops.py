"""OpenVINO IR: the reader, TensorIterator-1, Loop-5 and If-8.

The hand-written fixture under tests/data runs without OpenVINO. With the openvino package, models
are built with its opset API, saved as IR, and checked against OpenVINO's CPU plugin (forced to f32)
where the plugin is right, and against a NumPy statement of the port map's meaning everywhere:
the plugin returns wrong slices when a TensorIterator's window does not start at the sliced axis'
first element or does not cover all of it.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import load_fused, thin

import rnnloop

DATA = Path(__file__).parent / "data"
FIXTURE = DATA / "ti_reverse_rnn.xml"
W = (np.arange(15, dtype=np.float32).reshape(3, 5) - 7) / 10
R = (np.arange(25, dtype=np.float32).reshape(5, 5) % 7 - 3) / 10


def _reverse_rnn(x: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y = np.zeros(x.shape[:2] + (5,), np.float32)
    for t in reversed(range(x.shape[1])):
        h = np.tanh(x[:, t] @ W + h @ R)
        y[:, t] = h
    return h, y


# ---------------------------------------------------------------------------------------------
# the hand-written fixture and the reader's errors (no OpenVINO needed)


def test_hand_written_reverse_tensor_iterator_runs_fused(backend):
    session = load_fused(str(FIXTURE), backend)
    rng = np.random.default_rng(0)
    for batch, steps in [(2, 4), (3, 4)]:
        x = rng.standard_normal((batch, steps, 3)).astype(np.float32)
        h0 = rng.standard_normal((batch, 5)).astype(np.float32)
        h, y = session.run(None, {"X": x, "H0": h0})
        want_h, want_y = _reverse_rnn(x, h0)
        np.testing.assert_allclose(h, want_h, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(y, want_y, rtol=1e-5, atol=1e-6)
    assert [o.name for o in session.get_outputs()] == ["h_last", "y"]


def _copy_fixture(tmp_path, xml_edit=None, bin_bytes=None):
    text = FIXTURE.read_text()
    if xml_edit is not None:
        old, new = xml_edit
        assert old in text
        text = text.replace(old, new)
    (tmp_path / "m.xml").write_text(text)
    if bin_bytes is None:
        shutil.copy(DATA / "ti_reverse_rnn.bin", tmp_path / "m.bin")
    elif bin_bytes is not False:
        (tmp_path / "m.bin").write_bytes(bin_bytes)
    return str(tmp_path / "m.xml")


def test_missing_weights_file_is_a_clear_error(tmp_path):
    with pytest.raises(rnnloop.ModelError, match=r"Const 'axis' .*the weights file .*m\.bin' does not exist"):
        rnnloop.load(_copy_fixture(tmp_path, bin_bytes=False))


def test_truncated_weights_file_is_a_clear_error(tmp_path):
    data = (DATA / "ti_reverse_rnn.bin").read_bytes()
    with pytest.raises(rnnloop.ModelError, match=r"lies outside the weights file .* truncated"):
        rnnloop.load(_copy_fixture(tmp_path, bin_bytes=data[:100]))


@pytest.mark.parametrize("size, message", [
    (2**63, r"layer 12 'y_t': port 2 has a dimension of 9223372036854775808, beyond int64"),
    (2**62, r"TensorIterator 'rnn'.*stacked output 0 .* too large for any array")])
def test_sizes_no_array_can_have_are_a_clear_error(tmp_path, size, message):
    """The stacked output's part declared [size, 1, 5]: it sets the output's sizes after zero
    iterations, so it is refused at load by both backends (it crashed the kernel, found by fuzzing)."""
    port = '<output><port id="2" precision="FP32"><dim>-1</dim><dim>1</dim><dim>5</dim></port></output>'
    path = _copy_fixture(tmp_path, (port, port.replace("<dim>-1</dim>", f"<dim>{size}</dim>")))
    for backend in ("interp", "numba"):
        with pytest.raises(rnnloop.ModelError, match=message):
            rnnloop.load(path, backend=backend)


def test_truncated_xml_is_a_clear_error(tmp_path):
    path = tmp_path / "m.xml"
    path.write_text(FIXTURE.read_text()[:900])
    with pytest.raises(rnnloop.ModelError, match=r"not valid OpenVINO IR XML"):
        rnnloop.load(str(path))


@pytest.mark.parametrize("edit, message", [
    (('<edge from-layer="1" from-port="0" to-layer="2" to-port="1"/>',
      '<edge from-layer="7" from-port="0" to-layer="2" to-port="1"/>'), r"names layer 7, which does not exist"),
    (('<back_edges><edge from-layer="9" to-layer="1"/>', '<back_edges><edge from-layer="9" to-layer="3"/>'),
     r"back edge 9 -> 3 must lead from a body Result to a body Parameter"),
    (('internal_layer_id="10" start="-1"', 'internal_layer_id="42" start="-1"'),
     r"port map names body layer 42, which does not exist"),
    (('<data element_type="f32" shape="3,5" offset="0" size="60"/>',
      '<data element_type="f32" shape="3,5" offset="0" size="64"/>'), r"size 64 does not match 15 elements"),
    (('<net name="ti_reverse_rnn" version="11">', '<net name="ti_reverse_rnn" version="7">'),
     r"IR version 7; rnnloop reads versions 10 and 11"),
])
def test_malformed_ir_is_a_load_error_naming_the_problem(tmp_path, edit, message):
    with pytest.raises(rnnloop.ModelError, match=message):
        rnnloop.load(_copy_fixture(tmp_path, xml_edit=edit))


def test_every_unsupported_layer_is_listed_in_one_error(tmp_path):
    text = FIXTURE.read_text()
    text = text.replace('name="h_next" type="Tanh"', 'name="h_next" type="FancyTanh"')
    text = text.replace('name="sum" type="Add" version="opset1"', 'name="sum" type="Add" version="extension"')
    text = text.replace('name="x" type="Squeeze"', 'name="x" type="ReadValue"')
    (tmp_path / "m.xml").write_text(text)
    shutil.copy(DATA / "ti_reverse_rnn.bin", tmp_path / "m.bin")
    with pytest.raises(rnnloop.UnsupportedModelError) as error:
        rnnloop.load(str(tmp_path / "m.xml"))
    message = str(error.value)
    assert "3 unsupported layer(s)" in message
    assert "FancyTanh 'h_next' (layer 11, opset1): 'FancyTanh' is not supported" in message
    assert "Add 'sum' (layer 8, extension): version 'extension' is not a standard opset" in message
    assert "ReadValue 'x' (layer 3, opset1): stateful layers" in message


# ---------------------------------------------------------------------------------------------
# models built with OpenVINO's API, checked against its CPU plugin and against NumPy


@pytest.fixture(scope="module")
def ov():
    return pytest.importorskip("openvino", reason="the openvino package is not installed")


def _save(ov, model, tmp_path) -> str:
    path = str(tmp_path / "m.xml")
    ov.save_model(model, path, compress_to_fp16=False)
    return path


def _openvino_run(ov, path: str, feeds: dict) -> list[np.ndarray]:
    compiled = ov.Core().compile_model(path, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    return [np.asarray(v) for v in compiled(feeds).values()]


def _parts(steps: int, start: int, end: int, stride: int, part: int) -> list[int]:
    """Where each iteration's part begins: OpenVINO's window [start, end] includes both ends and a
    negative stride walks down from start."""
    def at(i):
        return i + steps if i < 0 else i
    if stride > 0:
        first, last = at(start), at(end)
        return list(range(first, last - part + 2, stride))
    top, low = at(start), at(end)
    return list(range(top - part + 1, low - 1, stride))


def _sliced_ti(ov, steps, start, end, stride, part):
    """s_next = 0.5 s + x_part, with x_part stacked back along the sliced axis."""
    import openvino.opset13 as ops
    x = ops.parameter([2, steps, 3], np.float32, name="x")
    s0 = ops.parameter([2, part, 3], np.float32, name="s0")
    bx = ops.parameter([2, part, 3], np.float32)
    bs = ops.parameter([2, part, 3], np.float32)
    s_next = ops.result(ops.add(ops.multiply(bs, ops.constant(np.float32(0.5))), bx))
    x_out = ops.result(ops.multiply(bx, ops.constant(np.float32(1))))
    ti = ops.tensor_iterator()
    ti.set_body(ov.Model([s_next, x_out], [bx, bs], "body"))
    ti.set_sliced_input(bx, x.output(0), start, stride, part, end, 1)
    ti.set_merged_input(bs, s0.output(0), s_next.output(0))
    last = ti.get_iter_value(s_next.output(0), -1)
    joined = ti.get_concatenated_slices(x_out.output(0), start, stride, part, end, 1)
    return ov.Model([last, joined], [x, s0], "sliced")


SLICES = [  # (steps, start, end, stride, part, OpenVINO's plugin gets it right)
    (5, 0, -1, 1, 1, True), (5, -1, 0, -1, 1, True), (6, 0, -1, 2, 2, True), (6, -1, 0, -2, 2, True),
    (5, 1, -1, 1, 1, False), (5, 0, 2, 1, 1, False), (5, -2, 1, -1, 1, False), (7, 1, -2, 2, 2, False),
    (6, 0, -1, 1, 2, False), (7, -1, 1, -2, 2, False),
]


@pytest.mark.parametrize("steps, start, end, stride, part, plugin_right", SLICES,
                         ids=[f"T{c[0]}-start{c[1]}-end{c[2]}-stride{c[3]}-part{c[4]}" for c in SLICES])
def test_tensor_iterator_slicing_follows_the_port_map(ov, tmp_path, steps, start, end, stride, part, plugin_right):
    path = _save(ov, _sliced_ti(ov, steps, start, end, stride, part), tmp_path)
    rng = np.random.default_rng(steps)
    feeds = {"x": rng.standard_normal((2, steps, 3)).astype(np.float32),
             "s0": rng.standard_normal((2, part, 3)).astype(np.float32)}
    positions = _parts(steps, start, end, stride, part)
    s = feeds["s0"]
    for p in positions:
        s = 0.5 * s + feeds["x"][:, p:p + part]
    order = sorted(positions) if stride < 0 else positions  # joined in the order of the stride's sign
    joined = np.concatenate([feeds["x"][:, p:p + part] for p in order], axis=1)
    got = rnnloop.load(path, backend="interp").run(None, feeds)
    np.testing.assert_allclose(got[0], s, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got[1], joined)
    if plugin_right:
        for g, r in zip(got, _openvino_run(ov, path, feeds)):
            np.testing.assert_allclose(g, r, rtol=1e-6, atol=1e-6)


@pytest.mark.slow
def test_tensor_iterator_slicing_fused_agrees(ov, tmp_path):
    path = _save(ov, _sliced_ti(ov, 7, -1, 1, -2, 2), tmp_path)
    feeds = {"x": np.arange(42, dtype=np.float32).reshape(2, 7, 3), "s0": np.ones((2, 2, 3), np.float32)}
    want = rnnloop.load(path, backend="interp").run(None, feeds)
    for g, w in zip(load_fused(path, "numba").run(None, feeds), want):
        np.testing.assert_array_equal(g, w)


def _while_loop(ov, trip_dtype=np.int64):
    """x doubles until its sum reaches limit; y stacks x + i (the iteration number)."""
    import openvino.opset13 as ops
    trip = ops.parameter([], trip_dtype, name="trip")
    go = ops.parameter([], np.bool_, name="go")
    x0 = ops.parameter([2], np.float32, name="x0")
    limit = ops.parameter([], np.float32, name="limit")
    i, x, lim = ops.parameter([], np.int64), ops.parameter([2], np.float32), ops.parameter([], np.float32)
    x2 = ops.multiply(x, ops.constant(np.float32(2)))
    more = ops.result(ops.less(ops.reduce_sum(x2, ops.constant(np.array([0])), False), lim))
    x_next = ops.result(x2)
    y = ops.result(ops.unsqueeze(ops.add(x2, ops.convert(i, "f32")), ops.constant(np.array([0]))))
    loop = ops.loop(trip, go)
    loop.set_function(ov.Model([more, x_next, y], [i, x, lim], "body"))
    loop.set_special_body_ports([0, 0])
    loop.set_merged_input(x, x0.output(0), x_next.output(0))
    loop.set_invariant_input(lim, limit.output(0))
    return ov.Model([loop.get_iter_value(x_next.output(0), -1),
                     loop.get_concatenated_slices(y.output(0), 0, 1, 1, -1, 0)], [trip, go, x0, limit], "while")


def _while_numpy(trip, go, x, limit):
    ys, i = [], 0
    while go and (trip < 0 or i < trip):
        x = x * 2
        ys.append(x + i)
        go = x.sum() < limit
        i += 1
    return x, np.array(ys, np.float32).reshape(-1, 2)


@pytest.mark.parametrize("trip, go, limit", thin([(-1, True, 100), (3, True, 100), (10, True, 1e9), (5, False, 100),
                                                  (0, True, 100)], 5))
def test_loop_trip_count_condition_and_iteration_number(ov, tmp_path, backend, trip, go, limit):
    path = _save(ov, _while_loop(ov), tmp_path)
    feeds = {"trip": np.array(trip), "go": np.array(go), "x0": np.array([1, 2], np.float32),
             "limit": np.array(limit, np.float32)}
    got = load_fused(path, backend).run(None, feeds)
    want = _while_numpy(trip, go, feeds["x0"], limit)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    if trip != 0 and go:  # OpenVINO's plugin leaves the outputs of a loop that never runs undefined
        for g, r in zip(got, _openvino_run(ov, path, feeds)):
            np.testing.assert_array_equal(g, r)


def test_loop_with_int32_trip_count(ov, tmp_path):
    path = _save(ov, _while_loop(ov, np.int32), tmp_path)
    feeds = {"trip": np.array(4, np.int32), "go": np.array(True), "x0": np.array([1, 2], np.float32),
             "limit": np.array(1e9, np.float32)}
    got = rnnloop.load(path, backend="interp").run(None, feeds)
    for g, r in zip(got, _openvino_run(ov, path, feeds)):
        np.testing.assert_array_equal(g, r)


def test_loop_whose_carried_value_grows_each_iteration(ov, tmp_path):
    """acc = concat(acc, acc[-1:] + 1): a shape that changes across iterations runs in the interpreter."""
    import openvino.opset13 as ops
    trip = ops.parameter([], np.int64, name="trip")
    acc0 = ops.parameter([1], np.float32, name="acc0")
    acc = ops.parameter([-1], np.float32)
    tail = ops.slice(acc, ops.constant(np.array([-1])), ops.constant(np.array([np.iinfo(np.int64).max])),
                     ops.constant(np.array([1])))
    grown = ops.result(ops.concat([acc, ops.add(tail, ops.constant(np.float32(1)))], 0))
    more = ops.result(ops.constant(np.array(True)))
    loop = ops.loop(trip, ops.constant(np.array(True)))
    loop.set_function(ov.Model([more, grown], [acc], "body"))
    loop.set_special_body_ports([-1, 0])
    loop.set_merged_input(acc, acc0.output(0), grown.output(0))
    path = _save(ov, ov.Model([loop.get_iter_value(grown.output(0), -1)], [trip, acc0], "grow"), tmp_path)
    feeds = {"trip": np.array(4), "acc0": np.array([5], np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", rnnloop.FallbackWarning)
        got, = rnnloop.load(path).run(None, feeds)
    np.testing.assert_array_equal(got, [5, 6, 7, 8, 9])
    np.testing.assert_array_equal(got, _openvino_run(ov, path, feeds)[0])


def _if_model(ov):
    """relu(x + y) if c else relu(2 x): the branches bind different inputs (else never reads y)."""
    import openvino.opset8 as ops
    cond = ops.parameter([], np.bool_, name="c")
    x, y = ops.parameter([2, 3], np.float32, name="x"), ops.parameter([2, 3], np.float32, name="y")
    tx, ty, ex = (ops.parameter([2, 3], np.float32) for _ in range(3))
    then_res = ops.result(ops.add(tx, ty))
    else_res = ops.result(ops.multiply(ex, ops.constant(np.float32(2))))
    branch = ops.if_op(cond)
    branch.set_then_body(ov.Model([then_res], [tx, ty]))
    branch.set_else_body(ov.Model([else_res], [ex]))
    branch.set_input(x.output(0), tx, ex)
    branch.set_input(y.output(0), ty, None)
    out = branch.set_output(then_res, else_res)
    return ov.Model([ops.result(ops.relu(out))], [cond, x, y], "iffy")


def test_an_if_runs_the_branch_its_condition_picks_and_compiles_into_a_native_if(ov, backend, tmp_path):
    path = _save(ov, _if_model(ov), tmp_path)
    session = rnnloop.load(path, backend=backend)
    if backend == "numba":
        assert "If 'If_" in session.explain() and "compiled into one kernel" in session.explain()
    rng = np.random.default_rng(0)
    for flag in (True, False, True):
        feeds = {"c": np.array(flag), "x": rng.standard_normal((2, 3)).astype(np.float32),
                 "y": rng.standard_normal((2, 3)).astype(np.float32)}
        want = np.maximum(feeds["x"] + feeds["y"] if flag else 2 * feeds["x"], 0)
        got, = session.run(None, feeds)
        np.testing.assert_allclose(got, want, rtol=1e-6)
        np.testing.assert_allclose(got, _openvino_run(ov, path, feeds)[0], rtol=1e-6)


def test_an_if_without_an_else_body_is_a_clear_error(ov, tmp_path):
    path = _save(ov, _if_model(ov), tmp_path)
    text = Path(path).read_text()
    start, end = text.index("<else_body>"), text.index("</else_body>") + len("</else_body>")
    Path(path).write_text(text[:start] + text[end:])
    with pytest.raises(rnnloop.ModelError, match="If 'If_.*needs a then_body and an else_body"):
        rnnloop.load(path)


def test_the_input_product_of_a_tensor_iterator_is_hoisted_out_of_the_loop():
    """The body squeezes the sliced axis away and multiplies by W: one product over all steps."""
    source = rnnloop.load(str(FIXTURE)).kernel_sources()[0][1]
    assert "by chunks of rows" in source


def test_bench_times_an_ir_model_beside_openvino():
    from rnnloop.bench import bench, random_feeds
    feeds = random_feeds(rnnloop.load(str(FIXTURE), backend="interp"), seed=1)
    assert feeds["X"].shape == (1, 4, 3) and feeds["X"].dtype == np.float32
    report = bench(str(FIXTURE), feeds, title="fixture", repeat=2, interp=False)
    labels = {r.label: r for r in report.results}
    assert "onnxruntime" not in labels and labels["rnnloop numba"].seconds is not None
    assert not report.disagreeing()
