"""Code generation rules for pooling and normalisation (MaxPool, AveragePool, LpPool, the global
pools, BatchNormalization, Instance-, Layer-, Group-, Lp- and MeanVarianceNormalization).

Each op becomes a call of a small compiled function (ModuleGen.helper, shared by like ops) that
writes buffers the kernel allocated. The semantics are the interpreter's (rnnloop.interp.nn_ops):

- A pool's output sizes and begin pads are computed in the kernel from the input's dims (any
  batch and image size, one kernel); kernel, strides, dilations and pads are baked in. For each
  output row, the taps of the last axis run outermost and the output positions innermost, so the
  inner loop writes one contiguous row and reads the input at a fixed stride, with no test per
  element: the range of positions a tap reaches inside the input is computed once per call.
  Taps are still visited in row-major kernel order for each output, which decides MaxPool's ties.
- Sums (means, variances, norms) accumulate in float64 and are rounded to the computation type
  once; a mean or norm is applied by multiplying with its reciprocal.
"""

from __future__ import annotations

import dataclasses
from contextlib import ExitStack
from typing import Iterable

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
    """The function (y, [ind,] x, o.., pb.., [pe..]) of one pool; FUNCTION stands for its name."""
    nd, last = pool.nd, pool.nd - 1
    o, pb, pe = ([f"{p}{a}" for a in range(nd)] for p in ("o", "pb", "pe"))
    params = ["y"] + (["ind"] if pool.indices else []) + ["x"] + o + pb + (pe if pool.include_pad else [])
    e = _function(params, f"{pool.kind} of {nd} axes: kernel {list(pool.kernel)}, strides {list(pool.strides)}, "
                          f"dilations {list(pool.dilations)}" + (", count_include_pad" if pool.include_pad else "")
                  + (f", p={pool.p:g}" if pool.kind == "LpPool" else "")
                  + (", with indices" + (" (column major)" if pool.column_major else "") if pool.indices else ""))
    for a in range(nd):
        e(f"n{a} = x.shape[{a + 2}]")
    k, s, d = pool.kernel, pool.strides, pool.dilations
    # The output positions tap j of the last axis reaches inside the input: [lo[j], hi[j]).
    e(f"lo = np.empty({k[last]}, np.int64)")
    e(f"hi = np.empty({k[last]}, np.int64)")
    with e.block(f"for j in range({k[last]}):"):
        e(f"q = j * {d[last]} - pb{last}")
        e(f"lo[j] = min(max(-(q // {s[last]}), 0), o{last})")
        e(f"hi[j] = max(min(-((q - n{last}) // {s[last]}), o{last}), lo[j])")
    if pool.kind == "AveragePool":
        _pool_counts(e, pool)
    if pool.indices:
        sizes = [f"n{a}" for a in range(nd)]
        for a in range(nd):  # the step of each spatial axis in a flat index of one N, C plane
            factors = sizes[:a] if pool.column_major else sizes[a + 1:]
            e(f"st{a} = {' * '.join(factors) or '1'}")
        e(f"plane = {' * '.join(sizes)}")
    lowest = literal(-np.inf if dtype.kind == "f" else np.iinfo(dtype).min, dtype)
    init = lowest if pool.kind == "MaxPool" else literal(0, dtype)
    i = [f"i{a}" for a in range(nd)]
    with e.block("for b in range(x.shape[0]):"), e.block("for c in range(x.shape[1]):"):
        e("xp = x[b, c]")
        e("yp = y[b, c]")
        if pool.indices:
            e("ip = ind[b, c]")
            e("first = (b * x.shape[1] + c) * plane")
        with _loops(e, i, o):
            e(f"yp[{', '.join(i)}] = {init}")
            if pool.indices:
                e(f"ip[{', '.join(i)}] = -1")
        with _loops(e, i[:last], o[:last]), ExitStack() as taps:
            for a in range(last):  # the taps of the outer axes: each one a row of the input, if inside it
                taps.enter_context(e.block(f"for j{a} in range({k[a]}):"))
                e(f"p{a} = i{a} * {s[a]} - pb{a} + j{a} * {d[a]}")
                with e.block(f"if p{a} < 0 or p{a} >= n{a}:"):
                    e("continue")
            with e.block(f"for j{last} in range({k[last]}):"):
                e(f"q = j{last} * {d[last]} - pb{last}")
                with e.block(f"for i{last} in range(lo[j{last}], hi[j{last}]):"):
                    e(f"p{last} = i{last} * {s[last]} + q")
                    e(f"v = xp[{', '.join(f'p{a}' for a in range(nd))}]")
                    _pool_update(e, pool, dtype, f"[{', '.join(i)}]")
        if pool.kind == "AveragePool":
            _pool_divide(e, pool, dtype)
        elif pool.kind == "LpPool" and pool.p != 1:
            with _loops(e, i, o):
                at = f"yp[{', '.join(i)}]"
                e(f"{at} = np.sqrt({at})" if pool.p == 2 else f"{at} = {at} ** {literal(1.0 / pool.p, dtype)}")
    return e.text()


