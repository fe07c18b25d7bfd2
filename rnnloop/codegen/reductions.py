"""Code generation rules for reductions, Softmax/LogSoftmax, ArgMax/ArgMin and batched MatMul.

Each op becomes a call of a small compiled function that walks its input in index order (the
last axis innermost, so a C-contiguous input is read once, front to back) and writes a buffer the
kernel allocated; like ops share one function (ModuleGen.helper). The semantics are the
interpreter's (rnnloop.interp.math_ops), including empty reductions, NaN propagation and integer
wrap-around. Axes must be known when the kernel is generated: attributes, or constant inputs.
Float sums add in NumPy's order (pairwise along the last axis), so on C-contiguous inputs they
equal the interpreter's bit for bit.

Numba computes int32 arithmetic in int64; a store into an int32 array wraps it, which is what
NumPy's int32 arithmetic gives, so intermediate values are cast to the dtype before anything that
is not wrap-around arithmetic (division, square root).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np

from ..ir import Op
from .emitter import Emitter, NoRule, Var, dtype_name, literal, shape_tuple
from .kernel import HELPER, MAX_RANK, LoopGen, emits, matmul_call

COMPILED = frozenset(np.dtype(t) for t in ("float32", "float64", "int32", "int64"))
_F32 = np.dtype(np.float32)


# ---------------------------------------------------------------------------------------------
# shared pieces


def _operand(g: LoopGen, x: Var | None, op: Op, floats_only: bool = False) -> Var:
    """The op's data input as an array of a compiled dtype (a literal becomes a 0-d array)."""
    if x is None:
        raise NoRule("the data input is missing")
    kinds = "f" if floats_only else "fi"
    if x.dtype not in COMPILED or x.dtype.kind not in kinds:
        names = "float32 and float64" if floats_only else "float32, float64, int32 and int64"
        raise NoRule(f"{op.op_type} on {x.dtype} is not compiled (compiled: {names})")
    if x.kind != "scalar":
        return x
    # A literal is a constant, so the op is hoisted and this array made once, not per iteration.
    name = g.body.fresh("s")
    g.body(f"{name} = np.full((), {x.expr}, {dtype_name(x.dtype)})")
    return Var(name, x.dtype, 0, "fresh")


def _axis(axis: int, rank: int) -> int:
    # An axis out of range is the interpreter's error to report: leave the loop to it.
    if not -rank <= int(axis) < rank:
        raise NoRule(f"axis {axis} is out of range for rank {rank}")
    return int(axis) % rank


def _math(dtype: np.dtype) -> tuple[str, str]:
    """exp and log for `dtype`: float32 ones that stay in float32, libm for float64."""
    return ("_m.exp_f32", "_m.log_f32") if dtype == _F32 else ("np.exp", "np.log")


@contextmanager
def _loops(e: Emitter, axes: Iterable[int], array: str = "x") -> Iterator[None]:
    """Nested loops `for i<d> in range(array.shape[d])` over `axes`, outermost first."""
    with ExitStack() as stack:
        for d in axes:
            stack.enter_context(e.block(f"for i{d} in range({array}.shape[{d}]):"))
        yield


def _at(parts: list[str]) -> str:
    return ", ".join(parts) if parts else "()"


def _function(params: list[str], doc: str) -> Emitter:
    """A helper's source up to its docstring; the caller writes the body at depth 1."""
    e = Emitter()
    e(HELPER)
    e(f"def FUNCTION({', '.join(params)}):")
    e.depth = 1
    e(f'"""{doc}"""')
    return e


def _reduced_dims(x: Var, reduced: Iterable[int], keepdims: bool) -> list[str]:
    reduced = set(reduced)
    return ["1" if d in reduced else x.dim(d) for d in range(x.rank) if keepdims or d not in reduced]


# ---------------------------------------------------------------------------------------------
# ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL2, ReduceLogSumExp


@dataclass(frozen=True)
class _Fold:
    """One reduction into `target`: acc = combine(acc, term(x)) from `init`, then target = final(acc).

    `term` may use {x} (the element) and {at} (the index of its output element); `final` may use
    {v} (the value folded so far, in the dtype), {n} (the element count) and {p} (the element of
    `peak`, for LogSumExp). A float sum names the `pairwise` term (see _pairwise_function) that
    sums a run of the last axis in NumPy's order; `p` is the extra operand of that term.
    """

    init: str
    combine: str
    term: str = "{x}"
    final: str | None = None
    target: str = "out"
    pairwise: str | None = None
    p: str = "0"


