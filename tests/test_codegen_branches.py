"""Expand and If inside a loop body, compiled (rnnloop.codegen.rules.emit_expand, codegen/branch.py):
each model runs under both backends and must agree with the interpreter; under numba every loop
must fuse, an If being a native `if` whose branches run only when taken."""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import load_falling_back, parse, run, run_fused

import rnnloop


def _agrees_with_interpreter(model, feeds: dict, backend: str) -> list[np.ndarray]:
    """Run on `backend` (every loop fused under numba): each output as the interpreter's (floats to
    an ulp or two: the kernel's Tanh is its own)."""
    got, want = run_fused(model, feeds, backend), run(model, feeds, backend="interp")
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(g, w)
    return got


def _source(model) -> str:
    """The generated source of the model's one fused loop."""
    [(_, source)] = rnnloop.load(model, strict=True).kernel_sources()
    return source


# ---------------------------------------------------------------------------------------------
# Expand

EXPAND_CONSTANT = """
expand (int64 M, float[3, 1] x0) => (float[3, 1] x_final, float[M, {out}] ys) {{
    x_final, ys = Loop(M, "", x0) <body = body (int64 i, bool c, float[3, 1] x) => (bool c_out, float[3, 1] x_next, float[{out}] y) {{
        c_out = Identity(c)
        s = Constant <value = int64[{n}] {{{shape}}}> ()
        y = Expand(x, s)
        one = Constant <value = float {{1.0}}> ()
        x_next = Add(x, one)
    }}>
}}
"""


@pytest.mark.parametrize("shape, out", [
    ([2, 1, 4], "2, 3, 4"),  # a higher rank; a 1 in the shape keeps the input's size
    ([4], "3, 4"),           # a shorter shape: aligned to the right
    ([1, 1], "3, 1"),        # nothing to broadcast
])
def test_expand_by_a_constant_shape_matches_the_interpreter(backend, shape, out):
    model = parse(EXPAND_CONSTANT.format(n=len(shape), shape=", ".join(map(str, shape)), out=out))
    feeds = {"M": np.array(3, np.int64), "x0": np.array([[1.0], [2.0], [3.0]], np.float32)}
    _, ys = _agrees_with_interpreter(model, feeds, backend)
    x = feeds["x0"] + 2  # the last iteration's
    np.testing.assert_array_equal(ys[2], np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(shape))))


EXPAND_COMPUTED = """
expand ({dtype}[A, B] xs, {dtype}[1] x0, int64[2] shp) => ({dtype}[1] x_final, {dtype}[A, B] ys, {dtype}[A, 3, B] zs, {dtype}[A, B] ws) {{
    x_final, ys, zs, ws = Scan(x0, xs) <num_scan_inputs = 1, body = body ({dtype}[1] x, {dtype}[B] row) => ({dtype}[1] x_next, {dtype}[B] y, {dtype}[3, B] z, {dtype}[B] w) {{
        n = Shape(row)
        y = Expand(x, n)
        z = Expand(row, shp)
        k = Constant <value = {dtype} {{1}}> ()
        w = Expand(k, n)
        x_next = Identity(x)
    }}>
}}
"""


@pytest.mark.parametrize("dtype", ["float", pytest.param("int64", marks=pytest.mark.slow),  # (a kernel each)
                                   pytest.param("bool", marks=pytest.mark.slow)])
def test_expand_to_a_computed_shape_matches_the_interpreter(backend, dtype):
    # y: the shape of the row (Shape in the body); z: a shape fed to the model, one of its values 1;
    # w: a constant scalar (a literal in the kernel) to the shape of the row.
    model = parse(EXPAND_COMPUTED.format(dtype=dtype))
    np_dtype = {"float": np.float32, "int64": np.int64, "bool": np.bool_}[dtype]
    feeds = {"xs": (np.arange(8).reshape(2, 4) % 3).astype(np_dtype), "x0": np.array([1], np_dtype),
             "shp": np.array([3, 1], np.int64)}
    _, ys, zs, ws = _agrees_with_interpreter(model, feeds, backend)
    assert ys.shape == (2, 4) and zs.shape == (2, 3, 4)
    np.testing.assert_array_equal(zs[:, 1], feeds["xs"])
    np.testing.assert_array_equal(ws, np.ones((2, 4), np_dtype))


@pytest.mark.parametrize("shp, message", [
    ([4, 3], r"Expand '[^']+'.*cannot broadcast"),  # 3 against the row's 4
    ([-1, 4], r"Expand '[^']+'.*negative dimension"),
])
def test_an_expand_that_does_not_broadcast_is_an_error_naming_the_op(backend, shp, message):
    model = parse(EXPAND_COMPUTED.format(dtype="float"))
    feeds = {"xs": np.zeros((2, 4), np.float32), "x0": np.array([1], np.float32), "shp": np.array(shp, np.int64)}
    session = rnnloop.load(model, backend=backend, strict=backend == "numba")
    with pytest.raises(rnnloop.RunError, match=message):
        session.run(None, feeds)


