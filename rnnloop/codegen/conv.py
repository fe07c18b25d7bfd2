"""Code generation rules for Conv and ConvTranspose: each becomes a call of a compiled convolution
(rnnloop/codegen/conv_rt.py, imported by the kernels that convolve as _cv).

A rule checks what it can when the kernel is generated (attributes, a constant W's shape), emits
the checks that need run-time sizes (channels, group, kernel_shape, bias, a kernel wider than its
padded input: RunErrors naming the node) and the output's sizes as expressions of the input's (the
pads of auto_pad and ConvTranspose's output_shape included, by interp/conv_ops.py's rules), then the
call. Attributes are baked into the call; sizes are run-time values, so one kernel serves every
input size, and one compiled entry per path and dtype every kernel (the path chosen here from a
constant W's shape). A constant W of a convolution that takes Winograd's path (conv_rt.py) has its
kernels transformed here, once, at load.
"""

from __future__ import annotations

import numpy as np

from ..interp.conv_ops import AUTO_PADS
from ..ir import Op
from .activation import BOUNDS
from .emitter import NoRule, Var, shape_tuple
from . import simd
from .conv_rt import PACKED_MIN_CHANNELS, SMALL_K
from .kernel import STATUS_POOL, STATUS_THREADS, LoopGen, emits

WINOGRAD_MIN_CHANNELS = 16  # input and output channels from which a 3x3 or 3-tap convolution takes Winograd's path


def winograd_kernels(w: np.ndarray) -> np.ndarray:
    """The kernels of w [M, C, 3, 3] in Winograd's domain, [16, M, C] (index 4 i + j of G g G^T), or
    of w [M, C, 3], [4, M, C] (G g); computed in float64 and rounded once."""
    G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    if w.ndim == 3:
        return np.ascontiguousarray(np.einsum("ia,mca->imc", G, w.astype(np.float64)).astype(w.dtype))
    u = np.einsum("ia,mcab,jb->ijmc", G, w.astype(np.float64), G)
    return np.ascontiguousarray(u.reshape(16, w.shape[0], w.shape[1]).astype(w.dtype))


def winograd_panels(w: np.ndarray) -> np.ndarray:
    """winograd_kernels(w) [F, M, C] as the panels of F products by [C, M] (simd.pack_weights of each transposed), one
    after the other, [F * ceil(M / P), C, P]."""
    panels = [simd.pack_weights(np.ascontiguousarray(k.T)) for k in winograd_kernels(w)]
    out = simd.aligned_empty((len(panels) * panels[0].shape[0],) + panels[0].shape[1:], w.dtype)
    out[...] = np.concatenate(panels)
    return out


def winograd_weights(w: np.ndarray) -> np.ndarray:
    """What the Winograd entry takes for a constant W: for a 3x3 W of PACKED_MIN_CHANNELS input
    channels or more, its kernels' panels, else its kernels (conv_rt._kernels_fit checks which)."""
    return winograd_panels(w) if w.ndim == 4 and w.shape[1] >= PACKED_MIN_CHANNELS else winograd_kernels(w)


def product_panels(w: np.ndarray, group: int) -> np.ndarray | None:
    """The panels of W^T [C * kernel, M] (simd.pack_weights) that conv_rt's product path multiplies a
    few columns by (conv_rt._few_columns), for a W of one group whose product BLAS would make
    (C * kernel above SMALL_K) and whose kernel is more than 1x1 (a 1x1 reads its input as it is)."""
    inner = int(np.prod(w.shape[1:]))
    if group != 1 or inner <= SMALL_K or all(k == 1 for k in w.shape[2:]):
        return None
    return simd.pack_weights(np.ascontiguousarray(w.reshape(w.shape[0], inner).T))


def winograd_fits(w_shape, strides, dilations, group: int) -> bool:
    """Whether a Conv takes the Winograd path: 1-d with 3 taps or 2-d 3x3, strides and dilations 1,
    one group, and enough channels for its products to pay (measured: see conv_rt.py's docstring)."""
    spatial = len(w_shape) - 2
    return (spatial in (1, 2) and tuple(w_shape[2:]) == (3,) * spatial and list(strides) == [1] * spatial
            and list(dilations) == [1] * spatial and group == 1 and min(w_shape[:2]) >= WINOGRAD_MIN_CHANNELS)


