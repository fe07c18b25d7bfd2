"""Code generation rules for pooling and normalisation (MaxPool, AveragePool, LpPool, the global
pools, BatchNormalization, Instance-, Layer-, Group-, Lp- and MeanVarianceNormalization).

Each op becomes a call of a small compiled function (ModuleGen.helper, shared by like ops) that
writes buffers the kernel allocated. The semantics are the interpreter's (rnnloop.interp.nn_ops):

- A pool's output sizes and begin pads are computed in the kernel from the input's dims (any
  batch and image size, one kernel); kernel, strides, dilations and pads are baked in. A pool is
  folded one spatial axis at a time (see _pool_function), each pass a loop along contiguous rows
  with no test per element, which vectorises.
- Sums (means, variances, norms) accumulate in float64, eight running sums at a time (a
  sequential sum cannot vectorise), and are rounded to the computation type once; a mean or norm
  is applied by multiplying with its reciprocal. Normalised rows are contiguous runs of the input
  (np.ascontiguousarray: a view of a C-contiguous input, a copy of another).
- Loops index by loop counters or unsigned values where they can: Numba then knows the index is
  not negative, and drops the wraparound test that would keep the loop from vectorising. Pools
  index their rows rather than take a view of each (_row): a view costs reference counting.
"""

from __future__ import annotations

import dataclasses
from contextlib import ExitStack
from typing import Callable, Iterable

import numpy as np

from ..interp.nn_ops import AUTO_PADS, MVN_EPSILON
from ..ir import Op
from .emitter import Emitter, NoRule, Var, dtype_name, literal
from .kernel import HELPER, LoopGen, emits

_FLOATS = frozenset(np.dtype(t) for t in ("float32", "float64"))
_NUMERIC = frozenset(np.dtype(t) for t in ("float32", "float64", "int8", "uint8", "int16", "uint16", "int32",
                                           "uint32", "int64", "uint64"))


# ---------------------------------------------------------------------------------------------
# shared pieces


def _function(params: list[str], doc: str) -> Emitter:
    """A helper's source up to its docstring; the caller writes the body at depth 1."""
    e = Emitter()
    e(HELPER)
    e(f"def FUNCTION({', '.join(params)}):")
    e.depth = 1
    e(f'"""{doc}"""')
    return e


def _loops(e: Emitter, names: Iterable[str], dims: Iterable[str]) -> ExitStack:
    """Nested `for name in range(dim)` blocks, outermost first (enter the returned stack)."""
    stack = ExitStack()
    for name, dim in zip(names, dims):
        stack.enter_context(e.block(f"for {name} in range({dim}):"))
    return stack


def _data(x: Var | None, op: Op, dtypes: frozenset = _FLOATS, min_rank: int = 2) -> Var:
    """The op's data input: an array of a compiled dtype and at least `min_rank` axes."""
    if x is None or x.kind == "scalar" or x.rank < min_rank:
        raise NoRule(f"{op.op_type} needs an array of rank {min_rank} or more")
    if x.dtype not in dtypes:
        raise NoRule(f"{op.op_type} on {x.dtype} is not compiled (compiled: "
                     f"{', '.join(sorted(d.name for d in dtypes))})")
    return x


def _vector(g: LoopGen, op: Op, v: Var | None, what: str, size: str, size_what: str) -> Var:
    """A 1-D float input of `size` values (checked in the kernel: a clear error naming the op)."""
    if v is None or v.kind == "scalar" or v.rank != 1 or v.dtype.kind != "f" or v.dtype not in _FLOATS:
        raise NoRule(f"{what} is not a 1-D float32 or float64 array")
    g.fail_if(f"{v.dim(0)} != {size}", op, f"{what} has {{a}} values; it must hold one per {size_what}: {{b}}",
              a=v.dim(0), b=size)
    return v


def _int_args(values: Iterable[str]) -> list[str]:
    # (np.int64 of a literal is no literal type: one compiled helper serves every size)
    return [f"np.int64({v})" for v in values]


def _out_dims(x: Var) -> list[str]:
    return [x.dim(a) for a in range(x.rank)]


# ---------------------------------------------------------------------------------------------
# MaxPool, AveragePool, LpPool


@dataclasses.dataclass(frozen=True)
class _Pool:
    """A pool's attributes, checked as the interpreter checks them (else the interpreter reports)."""

    kind: str
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads: tuple[int, ...]
    auto_pad: str
    ceil_mode: bool
    include_pad: bool = False
    p: float = 2.0
    indices: bool = False
    column_major: bool = False

    @property
    def nd(self) -> int:
        return len(self.kernel)


def _pool(op: Op, rank: int) -> _Pool:
    attrs = op.attrs
    kernel = attrs.get("kernel_shape")
    if kernel is None or len(kernel) != rank - 2 or rank < 3:
        raise NoRule("kernel_shape does not fit the input's rank")
    nd = len(kernel)
    strides = tuple(int(s) for s in attrs.get("strides") or [1] * nd)
    dilations = tuple(int(d) for d in attrs.get("dilations") or [1] * nd)
    pads = tuple(int(p) for p in attrs.get("pads") or [0] * 2 * nd)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if len(strides) != nd or len(dilations) != nd or len(pads) != 2 * nd or auto_pad not in AUTO_PADS:
        raise NoRule("strides, dilations, pads or auto_pad do not fit")
    if min(kernel) < 1 or min(strides) < 1 or min(dilations) < 1 or min(pads) < 0:
        raise NoRule("a kernel size, stride or dilation below 1, or a negative pad")
    p = float(attrs.get("p", 2))
    storage_order = int(attrs.get("storage_order", 0))
    if op.op_type == "LpPool" and not p > 0 or storage_order not in (0, 1):
        raise NoRule("p or storage_order out of range")
    indices = op.op_type == "MaxPool" and len(op.outputs) > 1 and bool(op.outputs[1])
    return _Pool(op.op_type, tuple(int(k) for k in kernel), strides, dilations, pads, auto_pad,
                 bool(attrs.get("ceil_mode", 0)), bool(attrs.get("count_include_pad", 0)), p, indices,
                 storage_order == 1)


