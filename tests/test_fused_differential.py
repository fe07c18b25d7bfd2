"""Random loop bodies: the fused kernel (backend="numba", strict=True) must agree with the interpreter.

Hypothesis builds ONNX Loops and Scans from ops the code generator compiles: elementwise unary and
binary ops with broadcasting (operands of every shape that broadcasts to the state's), MatMul,
Gather and Slice indexed by the iteration number, Transpose, Concat, Reshape, Squeeze/Unsqueeze,
with random shapes, dtypes (float32, float64, int64), trip-count modes (trip count only, condition
only, both; a false initial condition runs no iteration), scan input and output axes and directions.

Hypothesis draws a seed; the seed makes every choice of one program (see Choices). Each example
compiles a kernel (a few seconds when the cache is cold), so the example counts are small, and
derandomize=True makes every run, CI's included, test the same bodies (and reuse the kernels in
RNNLOOP_CACHE_DIR). To reproduce a failure, call loop_program(seed) or scan_program(seed).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import onnx
import pytest
from helpers import IR_VERSION
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from onnx import helper

import rnnloop

DTYPES = {"float32": np.float32, "float64": np.float64, "int64": np.int64}
ONNX_TYPES = {np.dtype(t): helper.np_dtype_to_tensor_dtype(np.dtype(t)) for t in [*DTYPES.values(), np.bool_]}
UNARY = {"f": ["Neg", "Abs", "Tanh", "Sigmoid", "Relu", "Sin", "Floor", "Sign", "Softsign"],
         "i": ["Neg", "Abs", "Relu", "Sign"]}
BINARY = {"f": ["Add", "Sub", "Mul", "Max", "Min", "Div"], "i": ["Add", "Sub", "Mul", "Max", "Min"]}

# No shrinking: the seed's neighbours are unrelated bodies, each a compile; a failure's report holds
# its seed and the body's description instead.
SETTINGS = settings(max_examples=14, deadline=None, derandomize=True, database=None,
                    phases=[Phase.explicit, Phase.generate], suppress_health_check=[HealthCheck.too_slow])


class Choices:
    """The random choices that shape one program, from a seed Hypothesis draws.

    (Drawing each choice from Hypothesis itself would let it shrink a failing body, but with a dozen
    examples its first ones are all the trivial body, and shrinking compiles a kernel per attempt.)
    """

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def integers(self, low: int, high: int) -> int:
        """An integer in [low, high]."""
        return int(self.rng.integers(low, high, endpoint=True))

    def booleans(self) -> bool:
        return bool(self.rng.integers(2))

    def choice(self, options: list):
        return options[int(self.rng.integers(len(options)))]

    def permutation(self, n: int) -> list[int]:
        return [int(a) for a in self.rng.permutation(n)]

    def shape(self, max_rank: int) -> tuple[int, ...]:
        return tuple(self.integers(1, 4) for _ in range(self.integers(0, max_rank)))


@dataclass
class Program:
    """A model under construction: graph inputs with their feeds, and the body's nodes."""

    dtype: np.dtype
    rng: np.random.Generator
    feeds: dict[str, np.ndarray] = field(default_factory=dict)
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)  # what the body does, for the failure report
    count: int = 0

    def fresh(self, hint: str) -> str:
        self.count += 1
        return f"{hint}{self.count}"

    def op(self, op_type: str, *inputs: str, **attrs) -> str:
        out = self.fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=f"{op_type}_{out}", **attrs))
        return out

    def const(self, value) -> str:
        name = self.fresh("k")
        array = np.asarray(value)
        self.nodes.append(helper.make_node("Constant", [], [name], value=onnx.numpy_helper.from_array(array, name)))
        return name

    def data(self, shape, low=-2.0, high=2.0) -> np.ndarray:
        if self.dtype.kind == "i":
            return self.rng.integers(-4, 5, shape).astype(self.dtype)
        return self.rng.uniform(low, high, shape).astype(self.dtype)

    def invariant(self, shape, hint: str = "inv", **kw) -> str:
        """A graph input the body captures (a loop invariant)."""
        name = self.fresh(hint)
        self.feeds[name] = self.data(shape, **kw)
        return name


