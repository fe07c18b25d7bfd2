"""Compiled regions: the ops of a graph that have rules run as one kernel per region (partition.py),
with the same results as the interpreter; what is left to the interpreter is listed with its reason."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import assert_same, parse

import rnnloop
from rnnloop.ir import Region


def load_numba(model) -> rnnloop.Session:
    """A numba session that must load without a fallback warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", rnnloop.FallbackWarning)
        return rnnloop.load(model)


def agree(model, feeds: dict, session: rnnloop.Session | None = None) -> list:
    """Run compiled and interpreted; the results must match. Returns the compiled ones."""
    session = session or load_numba(model)
    got = session.run(None, feeds)
    assert_same(got, rnnloop.load(model, backend="interp").run(None, feeds))
    return got


CHAIN = parse("""
    chain (float[N, 16] x, float[16] b) => (float[N, 16] y, int64[2] shape)
    {
        a = Sigmoid(x)
        c = Mul(a, x)
        d = Add(c, b)
        y = Tanh(d)
        shape = Shape(y)
    }""")


def test_a_model_of_ops_with_rules_is_one_region_called_directly():
    session = load_numba(CHAIN)
    assert [type(op) for op in session.program.ops] == [Region]
    assert session._direct is not None
    assert "5 op(s) compiled into one kernel" in session.explain()
    rng = np.random.default_rng(0)
    for n in (1, 3, 0):  # one kernel for every batch size
        agree(CHAIN, {"x": rng.standard_normal((n, 16), np.float32), "b": rng.standard_normal(16, np.float32)},
              session)
    [(label, source)] = session.kernel_sources()
    assert label == "Region 'chain/region1'" and "def kernel(status, max_iter, in_x, in_b)" in source


def test_feeds_the_direct_call_does_not_take_go_the_general_way():
    session = load_numba(CHAIN)
    b = np.ones(16, np.float32)
    [y_list] = session.run(["y"], {"x": [[0.5] * 16], "b": b})  # a list, converted
    [y_strided] = session.run(["y"], {"x": np.full((2, 32), 0.5, np.float32)[:, ::2], "b": b})
    np.testing.assert_allclose(y_list[0], y_strided[1])
    with pytest.raises(rnnloop.InputError, match="rank 2"):
        session.run(None, {"x": np.ones(16, np.float32), "b": b})
    with pytest.raises(rnnloop.InputError, match="size 16 on axis 1"):
        session.run(None, {"x": np.ones((1, 15), np.float32), "b": b})
    with pytest.raises(rnnloop.InputError, match="missing input"):
        session.run(None, {"x": np.ones((1, 16), np.float32)})
    with pytest.raises(rnnloop.InputError, match="unknown output"):
        session.run(["z"], {"x": np.ones((1, 16), np.float32), "b": b})
    shape, y, again = session.run(["shape", "y", "shape"], {"x": np.ones((1, 16), np.float32), "b": b})
    assert shape.tolist() == [1, 16] and again.tolist() == [1, 16] and y.shape == (1, 16)


SPLIT = parse("""
    split (float[N, 4] x) => (float[N, 4] y, float[N, 4] z)
    <int64 axis = {1}>
    {
        a = Relu(x)
        c = CumSum(a, axis)
        y = Add(a, c)
        z = Tanh(x)
    }""")


def test_an_op_without_a_rule_splits_the_graph_into_regions_around_it():
    session = load_numba(SPLIT)
    kinds = [op.op_type for op in session.program.ops]
    assert kinds == ["Region", "CumSum", "Region"], kinds
    first, _, second = session.program.ops
    assert {op.op_type for op in first.body.ops} == {"Relu", "Tanh"}
    assert [op.op_type for op in second.body.ops] == ["Add"]
    assert "CumSum 'CumSum_1' (ai.onnx opset 17): interpreted (no code generation rule for CumSum)" \
        in session.explain()
    agree(SPLIT, {"x": np.random.default_rng(1).standard_normal((3, 4), np.float32)}, session)


