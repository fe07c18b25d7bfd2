"""Bad models and bad feeds raise clear rnnloop errors that name the node or input."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import load_fused, parse

import rnnloop

DOUBLER = """
doubler (int64 M, float[2] x0) => (float[2] x) {
    x = Loop(M, , x0) <body = step (int64 i, bool c, float[2] x_in) => (bool c2, float[2] x_out) {
        c2 = Identity(c)
        x_out = Add(x_in, x_in)
    }>
}
"""


def test_body_with_too_few_outputs_is_a_load_error_naming_the_loop():
    text = DOUBLER.replace("=> (bool c2, float[2] x_out)", "=> (bool c2)")
    model = parse(text, check=False)
    model.graph.node[0].name = "my_loop"
    with pytest.raises(rnnloop.ModelError, match=r"Loop 'my_loop' .*returns 1 outputs.*needs at least 2"):
        rnnloop.load(model)


def test_body_with_too_many_inputs_is_a_load_error_naming_the_loop():
    text = DOUBLER.replace("float[2] x_in)", "float[2] x_in, float[2] extra)")
    with pytest.raises(rnnloop.ModelError, match=r"Loop .*body takes 4 inputs.*passes 3"):
        rnnloop.load(parse(text, check=False))


@pytest.mark.parametrize("count", [0, 3, 2**63 - 1])
def test_a_scan_with_num_scan_inputs_out_of_range_is_a_load_error_naming_it(count):
    text = """
    g (float[2] s0, float[3, 2] x) => (float[2] s, float[3, 2] ys) {
        s, ys = Scan <num_scan_inputs = 1, body = b (float[2] s_in, float[2] x_t) => (float[2] s_out, float[2] y) {
            s_out = Add(s_in, x_t)
            y = Identity(s_out)
        }> (s0, x)
    }"""
    model = parse(text.replace("num_scan_inputs = 1", f"num_scan_inputs = {count}"), check=False)
    with pytest.raises(rnnloop.ModelError, match=rf"Scan 'Scan_0'.*num_scan_inputs is {count}, but the Scan has 2"):
        rnnloop.load(model)


def test_carried_value_whose_dtype_changes_is_a_load_error_naming_the_loop():
    text = DOUBLER.replace("x_out = Add(x_in, x_in)", "x_out = Cast <to = 11> (x_in)").replace(
        "float[2] x_out)", "double[2] x_out)")
    with pytest.raises(rnnloop.ModelError, match=r"Loop .*carried value 0 changes dtype"):
        rnnloop.load(parse(text, check=False))


def test_a_declared_type_that_contradicts_its_op_is_a_load_error_naming_the_node():
    # The interpreter would follow the Cast, a kernel the declaration: refuse, as onnxruntime does.
    text = DOUBLER.replace("x_out = Add(x_in, x_in)", "x_out = Cast <to = 11> (x_in)")
    with pytest.raises(rnnloop.ModelError, match=r"Cast 'Cast_1': computes double, but the model declares its "
                                                 r"output float"):
        rnnloop.load(parse(text, check=False))


def test_text_that_is_not_utf8_is_a_load_error_naming_the_field():
    data = bytearray(parse(DOUBLER).SerializeToString())
    data[data.index(b"Identity")] = 0xF3  # what a flipped bit in a corrupt file looks like
    with pytest.raises(rnnloop.ModelError, match=r"graph\.node\[0\]\.attribute\[0\]\.g\.node\[0\]\.op_type "
                                                 r"is not UTF-8 text"):
        rnnloop.load(bytes(data))


def test_an_undefined_element_type_attribute_is_a_load_error_naming_the_node():
    model = parse(DOUBLER.replace("x_out = Add(x_in, x_in)", "x_out = Cast <to = 1> (x_in)"))
    model.graph.node[0].attribute[0].g.node[1].attribute[0].i = 99
    with pytest.raises(rnnloop.ModelError, match=r"Cast 'Cast_1'.*attribute 'to' = 99 is not a value ONNX defines"):
        rnnloop.load(model)


@pytest.mark.parametrize("old, new", [("x_out = Add(x_in, x_in)", "x_out = Add(x_in, ghost)"),
                                      ("x = Loop(M, , x0)", "x = Loop(M, , ghost)")], ids=["in the body", "outside"])
def test_a_name_defined_nowhere_is_a_load_error_naming_it_and_the_node(old, new):
    with pytest.raises(rnnloop.ModelError, match=r"Loop 'Loop_0' .*input 'ghost' is not defined"):
        rnnloop.load(parse(DOUBLER.replace(old, new), check=False))


def test_truncated_file_is_a_clear_load_error(tmp_path):
    data = parse(DOUBLER).SerializeToString()
    path = tmp_path / "model.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(rnnloop.ModelError):
        rnnloop.load(str(path))


def test_missing_file_is_a_clear_load_error(tmp_path):
    with pytest.raises(rnnloop.ModelError, match="no such model file"):
        rnnloop.load(str(tmp_path / "absent.onnx"))


def _two_unsupported_ops():
    """A Det in the graph and a Bernoulli in a loop body, ops rnnloop does not convert."""
    return parse("""
    odd (float[4] x) => (float[4] y) {
        a = Det(x)
        y = Loop(, , a) <body = step (int64 i, bool c, float[4] v) => (bool c2, float[4] w) {
            c2 = Identity(c)
            w = Bernoulli(v)
        }>
    }""", opset=20)


def test_every_unsupported_op_is_listed_in_one_error_with_its_node_name():
    model = _two_unsupported_ops()
    model.graph.node[0].name = "first"
    model.graph.node[1].attribute[0].g.node[1].name = "deep"
    with pytest.raises(rnnloop.UnsupportedModelError) as info:
        rnnloop.load(model)
    message = str(info.value)
    assert "2 unsupported" in message
    assert "Bernoulli 'deep'" in message and "Det 'first'" in message


def test_unnamed_nodes_are_named_by_op_type_and_index_in_their_graph():
    model = _two_unsupported_ops()
    with pytest.raises(rnnloop.UnsupportedModelError) as info:
        rnnloop.load(model)
    assert "Bernoulli 'Bernoulli_1' (ai.onnx opset 20)" in str(info.value)
    assert "Det 'Det_0' (ai.onnx opset 20)" in str(info.value)
    del model.graph.node[0]  # a model rnnloop runs: the same names in explain(), load after load
    model.graph.node[0].input[2] = "x"
    model.graph.node[0].attribute[0].g.node[1].op_type = "Neg"
    explained = [rnnloop.load(model, backend="interp").explain().splitlines()[0] for _ in range(2)]
    assert explained[0] == explained[1] == "Loop 'Loop_0' (ai.onnx opset 20): interpreted (backend='interp')"


def test_many_unsupported_nodes_of_one_op_read_as_one_line_with_the_first_names():
    nodes = "\n".join(f"        d{k} = Det(x)" for k in range(12))
    model = parse(f"""
    many (float[4, 2, 2] x) => (float[4] d0) {{
{nodes}
        b = Bernoulli(x)
    }}""", opset=20)
    with pytest.raises(rnnloop.UnsupportedModelError) as info:
        rnnloop.load(model)
    message = str(info.value)
    assert "the model uses 13 unsupported op(s)" in message, message
    assert ("Det ×12 (ai.onnx opset 20): 'Det' is not supported: 'Det_0', 'Det_1', 'Det_2', … (+9 more)"
            in message), message
    assert "Bernoulli 'Bernoulli_12' (ai.onnx opset 20)" in message
    assert len(message.splitlines()) == 4  # the count, one line per op type, what to do


def test_grouped_openvino_layers_are_named_with_their_layer_ids():
    from rnnloop.frontends.registry import Unsupported, unsupported_listing
    problems = [Unsupported("Foo", f"f{k}", "opset1", "'Foo' is not supported", f"layer {k}") for k in range(2)]
    count, listing = unsupported_listing(problems + problems[:1])  # (a node met twice counts once)
    assert count == 2
    assert listing == "  - Foo ×2 (opset1): 'Foo' is not supported: 'f0' (layer 0), 'f1' (layer 1)"


def test_loading_from_a_file_and_from_bytes_gives_the_same_session(tmp_path):
    model = parse(DOUBLER)
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    feeds = {"M": np.array(3, np.int64), "x0": np.array([1.0, 2.0], np.float32)}
    expected = np.array([8.0, 16.0], np.float32)
    for source in (str(path), path, model.SerializeToString(), model):
        np.testing.assert_array_equal(rnnloop.load(source).run(None, feeds)[0], expected)


def test_external_data_is_read_from_beside_the_model(tmp_path):
    model = parse("ext (float[1000] x) => (float[1000] y) { y = Add(x, w) }", check=False)
    w = np.arange(1000, dtype=np.float32)
    model.graph.initializer.append(onnx.numpy_helper.from_array(w, "w"))
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="weights.bin", size_threshold=0)
    y, = rnnloop.load(str(path)).run(None, {"x": np.ones(1000, np.float32)})
    np.testing.assert_array_equal(y, w + 1)
    with pytest.raises(rnnloop.ModelError, match="external data"):
        rnnloop.load(onnx.load(str(path), load_external_data=False))


class TestFeeds:
    session = None

    @classmethod
    def setup_class(cls):
        cls.session = rnnloop.load(parse(DOUBLER))

    def test_missing_and_unknown_inputs_are_named(self):
        with pytest.raises(rnnloop.InputError, match=r"unknown input\(s\) \['y'\] and missing input\(s\) \['x0'\]"):
            self.session.run(None, {"M": np.array(1, np.int64), "y": np.zeros(2, np.float32)})

    def test_wrong_dtype_is_named_with_the_fix(self):
        with pytest.raises(rnnloop.InputError, match=r"input 'x0' must be float32, got float64.*astype"):
            self.session.run(None, {"M": np.array(1, np.int64), "x0": np.zeros(2)})

    def test_wrong_rank_and_wrong_fixed_dimension_are_named(self):
        with pytest.raises(rnnloop.InputError, match=r"input 'x0' must have rank 1"):
            self.session.run(None, {"M": np.array(1, np.int64), "x0": np.zeros((1, 2), np.float32)})
        with pytest.raises(rnnloop.InputError, match=r"input 'x0' must have size 2 on axis 0"):
            self.session.run(None, {"M": np.array(1, np.int64), "x0": np.zeros(3, np.float32)})

    def test_python_scalars_and_lists_are_accepted_where_the_type_allows(self):
        y, = self.session.run(None, {"M": 2, "x0": [1.0, 2.0]})
        np.testing.assert_array_equal(y, np.array([4.0, 8.0], np.float32))
        assert y.dtype == np.float32
        with pytest.raises(rnnloop.InputError, match=r"input 'M' must be int64"):
            self.session.run(None, {"M": 2.5, "x0": [1.0, 2.0]})

    def test_unknown_output_name_is_an_error(self):
        with pytest.raises(rnnloop.InputError, match=r"unknown output name"):
            self.session.run(["nope"], {"M": 1, "x0": [1.0, 2.0]})

    def test_get_inputs_and_outputs_describe_the_model(self):
        inputs = self.session.get_inputs()
        assert [(i.name, i.shape, i.type) for i in inputs] == [("M", [], "tensor(int64)"),
                                                                ("x0", [2], "tensor(float)")]
        assert [(o.name, o.type) for o in self.session.get_outputs()] == [("x", "tensor(float)")]



def test_feeds_are_not_modified_and_outputs_do_not_change_on_the_next_run(backend):
    session = load_fused(parse(DOUBLER), backend)
    x0 = np.array([1.0, 2.0], np.float32)
    x0.setflags(write=False)
    first, = session.run(None, {"M": 1, "x0": x0})
    kept = first.copy()
    session.run(None, {"M": 3, "x0": x0})
    np.testing.assert_array_equal(first, kept)
    np.testing.assert_array_equal(x0, [1.0, 2.0])


def test_an_output_that_aliases_a_constant_or_a_feed_is_a_copy_the_caller_owns(backend):
    # After zero iterations the Loop's final value *is* its initial value: a constant, or the feed.
    model = parse("""
    aliases (int64 M, float[2] x0) => (float[2] from_constant, float[2] from_feed) {
        start = Constant <value = float[2] {1, 2}> ()
        from_constant, from_feed = Loop(M, , start, x0) <body = step (int64 i, bool c, float[2] a, float[2] b)
                                                           => (bool c2, float[2] a2, float[2] b2) {
            c2 = Identity(c)
            a2 = Add(a, a)
            b2 = Add(b, b)
        }>
    }""")
    session = load_fused(model, backend)
    # A feed of its own memory, a view into a larger array, and one over a foreign buffer.
    feeds = [np.array([5.0, 6.0], np.float32), np.array([9.0, 5.0, 7.0, 6.0], np.float32)[1::2],
             np.frombuffer(bytearray(np.array([5.0, 6.0], np.float32).tobytes()), np.float32)]
    for x0 in feeds:
        from_constant, from_feed = session.run(None, {"M": 0, "x0": x0})
        from_constant[:] = 0
        from_feed[:] = 0
        np.testing.assert_array_equal(x0, [5.0, 6.0])
        again, _ = session.run(None, {"M": 0, "x0": x0})
        np.testing.assert_array_equal(again, [1.0, 2.0])


SHAPE_ARITHMETIC = parse("""
shapes (float[N, 3] x, int64 M) => (int64[2] twice, int64[1] n_out) {
    two = Constant <value = int64[1] {2}> ()
    zero = Constant <value = int64[1] {0}> ()
    s = Shape(x)
    twice = Mul(s, two)
    n = Gather(s, zero)
    n_out = Loop(M, , n) <body = step (int64 i, bool c, int64[1] a) => (bool c2, int64[1] a2) {
        c2 = Identity(c)
        a2 = Add(a, a)
    }>
}""")


def test_shape_arithmetic_is_remembered_by_input_shape_and_handed_out_as_copies(backend):
    # Interpreted, Shape and Gather run once per input shape (GraphPlan's memo); compiled, the whole
    # model is one kernel. n reaches the caller unchanged after zero iterations, and what the caller
    # does to it must not reach the next run.
    from rnnloop.interp.graph import GraphPlan
    from rnnloop.ir import Region
    session = load_fused(SHAPE_ARITHMETIC, backend)
    x2, x5 = np.zeros((2, 3), np.float32), np.zeros((5, 3), np.float32)
    for x, m, twice, n in [(x2, 0, [4, 6], [2]), (x2, 0, [4, 6], [2]), (x5, 1, [10, 6], [10]),
                           (x2, 2, [4, 6], [8]), (x5, 0, [10, 6], [5])]:
        got_twice, got_n = session.run(None, {"x": x, "M": m})
        np.testing.assert_array_equal(got_twice, twice)
        np.testing.assert_array_equal(got_n, n)
        got_n[:] = -1
    if backend == "numba":
        assert [type(op) for op in session.program.ops] == [Region], session.explain()
        return
    plan = GraphPlan.of(session.program)
    assert [op.op_type for op in (s.op for s in plan.steps if s.shaped)] == ["Shape", "Gather"]
    assert sorted(plan.memo) == [((2, 3),), ((5, 3),)]


def test_an_unknown_backend_is_an_rnnloop_error():
    model = parse("""
        agraph (float[2] x) => (float[2] y)
        {
          y = Neg(x)
        }""")
    with pytest.raises(rnnloop.RnnloopError, match=r"backend must be one of \('numba', 'interp'\), got 'numbaa'"):
        rnnloop.load(model, backend="numbaa")


def test_output_names_given_as_a_string_is_an_error_that_says_to_pass_a_list():
    model = parse("""
        agraph (float[2] x) => (float[2] y)
        {
          y = Neg(x)
        }""")
    session = rnnloop.load(model)
    with pytest.raises(rnnloop.InputError, match=r"pass \['y'\]"):
        session.run("y", {"x": np.ones(2, np.float32)})
