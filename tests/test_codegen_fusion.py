"""Elementwise fusion (rnnloop.codegen.fusion): which ops group, and a group that broadcasts."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import parse, run, run_fused, thin

import rnnloop
from rnnloop.codegen import fusion
from rnnloop.ir import Graph, Op, TensorType
from rnnloop.models import lstm_loop


def _graph(ops: list[Op], outputs: list[str], inputs=("x", "w")) -> Graph:
    return Graph("body", inputs=list(inputs), outputs=outputs, ops=ops)


def _groups(graph: Graph, fixed=("w",)) -> list[tuple[list[str], set[str]]]:
    seen, out = set(), []
    for group in fusion.plan(graph, set(fixed)).values():
        if id(group) not in seen:
            seen.add(id(group))
            out.append(([op.outputs[0] for op in group.ops], group.materialized))
    return out


def _source(model) -> str:
    """The generated source of the model's one fused loop."""
    [(_, source)] = rnnloop.load(model).kernel_sources()
    return source


def _agrees_with_interpreter(model, feeds: dict, backend: str, atol: float = 1e-6) -> None:
    """Run on `backend` (every loop fused under numba): each output as the interpreter's."""
    got, want = run_fused(model, feeds, backend), run(model, feeds, backend="interp")
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=atol)


def test_a_chain_is_one_group_writing_only_what_is_read_outside():
    ops = [Op("Sigmoid", ["x"], ["a"]), Op("Mul", ["a", "w"], ["b"]), Op("Tanh", ["b"], ["c"]),
           Op("Add", ["c", "a"], ["d"])]
    assert _groups(_graph(ops, ["d", "b"])) == [(["a", "b", "c", "d"], {"b", "d"})]


def test_ops_of_fixed_values_stay_out():
    ops = [Op("Neg", ["w"], ["nw"]), Op("Add", ["x", "nw"], ["a"]), Op("Exp", ["a"], ["b"])]
    assert _groups(_graph(ops, ["b"])) == [(["a", "b"], {"b"})]


def test_no_group_when_a_member_is_read_before_the_sink():
    # 'm' (not elementwise) reads 'a' and comes before the sink 'c', which reads 'm': one nest at
    # the sink would compute 'a' too late.
    ops = [Op("Sigmoid", ["x"], ["a"]), Op("MatMul", ["a", "w"], ["m"]), Op("Tanh", ["a"], ["b"]),
           Op("Add", ["b", "m"], ["c"])]
    assert _groups(_graph(ops, ["c"])) == []


def test_no_group_with_two_sinks_or_two_ops_that_can_raise():
    two_sinks = [Op("Sigmoid", ["x"], ["a"]), Op("Tanh", ["a"], ["b"]), Op("Exp", ["a"], ["c"])]
    assert _groups(_graph(two_sinks, ["b", "c"])) == []
    two_divisions = [Op("Div", ["x", "w"], ["a"]), Op("Mod", ["a", "w"], ["b"])]
    assert _groups(_graph(two_divisions, ["b"])) == []


def test_the_lstm_gates_are_one_nest_with_the_sums_before_their_split():
    model, _ = lstm_loop(batch=1, input_size=4, hidden=8, steps=3)
    source = _source(model)
    adds = " ".join(["Add"] * 8)  # (x W + h R) + b, for each of the four gates
    assert f'"""{adds} Sigmoid Sigmoid Sigmoid Tanh Mul Mul Add Tanh Mul over rank 2"""' in source


def _split_body(readers: list[Op]) -> Graph:
    """s = x + b split in two along its last axis [1, 8] -> 2 x [1, 4], then `readers`."""
    f32 = np.dtype(np.float32)
    types = {n: TensorType(f32, (1, 8)) for n in ("x", "s")}
    types.update({n: TensorType(f32, (1, 4)) for n in ("s0", "s1", "a", "y")})
    constants = {"b": np.ones(8, np.float32), "sizes": np.array([4, 4], np.int64), "m": np.ones((4, 4), np.float32)}
    ops = [Op("Add", ["x", "b"], ["s"]), Op("Split", ["s", "sizes"], ["s0", "s1"], {"axis": 1}), *readers]
    return Graph("body", inputs=["x"], outputs=["y"], ops=ops, constants=constants, types=types)