def _pool_update(e: Emitter, pool: _Pool, dtype: np.dtype, at: str) -> None:
    """Fold the tap's value v into the output element yp[at] (and ip[at])."""
    y = f"yp{at}"
    if pool.kind == "AveragePool":
        e(f"{y} += v")
    elif pool.kind == "LpPool":
        term = "abs(v)" if pool.p == 1 else "v * v" if pool.p == 2 else f"abs(v) ** {literal(pool.p, dtype)}"
        e(f"{y} += {term}")
    elif not pool.indices:
        e(f"{y} = _m.maximum({y}, v)" if dtype.kind == "f" else f"{y} = max({y}, v)")
    else:  # the first maximum (or NaN) in tap order, and where it is
        nan = f" or (v != v and {y} == {y})" if dtype.kind == "f" else ""
        with e.block(f"if v > {y} or ip{at} < 0{nan}:"):
            e(f"{y} = v")
            e(f"ip{at} = first + {' + '.join(f'p{a} * st{a}' for a in range(pool.nd))}")


def _pool_counts(e: Emitter, pool: _Pool) -> None:
    """r<a>[i]: 1 / the count of taps of output position i of axis a that count (inside the input,
    or with count_include_pad inside the input and its pads); a window's count is their product."""
    for a in range(pool.nd):
        e(f"r{a} = np.zeros(o{a}, np.float64)")
        with e.block(f"for i in range(o{a}):"), e.block(f"for j in range({pool.kernel[a]}):"):
            e(f"p = i * {pool.strides[a]} - pb{a} + j * {pool.dilations[a]}")
            inside = f"p < pe{a}" if pool.include_pad else f"p >= 0 and p < n{a}"
            with e.block(f"if {inside}:"):
                e(f"r{a}[i] += 1.0")
        with e.block(f"for i in range(o{a}):"):
            e(f"r{a}[i] = 1.0 / r{a}[i]")  # (a window of padding alone: inf, and 0 * inf is NaN)


def _pool_divide(e: Emitter, pool: _Pool, dtype: np.dtype) -> None:
    nd, last = pool.nd, pool.nd - 1
    i = [f"i{a}" for a in range(nd)]
    with _loops(e, i[:last], [f"o{a}" for a in range(last)]):
        e(f"f = {' * '.join(f'r{a}[i{a}]' for a in range(last)) or '1.0'}")
        with e.block(f"for i{last} in range(o{last}):"):
            at = f"yp[{', '.join(i)}]"
            e(f"{at} = {dtype_name(dtype)}({at} * (f * r{last}[i{last}]))")


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
    function = g.module.helper(_group_function(op.op_type, dtype, stash, x.rank, eps))
    count = "np.int64(1)" if groups is None else f"np.int64({groups})"
    g.body(f"{function}({y}, {x.expr}, {scale.expr}, {bias.expr}, {count})")
    return [Var(y, dtype, rank, "buffer")]


def _group_function(op_type: str, dtype: np.dtype, stash: np.dtype, rank: int, eps: str) -> str:
    """The function (y, x, scale, bias, groups); InstanceNormalization's groups are its channels."""
    t, s = dtype_name(dtype), dtype_name(stash)
    e = _function(["y", "x", "scale", "bias", "groups"],
                  f"{op_type} of rank {rank}, epsilon {eps}, standardised in {stash.name}")
    spatial = [f"i{a}" for a in range(2, rank)]
    sizes = [f"x.shape[{a}]" for a in range(2, rank)]
    instance = op_type == "InstanceNormalization"
    e("per = 1" if instance else "per = x.shape[1] // groups")
    e(f"count = per * {' * '.join(sizes) or '1'}")
    with e.block("for n in range(x.shape[0]):"), e.block(f"for g in range({'x.shape[1]' if instance else 'groups'}):"):
        at = ", ".join(["n", "c"] + spatial)
        value = f"{s}(x[{at}])" if stash != dtype else f"x[{at}]"
        e("total = 0.0")
        with e.block("for c in range(g * per, g * per + per):"), _loops(e, spatial, sizes):
            e(f"total += {value}")
        e(f"mean = {s}(total / count)")
        e("total = 0.0")
        with e.block("for c in range(g * per, g * per + per):"), _loops(e, spatial, sizes):
            e(f"dev = {value} - mean")
            e("total += dev * dev")
        e(f"inv = {s}(1) / np.sqrt({s}(total / count) + {eps})")
        with e.block("for c in range(g * per, g * per + per):"):
            e("sc = scale[c]")
            e("bc = bias[c]")
            with _loops(e, spatial, sizes):
                normalized = f"({value} - mean) * inv"
                e(f"y[{at}] = {t}({normalized}) * sc + bc" if stash != dtype else f"y[{at}] = {normalized} * sc + bc")
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
    function = g.module.helper(_layernorm_function(dtype, stash, x.rank, axis, eps, len(params) == 2,
                                                   [s is not None for s in stats]))
    args = [y, x.expr] + [p.expr for p in params] + [s for s in stats if s is not None]
    g.body(f"{function}({', '.join(args)})")
    return results[:len(op.outputs)]