def _folds(op_type: str, dtype: np.dtype) -> list[_Fold]:
    """The folds of a reduction: one, or for ReduceLogSumExp the peak and then the sum."""
    zero, one = literal(0, dtype), literal(1, dtype)
    is_float = dtype.kind == "f"
    low = -np.inf if is_float else np.iinfo(dtype).min
    high = np.inf if is_float else np.iinfo(dtype).max
    add = "{acc} + {t}"
    summed = "sum" if is_float else None
    if op_type == "ReduceSum":
        return [_Fold(zero, add, pairwise=summed, p=zero)]
    if op_type == "ReduceMean":
        final = f"{{v}} / {dtype_name(dtype)}({{n}})" if is_float else "_m.div_int({v}, {n})"
        return [_Fold(zero, add, final=final, pairwise=summed, p=zero)]
    if op_type == "ReduceMax":
        return [_Fold(literal(low, dtype), "_m.maximum({acc}, {t})")]
    if op_type == "ReduceMin":
        return [_Fold(literal(high, dtype), "_m.minimum({acc}, {t})")]
    if op_type == "ReduceProd":
        return [_Fold(one, "{acc} * {t}")]
    if op_type == "ReduceL2":
        # Integers: NumPy takes the square root in float64 and truncates back.
        final = "np.sqrt({v})" if is_float else f"_m.float_to_{dtype.name}(np.sqrt(np.float64({{v}})))"
        return [_Fold(zero, add, term="{x} * {x}", final=final, pairwise="square" if is_float else None, p=zero)]
    if op_type == "ReduceLogSumExp":
        exp, log = _math(dtype)
        # Shifting by a peak that is not finite (or of an empty set) would give NaN: shift by 0.
        peak = _Fold(literal(low, dtype), "_m.maximum({acc}, {t})", target="peak",
                     final=f"({{v}} if abs({{v}}) < {literal(np.inf, dtype)} else {zero})")
        total = _Fold(zero, add, term=f"{exp}({{x}} - peak[{{at}}])", final=f"{log}({{v}}) + {{p}}",
                      pairwise="exp", p="peak[{at}]")
        return [peak, total]
    raise AssertionError(op_type)


def _reduced_axes(g: LoopGen, op: Op, rank: int) -> frozenset[int]:
    """The axes to reduce, from the attribute (old form) or the constant input, as the interpreter reads them."""
    if "axes" in op.attrs:
        axes = op.attrs["axes"]
        values = [] if axes is None else [int(a) for a in np.asarray(axes).reshape(-1)]
    elif len(op.inputs) > 1 and op.inputs[1]:
        value = g.const(op.inputs[1])
        if value is None:
            raise NoRule("the axes input must be a constant to compile")
        if value.ndim > 1 or (value.size and value.dtype.kind not in "iu"):
            raise NoRule(f"the axes input is {value.dtype} of shape {value.shape}, not a 1-D integer tensor")
        values = [int(a) for a in value.reshape(-1)]
    else:
        values = []
    if not values:
        return frozenset() if op.attrs.get("noop_with_empty_axes", 0) else frozenset(range(rank))
    axes = [_axis(a, rank) for a in values]
    if len(set(axes)) != len(axes):
        raise NoRule(f"axes {values} name an axis twice")
    return frozenset(axes)