def test_a_sum_is_split_first_when_its_parts_then_fuse_with_their_readers():
    body = _split_body([Op("Sigmoid", ["s0"], ["a"]), Op("Mul", ["a", "s1"], ["y"])])
    rewritten = fusion.split_first(body, set(body.constants), body.constants.get)
    assert [op.op_type for op in rewritten.ops] == ["Split", "Split", "Add", "Add", "Sigmoid", "Mul"]
    assert [op.inputs for op in rewritten.ops[:2]] == [["x", "sizes"], ["b", "sizes"]]
    assert [op.outputs for op in rewritten.ops[2:4]] == [["s0"], ["s1"]]
    assert _groups(rewritten, fixed=("b", "sizes")) == [([*"s0 s1".split(), "a", "y"], {"y"})]


def test_a_split_stays_when_its_parts_would_not_fuse_into_one_nest():
    body = _split_body([Op("MatMul", ["s0", "m"], ["a"]), Op("Mul", ["a", "s1"], ["y"])])
    assert fusion.split_first(body, set(body.constants), body.constants.get) is body


BROADCAST_TEXT = """
fuse (int64 M, float[1, 4] x0, float[3, 4] s) => (float[1, 4] x_final, float[M, 1, 4] a_seq, float[M, 3, 4] y_seq) {
    x_final, a_seq, y_seq = Loop(M, "", x0) <body = body (int64 i, bool c, float[1, 4] x) => (bool c_out, float[1, 4] x_next, float[1, 4] a, float[3, 4] y) {
        c_out = Identity(c)
        a = Sigmoid(x)
        y = Mul(a, s)
        x_next = Identity(a)
    }>
}
"""
BROADCAST = parse(BROADCAST_TEXT)


def test_a_member_smaller_than_the_sink_is_written_once_per_broadcast_row(backend):
    # Sigmoid's [1, 4] result is materialized (a scan output, and the next state) while the nest
    # runs over Mul's [3, 4]: its row is recomputed three times and must come out the same.
    feeds = {"M": np.array(3), "x0": np.linspace(-2, 2, 4, dtype=np.float32)[None],
             "s": np.arange(12, dtype=np.float32).reshape(3, 4)}
    if backend == "numba":
        assert "Sigmoid Mul over rank 2" in _source(BROADCAST)
    _agrees_with_interpreter(BROADCAST, feeds, backend, atol=1e-7)


ONE_COLUMN = parse("""
one_column (int64 M, float[B, 4] x0, float[T, B, 1] mask, float[4, 4] w) => (float[B, 4] x_final, float[M, B, 1] a_seq, float[M, B, 3] y_seq) {
    x_final, a_seq, y_seq = Loop(M, "", x0) <body = body (int64 i, bool c_in, float[B, 4] x) => (bool c_out, float[B, 4] x_next, float[B, 1] a, float[B, 3] y) {
        c_out = Identity(c_in)
        k = Gather <axis = 0> (mask, i)
        a = Sigmoid(k)
        ax = Mul(a, x)
        x_next = Tanh(ax)
        m = MatMul(x_next, w)
        sizes = Constant <value = int64[2] {1, 3}> ()
        p, q = Split <axis = 1> (m, sizes)
        pq = Mul(p, q)
        y = Neg(pq)
    }>
}
""")


@pytest.mark.parametrize("batch", [1, 3])
def test_arrays_of_one_column_broadcast_along_the_nest(batch, backend):
    """A nest reads and writes every array at its own column, or at column 0 by a flag: a [batch, 1]
    input (the mask row, the one-column part p) is read there, and a [batch, 1] member it writes
    ('a') is written there, once per column of the nest."""
    rng = np.random.default_rng(5)
    feeds = {"M": np.array(3), "x0": rng.standard_normal((batch, 4)).astype(np.float32),
             "mask": rng.standard_normal((3, batch, 1)).astype(np.float32),
             "w": rng.standard_normal((4, 4)).astype(np.float32)}
    if backend == "numba":
        assert "i1 * gp" in _source(ONE_COLUMN)
    _agrees_with_interpreter(ONE_COLUMN, feeds, backend)


def test_a_nest_whose_inputs_do_not_broadcast_is_an_error_naming_the_member(backend):
    text = BROADCAST_TEXT
    for fixed, free in (("[3, 4] s", "[P, Q] s"), ("[M, 3, 4] y_seq", "[M, P, Q] y_seq"), ("[3, 4] y", "[P, Q] y")):
        text = text.replace(fixed, free)
    model = parse(text)
    feeds = {"M": np.array(3), "x0": np.zeros((1, 4), np.float32), "s": np.zeros((3, 5), np.float32)}
    with pytest.raises(rnnloop.RunError, match=r"Mul 'Mul_2'.*broadcast"):
        run_fused(model, feeds, backend)