# ---------------------------------------------------------------------------------------------
# The rules


def _floats(op: Op, *values: Var | None) -> np.dtype:
    """The dtype of a convolution whose inputs are all arrays of one compiled float dtype."""
    x = values[0]
    for v in values:
        if v is not None and (v.kind == "scalar" or v.dtype != x.dtype):
            raise NoRule(f"{op.op_type} inputs of mixed dtypes or a literal")
    if x.dtype.name not in ("float32", "float64"):
        raise NoRule(f"{op.op_type} of {x.dtype} is not compiled (compiled: float32, float64)")
    if x.rank not in (3, 4, 5) or values[1].rank != x.rank:
        raise NoRule(f"{op.op_type} of rank {x.rank} by rank {values[1].rank} is not compiled "
                     "(compiled: 1 to 3 spatial axes, W of X's rank)")
    if len(values) > 2 and values[2] is not None and values[2].rank != 1:
        raise NoRule("a bias of rank other than 1")
    return x.dtype


def _attr_ints(op: Op, name: str, count: int, default: int, minimum: int) -> list[int]:
    """An attribute of `count` integers of at least `minimum` (else the interpreter reports it)."""
    value = op.attrs.get(name)
    values = [default] * count if value is None else [int(v) for v in value]
    if len(values) != count or any(v < minimum for v in values):
        raise NoRule(f"{name} {values} is not {count} values of at least {minimum}")
    return values


def _common(g: LoopGen, op: Op, x: Var, w: Var) -> tuple[str, int, int]:
    """auto_pad, group and the spatial rank, checked when generating; and the run-time check of
    kernel_shape against W."""
    auto_pad = op.attrs.get("auto_pad", "NOTSET")
    if auto_pad not in AUTO_PADS:
        raise NoRule(f"auto_pad '{auto_pad}'")
    group = int(op.attrs.get("group", 1))
    if group < 1:
        raise NoRule(f"group {group}")
    rank = x.rank - 2
    kernel = op.attrs.get("kernel_shape")
    if kernel is not None:
        kernel = _attr_ints(op, "kernel_shape", rank, 1, 0)
        dims = [w.dim(2 + a) for a in range(rank)]
        g.fail_if(" or ".join(f"{d} != {k}" for d, k in zip(dims, kernel)), op,
                  f"kernel_shape {kernel} does not match W's spatial shape {{after}}",
                  shapes=(shape_tuple([str(k) for k in kernel]), shape_tuple(dims), rank))
    return auto_pad, group, rank


def _int64s(values: list[str]) -> str:
    """A tuple of int64 values (np.int64 of each: a literal would compile a specialisation per value)."""
    return shape_tuple([f"np.int64({v})" for v in values])


def _geometry(op: Op, values: list[str]) -> str:
    """The geometry an entry takes (conv_rt._arguments): `values` (strides, dilations and pads before,
    three each, and the group), the bounds' bits, then the threads the kernel may use and the pool's
    block, with which the Winograd path shares its work with a worker (conv_rt._winograd_shared)."""
    return _int64s(values + _bounds_bits(op) + [f"status[{STATUS_THREADS}]", f"status[{STATUS_POOL}]"])


def _bounds_bits(op: Op) -> list[str]:
    """The bounds (lo, hi) an entry holds the outputs to (those of an activation folded into the
    Conv: activation.py), as the int64 bits of their float64 values (conv_rt._arguments)."""
    lo, hi = op.attrs.get(BOUNDS, (-np.inf, np.inf))
    return [str(int(np.float64(v).view(np.int64))) for v in (lo, hi)]


def _bias(g: LoopGen, op: Op, b: Var | None, channels: str, dtype: np.dtype) -> str:
    if b is None:
        return g.pass_constant(np.empty(0, dtype), "k_none")  # (a global of the module: no allocation)
    g.fail_if(f"{b.dim(0)} != {channels}", op, "B has {a} values; it needs one per output channel ({b})",
              a=b.dim(0), b=channels)
    return g.contiguous(b)