def _geometry(g: LoopGen, op: Op, x: Var, pool: _Pool) -> tuple[list[str], list[str], list[str]]:
    """Kernel code computing, per spatial axis, the output size, the begin pad and the end of the
    padded input (ONNX's output shape formulas, as nn_ops.pool_axes); returns their names."""
    emit = g.body
    outs, begins, ends = [], [], []
    for a in range(pool.nd):
        n, k, s, d = x.dim(a + 2), pool.kernel[a], pool.strides[a], pool.dilations[a]
        extent = (k - 1) * d + 1
        o, pb, end = emit.fresh(f"o{a}"), emit.fresh(f"pb{a}"), emit.fresh(f"pe{a}")
        if pool.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            total = emit.fresh(f"pads{a}")
            emit(f"{o} = -(-{n} // {s})")
            emit(f"{total} = max(({o} - 1) * {s} + {extent} - {n}, 0)")
            emit(f"{pb} = {total} // 2" if pool.auto_pad == "SAME_UPPER" else f"{pb} = {total} - {total} // 2")
            emit(f"{end} = {n} + {total} - {pb}")
        else:
            begin, finish = (0, 0) if pool.auto_pad == "VALID" else (pool.pads[a], pool.pads[a + pool.nd])
            span = emit.fresh(f"span{a}")
            emit(f"{pb} = {begin}")
            emit(f"{end} = {n} + {finish}")
            emit(f"{span} = {n} + {begin + finish - extent}")
            g.fail_if(f"{span} < 0", op, f"the kernel spans {extent} entries of spatial axis {a}, more than its "
                      f"{{a}} entries and {begin + finish} pads", a=n)
            if pool.ceil_mode:  # and a window starting in the end padding is dropped
                emit(f"{o} = -(-{span} // {s}) + 1")
                emit(f"{o} = {o} - 1 if ({o} - 1) * {s} >= {n} + {begin} else {o}")
            else:
                emit(f"{o} = {span} // {s} + 1")
        outs.append(o)
        begins.append(pb)
        ends.append(end)
    return outs, begins, ends