def _kind(p: Program) -> str:
    return "f" if p.dtype.kind == "f" else "i"


def _broadcast_operand_shape(c: Choices, shape: tuple) -> tuple:
    """A shape that broadcasts to `shape` without enlarging it: a suffix, with some dims set to 1."""
    keep = c.integers(0, len(shape))
    suffix = shape[len(shape) - keep:]
    return tuple(1 if c.booleans() else d for d in suffix)


def _binary(c: Choices, p: Program, x: str, shape: tuple) -> str:
    """x op v (or v op x) with v an invariant or constant that broadcasts to x's shape."""
    op = c.choice(BINARY[_kind(p)])
    source = c.choice(["invariant", "scalar constant", "array constant"])
    vshape = () if source == "scalar constant" else _broadcast_operand_shape(c, shape)
    if source == "invariant":
        v = p.invariant(vshape, low=0.5, high=1.5) if op == "Div" else p.invariant(vshape)
    else:
        v = p.const(p.data(vshape, low=0.5, high=1.5) if op == "Div" else p.data(vshape))
    swap = op != "Div" and c.booleans()
    p.steps.append(f"{op}({'v, x' if swap else 'x, v'}) with v {source} of shape {list(vshape)}")
    return p.op(op, v, x) if swap else p.op(op, x, v)


def _step(c: Choices, p: Program, x: str, shape: tuple, i: str | None, rows: int) -> str:
    """One state-preserving transform of x (shape `shape`); i is the iteration number (None in a Scan)."""
    rank = len(shape)
    kinds = ["unary", "binary", "binary", "unsqueeze"]
    if rank >= 1:  # (Reshape of a rank-0 value is not compiled; Concat needs an axis)
        kinds += ["reshape", "concat"]
    if rank >= 2:
        kinds.append("transpose")
    if rank in (1, 2):
        kinds.append("matmul")
    if i is not None:
        kinds += ["gather", "slice"]
    kind = c.choice(kinds)
    if kind == "unary":
        op = c.choice(UNARY[_kind(p)])
        p.steps.append(op)
        return p.op(op, x)
    if kind == "binary":
        return _binary(c, p, x, shape)
    if kind == "matmul":  # x @ W with W square: the shape stays
        n = shape[-1]
        w = p.invariant((n, n), "w", low=-1.0 / n, high=1.0 / n) if p.dtype.kind == "f" else p.invariant((n, n), "w")
        p.steps.append(f"MatMul(x, W[{n}, {n}])")
        return p.op("MatMul", x, w)
    if kind == "gather":  # table[i], added
        table = p.invariant((rows, *shape), "table")
        p.steps.append(f"Add(x, Gather(table[{rows}, ...], i))")
        return p.op("Add", x, p.op("Gather", table, i, axis=0))
    if kind == "slice":  # table[i:i+1] (or table[-1-i:-2-i:-1], rows from the end) squeezed, multiplied
        table = p.invariant((rows, *shape), "table")
        backwards = c.booleans()
        first = p.op("Unsqueeze", i, p.const(np.array([0], np.int64)))
        step = p.const(np.array([-1 if backwards else 1], np.int64))
        if backwards:
            first = p.op("Sub", p.const(np.array([-1], np.int64)), first)
        end = p.op("Add", first, step)
        part = p.op("Slice", table, first, end, p.const(np.array([0], np.int64)), step)
        p.steps.append(f"Mul(x, Squeeze(Slice(table[{rows}, ...], "
                       f"{'[-1 - i], [-2 - i], axes=[0], steps=[-1]' if backwards else '[i], [i + 1], axes=[0]'})))")
        return p.op("Mul", x, p.op("Squeeze", part, p.const(np.array([0], np.int64))))
    if kind == "reshape":  # flat, an elementwise op, back
        flat = p.op("Reshape", x, p.const(np.array([-1], np.int64)))
        flat = _binary(c, p, flat, (int(np.prod(shape)),))
        p.steps.append(f"  in Reshape(x, [-1]) ... Reshape(., {list(shape)})")
        return p.op("Reshape", flat, p.const(np.array(shape, np.int64)))
    if kind == "unsqueeze":  # a new axis of size 1, an elementwise op, squeezed again
        axis = c.integers(-rank - 1, rank)
        axes = p.const(np.array([axis], np.int64))
        u = p.op("Unsqueeze", x, axes)
        u = _binary(c, p, u, tuple(np.expand_dims(np.empty(shape), axis).shape))
        p.steps.append(f"  in Unsqueeze(x, [{axis}]) ... Squeeze(., [{axis}])")
        return p.op("Squeeze", u, axes)
    if kind == "transpose":  # permuted, an elementwise op along the new last axis, permuted back
        perm = c.permutation(rank)
        t = p.op("Transpose", x, perm=perm)
        t = _binary(c, p, t, tuple(shape[a] for a in perm))
        inverse = [int(a) for a in np.argsort(perm)]
        p.steps.append(f"  in Transpose(x, {perm}) ... Transpose(., {inverse})")
        return p.op("Transpose", t, perm=inverse)
    # concat: [x, v] along an axis, then the part that is x
    axis = c.integers(0, rank - 1)
    v = p.invariant(shape, "other")
    first = c.booleans()
    c = p.op("Concat", x, v, axis=axis) if first else p.op("Concat", v, x, axis=axis)
    n = shape[axis]
    start, end = (0, n) if first else (n, 2 * n)
    p.steps.append(f"Slice(Concat({'x, v' if first else 'v, x'}, axis={axis}), {start}:{end} on axis {axis})")
    return p.op("Slice", c, p.const(np.array([start], np.int64)), p.const(np.array([end], np.int64)),
                p.const(np.array([axis], np.int64)))