def _call(g: LoopGen, op: Op, entry: str, args: list[str]) -> None:
    """The call of an entry; a status other than 0 (sizes that do not agree: a bug of ours) runs
    the op in the interpreter instead, with a warning."""
    g.fail_if(f"_cv.{entry}({', '.join(args)}) != 0", op,
              "rnnloop internal error: the convolution's sizes do not agree; please report it", fallback=True)


@emits("Conv")
def emit_conv(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Output sizes from the input's (and the pads auto_pad asks for), checked; then the call of the
    path W's shape chooses (conv_rt.py), with the bounds of an activation folded into it."""
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    dtype = _floats(op, x, w, b)
    auto_pad, group, rank = _common(g, op, x, w)
    strides = _attr_ints(op, "strides", rank, 1, 1)
    dilations = _attr_ints(op, "dilations", rank, 1, 1)
    pads = _attr_ints(op, "pads", 2 * rank, 0, 0) if auto_pad == "NOTSET" else [0] * (2 * rank)
    dtype, _ = g.out_type(op.outputs[0], x.rank, dtype)
    emit = g.body
    g.fail_if(f"{x.dim(1)} != {w.dim(1)} * {group}", op,
              f"X has {{a}} channels but W expects {{b}} (its axis 1 x group {group}); W is [M, C / group, kernel...]",
              a=x.dim(1), b=f"{w.dim(1)} * {group}")
    if group > 1:
        g.fail_if(f"{w.dim(0)} % {group} != 0", op, f"W has {{a}} output channels, which group {group} does not "
                  "divide", a=w.dim(0))
    begins, outs = [], []
    for a in range(rank):
        size, s, d = x.dim(2 + a), strides[a], dilations[a]
        span, begin, size_out = (emit.fresh(f"{v}{a}") for v in ("span", "begin", "out"))
        emit(f"{span} = ({w.dim(2 + a)} - 1) * {d} + 1")
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            total = emit.fresh(f"total{a}")
            emit(f"{size_out} = -(-{size} // {s})")
            emit(f"{total} = max(0, ({size_out} - 1) * {s} + {span} - {size})")
            emit(f"{begin} = {total} // 2" if auto_pad == "SAME_UPPER" else f"{begin} = {total} - {total} // 2")
            padded = f"{size} + {total}"
        else:
            emit(f"{begin} = {pads[a]}")
            padded = f"{size} + {pads[a] + pads[a + rank]}"
            emit(f"{size_out} = ({padded} - {span}) // {s} + 1")
        g.fail_if(f"{padded} < {span}", op, f"the kernel spans {{a}} elements of spatial axis {a}, more than the "
                  "{b} of the padded input", a=span, b=padded)
        begins.append(begin)
        outs.append(size_out)
    out = g.buffer(op.outputs[0], dtype, [x.dim(0), w.dim(0)] + outs)
    geometry = _geometry(op, ["1"] * (3 - rank) + [str(s) for s in strides] + ["1"] * (3 - rank)
                         + [str(d) for d in dilations] + ["0"] * (3 - rank) + begins + [str(group)])
    args = [g.contiguous(x), g.contiguous(w), _bias(g, op, b, w.dim(0), dtype), out]
    value = g.const(op.inputs[1])
    none = np.empty((0, 0, 0), dtype)
    if value is not None and value.dtype == dtype and winograd_fits(value.shape, strides, dilations, group):
        kernels = g.pass_constant(winograd_weights(value), "k_winograd")  # laid out once, at load
        path = "conv_winograd" if value.ndim == 4 else "conv_winograd_1d"
        _call(g, op, f"{path}_{dtype.name}", args + [kernels, geometry])
    elif value is not None:  # (the path known from W's shape: only its entry compiles)
        path = "conv_direct" if value.shape[0] == group else "conv_product"
        panels = product_panels(value, group) if path == "conv_product" and value.dtype == dtype else None
        kernels = g.pass_constant(none, "k_none") if panels is None else g.pass_constant(panels, "k_panels")
        _call(g, op, f"{path}_{dtype.name}", args + [kernels, geometry])
    else:
        kernels = g.pass_constant(none, "k_none")
        with emit.block(f"if {w.dim(0)} == {group}:"):  # one output channel per group
            _call(g, op, f"conv_direct_{dtype.name}", args + [kernels, geometry])
        with emit.block("else:"):
            _call(g, op, f"conv_product_{dtype.name}", args + [kernels, geometry])
    return [Var(out, dtype, x.rank, "buffer", tuple([x.dim(0), w.dim(0)] + outs))]


@emits("ConvTranspose")
def emit_conv_transpose(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Output sizes from the input's, output_padding, pads or output_shape (transpose_geometry's
    rules as expressions), checked; then conv_transpose()."""
    x, w = ins[0], ins[1]
    b = ins[2] if len(ins) > 2 else None
    dtype = _floats(op, x, w, b)
    auto_pad, group, rank = _common(g, op, x, w)
    strides = _attr_ints(op, "strides", rank, 1, 1)
    dilations = _attr_ints(op, "dilations", rank, 1, 1)
    output_padding = _attr_ints(op, "output_padding", rank, 0, 0)
    shape = op.attrs.get("output_shape")
    if shape is not None:
        shape = [int(v) for v in shape]
        shape = shape[2:] if len(shape) == rank + 2 else shape  # (the whole shape, as some exporters give it)
        if len(shape) != rank or min(shape) < 0:
            raise NoRule(f"output_shape {shape}")
    pads = _attr_ints(op, "pads", 2 * rank, 0, 0) if auto_pad == "NOTSET" and shape is None else [0] * (2 * rank)
    dtype, _ = g.out_type(op.outputs[0], x.rank, dtype)
    emit = g.body
    g.fail_if(f"{x.dim(1)} != {w.dim(0)}", op, "X has {a} channels but W has {b}; W is [C, M / group, kernel...]",
              a=x.dim(1), b=w.dim(0))
    if group > 1:
        g.fail_if(f"{x.dim(1)} % {group} != 0", op, f"X has {{a}} channels, which group {group} does not divide",
                  a=x.dim(1))
    cuts, outs = [], []
    for a in range(rank):
        size, s, d = x.dim(2 + a), strides[a], dilations[a]
        full, cut, size_out = (emit.fresh(f"{v}{a}") for v in ("full", "cut", "out"))
        emit(f"{full} = {s} * ({size} - 1) + {output_padding[a]} + ({w.dim(2 + a)} - 1) * {d} + 1")
        if shape is not None:
            emit(f"{size_out} = {shape[a]}")
            total = f"({full} - {size_out})"
            emit(f"{cut} = {total} // 2" if auto_pad == "SAME_UPPER" else f"{cut} = {total} - {total} // 2")
        elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            total = emit.fresh(f"total{a}")
            emit(f"{total} = max(0, {full} - {size} * {s})")
            emit(f"{cut} = {total} // 2" if auto_pad == "SAME_UPPER" else f"{cut} = {total} - {total} // 2")
            emit(f"{size_out} = {full} - {total}")
        else:
            emit(f"{cut} = {pads[a]}")
            emit(f"{size_out} = {full} - {pads[a] + pads[a + rank]}")
            g.fail_if(f"{size_out} < 0", op, f"pads {pads[a]}, {pads[a + rank]} remove more than the {{a}} elements of "
                      f"the full result on spatial axis {a}", a=full)
        cuts.append(cut)
        outs.append(size_out)
    channels = f"{w.dim(1)} * {group}"
    out = g.buffer(op.outputs[0], dtype, [x.dim(0), channels] + outs)
    geometry = _geometry(op, ["1"] * (3 - rank) + [str(s) for s in strides] + ["1"] * (3 - rank)
                         + [str(d) for d in dilations] + ["0"] * (3 - rank) + cuts + [str(group)])
    none = g.pass_constant(np.empty((0, 0, 0), dtype), "k_none")
    _call(g, op, f"conv_transpose_{dtype.name}", [g.contiguous(x), g.contiguous(w), _bias(g, op, b, channels, dtype),
                                                  out, none, geometry])
    return [Var(out, dtype, x.rank, "buffer", tuple([x.dim(0), channels] + outs))]