# ---------------------------------------------------------------------------------------------
# If in a loop body

IF_ON_ITERATION = """
branches (int64 M, int64 k, {t}[2] x0) => ({t}[2] x_final, {t}[M, 2] ys) {{
    x_final, ys = Loop(M, "", x0) <body = body (int64 i, bool c, {t}[2] x) => (bool c_out, {t}[2] x_next, {t}[2] y) {{
        c_out = Identity(c)
        lt = Less(i, k)
        x_next = If(lt) <then_branch = then_ () => ({t}[2] a) {{
            {then}
        }}, else_branch = else_ () => ({t}[2] b) {{
            {else_}
        }}>
        y = Identity(x_next)
    }}>
}}
"""

# Per dtype: the then branch (a), the else branch (b) (different ops and constants), the start value.
BRANCHES = {
    "float": ("one = Constant <value = float {1.5}> ()\n a = Add(x, one)",
              "w = Constant <value = float[2] {2.0, -1.0}> ()\n m = Mul(x, w)\n b = Tanh(m)",
              np.array([0.25, 0.5], np.float32)),
    "int64": ("one = Constant <value = int64 {3}> ()\n a = Add(x, one)",
              "two = Constant <value = int64[2] {2, -1}> ()\n b = Mul(x, two)",
              np.array([1, 2], np.int64)),
    "bool": ("a = Not(x)",
             "t = Constant <value = bool[2] {1, 0}> ()\n b = Xor(x, t)",
             np.array([True, False])),
}


@pytest.mark.parametrize("dtype", list(BRANCHES))
def test_if_on_the_iteration_takes_both_branches_as_a_carried_and_a_scan_output(backend, dtype):
    then, else_, x0 = BRANCHES[dtype]
    model = parse(IF_ON_ITERATION.format(t=dtype, then=then, else_=else_))
    feeds = {"M": np.array(5, np.int64), "k": np.array(2, np.int64), "x0": x0}
    x_final, ys = _agrees_with_interpreter(model, feeds, backend)
    assert ys.shape == (5, 2) and ys.dtype == x0.dtype
    np.testing.assert_array_equal(x_final, ys[-1])


def test_if_on_the_iteration_gives_the_expected_values(backend):
    then, else_, x0 = BRANCHES["int64"]
    model = parse(IF_ON_ITERATION.format(t="int64", then=then, else_=else_))
    _, ys = run_fused(model, {"M": np.array(4, np.int64), "k": np.array(2, np.int64), "x0": x0}, backend)
    # +3, +3, then *[2, -1] twice
    np.testing.assert_array_equal(ys, [[4, 5], [7, 8], [14, -8], [28, 8]])


def test_an_if_in_a_loop_body_is_a_native_if_with_an_else():
    then, else_, _ = BRANCHES["float"]
    source = _source(parse(IF_ON_ITERATION.format(t="float", then=then, else_=else_)))
    lines = source.splitlines()
    at = next(k for k, line in enumerate(lines) if re.match(r"\s+# If '", line))
    indent = len(lines[at]) - len(lines[at].lstrip())
    assert re.match(rf"{' ' * indent}if \S.*:$", lines[at + 1]), lines[at + 1]
    assert f"{' ' * indent}else:" in lines[at + 2:], source
    # Each branch's ops in its block: the Tanh only after the else.
    assert source.index("else:") < source.index("Tanh '")


NESTED = """
nested (int64 M, int64 j, int64 k) => (float[M] ys) {
    ys = Loop(M, "") <body = body (int64 i, bool c) => (bool c_out, float y) {
        c_out = Identity(c)
        lt_k = Less(i, k)
        y = If(lt_k) <then_branch = outer_then () => (float r) {
            lt_j = Less(i, j)
            r = If(lt_j) <then_branch = inner_then () => (float p) {
                p = Constant <value = float {1.0}> ()
            }, else_branch = inner_else () => (float q) {
                f = Cast <to = 1> (i)
                q = Mul(f, f)
            }>
        }, else_branch = outer_else () => (float s) {
            s = Constant <value = float {-7.0}> ()
        }>
    }>
}
"""


def test_a_nested_if_with_constant_and_computed_scalar_outputs(backend):
    model = parse(NESTED)
    feeds = {"M": np.array(6, np.int64), "j": np.array(2, np.int64), "k": np.array(4, np.int64)}
    [ys] = _agrees_with_interpreter(model, feeds, backend)
    np.testing.assert_array_equal(ys, np.array([1, 1, 4, 9, -7, -7], np.float32))