@emits("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceLogSumExp")
def emit_reduce(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Fold the input over constant axes into a buffer, through a function shared by like reductions."""
    x = _operand(g, ins[0], op, floats_only=op.op_type == "ReduceLogSumExp")
    reduced = _reduced_axes(g, op, x.rank)
    keepdims = bool(op.attrs.get("keepdims", 1))
    dims = _reduced_dims(x, reduced, keepdims)
    dtype, rank = g.out_type(op.outputs[0], len(dims), x.dtype)
    if op.op_type == "ReduceMean" and dtype.kind == "i":
        count = " * ".join(x.dim(d) for d in sorted(reduced)) or "1"
        g.fail_if(f"{count} == 0", op, "the mean of an empty set of integers is undefined "
                  f"(the reduced axes {sorted(reduced)} hold no element)")
    folds = _folds(op.op_type, dtype)
    out = g.buffer(op.outputs[0], dtype, dims)
    args = [out] + [g.buffer(f"{op.outputs[0]}_peak", dtype, dims) for f in folds if f.target == "peak"]
    args.append(x.expr)
    sums = {}
    for kind in [f.pairwise for f in folds if f.pairwise and _tail(x.rank, reduced) < x.rank]:
        sums[kind], stack = _pairwise(g, dtype, kind, op.outputs[0])
        args += stack
    function = g.module.helper(_reduce_function(op.op_type, folds, dtype, x.rank, reduced, keepdims, sums))
    g.body(f"{function}({', '.join(args)})")
    return [Var(out, dtype, rank, "buffer")]


def _tail(rank: int, reduced: frozenset[int]) -> int:
    """The first of the reduced axes at the end (rank if the last axis is kept)."""
    tail = rank
    while tail and tail - 1 in reduced:
        tail -= 1
    return tail


def _reduce_function(op_type: str, folds: list[_Fold], dtype: np.dtype, rank: int, reduced: frozenset[int],
                     keepdims: bool, sums: dict[str, str]) -> str:
    """The function (out, [peak,] x, [runs, halves per pairwise sum]) of one reduction; FUNCTION stands for its name."""
    axes = sorted(reduced)
    stacks = [f"{name}_{kind}" for kind in sums for name in ("runs", "halves")]
    e = _function(["out"] + [f.target for f in folds if f.target != "out"] + ["x"] + stacks,
                  f"{op_type} of rank {rank} over axes {axes}, keepdims={int(keepdims)}")
    if op_type == "ReduceMean":
        e(f"n = {' * '.join(f'x.shape[{d}]' for d in axes) or '1'}")
    for fold in folds:
        _emit_fold(e, fold, dtype, rank, reduced, keepdims, sums.get(fold.pairwise))
    return e.text()


def _emit_fold(e: Emitter, fold: _Fold, dtype: np.dtype, rank: int, reduced: frozenset[int],
               keepdims: bool, pairwise: str | None) -> None:
    """Loops that fold x into the fold's target.

    The reduced axes at the end (the "tail") fold into a local accumulator, one output element at
    a time. A reduced axis before a kept one folds into the target itself, so that the innermost
    loop still runs along the last axis of both arrays, where it can vectorise; that is also the
    order NumPy adds in, as is the pairwise sum of the tail (exact for a C-contiguous input).
    """
    idx = [f"i{d}" for d in range(rank)]
    at = _at(["0" if d in reduced else idx[d] for d in range(rank) if keepdims or d not in reduced])
    target = f"{fold.target}[{at}]"
    tail = _tail(rank, reduced)
    in_place = any(d in reduced for d in range(tail))
    if in_place:
        e(f"{fold.target}[...] = {fold.init}")
    if pairwise and rank - tail > 1:
        _whole_tail(e, rank, tail)
    with _loops(e, range(tail)):
        value = fold.term.format(x=f"x[{_at(idx)}]", at=at)
        if tail < rank:
            call = (pairwise, f"runs_{fold.pairwise}, halves_{fold.pairwise}") if pairwise else None
            _fold_tail(e, fold, idx, tail, at, call)
            value = "acc"
        if in_place:
            e(f"{target} = {fold.combine.format(acc=target, t=value)}")
        elif fold.final:
            e(f"{target} = {fold.final.format(v=f'{dtype_name(dtype)}({value})', n='n', p=f'peak[{at}]')}")
        else:
            e(f"{target} = {value}")
    if in_place and fold.final:  # the target holds the folded values, in the dtype: finish each one
        e(f"flat = {fold.target}.reshape({fold.target}.size)")
        if "{p}" in fold.final:
            e("peak_flat = peak.reshape(peak.size)")
        with e.block("for k in range(flat.size):"):
            e(f"flat[k] = {fold.final.format(v='flat[k]', n='n', p='peak_flat[k]')}")


def _whole_tail(e: Emitter, rank: int, tail: int) -> None:
    """`run`: the element count of the tail axes; `whole`: whether they are one C-contiguous run."""
    e(f"run = {' * '.join(f'x.shape[{d}]' for d in range(tail, rank))}")
    steps = [f"x.strides[{rank - 1}] == x.itemsize"]
    steps += [f"x.strides[{d}] == x.strides[{d + 1}] * x.shape[{d + 1}]" for d in range(tail, rank - 1)]
    e(f"whole = {' and '.join(steps)}")


def _fold_tail(e: Emitter, fold: _Fold, idx: list[str], tail: int, at: str,
               pairwise: tuple[str, str] | None) -> None:
    """acc = the fold of the tail axes at the current outer index.

    `pairwise` is the pairwise sum function and the arguments of its stack, or None.
    """
    rank = len(idx)
    if not pairwise:
        e(f"acc = {fold.init}")
        _fold_in_order(e, fold, idx, tail, at)
        return
    name, stack = pairwise
    block = f"x[{', '.join(idx[:tail])}]" if tail else "x"
    p = fold.p.format(at=at)
    if rank - tail == 1:
        e(f"acc = {fold.init} + {name}({block}, 0, x.shape[{rank - 1}], {p}, {stack})")
        return
    e(f"acc = {fold.init}")
    with e.block("if whole:"):  # a contiguous view: no copy
        e(f"acc = acc + {name}(np.ascontiguousarray({block}).reshape(run), 0, run, {p}, {stack})")
    with e.block("else:"):
        _fold_in_order(e, fold, idx, tail, at)


def _fold_in_order(e: Emitter, fold: _Fold, idx: list[str], tail: int, at: str) -> None:
    with _loops(e, range(tail, len(idx))):
        e(f"acc = {fold.combine.format(acc='acc', t=fold.term.format(x=f'x[{_at(idx)}]', at=at))}")


# NumPy sums a run of floats pairwise (numpy/_core/src/umath/loops_utils.h.src): runs under 8 one
# by one, runs up to 128 in 8 interleaved partial sums, longer runs as the sum of two halves made of
# whole blocks of 8. The same order gives the same rounding, so kernels agree with the interpreter
# bit for bit. The halving is a loop over an explicit stack, not recursion: Numba's cache cannot
# load a recursive function (the next process crashes).
_PAIRWISE_TERMS = {"sum": "{a}", "square": "{a} * {a}", "exp": "{exp}({a} - p)"}
PAIRWISE_DEPTH = 64  # halvings from the largest run an int64 can count down to 128 (56) fit


def _pairwise(g: LoopGen, dtype: np.dtype, kind: str, hint: str) -> tuple[str, list[str]]:
    """The pairwise sum function of `kind` terms, and the scratch buffers (its stack) a caller passes it."""
    if kind == "sum" and dtype in (np.float32, np.float64):  # its eight partial sums as one vector
        leaf = "_m.sum_run(a, lo, n)"
    else:
        leaf = f"{g.module.helper(_pairwise_leaf_function(dtype, kind))}(a, lo, n, p)"
    function = g.module.helper(_pairwise_function(dtype, kind, leaf))
    stack = [g.buffer(f"{hint}_runs", np.dtype(np.int64), ["3", str(PAIRWISE_DEPTH)]),
             g.buffer(f"{hint}_halves", dtype, [str(PAIRWISE_DEPTH)])]
    return function, stack


def _pairwise_leaf_function(dtype: np.dtype, kind: str) -> str:
    """The function (a, lo, n, p): the sum of term(a[i]) for i in [lo, lo + n), n <= 128, in NumPy's order."""
    exp, _ = _math(dtype)

    def term(a: str) -> str:
        return _PAIRWISE_TERMS[kind].format(a=a, exp=exp)

    e = _function(["a", "lo", "n", "p"], f"sum of the {kind} terms of a[lo:lo + n] (n <= 128), as NumPy adds")
    with e.block("if n < 8:"):
        e(f"r = {literal(0, dtype)}")
        with e.block("for i in range(lo, lo + n):"):
            e(f"r += {term('a[i]')}")
        e("return r")
    for k in range(8):
        e(f"r{k} = {term(f'a[lo + {k}]' if k else 'a[lo]')}")
    with e.block("for b in range(lo + 8, lo + n - n % 8, 8):"):
        for k in range(8):
            e(f"r{k} += {term(f'a[b + {k}]' if k else 'a[b]')}")
    e("r = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))")
    with e.block("for i in range(lo + n - n % 8, lo + n):"):
        e(f"r += {term('a[i]')}")
    e("return r")
    return e.text()


def _pairwise_function(dtype: np.dtype, kind: str, leaf: str) -> str:
    """The function (a, lo, n, p, runs, halves): the pairwise sum of any run, in NumPy's order;
    `leaf` is the call that sums a run of at most 128 from a[lo].

    It walks NumPy's recursion depth first: each split records the right half in `runs` (start,
    length, whether the left half is summed) and goes left; each finished sum either waits in
    `halves` for its right neighbour or is added to its left one.
    """
    e = _function(["a", "lo", "n", "p", "runs", "halves"], f"pairwise sum of the {kind} terms of a[lo:lo + n], as NumPy adds")
    with e.block("if n <= 128:"):
        e(f"return {leaf}")
    e("depth = 0")
    with e.block("while True:"):
        with e.block("while n > 128:"):
            e("half = n // 2")
            e("half -= half % 8")
            e("runs[0, depth] = lo + half")
            e("runs[1, depth] = n - half")
            e("runs[2, depth] = 0")
            e("depth += 1")
            e("n = half")
        e(f"s = {leaf}")
        with e.block("while depth > 0 and runs[2, depth - 1] == 1:"):
            e("depth -= 1")
            e("s = halves[depth] + s")
        with e.block("if depth == 0:"):
            e("return s")
        e("halves[depth - 1] = s")
        e("runs[2, depth - 1] = 1")
        e("lo = runs[0, depth - 1]")
        e("n = runs[1, depth - 1]")
    return e.text()


# ---------------------------------------------------------------------------------------------
# Softmax, LogSoftmax, ArgMax, ArgMin: along one axis


class _Lanes:
    """Index expressions for walking x along `axis`: one lane per index of the other axes.

    The axes before `axis` are outer loops. The axes after it ("post") are inner loops inside the
    loop along the axis, so memory is still read in order; their per-lane state then lives in
    scratch arrays shaped like x with `axis` of size 1, instead of in local variables.
    """

    def __init__(self, rank: int, axis: int):
        self.rank, self.axis = rank, axis
        self.idx = [f"i{d}" for d in range(rank)]
        self.pre, self.post = range(axis), range(axis + 1, rank)

    def x(self, j: str) -> str:
        return f"x[{_at([j if d == self.axis else i for d, i in enumerate(self.idx)])}]"

    def out(self, j: str, keep: bool = True) -> str:
        parts = [j if d == self.axis else i for d, i in enumerate(self.idx)]
        return f"out[{_at(parts if keep else parts[:self.axis] + parts[self.axis + 1:])}]"

    def state(self, local: str, scratch: str) -> str:
        """A local variable when there are no post axes, else the lane's element of a scratch array."""
        return f"{scratch}[{_at(['0' if d == self.axis else i for d, i in enumerate(self.idx)])}]" \
            if self.post else local

    @contextmanager
    def along(self, e: Emitter, start: str = "0") -> Iterator[None]:
        """for j along the axis, then the post axes."""
        first = "" if start == "0" else f"{start}, "
        with e.block(f"for j in range({first}x.shape[{self.axis}]):"), _loops(e, self.post):
            yield


@emits("Softmax", "LogSoftmax")
def emit_softmax(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """exp(x - max) / sum, or (x - max) - ln(sum(exp(x - max))), along one axis (opset 13 form).

    Older opsets' 2-D coercion is lowered by the front end into Flatten, Softmax(axis=-1), Reshape.
    """
    x = _operand(g, ins[0], op, floats_only=True)
    axis = _axis(op.attrs.get("axis", -1), x.rank)
    dtype, rank = g.out_type(op.outputs[0], x.rank, x.dtype)
    out = g.buffer(op.outputs[0], dtype, [x.dim(d) for d in range(rank)])
    x_in, out_in, walked = x.expr, out, rank
    if _trailing_ones(g, op, x, axis):  # attention's scores [N, T, 1] along T: walked as [N, T]
        lead = shape_tuple([x.dim(d) for d in range(axis + 1)])
        x_in, out_in, walked = f"np.ascontiguousarray({x.expr}).reshape({lead})", f"{out}.reshape({lead})", axis + 1
    args, pairwise = [out_in], None
    if axis < walked - 1:
        lane = _reduced_dims(x, [axis], True)
        args += [g.buffer(f"{op.outputs[0]}_max", dtype, lane), g.buffer(f"{op.outputs[0]}_sum", dtype, lane)]
    else:  # lanes along the last axis are summed pairwise, as NumPy does
        pairwise, stack = _pairwise(g, dtype, "sum", op.outputs[0])
        args += stack
    function = g.module.helper(_softmax_function(op.op_type, dtype, walked, axis, pairwise))
    g.body(f"{function}({', '.join(args[:1] + [x_in] + args[1:])})")
    return [Var(out, dtype, rank, "buffer")]


def _trailing_ones(g: LoopGen, op: Op, x: Var, axis: int) -> bool:
    """Whether the model declares every axis after `axis` of size 1, so the op can walk x without
    them: along the last axis, in lanes that vectorise, rather than with per-lane scratch arrays.
    An input that has another size there runs in the interpreter."""
    shape = g.declared_shape(op.inputs[0], x.rank)
    if shape is None or axis == x.rank - 1 or any(d != 1 for d in shape[axis + 1:]):
        return False
    for d in range(axis + 1, x.rank):
        g.fail_if(f"{x.dim(d)} != 1", op, f"axis {d} has {{a}} entries where the model declares 1", a=x.dim(d),
                  fallback=True)
    return True


def _softmax_function(op_type: str, dtype: np.dtype, rank: int, axis: int, pairwise: str | None) -> str:
    """The function of Softmax/LogSoftmax, (out, x, max, sum) or along the last axis (out, x, runs, halves).

    Per lane: the maximum; x - max (exponentiated for Softmax) into out and its sum (of
    exponentials for LogSoftmax); then out / sum, or out - ln(sum). Summed pairwise (along the
    last axis), LogSoftmax writes the exponentials into out first, a loop of no reduction that
    vectorises, sums them, then writes (x - max) - ln(sum): the same values, a tenth of the time.
    """
    exp, log = _math(dtype)
    lanes = _Lanes(rank, axis)
    e = _function(["out", "x", "mx", "sm"] if lanes.post else ["out", "x", "runs", "halves"],
                  f"{op_type} of rank {rank} along axis {axis}")
    m, s = lanes.state("m", "mx"), lanes.state("s", "sm")
    xj, oj = lanes.x("j"), lanes.out("j")
    shifted = f"{exp}({xj} - {m})" if op_type == "Softmax" or pairwise else f"{xj} - {m}"
    zero = literal(0, dtype)
    with _loops(e, lanes.pre):
        with _loops(e, lanes.post):
            e(f"{m} = {literal(-np.inf, dtype)}")
            e(f"{s} = {zero}")
        if pairwise:  # (along the last axis, so a lane is one row: eight running maxima)
            e(f"{m} = _m.max_of({lanes.x(':')}, 0, x.shape[{axis}]) if x.shape[{axis}] else {m}")
        else:
            with lanes.along(e):
                e(f"{m} = _m.maximum({m}, {xj})")
        with lanes.along(e):
            e(f"{oj} = {shifted}")
            if not pairwise:
                e(f"{s} = {s} + {oj if op_type == 'Softmax' else f'{exp}({oj})'}")
        if pairwise:
            e(f"{s} = {zero} + {pairwise}({lanes.out(':')}, 0, x.shape[{axis}], {zero}, runs, halves)")
        if op_type == "LogSoftmax":
            with _loops(e, lanes.post):
                e(f"{s} = {log}({s})")
        with lanes.along(e):
            if op_type == "Softmax":
                e(f"{oj} = {oj} / {s}")
            else:
                e(f"{oj} = ({xj} - {m}) - {s}" if pairwise else f"{oj} = {oj} - {s}")
    return e.text()


@emits("ArgMax", "ArgMin")
def emit_arg_extreme(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """The int64 index of the first (or last) largest or smallest entry along an axis; NaN counts as extreme."""
    x = _operand(g, ins[0], op)
    axis = _axis(op.attrs.get("axis", 0), x.rank)
    keepdims = bool(op.attrs.get("keepdims", 1))
    last = bool(op.attrs.get("select_last_index", 0))
    dims = _reduced_dims(x, [axis], keepdims)
    dtype, rank = g.out_type(op.outputs[0], len(dims), np.dtype(np.int64))
    _fail_if_empty(g, op, x, axis)
    out = g.buffer(op.outputs[0], dtype, dims)
    args = [out]
    if axis < x.rank - 1:
        args.append(g.buffer(f"{op.outputs[0]}_best", x.dtype, _reduced_dims(x, [axis], True)))
    function = g.module.helper(_arg_function(op.op_type, x.dtype, x.rank, axis, keepdims, last))
    g.body(f"{function}({', '.join(args)}, {x.expr})")
    return [Var(out, dtype, rank, "buffer")]


def _fail_if_empty(g: LoopGen, op: Op, x: Var, axis: int) -> None:
    """The interpreter's error for an empty axis, with the input's shape written as a tuple."""
    shown = x.rank <= MAX_RANK
    dims = [f"{{before[{d}]}}" for d in range(x.rank)] if shown else ["..."]
    shape = f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"
    g.fail_if(f"{x.dim(axis)} == 0", op, f"axis {axis} of the input (shape {shape}) is empty: there is no index to return",
              shapes=(f"{x.expr}.shape", f"{x.expr}.shape", x.rank) if shown else None)


def _better(op_type: str, dtype: np.dtype, last: bool, b: str, first_nan: bool = False) -> str:
    """When entry v replaces the best `b` so far: NumPy's argmax/argmin take the first NaN as extreme.

    With `first_nan` the caller stops at a NaN, so `b` is never NaN here.
    """
    symbol = (">" if op_type == "ArgMax" else "<") + ("=" if last else "")
    if first_nan:
        return f"not v {'<=' if op_type == 'ArgMax' else '>='} {b}"  # larger (smaller), or NaN
    if dtype.kind != "f":
        return f"v {symbol} {b}"
    # With select_last_index the interpreter searches the flipped axis: the last NaN wins.
    return f"v {symbol} {b} or v != v" if last else f"v {symbol} {b} or (v != v and {b} == {b})"


def _arg_function(op_type: str, dtype: np.dtype, rank: int, axis: int, keepdims: bool, last: bool) -> str:
    """The function (out, [best,] x) of ArgMax/ArgMin; the kernel has checked the axis is not empty."""
    lanes = _Lanes(rank, axis)
    e = _function(["out", "best", "x"] if lanes.post else ["out", "x"],
                  f"{op_type} of rank {rank} along axis {axis}, keepdims={int(keepdims)}, "
                  f"select_last_index={int(last)}")
    best = lanes.state("b", "best")
    index = lanes.out("0", keepdims) if lanes.post else "k"
    with e.block(f"if x.shape[{axis}] == 0:"):
        e("return")  # no entry to start from (the kernel reports this before calling)
    # One lane at a time, the first NaN ends the search: then one comparison per entry does.
    first_nan = dtype.kind == "f" and not last and not lanes.post
    with _loops(e, lanes.pre):
        with _loops(e, lanes.post):
            e(f"{best} = {lanes.x('0')}")
            e(f"{index} = 0")
        with e.block("if b == b:") if first_nan else nullcontext(), lanes.along(e, "1"):
            e(f"v = {lanes.x('j')}")
            with e.block(f"if {_better(op_type, dtype, last, best, first_nan)}:"):
                e(f"{best} = v")
                e(f"{index} = j")
                if first_nan:
                    with e.block("if v != v:"):
                        e("break")
        if not lanes.post:
            e(f"{lanes.out('0', keepdims)} = k")
    return e.text()


# ---------------------------------------------------------------------------------------------
# MatMul with batch axes (called by the MatMul rule in rules.py)


def emit_batched_matmul(g: LoopGen, op: Op, a: Var, b: Var) -> list[Var]:
    """np.matmul of operands of rank >= 1, one of them > 2: per matrix of the broadcast batch, a product."""
    if a.dtype != b.dtype or a.dtype not in COMPILED:
        raise NoRule(f"MatMul of {a.dtype} by {b.dtype} is not compiled (compiled: equal dtypes of "
                     "float32, float64, int32, int64)")
    a_batch, b_batch = max(a.rank - 2, 0), max(b.rank - 2, 0)
    nb = max(a_batch, b_batch)
    rows, cols = a.rank >= 2, b.rank >= 2
    dtype, rank = g.out_type(op.outputs[0], nb + rows + cols, a.dtype)
    k_a, k_b = a.dim(a.rank - 1), b.dim(b.rank - 2 if cols else 0)
    g.fail_if(f"{k_a} != {k_b}", op, "inner dimensions differ ({a} and {b})", a=k_a, b=k_b)
    dims = [_batch_dim(g, op, a, b, d, nb) for d in range(nb)]
    dims += ([a.dim(a.rank - 2)] if rows else []) + ([b.dim(b.rank - 1)] if cols else [])
    out = g.buffer(op.outputs[0], dtype, dims)
    if a.rank > 2 and b.rank == 2 and dtype.kind == "f" and b.kind == "invariant":
        # A stack of rows by one matrix (a Linear layer on [batch, time, features]) is one product of
        # all the rows, by the matrix's panels (packed at load when it is a weight): a product per
        # matrix of the batch repacks it in BLAS every time (FSMN's [1, 10, 400] x [400, 128]).
        rows = " * ".join(a.dim(d) for d in range(a.rank - 1))
        panels = g.panels(b, b.expr, rows, g.const(op.inputs[1]))
        flat_a, flat_out = g.body.fresh("rows"), g.body.fresh("rows_out")
        g.body(f"{flat_a} = np.ascontiguousarray({a.expr}).reshape(({rows}, {k_a}))")
        g.body(f"{flat_out} = {out}.reshape(({rows}, {b.dim(1)}))")
        g.body(matmul_call(flat_a, b.expr, flat_out, panels=panels, backwards="False"))
        return [Var(out, dtype, rank, "buffer")]
    # BLAS reads strided operands as they are (rnnloop.codegen.blas): no copies.
    args = [out, a.expr, b.expr]
    function = g.module.helper(_matmul_function(dtype, a.rank, b.rank))
    g.body(f"{function}({', '.join(args)})")
    return [Var(out, dtype, rank, "buffer")]


def _batch_dim(g: LoopGen, op: Op, a: Var, b: Var, d: int, nb: int) -> str:
    """Batch axis d of the product (axes align at the end), checked to broadcast."""
    da = d - (nb - max(a.rank - 2, 0))
    db = d - (nb - max(b.rank - 2, 0))
    if da < 0 or db < 0:
        return a.dim(da) if da >= 0 else b.dim(db)
    x, y = a.dim(da), b.dim(db)
    g.fail_if(f"{x} != {y} and {x} != 1 and {y} != 1", op,
              f"batch axis {d} does not broadcast ({{a}} and {{b}})", a=x, b=y)
    return f"({y} if {x} == 1 else {x})"


def _matmul_function(dtype: np.dtype, a_rank: int, b_rank: int) -> str:
    """The function (out, a, b): loops over the batch axes of out, one product per matrix."""
    rows, cols = a_rank >= 2, b_rank >= 2
    nb = max(a_rank, b_rank) - 2
    e = _function(["out", "a", "b"], f"MatMul of rank {a_rank} by rank {b_rank}")
    pick = {}
    for name, r in (("a", a_rank), ("b", b_rank)):
        n = max(r - 2, 0)
        for d in range(nb - n, nb):
            # An axis of size 1 broadcasts: read index 0 of it whatever the batch index.
            e(f"f{name}{d} = 1 if {name}.shape[{d - (nb - n)}] != 1 else 0")
        pick[name] = [f"i{d} * f{name}{d}" for d in range(nb - n, nb)]
    with _loops(e, range(nb), "out"):
        e(f"a2 = a[{', '.join(pick['a'])}]" if pick["a"] else "a2 = a")
        e(f"b2 = b[{', '.join(pick['b'])}]" if pick["b"] else "b2 = b")
        e(f"o2 = out[{', '.join(f'i{d}' for d in range(nb))}]")
        if dtype.kind == "f":
            e(matmul_call("a2", "b2", "o2", 2 if rows else 1, 2 if cols else 1))
        else:
            _integer_product(e, dtype, rows, cols)
    return e.text()


def _integer_product(e: Emitter, dtype: np.dtype, rows: bool, cols: bool) -> None:
    """o2 = a2 @ b2 by loops, k outside j so that the inner loop runs along rows of b2."""
    e(f"o2[...] = {literal(0, dtype)}")
    a_at = "a2[i, kk]" if rows else "a2[kk]"
    b_at = "b2[kk, j]" if cols else "b2[kk]"
    o_at = "o2[" + ", ".join((["i"] if rows else []) + (["j"] if cols else [])) + "]"
    with ExitStack() as stack:
        if rows:
            stack.enter_context(e.block("for i in range(a2.shape[0]):"))
        stack.enter_context(e.block(f"for kk in range(a2.shape[{1 if rows else 0}]):"))
        e(f"aik = {a_at}")
        if cols:
            stack.enter_context(e.block("for j in range(b2.shape[1]):"))
        e(f"{o_at} = {o_at} + aik * {b_at}")