def _side_output(c: Choices, p: Program, x: str, shape: tuple) -> tuple[str, tuple]:
    """A per-iteration output derived from x by an op that may change the shape."""
    rank = len(shape)
    kind = c.choice(["same", "transpose", "concat", "flatten", "unsqueeze"])
    if kind == "transpose" and rank >= 2:
        perm = c.permutation(rank)
        p.steps.append(f"scan output Transpose(x, {perm})")
        return p.op("Transpose", x, perm=perm), tuple(shape[a] for a in perm)
    if kind == "concat" and rank >= 1:
        axis = c.integers(-rank, rank - 1)
        p.steps.append(f"scan output Concat(x, x, axis={axis})")
        out = list(shape)
        out[axis] *= 2
        return p.op("Concat", x, x, axis=axis), tuple(out)
    if kind == "flatten" and rank >= 1:
        p.steps.append("scan output Reshape(x, [-1])")
        return p.op("Reshape", x, p.const(np.array([-1], np.int64))), (int(np.prod(shape)),)
    if kind == "unsqueeze":
        axis = c.integers(0, rank)
        p.steps.append(f"scan output Unsqueeze(x, [{axis}])")
        return p.op("Unsqueeze", x, p.const(np.array([axis], np.int64))), tuple(np.expand_dims(np.empty(shape), axis).shape)
    p.steps.append("scan output Identity(x)")
    return p.op("Identity", x), shape


def _info(name: str, dtype, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, ONNX_TYPES[np.dtype(dtype)], None if shape is None else list(shape))


def _model(p: Program, nodes: list, inputs: list, outputs: list) -> onnx.ModelProto:
    graph_inputs = [_info(n, v.dtype, v.shape) for n, v in p.feeds.items()]
    graph = helper.make_graph(nodes, "differential", graph_inputs, outputs)
    return helper.make_model(graph, ir_version=IR_VERSION, opset_imports=[helper.make_opsetid("", 17)])