def test_an_op_a_rule_refuses_is_interpreted_with_the_rules_reason():
    model = parse("""
        refuse (float[5, 3] x, int64[2, 2] i) => (float[2, 2, 3] y)
        {
            a = Neg(x)
            g = Gather(a, i)
            y = Relu(g)
        }""")
    session = load_numba(model)
    assert "Gather 'Gather_1' (ai.onnx opset 17): interpreted (" in session.explain()
    assert "rank > 1" in session.explain()
    agree(model, {"x": np.arange(15, dtype=np.float32).reshape(5, 3), "i": np.array([[0, 4], [-1, 2]])}, session)


BRANCH = parse("""
    branch (bool flag, float[3] x) => (float[3] y)
    {
        a = Abs(x)
        y = If(flag) <
            then_branch = g1 () => (float[3] t) { t = Sqrt(a) },
            else_branch = g2 () => (float[3] e) { e = Neg(a) }
        >
    }""")


def test_an_if_is_a_native_if_inside_the_region():
    session = load_numba(BRANCH)
    assert [type(op) for op in session.program.ops] == [Region]
    x = np.array([4, -9, 16], np.float32)
    assert agree(BRANCH, {"flag": np.array(True), "x": x}, session)[0].tolist() == [2, 3, 4]
    assert agree(BRANCH, {"flag": np.array(False), "x": x}, session)[0].tolist() == [-4, -9, -16]


def test_an_if_with_a_branch_the_interpreter_runs_leaves_only_the_if_out_and_compiles_its_branches():
    model = parse("""
        branchy (bool flag, float[4] x) => (float[4] y)
        {
            ax = Constant <value = int64 {0}> ()
            a = Mul(x, x)
            b = Add(a, x)
            t = If(flag) <
                then_branch = g1 () => (float[4] o) { e = Exp(b)  o = CumSum(e, ax) },
                else_branch = g2 () => (float[4] o2) { o2 = Neg(b) }
            >
            y = Tanh(t)
        }""")
    session = load_numba(model)
    assert [op.op_type for op in session.program.ops] == ["Region", "If", "Region"]
    explained = session.explain()
    assert "If 'If_3' (ai.onnx opset 17): interpreted (CumSum 'CumSum_1'" in explained
    assert "Region 'If_3/then/region1': 1 op(s) compiled into one kernel (Exp" in explained
    assert "Region 'If_3/else/region1': 1 op(s) compiled into one kernel (Neg" in explained
    assert "CumSum 'CumSum_1' (ai.onnx opset 17): interpreted (no code generation rule for CumSum)" in explained
    x = np.linspace(-1, 1, 4).astype(np.float32)
    for flag in (True, False):
        agree(model, {"flag": np.array(flag), "x": x}, session)


def test_the_body_of_a_loop_the_interpreter_runs_is_compiled_in_regions_around_its_interpreted_ops():
    model = parse("""
        looped (int64 n, float[4] x) => (float[4] y, float[N, 4] ys)
        {
            ax = Constant <value = int64 {0}> ()
            y, ys = Loop(n, , x) <body = step (int64 i, bool c, float[4] v) => (bool c2, float[4] w, float[4] s) {
                c2 = Identity(c)
                a = Mul(v, v)
                b = Add(a, v)
                k = CumSum(b, ax)
                w = Tanh(k)
                s = Sigmoid(w)
            }>
        }""")
    with pytest.warns(rnnloop.FallbackWarning, match="Loop 'Loop_1'.*interpreted.*CumSum"):
        session = rnnloop.load(model)
    body = session.options.programs[id(session.graph.ops[0].body)]
    assert [op.op_type for op in body.ops] == ["Region", "CumSum", "Region"]
    assert "Region 'Loop_1/body/region2': 2 op(s) compiled into one kernel (Tanh" in session.explain()
    feeds = {"n": np.array(5, np.int64), "x": np.linspace(-1, 1, 4).astype(np.float32)}
    agree(model, feeds, session)
    assert "Region 'Loop_1/body/region1'" in dict(session.kernel_sources())


