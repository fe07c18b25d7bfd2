"""IR rewrites between lowering and planning: constant folding, undone Unsqueezes, dead code elimination."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import IR_VERSION, parse
from onnx import TensorProto, helper, numpy_helper

import rnnloop
from rnnloop.frontends.onnx import convert_model
from rnnloop.passes import FOLD_GROWTH_BYTES, fold_constants


def _ops(model) -> list[str]:
    return [op.op_type for op in rnnloop.load(model, backend="interp").graph.ops]


def test_ops_on_constants_run_once_at_load_and_ops_on_inputs_stay():
    model = parse("""
    fold (float[2, 3] x) => (float[2, 3] y) {
        w = Constant <value = float[3, 2] {1, 2, 3, 4, 5, 6}> ()
        wt = Transpose <perm = [1, 0]> (w)
        twice = Add(wt, wt)
        y = Mul(x, twice)
    }""")
    assert _ops(model) == ["Mul"]
    session = rnnloop.load(model, backend="interp")
    folded = session.graph.constants[session.graph.ops[0].inputs[1]]
    assert folded.flags.c_contiguous and folded.base is None  # a copy, not a view of w
    x = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x})[0], [[2, 6, 10], [4, 8, 12]])


def test_an_onnx_lstm_with_weights_in_the_model_prepares_them_at_load():
    from rnnloop.models import lstm_native
    ops = _ops(lstm_native(1, 4, 8, 3)[0])
    assert "Transpose" not in ops and "Split" not in ops and "Add" not in ops
    assert ops.count("Loop") == 1


def test_an_op_that_fails_on_its_constants_still_fails_at_run_with_its_name():
    model = parse("""
    bad (float[2] x) => (float[2] y) {
        shape = Constant <value = int64[1] {3}> ()
        c = Constant <value = float[2] {1, 2}> ()
        r = Reshape(c, shape)
        y = Add(x, r)
    }""", check=False)
    session = rnnloop.load(model, backend="interp")
    assert [op.op_type for op in session.graph.ops] == ["Reshape", "Add"]
    with pytest.raises(rnnloop.RunError, match="Reshape"):
        session.run(None, {"x": np.zeros(2, np.float32)})


def test_a_result_much_larger_than_its_inputs_is_not_folded():
    n = 2 * FOLD_GROWTH_BYTES // 4
    model = parse(f"""
    grow (float[1] x) => (float[{n}] y) {{
        shape = Constant <value = int64[1] {{{n}}}> ()
        big = ConstantOfShape <value = float[1] {{1}}> (shape)
        y = Add(x, big)
    }}""")
    assert _ops(model) == ["ConstantOfShape", "Add"]


def test_a_graph_without_foldable_ops_is_returned_as_it_is():
    graph = convert_model(parse("""
    plain (float[2] x) => (float[2] y) {
        y = Add(x, x)
    }"""))
    assert fold_constants(graph) is graph


def test_a_folded_output_is_a_copy_the_caller_owns():
    model = parse("""
    out (float[2] x) => (float[2] y, float[2] z) {
        c = Constant <value = float[2] {1, 2}> ()
        y = Neg(c)
        z = Add(x, c)
    }""")
    session = rnnloop.load(model, backend="interp")
    assert [op.op_type for op in session.graph.ops] == ["Add"]  # y is a constant now
    y, _ = session.run(None, {"x": np.zeros(2, np.float32)})
    y[:] = 7
    np.testing.assert_array_equal(session.run(None, {"x": np.zeros(2, np.float32)})[0], [-1, -2])


def test_ops_on_constants_inside_a_loop_body_are_folded_too():
    model = parse("""
    body_fold (int64 n, float[2] x0) => (float[2] x) {
        x = Loop(n, , x0) <body = step (int64 i, bool c, float[2] a) => (bool c2, float[2] a2) {
            c2 = Identity(c)
            w = Constant <value = float[2, 2] {1, 2, 3, 4}> ()
            wt = Transpose <perm = [1, 0]> (w)
            a2 = MatMul(a, wt)
        }>
    }""")
    session = rnnloop.load(model, backend="interp")
    body = session.graph.ops[0].body
    assert [op.op_type for op in body.ops] == ["Identity", "MatMul"]
    np.testing.assert_array_equal(session.run(None, {"n": np.array(1), "x0": np.array([1, 1], np.float32)})[0],
                                  [3, 7])


def test_ops_nothing_reads_are_dropped_in_graphs_and_loop_bodies():
    model = parse("""
    dead (float[2] x, int64 n) => (float[2] y) {
        unused = Exp(x)
        t = Constant <value = bool {1}> ()
        y = Loop(n, t, x) <body = step (int64 i, bool c, float[2] acc) => (bool c_out, float[2] acc_out) {
            c_out = Identity(c)
            waste = Sin(acc)
            acc_out = Add(acc, acc)
        }>
    }""")
    graph = rnnloop.load(model, backend="interp").graph
    assert [op.op_type for op in graph.ops] == ["Loop"] and list(graph.constants) == ["t"]
    assert [op.op_type for op in graph.ops[0].body.ops] == ["Identity", "Add"]



def test_an_unsqueeze_undone_by_a_squeeze_or_a_gather_is_read_through():
    # As torch exports an LSTM: the states unsqueezed for the direction axis, the outputs squeezed.
    model = parse("""
    wrap (float[2, 3] x, float[2, 3] h) => (float[2, 3] y, float[2, 3] z, float[2, 3] w) {
        zero = Constant <value = int64[1] {0}> ()
        last = Constant <value = int64[1] {-1}> ()
        index = Constant <value = int64 {0}> ()
        u = Unsqueeze(x, zero)
        y = Squeeze(u, zero)
        v = Unsqueeze(h, last)
        inner = Gather <axis = 2> (v, index)
        s = Sin(inner)
        us = Unsqueeze(s, zero)
        z = Squeeze(us, zero)
        g = Gather <axis = 0> (u, index)
        ug = Unsqueeze(g, zero)
        w = Squeeze(ug)
    }""")
    session = rnnloop.load(model, backend="interp")
    # y stays a result of its own (an Identity of the input x); z is Sin's result itself (its
    # Identity forwarded); the Gathers read x and h; a Squeeze of every size-1 axis (no axes
    # given) may remove others too, so it stays.
    assert [(op.op_type, op.inputs[0]) for op in session.graph.ops] == [
        ("Identity", "x"), ("Sin", "h"), ("Unsqueeze", "x"), ("Squeeze", "ug")]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y, z, w = session.run(None, {"x": x, "h": x + 1})
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(z, np.sin(x + 1))
    np.testing.assert_array_equal(w, x)
    assert not np.shares_memory(y, x)


def test_unsqueezes_that_are_not_undone_stay():
    model = parse("""
    keep (float[2, 1] x) => (float[1, 2] y, float[2] z, float[1, 2] w) {
        zero = Constant <value = int64[1] {0}> ()
        two = Constant <value = int64[1] {2}> ()
        both = Constant <value = int64[2] {0, 2}> ()
        index = Constant <value = int64 {0}> ()
        u = Unsqueeze(x, zero)
        y = Squeeze(u, two)
        z = Squeeze(u, both)
        w = Gather <axis = 2> (u, index)
    }""")
    session = rnnloop.load(model, backend="interp")  # each removes an axis x had, not (only) the new one
    assert [op.op_type for op in session.graph.ops] == ["Unsqueeze", "Squeeze", "Squeeze", "Gather"]
    x = np.array([[1], [2]], np.float32)
    y, z, w = session.run(None, {"x": x})
    np.testing.assert_array_equal(y, [[1, 2]])
    np.testing.assert_array_equal(z, [1, 2])
    np.testing.assert_array_equal(w, [[1, 2]])


def test_a_transposed_stack_is_made_on_the_transposed_axis():
    # A bidirectional LSTM's Y and an exporter's Transpose to [steps, batch, directions, hidden].
    model = parse("""
    stacked (float[5, 2, 3] a, float[5, 2, 3] b) => (float[5, 2, 2, 3] y, float[2, 5, 3, 2] z, float[5, 2, 6] f) {
        one = Constant <value = int64[1] {1}> ()
        ua = Unsqueeze(a, one)
        ub = Unsqueeze(b, one)
        joined = Concat <axis = 1> (ua, ub)
        y = Transpose <perm = [0, 2, 1, 3]> (joined)
        again = Concat <axis = -3> (ua, ub)
        z = Transpose <perm = [1, 0, 3, 2]> (again)
        thrice = Concat <axis = 1> (ua, ub)
        moved = Transpose <perm = [0, 2, 1, 3]> (thrice)
        flat = Constant <value = int64[3] {0, 0, -1}> ()
        f = Reshape(moved, flat)
    }""")
    a, b = (np.random.default_rng(k).standard_normal((5, 2, 3)).astype(np.float32) for k in (0, 1))
    want = np.stack([a, b], axis=1)
    for backend in ("interp", "numba"):
        session = rnnloop.load(model, backend=backend)
        # y and f: a Concat on axis 2 of the parts unsqueezed there; z moves the other axes too.
        ops = [(op.op_type, op.attrs.get("axis")) for op in session.graph.ops if op.op_type != "Unsqueeze"]
        assert ops == [("Concat", 2), ("Concat", -3), ("Transpose", None), ("Concat", 2), ("Reshape", None)]
        y, z, f = session.run(None, {"a": a, "b": b})
        np.testing.assert_array_equal(y, want.transpose(0, 2, 1, 3))
        np.testing.assert_array_equal(z, want.transpose(1, 0, 3, 2))
        np.testing.assert_array_equal(f, want.transpose(0, 2, 1, 3).reshape(5, 2, 6))


def test_a_stack_read_by_another_op_or_returned_is_not_moved():
    model = parse("""
    kept (float[5, 2, 3] a, float[5, 2, 3] b) => (float[5, 2, 2, 3] y, float[5, 2, 2, 3] joined) {
        one = Constant <value = int64[1] {1}> ()
        ua = Unsqueeze(a, one)
        ub = Unsqueeze(b, one)
        joined = Concat <axis = 1> (ua, ub)
        y = Transpose <perm = [0, 2, 1, 3]> (joined)
    }""")
    session = rnnloop.load(model, backend="interp")
    assert [op.op_type for op in session.graph.ops] == ["Unsqueeze", "Unsqueeze", "Concat", "Transpose"]


def test_an_identity_of_a_computed_value_takes_its_place():
    model = parse("""
    identities (float[2] x) => (float[2] y, float[2] z, float[2] x_out, float[2] e) {
        t = Tanh(x)
        y = Identity(t)
        z = Identity(y)
        x_out = Identity(x)
        e = Exp(t)
    }""")
    session = rnnloop.load(model, backend="interp")
    graph = session.graph
    # t is computed as y (and read as y by Exp); z repeats a graph output and x_out a graph input:
    # each keeps its Identity.
    assert [(op.op_type, op.outputs) for op in graph.ops] == [
        ("Tanh", ["y"]), ("Identity", ["z"]), ("Identity", ["x_out"]), ("Exp", ["e"])]
    assert graph.ops[3].inputs == ["y"]
    x = np.array([0.5, -1.0], np.float32)
    y, z, x_out, e = session.run(None, {"x": x})
    np.testing.assert_allclose(y, np.tanh(x), rtol=1e-6)
    np.testing.assert_array_equal(z, y)
    np.testing.assert_array_equal(x_out, x)
    assert x_out is not x  # still the caller's own copy
    np.testing.assert_allclose(e, np.exp(np.tanh(x)), rtol=1e-6)


def test_a_chain_of_identities_is_one_value():
    model = parse("""
    chain (float[2] x) => (float[2] z, float[2] w) {
        t = Tanh(x)
        y = Identity(t)
        z = Identity(y)
        w = Identity(t)
    }""")
    session = rnnloop.load(model, backend="interp")
    # t takes the name at the end of its first chain; a second Identity of it stays, reading that name.
    assert [(op.op_type, op.inputs, op.outputs) for op in session.graph.ops] == [
        ("Tanh", ["x"], ["z"]), ("Identity", ["z"], ["w"])]
    x = np.array([0.5, -1.0], np.float32)
    z, w = session.run(None, {"x": x})
    np.testing.assert_allclose(z, np.tanh(x), rtol=1e-6)
    np.testing.assert_array_equal(w, z)


def _embedding_model(bias: str = "[6]", extra_reader: bool = False, axis: int = 0, vocab: int = 10,
                     loop: bool = False) -> tuple:
    """tokens -> Gather(E [vocab, 4]) -> MatMul(W [4, 6]) (-> Add b), as a decoder's first layer; with
    `loop`, inside a Loop body that carries the token."""
    rng = np.random.default_rng(7)
    E, W = rng.standard_normal((vocab, 4)).astype(np.float32), rng.standard_normal((4, 6)).astype(np.float32)
    shape = [int(d) for d in bias.strip("[]").split(",")] if bias else None
    b = rng.standard_normal(shape).astype(np.float32) if bias else None
    nodes = [helper.make_node("Gather", ["E", "tokens"], ["x"], axis=axis),
             helper.make_node("MatMul", ["x", "W"], ["xw"])]
    nodes += [helper.make_node("Add", ["xw", "b"], ["y"])] if bias else [helper.make_node("Identity", ["xw"], ["y"])]
    outputs = ["y"] + (["x"] if extra_reader else [])
    inits = {"E": E, "W": W, **({"b": b} if bias else {})}
    if not loop:
        graph = helper.make_graph(nodes, "embed", [helper.make_tensor_value_info("tokens", TensorProto.INT64, [3])],
                                  [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                                  [numpy_helper.from_array(v, k) for k, v in inits.items()])
    else:  # each iteration looks up the carried token and stacks its row
        body = helper.make_graph(
            nodes + [helper.make_node("Identity", ["c"], ["c_out"]),
                     helper.make_node("Identity", ["tokens"], ["t_out"])],
            "step", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                     helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                     helper.make_tensor_value_info("tokens", TensorProto.INT64, [3])],
            [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
             helper.make_tensor_value_info("t_out", TensorProto.INT64, [3]),
             helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        graph = helper.make_graph(
            [helper.make_node("Loop", ["n", "", "tokens"], ["t_last", "ys"], body=body)], "embed_loop",
            [helper.make_tensor_value_info("tokens", TensorProto.INT64, [3]),
             helper.make_tensor_value_info("n", TensorProto.INT64, [])],
            [helper.make_tensor_value_info("ys", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=IR_VERSION)
    expected = E[np.array([1, 9, 0]) % vocab] @ W + (b if bias else 0)
    return model, expected


@pytest.mark.parametrize("bias, backend", [("[6]", "interp"), ("[1]", "interp"), ("", "interp"),
                                           pytest.param("[6]", "numba", marks=pytest.mark.slow)])
def test_embeddings_times_constant_weights_are_gathered_from_a_table_of_products(bias, backend):
    model, expected = _embedding_model(bias)
    session = rnnloop.load(model, backend=backend)
    ops = [op.op_type for op in session.graph.ops]
    assert "MatMul" not in ops and "Add" not in ops and ops.count("Gather") == 1
    table = session.graph.constants[session.graph.ops[0].inputs[0]]
    assert table.shape == (10, 6) and table.dtype == np.float32
    assert "E" not in session.graph.constants  # nothing else reads the embeddings
    tokens = np.array([1, 9, 0], np.int64)
    np.testing.assert_allclose(session.run(None, {"tokens": tokens})[0], expected, rtol=1e-5, atol=1e-6)
    negative = session.run(None, {"tokens": np.array([-9, -1, 0], np.int64)})[0]  # Gather's negative indices
    np.testing.assert_allclose(negative, expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(rnnloop.RnnloopError, match="Gather"):
        session.run(None, {"tokens": np.array([1, 10, 0], np.int64)})


def test_a_product_of_embeddings_inside_a_loop_body_is_folded_there():
    model, expected = _embedding_model(loop=True)
    session = rnnloop.load(model, backend="interp")
    body = session.graph.ops[0].body
    assert "MatMul" not in [op.op_type for op in body.ops]
    ys = session.run(None, {"tokens": np.array([1, 9, 0], np.int64), "n": np.array(2)})[0]
    np.testing.assert_allclose(ys, [expected, expected], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["gathered rows read elsewhere", "axis 1", "table too large", "bias per row"])
def test_products_of_embeddings_that_cannot_fold_stay(case, monkeypatch):
    import rnnloop.passes as passes
    options = {"gathered rows read elsewhere": dict(extra_reader=True), "axis 1": dict(axis=1, vocab=4),
               "table too large": dict(vocab=200), "bias per row": dict(bias="[3, 6]")}[case]
    if case == "table too large":
        monkeypatch.setattr(passes, "EMBEDDING_TABLE_BYTES", 200 * 6 * 4 - 1)
    model, _ = _embedding_model(**options)
    ops = [op.op_type for op in rnnloop.load(model, backend="interp").graph.ops]
    # a bias that is not one row folds no Add, but the MatMul still folds
    assert ops == (["Gather", "Add"] if case == "bias per row" else ["Gather", "MatMul", "Add"])