RAISES_UNLESS_SKIPPED = """
guarded (int64 M, bool flag, float[2] x, float[2, 3] w) => (float[M] ys, float[M, 6] zs) {
    ys, zs = Loop(M, "") <body = body (int64 i, bool c) => (bool c_out, float y, float[6] z) {
        c_out = Identity(c)
        two = Constant <value = int64 {2}> ()
        in_range = Less(i, two)
        y = If(in_range) <then_branch = read () => (float g) {
            g = Gather(x, i)
        }, else_branch = zero () => (float h) {
            h = Constant <value = float {0.0}> ()
        }>
        z = If(flag) <then_branch = flat () => (float[6] fw) {
            six = Constant <value = int64[1] {6}> ()
            fw = Reshape(w, six)
        }, else_branch = wrong () => (float[6] bad) {
            seven = Constant <value = int64[1] {7}> ()
            bad = Reshape(w, seven)
        }>
    }>
}
"""


def test_an_error_of_the_branch_not_taken_is_not_raised(backend):
    # Gather(x, i) is out of range from i = 2, where its branch no longer runs; the Reshape to 7
    # values cannot succeed but only runs when flag is false. Its inputs are fixed for the whole
    # loop: hoisted out of it, it would raise whichever branch is taken.
    model = parse(RAISES_UNLESS_SKIPPED)
    feeds = {"M": np.array(4, np.int64), "flag": np.array(True), "x": np.array([5.0, 6.0], np.float32),
             "w": np.arange(6, dtype=np.float32).reshape(2, 3)}
    ys, zs = _agrees_with_interpreter(model, feeds, backend)
    np.testing.assert_array_equal(ys, [5, 6, 0, 0])
    np.testing.assert_array_equal(zs, np.tile(np.arange(6, dtype=np.float32), (4, 1)))
    session = rnnloop.load(model, backend=backend, strict=backend == "numba")
    with pytest.raises(rnnloop.RunError, match=r"Reshape '[^']+'.*7"):
        session.run(None, {**feeds, "flag": np.array(False)})


INNER_LOOP = """
inner (int64 M, int64 k, float[3] x0) => (float[3] x_final) {
    x_final = Loop(M, "", x0) <body = body (int64 i, bool c, float[3] x) => (bool c_out, float[3] x_next) {
        c_out = Identity(c)
        lt = Less(i, k)
        x_next = If(lt) <then_branch = repeat () => (float[3] r) {
            r = Loop(i, "", x) <body = twice (int64 j, bool d, float[3] v) => (bool d_out, float[3] v_next) {
                d_out = Identity(d)
                v_next = Add(v, v)
            }>
        }, else_branch = keep () => (float[3] s) {
            one = Constant <value = float {1.0}> ()
            s = Sub(x, one)
        }>
    }>
}
"""


def test_a_loop_inside_a_branch(backend):
    model = parse(INNER_LOOP)
    feeds = {"M": np.array(5, np.int64), "k": np.array(3, np.int64), "x0": np.array([1, 2, 3], np.float32)}
    [x_final] = _agrees_with_interpreter(model, feeds, backend)
    np.testing.assert_array_equal(x_final, (np.array([1, 2, 3]) * 2 ** (0 + 1 + 2) - 2).astype(np.float32))


CONSTANT_CONDITION = """
constant (int64 M, float[2] x0) => (float[2] x_final) {
    x_final = Loop(M, "", x0) <body = body (int64 i, bool c, float[2] x) => (bool c_out, float[2] x_next) {
        c_out = Identity(c)
        yes = Constant <value = bool {1}> ()
        x_next = If(yes) <then_branch = taken () => (float[2] a) {
            one = Constant <value = float {1.0}> ()
            a = Add(x, one)
        }, else_branch = never () => (float[2] b) {
            b = Neg(x)
        }>
    }>
}
"""


def test_an_if_on_a_constant_is_its_taken_branch(backend):
    model = parse(CONSTANT_CONDITION)
    feeds = {"M": np.array(3, np.int64), "x0": np.array([1, 2], np.float32)}
    [x_final] = _agrees_with_interpreter(model, feeds, backend)
    np.testing.assert_array_equal(x_final, [4, 5])
    if backend == "numba":
        source = _source(model)
        assert "# Add '" in source and "# Neg '" not in source and "else:" not in source


MISMATCHED = """
mismatched (int64 M, int64 k, float[2] x0) => (float[M, 2] ys) {
    ys = Loop(M, "") <body = body (int64 i, bool c) => (bool c_out, float[2] y) {
        c_out = Identity(c)
        lt = Less(i, k)
        y = If(lt) <then_branch = vector () => (float[2] a) {
            a = Identity(x0)
        }, else_branch = matrix () => (float[1, 2] b) {
            axes = Constant <value = int64[1] {0}> ()
            b = Unsqueeze(x0, axes)
        }>
    }>
}
"""


def test_branches_of_different_ranks_are_interpreted_with_the_reason():
    model = parse(MISMATCHED, check=False)
    load_falling_back(model, "numba", match=r"If '[^']+'.*rank 1 in the then branch but float32 of rank 2")