def test_views_nobody_reads_are_not_built_and_sizes_are_checked_once():
    """The LSTM's gate parts are read from the gates at their columns, and the input row by the
    hoisted product: no view is built for them. The gates' nest checks each size once, though its
    members meet the batch size twelve times: the rows of x W against those of h R, then against the
    cell state's, and the hidden size against the cell state's."""
    model, _ = lstm_loop(batch=1, input_size=4, hidden=8, steps=3)
    source = _source(model)
    assert not re.search(r"^ +v_(gi|go_|gf|gc|x) = ", source, re.M)
    # nor for the parts of x W (a view of the hoisted product: read through its row), h R and the bias
    assert not re.search(r"^ +v_\w+_part\d = ", source, re.M)
    start = source.index("# fused: Add")
    nest = source[start:source.index("op1(", start)]
    assert nest.count("_r.broadcast_dim(") == 3


# (every op and every shape in the default run: a kernel each, seconds with a cold cache)
@pytest.mark.parametrize("a, b, out, op", thin([(*shapes, op) for shapes in (([3, 4], [4], [3, 4]), ([3, 1], [1, 4], [3, 4]),
                                                                          ([4], [4], [4]))
                                                for op in ("Add", "Sub", "Mul", "Div")], every=3))
def test_one_binary_op_runs_as_the_runtime_helper(op, a, b, out, backend):
    """A lone Add, Sub, Mul or Div of arrays of rank 1 or 2 (a bias added to a product) calls
    runtime.binary_rows, compiled once per machine, instead of a nest compiled with the kernel."""
    def dims(shape):
        return ", ".join(map(str, shape))
    model = parse(f"""
    lone (int64 M, float[{dims(a)}] x, float[{dims(b)}] w) => (float[M, {dims(out)}] ys) {{
        ys = Loop(M, "") <body = body (int64 i, bool c) => (bool c_out, float[{dims(out)}] y) {{
            c_out = Identity(c)
            y = {op}(x, w)
        }}>
    }}""")
    rng = np.random.default_rng(7)
    feeds = {"M": np.array(2), "x": rng.uniform(0.5, 2, a).astype(np.float32),
             "w": rng.uniform(0.5, 2, b).astype(np.float32)}
    if backend == "numba":
        source = _source(model)
        assert "_r.binary_rows(" in source and "def op1" not in source
    _agrees_with_interpreter(model, feeds, backend, atol=0)


COLUMNS_TEXT = """
columns (int64 M, float[B, 6] x0, float[6, 9] w, float[R, 4] c) => (float[B, 6] x_final, float[M, Y, 4] y_seq) {
    x_final, y_seq = Loop(M, "", x0) <body = body (int64 i, bool c_in, float[B, 6] x) => (bool c_out, float[B, 6] x_next, float[Y, 4] y) {
        c_out = Identity(c_in)
        m = MatMul(x, w)
        sizes = Constant <value = int64[3] {4, 3, 2}> ()
        p, q, r = Split <axis = 1> (m, sizes)
        sp = Sigmoid(p)
        tq = Tanh(q)
        y = Mul(sp, c)
        rr = Concat <axis = 1> (tq, q)
        x_next = Tanh(rr)
    }>
}
"""
COLUMNS = parse(COLUMNS_TEXT)


@pytest.mark.parametrize("batch, rows", [(3, 3), (1, 3), (2, 1)])
def test_parts_split_off_a_product_are_read_from_it_at_their_columns(batch, rows, backend):
    """Split's parts of a product's columns reach the fused nest as the product and a first column;
    a part with one row broadcasts against c's rows (and c's one row against the parts')."""
    rng = np.random.default_rng(3)
    feeds = {"M": np.array(4), "x0": rng.standard_normal((batch, 6)).astype(np.float32),
             "w": rng.standard_normal((6, 9)).astype(np.float32) * 0.5,
             "c": rng.standard_normal((rows, 4)).astype(np.float32)}
    if backend == "numba":
        assert "q0 + i1" in _source(COLUMNS)  # the part read at its first column of the product
    _agrees_with_interpreter(COLUMNS, feeds, backend)


def test_negative_split_sizes_are_an_error(backend):
    """Sizes that add up to the axis but include a negative one are an error, as in the interpreter,
    never parts read before the product's first column."""
    model = parse(COLUMNS_TEXT.replace("{4, 3, 2}", "{5, -1, 5}"))
    feeds = {"M": np.array(2), "x0": np.ones((1, 6), np.float32), "w": np.ones((6, 9), np.float32),
             "c": np.ones((1, 4), np.float32)}
    with pytest.raises(rnnloop.RunError, match=r"Split.*non-negative"):
        run_fused(model, feeds, backend)