def _layernorm_function(dtype: np.dtype, stash: np.dtype, rank: int, axis: int, eps: str, with_bias: bool,
                        stats: list[bool]) -> str:
    """The function (y, x, scale, [bias,] [mean,] [inv]): one row of the outer axes at a time, the
    normalised axes walked in index order with j, their flat index (which scale and bias take mod
    their size)."""
    t, s = dtype_name(dtype), dtype_name(stash)
    params = ["y", "x", "scale"] + (["bias"] if with_bias else []) + \
        [name for name, on in zip(("mean_out", "inv_out"), stats) if on]
    e = _function(params, f"LayerNormalization of rank {rank} from axis {axis}, epsilon {eps}, "
                          f"standardised in {stash.name}")
    outer, inner = [f"i{a}" for a in range(axis)], [f"i{a}" for a in range(axis, rank)]
    inner_sizes = [f"x.shape[{a}]" for a in range(axis, rank)]
    e(f"count = {' * '.join(inner_sizes)}")
    e("sf = np.ascontiguousarray(scale).reshape(scale.size)")
    if with_bias:
        e("bf = np.ascontiguousarray(bias).reshape(bias.size)")
    at = ", ".join(outer + inner)
    value = f"{s}(x[{at}])" if stash != dtype else f"x[{at}]"
    with _loops(e, outer, [f"x.shape[{a}]" for a in range(axis)]):
        e("total = 0.0")
        with _loops(e, inner, inner_sizes):
            e(f"total += {value}")
        e(f"mean = {s}(total / count)")
        e("total = 0.0")
        with _loops(e, inner, inner_sizes):
            e(f"dev = {value} - mean")
            e("total += dev * dev")
        e(f"inv = {s}(1) / np.sqrt({s}(total / count) + {eps})")
        stat_at = ", ".join(outer + ["0"] * (rank - axis))
        if stats[0]:
            e(f"mean_out[{stat_at}] = mean")
        if stats[1]:
            e(f"inv_out[{stat_at}] = inv")
        e("j = 0")
        with _loops(e, inner, inner_sizes):
            normalized = f"({value} - mean) * inv"
            term = f"{t}({normalized})" if stash != dtype else normalized
            shift = " + bf[j % bf.size]" if with_bias else ""
            e(f"y[{at}] = {term} * sf[j % sf.size]{shift}")
            e("j += 1")
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
    taken out), then write x scaled (and shifted) by them: in index order, both passes."""
    dtype, rank = g.out_type(op.outputs[0], x.rank, x.dtype)
    y = g.buffer(op.outputs[0], dtype, _out_dims(x))
    kept = [x.dim(a) for a in range(x.rank) if a not in reduced]
    lanes = " * ".join(kept) or "1"
    sums = [g.buffer(f"{op.outputs[0]}_sum{k}", np.dtype(np.float64), [lanes])
            for k in range(2 if kind == "MeanVarianceNormalization" else 1)]
    function = g.module.helper(_moments_function(kind, dtype, x.rank, frozenset(reduced), p))
    g.body(f"{function}({y}, {x.expr}, {', '.join(sums)})")
    return [Var(y, dtype, rank, "buffer")]


def _moments_function(kind: str, dtype: np.dtype, rank: int, reduced: frozenset[int], p: int) -> str:
    t = dtype_name(dtype)
    mvn = kind == "MeanVarianceNormalization"
    e = _function(["y", "x", "s1", "s2"] if mvn else ["y", "x", "s1"],
                  f"{kind} of rank {rank} over axes {sorted(reduced)}" + ("" if mvn else f", p={p}"))
    kept = [a for a in range(rank) if a not in reduced]
    idx = [f"i{a}" for a in range(rank)]
    sizes = [f"x.shape[{a}]" for a in range(rank)]
    for k, a in enumerate(kept):  # the lane of an element: its kept indices, row-major
        e(f"ks{a} = {' * '.join(sizes[b] for b in kept[k + 1:]) or '1'}")
    lane = " + ".join(f"i{a} * ks{a}" for a in kept) or "0"
    e("count = " + (" * ".join(sizes[a] for a in sorted(reduced)) or "1"))
    e("s1[:] = 0.0")
    if mvn:
        e("s2[:] = 0.0")
    at = ", ".join(idx)
    with _loops(e, idx, sizes):
        e(f"k = {lane}")
        e(f"v = x[{at}]")
        if mvn:
            e("s1[k] += v")
            e("s2[k] += v * v")
        else:
            e("s1[k] += abs(v)" if p == 1 else "s1[k] += v * v")
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
    with _loops(e, idx, sizes):
        e(f"k = {lane}")
        e(f"y[{at}] = {t}((x[{at}] - {t}(s1[k])) * {t}(s2[k]))" if mvn else f"y[{at}] = x[{at}] * {t}(s1[k])")
    return e.text()