def test_a_linear_layer_on_a_stack_of_rows_is_one_product_by_packed_weights():
    w = np.random.default_rng(0).standard_normal((6, 5)).astype(np.float32)
    values = ", ".join(map(str, w.ravel().tolist()))
    model = parse(f"""
        linear (float[T, N, 6] x) => (float[N, T, 5] y, float[T, N, 5] z)
        <float[6, 5] w = {{{values}}}> {{
            xt = Transpose <perm = [1, 0, 2]> (x)
            y = MatMul(xt, w)
            z = MatMul(x, w)
        }}""")
    session = load_numba(model)
    source = session.kernel_sources()[0][1]
    assert source.count("matmul_packed") == 2 and "k_panels" in source, source
    for shape in ((4, 3, 6), (1, 1, 6), (0, 2, 6)):  # (a strided view, one row, no rows)
        agree(model, {"x": np.random.default_rng(1).standard_normal(shape).astype(np.float32)}, session)


def test_results_never_share_memory_with_feeds_or_constants():
    model = parse("""
        alias (float[3] x, int64 m) => (float[3] same, float[3] looped, float[3] k, float[3] neg)
        <float[3] c = {1, 2, 3}>
        {
            same = Identity(x)
            neg = Neg(x)
            k = Identity(c)
            looped = Loop(m, "", x) <body = b (int64 i, bool cond, float[3] s) => (bool c2, float[3] s2) {
                c2 = Identity(cond)
                s2 = Add(s, s)
            }>
        }""")
    session = load_numba(model)
    x = np.array([1, 2, 3], np.float32)
    for _ in range(2):
        results = agree(model, {"x": x, "m": np.array(0, np.int64)}, session)
        for r in results:
            r[:] = -7
        assert x.tolist() == [1, 2, 3]