def loop_program(seed: int) -> tuple[onnx.ModelProto, dict, str]:
    """(model, feeds, description) of a random ONNX Loop."""
    c = Choices(seed)
    dtype = np.dtype(DTYPES[c.choice(list(DTYPES))])
    p = Program(dtype, c.rng)
    shape = c.shape(3)
    mode = c.choice(["trip count", "condition", "both"])
    trip = c.integers(0, 5) if c.integers(0, 7) == 0 else c.integers(1, 5)  # 0 now and then
    stop_after = c.integers(0, 4)  # the body's condition: i < stop_after
    initial = c.integers(0, 7) > 0  # False (no iteration) now and then
    runs = {"trip count": trip, "condition": stop_after + 1, "both": min(trip, stop_after + 1)}[mode]
    rows = runs + 1  # tables indexed by the iteration number have a row for every iteration
    p.feeds["x0"] = p.data(shape)
    if mode != "condition":
        p.feeds["M"] = np.array(trip, np.int64)
    if mode != "trip count":
        p.feeds["c0"] = np.array(initial)
    p.steps.append(f"{mode}: M={trip if mode != 'condition' else '-'}, cond while i < {stop_after}"
                   f"{'' if mode == 'trip count' else f', initial cond {initial}'}; {dtype}{list(shape)}")
    x = "x_in"
    scan_values = []
    for _ in range(c.integers(1, 3)):
        x = _step(c, p, x, shape, "i", rows)
        if c.integers(0, 3) == 0:
            scan_values.append(_side_output(c, p, x, shape))
    if not scan_values and c.booleans():
        scan_values.append(_side_output(c, p, x, shape))
    if mode == "trip count":
        cond_out = p.op("Identity", "cond_in")
    else:
        cond_out = p.op("Less", "i", p.const(np.array(stop_after, np.int64)))
    x_out = p.op("Identity", x)
    body = helper.make_graph(
        p.nodes, "body",
        [_info("i", np.int64, []), _info("cond_in", np.bool_, []), _info("x_in", dtype, shape)],
        [_info(cond_out, np.bool_, []), _info(x_out, dtype, shape)] + [_info(n, dtype, s) for n, s in scan_values])
    outputs = ["x_final"] + [f"scan{k}" for k in range(len(scan_values))]
    loop = helper.make_node("Loop", ["M" if mode != "condition" else "", "c0" if mode != "trip count" else "", "x0"],
                            outputs, name="random_loop", body=body)
    model = _model(p, [loop], [], [_info("x_final", dtype, shape)]
                   + [_info(f"scan{k}", dtype, ("iterations", *sh)) for k, (_, sh) in enumerate(scan_values)])
    return model, p.feeds, "\n".join(p.steps)


def scan_program(seed: int) -> tuple[onnx.ModelProto, dict, str]:
    """(model, feeds, description) of a random ONNX Scan (opset 17) with one or two scan inputs."""
    c = Choices(seed)
    dtype = np.dtype(DTYPES[c.choice(list(DTYPES))])
    p = Program(dtype, c.rng)
    shape = c.shape(2)
    length = c.integers(0, 4) if c.integers(0, 7) == 0 else c.integers(1, 4)
    p.feeds["s0"] = p.data(shape)
    in_axes, in_dirs, slices = [], [], []
    for k in range(c.integers(1, 2)):
        axis = c.integers(-len(shape) - 1, len(shape))
        direction = c.integers(0, 1)
        at = axis % (len(shape) + 1)
        p.feeds[f"xs{k}"] = p.data(shape[:at] + (length,) + shape[at:])
        in_axes.append(axis)
        in_dirs.append(direction)
        slices.append(f"x{k}_t")
    p.steps.append(f"Scan over {length} steps, inputs axes {in_axes} directions {in_dirs}; {dtype}{list(shape)}")
    s = "s_in"
    for name in slices:
        op = c.choice(BINARY[_kind(p)][:5])
        p.steps.append(f"{op}(s, {name})")
        s = p.op(op, s, name)
    for _ in range(c.integers(0, 2)):
        s = _step(c, p, s, shape, None, 0)
    scan_values = [_side_output(c, p, s, shape) for _ in range(c.integers(1, 2))]
    out_axes = [c.integers(-len(sh) - 1, len(sh)) for _, sh in scan_values]
    out_dirs = [c.integers(0, 1) for _ in scan_values]
    p.steps.append(f"scan output axes {out_axes} directions {out_dirs}")
    s_out = p.op("Identity", s)
    body = helper.make_graph(
        p.nodes, "body", [_info("s_in", dtype, shape)] + [_info(n, dtype, shape) for n in slices],
        [_info(s_out, dtype, shape)] + [_info(n, dtype, sh) for n, sh in scan_values])
    outputs = ["s_final"] + [f"ys{k}" for k in range(len(scan_values))]
    scan = helper.make_node("Scan", ["s0"] + [f"xs{k}" for k in range(len(slices))], outputs, name="random_scan",
                            body=body, num_scan_inputs=len(slices), scan_input_axes=in_axes,
                            scan_input_directions=in_dirs, scan_output_axes=out_axes,
                            scan_output_directions=out_dirs)
    stacked = [sh[:a % (len(sh) + 1)] + ("steps",) + sh[a % (len(sh) + 1):] for (_, sh), a in zip(scan_values, out_axes)]
    model = _model(p, [scan], [], [_info("s_final", dtype, shape)]
                   + [_info(f"ys{k}", dtype, sh) for k, sh in enumerate(stacked)])
    return model, p.feeds, "\n".join(p.steps)