@emits("MaxPool", "AveragePool", "LpPool")
def emit_pool(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """A pool over the spatial axes of an N, C, ... input, through a function shared by like pools."""
    x = _data(ins[0], op, _NUMERIC if op.op_type == "MaxPool" else _FLOATS, min_rank=3)
    pool = _pool(op, x.rank)
    dtype, rank = g.out_type(op.outputs[0], x.rank, x.dtype)
    outs, begins, ends = _geometry(g, op, x, pool)
    dims = [x.dim(0), x.dim(1), *outs]
    y = g.buffer(op.outputs[0], dtype, dims)
    results = [Var(y, dtype, rank, "buffer", tuple(dims))]
    args = [y]
    if pool.indices:
        index_type, _ = g.out_type(op.outputs[1], x.rank, np.dtype(np.int64))
        ind = g.buffer(op.outputs[1], index_type, dims)
        args.append(ind)
        results.append(Var(ind, index_type, rank, "buffer", tuple(dims)))
    args += [x.expr, *_int_args(outs + begins + (ends if pool.include_pad else []))]
    function = g.module.helper(_pool_function(pool, dtype))
    g.body(f"{function}({', '.join(args)})")
    return results


def _pool_function(pool: _Pool, dtype: np.dtype) -> str:
    """The function (y, [ind,] x, o.., pb.., [pe..]) of one pool; FUNCTION stands for its name.

    Pools are separable: each N, C plane is folded one axis at a time. Along an axis before the
    last, whole rows fold at once: a tap outside the input skips its row, and the inner loop runs
    along a contiguous row with no test per element. Along the last axis, the positions whose taps
    are all inside the row fold tap by tap over a contiguous run (every stride-th of it is an
    output), the few at the ends tap by tap with checks. The axes before the last go first, so the
    strided last pass works on the fewest rows; MaxPool with indices goes the other way, last axis
    first, per output, so that its taps are met in row-major kernel order (the first maximum, or the
    first NaN, is the one it reports).
    """
    nd, last = pool.nd, pool.nd - 1
    o, pb, pe = ([f"{p}{a}" for a in range(nd)] for p in ("o", "pb", "pe"))
    n = [f"n{a}" for a in range(nd)]
    params = ["y"] + (["ind"] if pool.indices else []) + ["x"] + o + pb + (pe if pool.include_pad else [])
    e = _function(params, f"{pool.kind} of {nd} axes: kernel {list(pool.kernel)}, strides {list(pool.strides)}, "
                          f"dilations {list(pool.dilations)}" + (", count_include_pad" if pool.include_pad else "")
                  + (f", p={pool.p:g}" if pool.kind == "LpPool" else "")
                  + (", with indices" + (" (column major)" if pool.column_major else "") if pool.indices else ""))
    for a in range(nd):
        e(f"n{a} = x.shape[{a + 2}]")
    k, s, d = pool.kernel[last], pool.strides[last], pool.dilations[last]
    # The positions of the last axis whose every tap is inside the input: [inner_lo, inner_hi).
    e(f"inner_lo = min(max(-(-pb{last} // {s}), 0), o{last})")
    e(f"inner_hi = max(min(-(({(k - 1) * d} - pb{last} - n{last}) // {s}), o{last}), inner_lo)")
    if pool.kind == "AveragePool":
        _pool_counts(e, pool)
    t = dtype_name(dtype)
    if pool.indices:
        for a in range(nd):  # the step of each spatial axis in a flat index of one N, C plane
            factors = n[:a] if pool.column_major else n[a + 1:]
            e(f"st{a} = {' * '.join(factors) or '1'}")
        e(f"plane = {' * '.join(n)}")
        order = list(range(last, -1, -1))
        between = {a: n[:a] + o[a:] for a in range(1, nd)}  # the plane after the pass along a
    else:
        e(f"run = np.empty(max(n{last}, 1), {t})")  # a row folded at every position (stride 1)
        order = list(range(nd))
        between = {a: o[:a + 1] + n[a + 1:] for a in range(last)}
    for a, dims in between.items():
        e(f"t{a} = np.empty(({', '.join(dims)},), {t})")
        if pool.indices:
            e(f"u{a} = np.empty(({', '.join(dims)},), np.int64)")
    with e.block("for b in range(x.shape[0]):"), e.block("for c in range(x.shape[1]):"):
        e("xp = x[b, c]")
        e("yp = y[b, c]")
        if pool.indices:
            e("ip = ind[b, c]")
            e("first = (b * x.shape[1] + c) * plane")
        source = "xp"
        for step, a in enumerate(order):
            final = step == nd - 1
            dst, dst_index = ("yp", "ip") if final else (f"t{a}", f"u{a}")
            if pool.indices:
                rows = n[:a]
                if a == last:
                    _pool_last_pass_indexed(e, pool, dtype, rows, source, dst, dst_index)
                else:
                    _pool_row_pass(e, pool, dtype, a, n[:a], o[a + 1:], source, dst, f"u{a + 1}", dst_index)
            elif a == last:
                _pool_last_pass(e, pool, dtype, o[:a], source, dst, raw=source == "xp")
            else:
                _pool_row_pass(e, pool, dtype, a, o[:a], n[a + 1:], source, dst)
            source = dst
        if pool.kind == "AveragePool":
            _pool_divide(e, pool, dtype)
        elif pool.kind == "LpPool" and pool.p != 1:
            yp = [f"i{a}" for a in range(nd)]
            with _loops(e, yp, o):
                at = f"yp[{', '.join(yp)}]"
                e(f"{at} = np.sqrt({at})" if pool.p == 2 else f"{at} = {at} ** {literal(1.0 / pool.p, dtype)}")
    return e.text()


def _pool_init(pool: _Pool, dtype: np.dtype) -> str:
    if pool.kind != "MaxPool":
        return literal(0, dtype)
    return literal(-np.inf if dtype.kind == "f" else np.iinfo(dtype).min, dtype)


def _pool_fold(e: Emitter, pool: _Pool, dtype: np.dtype, acc: str, v: str, at: str | None = None,
               where: str | None = None, valid: str | None = None) -> None:
    """acc = acc folded with v (and for MaxPool with indices, at = where when v is the new maximum:
    the first maximum, or the first NaN, in tap order; `valid`, when given, says v comes from a tap)."""
    if pool.kind != "MaxPool":
        e(f"{acc} += {v}")
    elif pool.indices:
        nan = f" or ({v} != {v} and {acc} == {acc})" if dtype.kind == "f" else ""
        check = f"{valid} and (" if valid else "("
        with e.block(f"if {check}{v} > {acc} or {at} < 0{nan}):"):
            e(f"{acc} = {v}")
            e(f"{at} = {where}")
    else:  # (Numba's np.maximum: NaN if either is, the first of equals; a loop of them vectorises)
        e(f"{acc} = np.maximum({acc}, {v})")


def _pool_term(pool: _Pool, dtype: np.dtype, v: str) -> str:
    """The value a tap adds: LpPool's |v|^p."""
    if pool.kind != "LpPool":
        return v
    return f"abs({v})" if pool.p == 1 else f"{v} * {v}" if pool.p == 2 else f"abs({v}) ** {literal(pool.p, dtype)}"


def _row(array: str, idx: list[str]) -> Callable[[str], str]:
    """The element at a position of one row of `array`, the row's indices `idx` before it: rows are
    indexed, not taken as views (a view per row costs its reference counting: a 2x2 MaxPool over
    128 x 16 x 50 took 114 µs with views, 35 without)."""
    return lambda at: f"{array}[{', '.join(idx + [at])}]"


def _pool_edges(e: Emitter, pool: _Pool, dtype: np.dtype, xr: Callable[[str], str], dr: Callable[[str], str],
                ir: Callable[[str], str] | None = None, where: str | None = None, raw: bool = True) -> None:
    """The positions of the last axis with a tap outside the row (xr into dr: _row's), each tap checked
    (`raw`: xr is the input, whose values LpPool raises to p; otherwise a pass already did)."""
    last = pool.nd - 1
    k, s, d = pool.kernel[last], pool.strides[last], pool.dilations[last]
    spans = ["range(inner_lo)", f"range(inner_hi, o{last})"] if where is None else \
        ["range(inner_lo)", "range(inner_lo, inner_hi)", f"range(inner_hi, o{last})"]
    for k_span, span in enumerate(spans):
        checked = where is None or k_span != 1
        with e.block(f"for i in {span}:"):
            e(f"q = i * {s} - pb{last}")
            e(f"acc = {_pool_init(pool, dtype)}")
            if where is not None:
                e("at = -1")
            for j in range(k):
                p = f"q + {j * d}" if j else "q"
                with e.block(f"if {p} >= 0 and {p} < n{last}:") if checked else ExitStack():
                    e(f"v = {xr(p)}")
                    _pool_fold(e, pool, dtype, "acc", _pool_term(pool, dtype, "v") if raw else "v", "at",
                               None if where is None else f"{where} + ({p}) * st{last}")
            e(f"{dr('i')} = acc")
            if where is not None:
                e(f"{ir('i')} = at")


def _pool_last_pass(e: Emitter, pool: _Pool, dtype: np.dtype, rows: list[str], src: str, dst: str,
                    raw: bool) -> None:
    """Each row of the source (its axes before the last: `rows`) into output positions along the last
    axis: the inner positions from `run`, the row folded tap by tap at every position from the first
    inner window's start (contiguous loops that vectorise), then every stride-th."""
    last = pool.nd - 1
    k, s, d = pool.kernel[last], pool.strides[last], pool.dilations[last]
    idx = [f"r{a}" for a in range(len(rows))]
    with _loops(e, idx, rows):
        xr, dr = _row(src, idx), _row(dst, idx)
        _pool_edges(e, pool, dtype, xr, dr, raw=raw)
        e(f"start = inner_lo * {s} - pb{last}")
        e(f"span = (inner_hi - inner_lo - 1) * {s} + 1 if inner_hi > inner_lo else 0")
        # (unsigned indices from where the runs start: Numba then has no wraparound test in the
        # loops, which vectorise)
        e("xs = np.uint64(max(start, 0))")
        e("ds = np.uint64(inner_lo)")
        folded = (lambda at: dr(f"ds + {at}")) if s == 1 else (lambda at: f"run[{at}]")
        for j in range(k):
            with e.block("for i in range(np.uint64(span)):"):
                v = xr(f"xs + i + np.uint64({j * d})") if j else xr("xs + i")
                v = _pool_term(pool, dtype, v) if raw else v
                if j == 0:
                    e(f"{folded('i')} = {v}")
                else:
                    e(f"v = {v}")
                    e(f"acc = {folded('i')}")
                    _pool_fold(e, pool, dtype, "acc", "v")
                    e(f"{folded('i')} = acc")
        if s != 1:
            with e.block("for i in range(np.uint64(inner_hi - inner_lo)):"):
                e(f"{dr('ds + i')} = run[i * np.uint64({s})]")


def _pool_last_pass_indexed(e: Emitter, pool: _Pool, dtype: np.dtype, rows: list[str], src: str, dst: str,
                            dst_index: str) -> None:
    """MaxPool with indices, along the last axis first: per output position, its taps in order."""
    idx = [f"r{a}" for a in range(len(rows))]
    with _loops(e, idx, rows):
        _pool_edges(e, pool, dtype, _row(src, idx), _row(dst, idx), _row(dst_index, idx),
                    where="first" if pool.nd == 1 else "0")  # (the other passes add theirs)


def _pool_row_pass(e: Emitter, pool: _Pool, dtype: np.dtype, a: int, before_dims: list[str], after_dims: list[str],
                   src: str, dst: str, src_index: str | None = None, dst_index: str | None = None) -> None:
    """Fold the source along axis a, whole rows (the axes after a) at a time."""
    k, s, d = pool.kernel[a], pool.strides[a], pool.dilations[a]
    before = [f"r{b}" for b in range(a)]
    after = [f"i{b}" for b in range(a + 1, pool.nd)]
    with _loops(e, before, before_dims), e.block(f"for i in range(o{a}):"):
        at = ", ".join(before + ["i"] + after)
        with _loops(e, after, after_dims):
            e(f"{dst}[{at}] = {_pool_init(pool, dtype)}")
            if pool.indices:
                e(f"{dst_index}[{at}] = -1")
        with e.block(f"for j in range({k}):"):
            e(f"p = i * {s} - pb{a} + j * {d}")
            with e.block(f"if p < 0 or p >= n{a}:"):
                e("continue")
            # (rows indexed, not views: see _row; p unsigned and the inner indices loop counters, so
            # that Numba has no wraparound test in the inner loop, which vectorises)
            e("pu = np.uint64(p)")
            srow, drow = _row(src, before + ["pu"]), _row(dst, before + ["i"])
            if pool.indices:
                sirow, dirow = _row(src_index, before + ["pu"]), _row(dst_index, before + ["i"])
            inner = ", ".join(after)
            with _loops(e, after, after_dims):
                e(f"v = {_pool_term(pool, dtype, srow(inner)) if src == 'xp' else srow(inner)}")
                e(f"acc = {drow(inner)}")
                if pool.indices:
                    e(f"si = {sirow(inner)}")
                    e(f"at = {dirow(inner)}")
                    where = f"si + p * st{a}" + (" + first" if a == 0 else "")
                    _pool_fold(e, pool, dtype, "acc", "v", "at", where, valid="si >= 0")
                    e(f"{dirow(inner)} = at")
                else:
                    _pool_fold(e, pool, dtype, "acc", "v")
                e(f"{drow(inner)} = acc")


def _pool_counts(e: Emitter, pool: _Pool) -> None:
    """inv<a>[i]: 1 / the count of taps of output position i of axis a that count (inside the input,
    or with count_include_pad inside the input and its pads); a window's count is their product."""
    for a in range(pool.nd):
        e(f"inv{a} = np.zeros(o{a}, np.float64)")
        with e.block(f"for i in range(o{a}):"), e.block(f"for j in range({pool.kernel[a]}):"):
            e(f"p = i * {pool.strides[a]} - pb{a} + j * {pool.dilations[a]}")
            inside = f"p < pe{a}" if pool.include_pad else f"p >= 0 and p < n{a}"
            with e.block(f"if {inside}:"):
                e(f"inv{a}[i] += 1.0")
        with e.block(f"for i in range(o{a}):"):
            e(f"inv{a}[i] = 1.0 / inv{a}[i]")  # (a window of padding alone: inf, and 0 * inf is NaN)


def _pool_divide(e: Emitter, pool: _Pool, dtype: np.dtype) -> None:
    nd, last = pool.nd, pool.nd - 1
    i = [f"i{a}" for a in range(nd)]
    with _loops(e, i[:last], [f"o{a}" for a in range(last)]):
        e(f"f = {' * '.join(f'inv{a}[i{a}]' for a in range(last)) or '1.0'}")
        with e.block(f"for i{last} in range(o{last}):"):
            at = f"yp[{', '.join(i)}]"
            e(f"{at} = {dtype_name(dtype)}({at} * (f * inv{last}[i{last}]))")


# ---------------------------------------------------------------------------------------------
# GlobalAveragePool, GlobalMaxPool: the reductions of rnnloop/codegen/reductions.py


@emits("GlobalAveragePool", "GlobalMaxPool")
def emit_global_pool(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """ReduceMean or ReduceMax over the axes after N and C, kept (the interpreter's definition)."""
    from .reductions import emit_reduce
    x = _data(ins[0], op, _FLOATS if op.op_type == "GlobalAveragePool" else _NUMERIC)
    reduce = "ReduceMean" if op.op_type == "GlobalAveragePool" else "ReduceMax"
    as_reduce = dataclasses.replace(op, op_type=reduce, inputs=op.inputs[:1],
                                    attrs={"axes": list(range(2, x.rank)), "keepdims": 1, "noop_with_empty_axes": 1})
    return emit_reduce(g, as_reduce, ins[:1])


# ---------------------------------------------------------------------------------------------
# BatchNormalization, InstanceNormalization, GroupNormalization


@emits("BatchNormalization")
def emit_batchnormalization(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """y = x * a[c] + b[c], a = scale / sqrt(var + epsilon), b = B - mean * a (inference)."""
    if op.attrs.get("training_mode", 0) or len([o for o in op.outputs if o]) > 1:
        raise NoRule("training mode")
    x = _data(ins[0], op)
    channels = x.dim(1)
    params = [_vector(g, op, v, what, channels, "channel (axis 1 of the input)")
              for v, what in zip(ins[1:5], ("scale", "B", "input_mean", "input_var"))]
    dtype, rank = g.out_type(op.outputs[0], x.rank, x.dtype)
    y = g.buffer(op.outputs[0], dtype, _out_dims(x))
    eps = literal(op.attrs.get("epsilon", 1e-5), dtype)
    function = g.module.helper(_batchnorm_function(dtype, x.rank, eps))
    g.body(f"{function}({y}, {x.expr}, {', '.join(v.expr for v in params)})")
    return [Var(y, dtype, rank, "buffer")]


def _batchnorm_function(dtype: np.dtype, rank: int, eps: str) -> str:
    t = dtype_name(dtype)
    e = _function(["y", "x", "scale", "bias", "mean", "var"], f"BatchNormalization of rank {rank}, epsilon {eps}")
    e(f"a = np.empty(x.shape[1], {t})")
    e(f"b = np.empty(x.shape[1], {t})")
    with e.block("for c in range(x.shape[1]):"):
        e(f"a[c] = {t}(scale[c]) / np.sqrt({t}(var[c]) + {eps})")
        e(f"b[c] = {t}(bias[c]) - {t}(mean[c]) * a[c]")
    spatial = [f"i{a}" for a in range(2, rank)]
    with e.block("for n in range(x.shape[0]):"), e.block("for c in range(x.shape[1]):"):
        e("ac = a[c]")
        e("bc = b[c]")
        with _loops(e, spatial, [f"x.shape[{a}]" for a in range(2, rank)]):
            at = ", ".join(["n", "c"] + spatial)
            e(f"y[{at}] = x[{at}] * ac + bc")
    return e.text()


def _stash(op: Op) -> np.dtype:
    from ..interp.nn_ops import _stash
    try:
        dtype = _stash(op.attrs.get("stash_type", 1))
    except Exception:  # noqa: BLE001 - the interpreter reports it
        raise NoRule("stash_type is not a float type") from None
    if dtype not in _FLOATS:
        raise NoRule(f"stash_type {dtype} is not compiled (float32, float64 are)")
    return dtype


# Terms of a row sum (_sum_function): {v} is an element, {m} the mean, {s} the stash type.
_SUM_TERMS = {"sum": "np.float64({v})", "square": "np.float64({v} * {v})", "abs": "np.float64(abs({v}))",
              "dev": "np.float64(({s}({v}) - {m}) * ({s}({v}) - {m}))"}


def _row_sum(g: LoopGen, kind: str, stash: np.dtype) -> str:
    """The name of a helper summing a term of a 1-D array's elements in float64: eight running sums,
    so that the loop vectorises (a sequential float sum cannot be reordered, and runs at the latency
    of one addition per element)."""
    term = _SUM_TERMS[kind]
    e = _function(["a", "m"], f"the sum of {kind} terms of a 1-D array, in float64, eight at a time")
    e("n = a.shape[0]")
    e("end = n - n % 8")
    for k in range(8):
        e(f"s{k} = 0.0")
    with e.block("for i in range(0, end, 8):"):
        for k in range(8):
            e(f"s{k} += {term.format(v=f'a[i + {k}]' if k else 'a[i]', m='m', s=dtype_name(stash))}")
    e("s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))")
    with e.block("for i in range(end, n):"):
        e(f"s += {term.format(v='a[i]', m='m', s=dtype_name(stash))}")
    e("return s")
    return g.module.helper(e.text())


def _row_moments(g: LoopGen) -> str:
    """The name of a helper giving the sum and the sum of squares of a 1-D array's elements, in
    float64, in one pass (eight running sums of each)."""
    e = _function(["a"], "the sum and the sum of squares of a 1-D array, in float64, eight at a time")
    e("n = a.shape[0]")
    e("end = n - n % 8")
    for k in range(8):
        e(f"s{k} = 0.0")
        e(f"q{k} = 0.0")
    with e.block("for i in range(0, end, 8):"):
        for k in range(8):
            e(f"v{k} = np.float64(a[i + {k}])" if k else "v0 = np.float64(a[i])")
            e(f"s{k} += v{k}")
            e(f"q{k} += v{k} * v{k}")
    e("s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))")
    e("q = ((q0 + q1) + (q2 + q3)) + ((q4 + q5) + (q6 + q7))")
    with e.block("for i in range(end, n):"):
        e("v = np.float64(a[i])")
        e("s += v")
        e("q += v * v")
    e("return s, q")
    return g.module.helper(e.text())


def _standardise(e: Emitter, run: str, count: str, stash: np.dtype, eps: str, sums: list[str]) -> None:
    """mean and inv = 1 / sqrt(var + eps) of the 1-D array `run`, in the stash type. A float32 stash
    takes both from one pass of float64 sums (var = E[x^2] - mean^2: in float64 as exact as the
    spec's two passes in float32); a float64 one makes the spec's two passes."""
    s = dtype_name(stash)
    if len(sums) == 1:
        e(f"total, squares = {sums[0]}({run})")
        e(f"mean64 = total / {count}")
        e(f"mean = {s}(mean64)")
        e(f"inv = {s}(1) / np.sqrt({s}(max(squares / {count} - mean64 * mean64, 0.0)) + {eps})")
    else:
        total, deviations = sums
        e(f"mean = {s}({total}({run}, {s}(0)) / {count})")
        e(f"inv = {s}(1) / np.sqrt({s}({deviations}({run}, mean) / {count}) + {eps})")


def _standardising(g: LoopGen, stash: np.dtype) -> list[str]:
    """The sum helpers _standardise calls."""
    return [_row_moments(g)] if stash == np.float32 else [_row_sum(g, kind, stash) for kind in ("sum", "dev")]


@emits("InstanceNormalization", "GroupNormalization")
def emit_group_normalization(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Standardise each instance's groups of channels (InstanceNormalization: one channel a group)
    over their channels and spatial axes, then scale and shift per channel."""
    x = _data(ins[0], op)
    channels = x.dim(1)
    if op.op_type == "GroupNormalization":
        groups = op.attrs.get("num_groups")
        if not isinstance(groups, int) or groups < 1:
            raise NoRule("num_groups is not a positive integer")
        g.fail_if(f"{channels} % {groups} != 0", op, f"num_groups {groups} does not divide the {{a}} channels "
                  "of the input (axis 1)", a=channels)
        stash, names = _stash(op), ("scale", "bias")
    else:
        groups, stash, names = None, x.dtype, ("scale", "B")
    scale, bias = (_vector(g, op, v, what, channels, "channel (axis 1 of the input)")
                   for v, what in zip(ins[1:3], names))
    dtype, rank = g.out_type(op.outputs[0], x.rank, x.dtype)
    y = g.buffer(op.outputs[0], dtype, _out_dims(x))
    eps = literal(op.attrs.get("epsilon", 1e-5), stash)
    sums = _standardising(g, stash)
    function = g.module.helper(_group_function(op.op_type, dtype, stash, x.rank, eps, sums))
    count = "np.int64(1)" if groups is None else f"np.int64({groups})"
    g.body(f"{function}({y}, {x.expr}, {scale.expr}, {bias.expr}, {count})")
    return [Var(y, dtype, rank, "buffer")]


def _group_function(op_type: str, dtype: np.dtype, stash: np.dtype, rank: int, eps: str, sums: list[str]) -> str:
    """The function (y, x, scale, bias, groups), on x as [N, groups, channels per group, the rest]:
    each group a contiguous run to sum, each channel of it a row to write. InstanceNormalization's
    groups are its channels."""
    t, s = dtype_name(dtype), dtype_name(stash)
    e = _function(["y", "x", "scale", "bias", "groups"],
                  f"{op_type} of rank {rank}, epsilon {eps}, standardised in {stash.name}")
    instance = op_type == "InstanceNormalization"
    e("per = 1" if instance else "per = x.shape[1] // groups")
    e(f"size = {' * '.join(f'x.shape[{a}]' for a in range(2, rank)) or '1'}")
    e("count = per * size")
    e(f"x4 = np.ascontiguousarray(x).reshape((x.shape[0], {'x.shape[1]' if instance else 'groups'}, per, size))")
    e("y4 = y.reshape(x4.shape)")
    with e.block("for n in range(x4.shape[0]):"), e.block("for g in range(x4.shape[1]):"):
        e("run = x4[n, g].reshape(count)")
        _standardise(e, "run", "count", stash, eps, sums)
        with e.block("for c in range(per):"):
            e("sc = scale[g * per + c]")
            e("bc = bias[g * per + c]")
            e("xr = x4[n, g, c]")
            e("yr = y4[n, g, c]")
            with e.block("for i in range(size):"):
                value = f"{s}(xr[i])" if stash != dtype else "xr[i]"
                normalized = f"({value} - mean) * inv"
                e(f"yr[i] = {t}({normalized}) * sc + bc" if stash != dtype else f"yr[i] = {normalized} * sc + bc")
    return e.text()


# ---------------------------------------------------------------------------------------------
# LayerNormalization


@emits("LayerNormalization")
def emit_layernormalization(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Standardise over the axes from `axis` on (in the stash type), then Scale and B, whose dims
    must be the input's last ones (a Scale or B that broadcasts a 1 runs in the interpreter)."""
    x = _data(ins[0], op, min_rank=1)
    axis = int(op.attrs.get("axis", -1))
    if not -x.rank <= axis < x.rank:
        raise NoRule(f"axis {axis} is out of range for rank {x.rank}")
    axis %= x.rank
    stash = _stash(op)
    params = []
    for v, what in zip(ins[1:3], ("Scale", "B")):
        if v is None:
            continue
        if v.kind == "scalar" or v.dtype != x.dtype or v.rank > x.rank:
            raise NoRule(f"{what} is not an array of the input's dtype")
        for d in range(v.rank):  # its dims are the input's last ones, or 1 before the normalised axes
            mine, theirs = v.dim(v.rank - 1 - d), x.dim(x.rank - 1 - d)
            fits = f"{mine} != {theirs}" if x.rank - 1 - d >= axis else f"{mine} != 1"
            g.fail_if(fits, op, f"{what} broadcasts along an axis (shape {{a}} at axis {v.rank - 1 - d})",
                      a=mine, fallback=True)
        params.append(v)
    dtype, rank = g.out_type(op.outputs[0], x.rank, x.dtype)
    y = g.buffer(op.outputs[0], dtype, _out_dims(x))
    results = [Var(y, dtype, rank, "buffer")]  # one per output of the op ("" names are skipped)
    stats_dims = [x.dim(a) for a in range(axis)] + ["1"] * (x.rank - axis)
    stats = []
    for k in (1, 2):
        if len(op.outputs) > k and op.outputs[k]:
            st, _ = g.out_type(op.outputs[k], x.rank, stash)
            stats.append(g.buffer(op.outputs[k], st, stats_dims))
            results.append(Var(stats[-1], st, x.rank, "buffer"))
        else:
            stats.append(None)
            results.append(results[0])
    eps = literal(op.attrs.get("epsilon", 1e-5), stash)
    sums = _standardising(g, stash)
    function = g.module.helper(_layernorm_function(dtype, stash, x.rank, axis, eps, len(params) == 2,
                                                   [s is not None for s in stats], sums))
    args = [y, x.expr] + [p.expr for p in params] + [s for s in stats if s is not None]
    g.body(f"{function}({', '.join(args)})")
    return results[:len(op.outputs)]


def _layernorm_function(dtype: np.dtype, stash: np.dtype, rank: int, axis: int, eps: str, with_bias: bool,
                        stats: list[bool], sums: list[str]) -> str:
    """The function (y, x, scale, [bias,] [mean,] [inv]), on x as rows of the normalised axes (a
    contiguous run each). Scale (and B) hold the row's last elements: the row is written a scale's
    length at a time."""
    t, s = dtype_name(dtype), dtype_name(stash)
    params = ["y", "x", "scale"] + (["bias"] if with_bias else []) + \
        [name for name, on in zip(("mean_out", "inv_out"), stats) if on]
    e = _function(params, f"LayerNormalization of rank {rank} from axis {axis}, epsilon {eps}, "
                          f"standardised in {stash.name}")
    e(f"count = {' * '.join(f'x.shape[{a}]' for a in range(axis, rank))}")
    e(f"rows = {' * '.join(f'x.shape[{a}]' for a in range(axis)) or '1'}")
    e("x2 = np.ascontiguousarray(x).reshape((rows, count))")
    e("y2 = y.reshape((rows, count))")
    e("sf = np.ascontiguousarray(scale).reshape(scale.size)")
    if with_bias:
        e("bf = np.ascontiguousarray(bias).reshape(bias.size)")
    for name, on in zip(("mean_out", "inv_out"), stats):
        if on:
            e(f"{name}_flat = {name}.reshape(rows)")
    e("step = max(sf.size, 1)")
    with e.block("for r in range(rows):"):
        e("xr = x2[r]")
        e("yr = y2[r]")
        _standardise(e, "xr", "count", stash, eps, sums)
        if stats[0]:
            e("mean_out_flat[r] = mean")
        if stats[1]:
            e("inv_out_flat[r] = inv")
        with e.block("for base in range(0, count, step):"):
            e("xb = xr[base:]")
            e("yb = yr[base:]")
            value = f"{s}(xb[j])" if stash != dtype else "xb[j]"
            normalized = f"({value} - mean) * inv"
            term = f"{t}({normalized})" if stash != dtype else normalized
            if with_bias:
                with e.block("if bf.size == sf.size:"), e.block("for j in range(sf.size):"):
                    e(f"yb[j] = {term} * sf[j] + bf[j]")
                with e.block("else:"), e.block("for j in range(sf.size):"):  # (B of another length)
                    e(f"yb[j] = {term} * sf[j] + bf[(base + j) % bf.size]")
            else:
                with e.block("for j in range(sf.size):"):
                    e(f"yb[j] = {term} * sf[j]")
    return e.text()


# ---------------------------------------------------------------------------------------------
# LpNormalization, MeanVarianceNormalization


@emits("LpNormalization")
def emit_lpnormalization(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """y = x / ||x||_p along axis (0 where the norm is 0)."""
    x = _data(ins[0], op, min_rank=1)
    axis, p = int(op.attrs.get("axis", -1)), op.attrs.get("p", 2)
    if not -x.rank <= axis < x.rank or p not in (1, 2):
        raise NoRule("axis out of range or p not 1 or 2")
    return _moments(g, op, x, {axis % x.rank}, "LpNormalization", int(p))


@emits("MeanVarianceNormalization")
def emit_meanvariancenormalization(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Y = (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9) over axes."""
    x = _data(ins[0], op, min_rank=1)
    axes = [int(a) for a in op.attrs.get("axes", (0, 2, 3))]
    if any(not -x.rank <= a < x.rank for a in axes) or len({a % x.rank for a in axes}) != len(axes):
        raise NoRule("axes out of range or repeated")
    return _moments(g, op, x, {a % x.rank for a in axes}, "MeanVarianceNormalization", 0)


def _moments(g: LoopGen, op: Op, x: Var, reduced: set[int], kind: str, p: int) -> list[Var]:
    """Ops that fold x over `reduced` axes into per-lane sums (scratch buffers with those axes
    taken out), then write x scaled (and shifted) by them."""
    dtype, rank = g.out_type(op.outputs[0], x.rank, x.dtype)
    y = g.buffer(op.outputs[0], dtype, _out_dims(x))
    kept = [x.dim(a) for a in range(x.rank) if a not in reduced]
    lanes = " * ".join(kept) or "1"
    mvn = kind == "MeanVarianceNormalization"
    sums = [g.buffer(f"{op.outputs[0]}_sum{k}", np.dtype(np.float64), [lanes]) for k in range(2 if mvn else 1)]
    terms = ("sum", "square") if mvn else ("abs" if p == 1 else "square",)
    helpers = [_row_sum(g, term, dtype) for term in terms] if x.rank - 1 in reduced else []
    function = g.module.helper(_moments_function(kind, dtype, x.rank, frozenset(reduced), p, helpers))
    g.body(f"{function}({y}, {x.expr}, {', '.join(sums)})")
    return [Var(y, dtype, rank, "buffer")]


def _moments_function(kind: str, dtype: np.dtype, rank: int, reduced: frozenset[int], p: int,
                      helpers: list[str]) -> str:
    """The function (y, x, s1, [s2]): a row of the last axis at a time, summed (`helpers`) into its
    lane when the last axis is reduced, else added to a row of lanes; then written the same way."""
    t = dtype_name(dtype)
    mvn = kind == "MeanVarianceNormalization"
    e = _function(["y", "x", "s1", "s2"] if mvn else ["y", "x", "s1"],
                  f"{kind} of rank {rank} over axes {sorted(reduced)}" + ("" if mvn else f", p={p}"))
    last = rank - 1
    kept = [a for a in range(rank) if a not in reduced]
    idx = [f"i{a}" for a in range(last)]
    sizes = [f"x.shape[{a}]" for a in range(rank)]
    for k, a in enumerate(kept):  # the lane of an element: its kept indices, row-major
        e(f"ks{a} = {' * '.join(sizes[b] for b in kept[k + 1:]) or '1'}")
    lane = " + ".join(f"i{a} * ks{a}" for a in kept if a != last) or "0"
    e("count = " + (" * ".join(sizes[a] for a in sorted(reduced)) or "1"))
    e("s1[:] = 0.0")
    if mvn:
        e("s2[:] = 0.0")
    rows = ", ".join(idx)
    with _loops(e, idx, sizes[:last]):
        e(f"k = {lane}")
        e(f"xr = x[{rows}]" if idx else "xr = x")
        if last in reduced:
            for target, helper in zip(("s1", "s2"), helpers):
                e(f"{target}[k] += {helper}(xr, {t}(0))")
        else:  # a run of lanes
            e("l1 = s1[k:]")
            if mvn:
                e("l2 = s2[k:]")
            with e.block(f"for i in range({sizes[last]}):"):
                e("v = xr[i]")
                if mvn:
                    e("l1[i] += v")
                    e("l2[i] += v * v")
                else:
                    e("l1[i] += abs(v)" if p == 1 else "l1[i] += v * v")
    # s1 becomes the shift and s2 the factor of each lane (LpNormalization: s1 the factor)
    with e.block("for k in range(s1.size):"):
        if mvn:
            e(f"mean = {t}(s1[k] / count)")
            e(f"std = np.sqrt({t}(s2[k] / count) - mean * mean)")
            e(f"s2[k] = {t}(1) / (std + {literal(MVN_EPSILON, dtype)})")
            e("s1[k] = mean")
        else:
            e(f"norm = {t}(s1[k])" if p == 1 else f"norm = {t}(np.sqrt(s1[k]))")
            e(f"s1[k] = 0.0 if norm == 0 else {t}(1) / norm")
    with _loops(e, idx, sizes[:last]):
        e(f"k = {lane}")
        e(f"xr = x[{rows}]" if idx else "xr = x")
        e(f"yr = y[{rows}]" if idx else "yr = y")
        if last in reduced:
            e(f"shift = {t}(s1[k])" if mvn else f"factor = {t}(s1[k])")
            if mvn:
                e(f"factor = {t}(s2[k])")
            with e.block(f"for i in range({sizes[last]}):"):
                e(f"yr[i] = {t}((xr[i] - shift) * factor)" if mvn else "yr[i] = xr[i] * factor")
        else:
            e("l1 = s1[k:]")
            if mvn:
                e("l2 = s2[k:]")
            with e.block(f"for i in range({sizes[last]}):"):
                e(f"yr[i] = {t}((xr[i] - {t}(l1[i])) * {t}(l2[i]))" if mvn else f"yr[i] = xr[i] * {t}(l1[i])")
    return e.text()