def test_a_regions_constants_reach_its_kernel_as_one_table_made_at_load():
    """fused.bind: the kernel takes one int64 table of its constants' addresses, sizes and strides
    (runtime.bound makes views of them), not an array each; an output that is a constant is still a
    copy the caller owns."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((100, 70)).astype(np.float32)
    b = rng.standard_normal(70).astype(np.float32)
    model = parse(f"""
        bound (float[N, 100] x) => (float[N, 70] y, float[70] k)
        <float[100, 70] w = {{{", ".join(map(str, w.ravel().tolist()))}}},
         float[70] b = {{{", ".join(map(str, b.tolist()))}}}> {{
            p = MatMul(x, w)
            y = Add(p, b)
            k = Identity(b)
        }}""")
    session = load_numba(model)
    region = session.partition.compiled[0]
    assert region.kernel.bound and "def kernel(status, max_iter, in_x, consts):" in region.source
    (table,) = region.arguments
    assert table.dtype == np.int64 and table.shape[0] == len(region.constants) >= 2
    for row, constant in zip(table, region.constants):
        assert row[0] == constant.ctypes.data and tuple(row[1:1 + constant.ndim]) == constant.shape
    for n in (3, 1, 0):
        y, k = agree(model, {"x": rng.standard_normal((n, 100)).astype(np.float32)}, session)
        k[:] = 0  # (the caller's copy)
    assert np.array_equal(session.run(None, {"x": np.zeros((1, 100), np.float32)})[1], b)


def test_loops_that_read_nothing_of_each_other_are_paired_and_what_the_second_needs_moves_before_the_first():
    """region.concurrent_loops: the two directions of each layer of a bidirectional encoder (here
    a, b and c, d: c reads a's result and d b's) run at once; the op only b reads moves before a."""
    from rnnloop.codegen.region import concurrent_loops
    from rnnloop.ir import Graph, Loop, Op

    a = Loop("Loop", ["", "", "x"], ["ya"])
    before_b = Op("Neg", ["x"], ["nx"])
    b = Loop("Loop", ["", "", "nx"], ["yb"])
    c = Loop("Loop", ["", "", "ya"], ["yc"])
    d = Loop("Loop", ["", "", "yb"], ["yd"])
    after = Op("Add", ["yc", "yd"], ["y"])
    ordered, partners = concurrent_loops(Graph("g", ["x"], ["y"], [a, before_b, b, c, d, after]))
    assert ordered.ops == [before_b, a, b, c, d, after]
    assert partners == {id(a): b, id(c): d}
    chain = [a, Loop("Loop", ["", "", "ya"], ["yb"])]  # (each reads the one before)
    assert concurrent_loops(Graph("g", ["x"], ["yb"], chain)) == (Graph("g", ["x"], ["yb"], chain), {})


def test_a_loops_results_are_returned_uncopied_and_never_share_memory():
    """A loop's carried and stacked results are arrays the kernel made in the call: a region returns
    them as they are (a copy of a 200-step LSTM's outputs cost 1-2% of its time), but copies an output
    whose memory an earlier one has, and a carried value when the loop did not run."""
    model = parse("""
        owned (float[2, 3] x, int64 m) => (float[2, 3] last, float[M, 2, 3] ys, float[M, 6] flat)
        <int64[2] rows = {-1, 6}>
        {
            last, ys = Loop(m, "", x) <body = b (int64 i, bool cond, float[2, 3] s) => (bool c2, float[2, 3] s2,
                                                                                       float[2, 3] y) {
                c2 = Identity(cond)
                s2 = Add(s, s)
                y = Identity(s2)
            }>
            flat = Reshape(ys, rows)
        }""")
    session = load_numba(model)
    [(_, source)] = session.kernel_sources()
    assert source[source.index("def kernel("):].count("np.copy(") == 1  # flat, a view of ys
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for m in (3, 0):
        results = agree(model, {"x": x, "m": np.array(m, np.int64)}, session)
        for k, r in enumerate(results):
            assert not np.shares_memory(r, x)
            assert not any(np.shares_memory(r, other) for other in results[k + 1:])


def test_an_error_inside_a_region_names_the_node():
    model = parse("""
        oob (float[4] x, int64 k) => (float y)
        {
            a = Neg(x)
            y = Gather(a, k)
        }""")
    session = load_numba(model)
    for backend_session in (session, rnnloop.load(model, backend="interp")):
        with pytest.raises(rnnloop.RunError, match="Gather 'Gather_1'.*index 7 is (out of range|outside)"):
            backend_session.run(None, {"x": np.ones(4, np.float32), "k": np.array(7, np.int64)})


def test_a_size_the_kernel_cannot_take_runs_that_call_in_the_interpreter():
    # Squeeze without axes removes every axis of size 1: the kernel is built for the sizes the model
    # declares, and a symbolic size that turns out to be 1 changes the result's rank.
    model = parse("""
        squeeze (float[N, 1, 3] x) => (float[N, 3] y)
        {
            y = Squeeze(x)
        }""", check=False)
    session = load_numba(model)
    assert_same(session.run(None, {"x": np.ones((2, 1, 3), np.float32)}), [np.ones((2, 3), np.float32)])
    with pytest.warns(rnnloop.FallbackWarning, match="rank depends"):
        [y] = session.run(None, {"x": np.ones((1, 1, 3), np.float32)})
    assert y.shape == (3,)  # what the interpreter computes (and the model's declared rank does not hold)


def test_a_region_that_does_not_compile_returns_its_ops_to_the_interpreter(monkeypatch):
    from rnnloop.codegen import kernel, rules  # noqa: F401
    transpose = kernel.RULES["Transpose"]

    def broken(g, op, ins):
        g.body("this is not python")
        return transpose(g, op, ins)

    monkeypatch.setitem(kernel.RULES, "Transpose", broken)
    model = parse("""
        broken (float[1, 2] x) => (float[2, 1] y)
        {
            a = Neg(x)
            t = Transpose(a)
            y = Abs(t)
        }""")
    with pytest.warns(rnnloop.FallbackWarning, match="region1.*did not compile"):
        session = rnnloop.load(model)
    assert [op.op_type for op in session.program.ops] == ["Neg", "Transpose", "Abs"]
    assert "its region's kernel did not compile" in session.explain()
    assert_same(session.run(None, {"x": np.array([[1, -2]], np.float32)}), [np.array([[1], [2]], np.float32)])
    with pytest.raises(rnnloop.UnsupportedModelError, match="did not compile"):
        rnnloop.load(model, strict=True)


def test_the_vad_model_is_one_region_that_carries_its_state_between_chunks():
    from helpers import run_onnxruntime

    from rnnloop.models import vad_stream
    model, feeds = vad_stream(chunk=256, hidden=16)
    session = load_numba(model)
    assert [type(op) for op in session.program.ops] == [Region], session.explain()
    interp = rnnloop.load(model, backend="interp")
    rng = np.random.default_rng(3)
    state = {"h": feeds["h"], "c": feeds["c"]}
    for rate in (16000, 8000, 16000):
        chunk = {"x": rng.uniform(-1, 1, (1, 256)).astype(np.float32), "sr": np.array(rate, np.int64), **state}
        got = session.run(None, chunk)
        assert_same(got, interp.run(None, chunk), rtol=1e-4, atol=1e-5)
        assert_same(got, run_onnxruntime(model, chunk), rtol=1e-4, atol=1e-5)
        state = {"h": got[1], "c": got[2]}


def test_a_compile_that_takes_long_says_so_on_stderr(monkeypatch, capsys):
    import time

    from rnnloop.codegen import fused
    monkeypatch.setattr(fused, "PROGRESS_SECONDS", 0.05)
    with fused._progress("Region 'm/region1'"):
        time.sleep(0.3)
    with fused._progress("Region 'm/region2'"):
        pass
    assert capsys.readouterr().err.splitlines() == ["rnnloop: compiling Region 'm/region1' ...",
                                                    "rnnloop: compiled Region 'm/region1' in 0.3 s"]


@pytest.mark.slow
def test_the_decoder_step_is_one_region_that_agrees_with_onnxruntime():
    from helpers import run_onnxruntime

    from rnnloop.models import gru_decoder_step
    model, feeds = gru_decoder_step(batch=3, hidden=16, source=5, vocab=40)
    session = load_numba(model)
    assert [type(op) for op in session.program.ops] == [Region], session.explain()
    got = session.run(None, feeds)
    assert_same(got, rnnloop.load(model, backend="interp").run(None, feeds), rtol=1e-4, atol=1e-5)
    assert_same(got, run_onnxruntime(model, feeds), rtol=1e-4, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["bilstm_encoder", "bigru_encoder"])
def test_a_stacked_bidirectional_encoder_is_one_region_that_agrees_with_onnxruntime(name):
    # Both directions of every layer and the Transpose/Reshape glue between layers are one kernel,
    # which serves batch 12 and batch 1 alike. Two layers keep the compile short; the glue is the same.
    from helpers import run_onnxruntime

    from rnnloop.models import MODELS
    model, _ = MODELS[name](batch=12, input_size=8, hidden=16, steps=5, layers=2)
    session = load_numba(model)
    assert [type(op) for op in session.program.ops] == [Region], session.explain()
    assert session.explain().count("fused into the kernel of Region") == 4, session.explain()
    # Between layers, the one copy the math needs: each direction's loop stacks its outputs in
    # order (the reverse one from the end, not reversed after), and the two are joined where the
    # exporter's Transpose puts them, which then leaves the Reshape a view.
    [(_, source)] = session.kernel_sources()
    assert "[::-1]" not in source and "Transpose" not in source, source
    interp = rnnloop.load(model, backend="interp")
    rng = np.random.default_rng(4)
    for batch, steps in ((12, 5), (1, 7)):
        feeds = {"X": rng.standard_normal((steps, batch, 8)).astype(np.float32)}
        got = session.run(None, feeds)
        assert got[0].shape == (steps, batch, 32)
        assert_same(got, interp.run(None, feeds), rtol=1e-4, atol=1e-5)
        assert_same(got, run_onnxruntime(model, feeds), rtol=1e-4, atol=1e-5)