def assert_backends_agree(model: onnx.ModelProto, feeds: dict, description: str) -> None:
    """The fused kernel (every loop must fuse) gives the interpreter's outputs: dtype, shape, values."""
    onnx.checker.check_model(model, full_check=True)
    expected = rnnloop.load(model, backend="interp").run(None, feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("error", rnnloop.FallbackWarning)
        session = rnnloop.load(model, backend="numba", strict=True)
    actual = session.run(None, feeds)
    for k, (a, e) in enumerate(zip(actual, expected)):
        what = f"output {k} of the body:\n{description}"
        assert a.dtype == e.dtype and a.shape == e.shape, f"{a.dtype}{a.shape} != {e.dtype}{e.shape}: {what}"
        if e.dtype.kind == "f":
            # Floats: BLAS sums in another order, and float32 tanh/sigmoid are within ~4e-7.
            rtol = 1e-5 if e.dtype == np.float32 else 1e-12
            scale = float(np.max(np.abs(e[np.isfinite(e)]), initial=1.0))
            np.testing.assert_allclose(a, e, rtol=rtol, atol=rtol * scale, err_msg=what)
        else:
            np.testing.assert_array_equal(a, e, err_msg=what)


seeds = st.integers(0, 2**32 - 1)


@settings(SETTINGS, max_examples=2)
@given(seeds)
def test_random_loop_bodies_fuse_and_match_the_interpreter(seed):
    assert_backends_agree(*loop_program(seed))


@settings(SETTINGS, max_examples=1)
@given(seeds)
def test_random_scan_bodies_fuse_and_match_the_interpreter(seed):
    assert_backends_agree(*scan_program(seed))


@pytest.mark.slow
@SETTINGS
@given(seeds)
def test_more_random_loop_bodies_fuse_and_match_the_interpreter(seed):
    """Other seeds than the tests above draw (derandomize seeds each test by its name)."""
    assert_backends_agree(*loop_program(seed))


@pytest.mark.slow
@settings(SETTINGS, max_examples=8)
@given(seeds)
def test_more_random_scan_bodies_fuse_and_match_the_interpreter(seed):
    assert_backends_agree(*scan_program(seed))


@settings(SETTINGS, max_examples=100)
@given(seeds, st.booleans())
def test_the_generators_build_models_the_checker_and_the_interpreter_accept(seed, scan):
    """Many more bodies than the fused tests try, cheaply (no compiling): the generators are sound."""
    model, feeds, _ = (scan_program if scan else loop_program)(seed)
    onnx.checker.check_model(model, full_check=True)
    rnnloop.load(model, backend="interp").run(None, feeds)
