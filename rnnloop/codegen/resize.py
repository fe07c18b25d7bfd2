"""Code generation rule for Resize: per resized axis, the output size and scale (from scales or sizes,
constant or computed at run time, checked as the interpreter checks them), a table of source indices
and weights (resize_rt.axis_table), and one pass along that axis (resize_rt.resize_axis); linear and
cubic passes compute in float64 and the result is rounded into the input's dtype at the end, nearest
passes select in the input's dtype. rnnloop.interp.resize is the specification."""

from __future__ import annotations

import numpy as np

from ..interp import resize as spec
from ..ir import Op
from . import resize_rt
from .emitter import NoRule, Var, dtype_name, literal
from .kernel import LoopGen, emits


def _vector(g: LoopGen, op: Op, k: int, ins: list[Var | None]) -> Var | None:
    """Input k when given and not a constant empty tensor (an exporter's way to omit it)."""
    if len(ins) <= k or ins[k] is None:
        return None
    value = g.const(op.inputs[k])
    if value is not None and value.size == 0:
        return None
    v = ins[k]
    if v.kind == "scalar" or v.rank != 1:
        raise NoRule(f"input {k} of Resize is not a vector")
    return v


@emits("Resize")
def emit_resize(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Y = X resized axis by axis (see the module docstring)."""
    x = ins[0]
    if x.kind == "scalar" or x.rank == 0:
        raise NoRule("Resize of a scalar")
    a = op.attrs
    mode, ctm = a.get("mode", "nearest"), a.get("coordinate_transformation_mode", "half_pixel")
    nearest, policy = a.get("nearest_mode", "round_prefer_floor"), a.get("keep_aspect_ratio_policy", "stretch")
    antialias, exclude = int(a.get("antialias", 0)), int(a.get("exclude_outside", 0))
    problem = spec.check_attributes(mode, ctm, nearest, policy, antialias, exclude)
    if problem:
        raise NoRule(problem)
    rank = x.rank
    axes = a.get("axes")
    axes = list(range(rank)) if axes is None else [int(v) for v in axes]
    if any(not -rank <= v < rank for v in axes) or len({v % rank for v in axes}) != len(axes) or not axes:
        raise NoRule(f"axes {axes} for rank {rank}")
    axes = [v % rank for v in axes]
    exact = mode == "nearest"
    if not exact and x.dtype.kind not in "iuf":
        raise NoRule(f"mode '{mode}' on {x.dtype}")
    scales, sizes = _vector(g, op, 2, ins), _vector(g, op, 3, ins)
    if (scales is None) == (sizes is None):
        raise NoRule("not exactly one of scales and sizes is given (or one is empty only at run time)")
    dtype, _ = g.out_type(op.outputs[0], rank, x.dtype)
    plan = _plan(g, op, x, axes, scales, sizes, policy)
    bounds = _roi(g, op, ins, axes) if ctm == "tf_crop_and_resize" else [("np.float64(0.0)", "np.float64(1.0)")] * len(axes)
    emit = g.body
    work = x.dtype if exact else np.dtype(np.float64)
    extrapolation = literal(np.asarray(a.get("extrapolation_value", 0.0)).astype(work)[()], work)
    codes = (f"np.int64({resize_rt.MODES.index(mode)}), np.int64({resize_rt.COORDINATE_MODES.index(ctm)}), "
             f"np.int64({resize_rt.NEAREST_MODES.index(nearest)}), np.float64({float(a.get('cubic_coeff_a', -0.75))!r}), "
             f"np.int64({exclude}), np.int64({antialias})")
    current, dims = x.expr, [x.dim(d) for d in range(rank)]
    for k, axis in enumerate(axes):
        size, scale, length = plan[k]
        start, end = bounds[k]
        after = dims[:axis] + [size] + dims[axis + 1:]
        stage = g.buffer(f"{op.outputs[0]}_axis{axis}", work, after)
        identity = f"{scale} == 1.0 and {size} == {dims[axis]}"
        if ctm == "tf_crop_and_resize":
            identity += f" and {start} == 0.0 and {end} == 1.0"
        with emit.block(f"if {identity}:"):
            emit(f"_r.put({stage}, {current})")  # (the interpreter skips the axis: the values as they are)
        with emit.block("else:"):
            index, weights, outside = (emit.fresh(n) for n in ("index", "weights", "outside"))
            emit(f"{index}, {weights}, {outside} = _rz.axis_table(np.int64({dims[axis]}), {size}, {scale}, "
                 f"{length}, {start}, {end}, {codes})")
            outer = " * ".join(dims[:axis]) or "1"
            inner = " * ".join(dims[axis + 1:]) or "1"
            src = f"np.ascontiguousarray({current}).reshape(({outer}, {dims[axis]}, {inner}))"
            dst = f"{stage}.reshape(({outer}, {size}, {inner}))"
            if exact:
                emit(f"_rz.resize_axis_nearest({src}, {index}, {outside}, {extrapolation}, {dst})")
            else:
                emit(f"_rz.resize_axis({src}, {index}, {weights}, {outside}, {extrapolation}, {dst})")
        current, dims = stage, after
    if exact:
        return [Var(current, dtype, rank, "buffer", tuple(dims))]
    out = g.buffer(op.outputs[0], dtype, dims)
    _round_into(g, out, current, dtype)
    return [Var(out, dtype, rank, "buffer", tuple(dims))]


def _plan(g: LoopGen, op: Op, x: Var, axes: list[int], scales: Var | None, sizes: Var | None,
          policy: str) -> list[tuple[str, str, str]]:
    """(output size, scale, length_resized) of each resized axis, as names of run-time values (float32
    products and quotients, as rnnloop.interp.resize.output_plan)."""
    emit, m = g.body, len(axes)
    given = scales if scales is not None else sizes
    what = "scales" if scales is not None else "sizes"
    g.fail_if(f"{given.dim(0)} != {m}", op, f"{what} has {{a}} values for {m} axes; give one per resized axis",
              a=given.dim(0))
    plan = []
    if scales is not None:
        for k, axis in enumerate(axes):
            scale, size = emit.fresh(f"scale{axis}"), emit.fresh(f"size{axis}")
            length = emit.fresh(f"length{axis}")
            emit(f"{scale} = np.float64({scales.expr}[{k}])")
            g.fail_if(f"not ({scale} > 0) or not np.isfinite({scale})", op,
                      f"scales must be positive and finite (axis {axis})")
            emit(f"{length} = np.float64(np.float32({scale}) * np.float32({x.dim(axis)}))")
            emit(f"{size} = np.int64(math.floor({length}))")
            plan.append((size, scale, length))
        return plan
    wanted = []
    for k, axis in enumerate(axes):
        size = emit.fresh(f"size{axis}")
        emit(f"{size} = np.int64({sizes.expr}[{k}])")
        g.fail_if(f"{size} < 0", op, f"sizes has a negative size ({{a}} for axis {axis})", a=size)
        g.fail_if(f"{x.dim(axis)} == 0", op, f"cannot resize the empty axis {axis} to a size")
        wanted.append(size)
    if policy == "stretch":
        for size, axis in zip(wanted, axes):
            scale = emit.fresh(f"scale{axis}")
            emit(f"{scale} = np.float64(np.float32({size}) / np.float32({x.dim(axis)}))")
            plan.append((size, scale, f"np.float64({size})"))
        return plan
    ratio = emit.fresh("ratio")
    pick = "min" if policy == "not_larger" else "max"
    ratios = [f"np.float64(np.float32({size}) / np.float32({x.dim(axis)}))" for size, axis in zip(wanted, axes)]
    emit(f"{ratio} = {ratios[0]}")
    for r in ratios[1:]:
        emit(f"{ratio} = {pick}({ratio}, {r})")
    for axis in axes:
        size, length = emit.fresh(f"out{axis}"), emit.fresh(f"length{axis}")
        emit(f"{length} = np.float64(np.float32({ratio}) * np.float32({x.dim(axis)}))")
        emit(f"{size} = np.int64({length} + 0.5)")  # round half up
        plan.append((size, ratio, length))
    return plan


def _roi(g: LoopGen, op: Op, ins: list[Var | None], axes: list[int]) -> list[tuple[str, str]]:
    """(start, end) of each resized axis from the roi input (tf_crop_and_resize)."""
    roi = ins[1] if len(ins) > 1 else None
    if roi is None or roi.kind == "scalar" or roi.rank != 1:
        raise NoRule("tf_crop_and_resize without a roi vector")
    m = len(axes)
    g.fail_if(f"{roi.dim(0)} != {2 * m}", op, f"roi has {{a}} values; it needs a start and an end for each of {m} axes",
              a=roi.dim(0))
    bounds = []
    for k, axis in enumerate(axes):
        start, end = g.body.fresh(f"start{axis}"), g.body.fresh(f"end{axis}")
        g.body(f"{start} = np.float64({roi.expr}[{k}])")
        g.body(f"{end} = np.float64({roi.expr}[{k + m}])")
        bounds.append((start, end))
    return bounds


def _round_into(g: LoopGen, out: str, src: str, dtype: np.dtype) -> None:
    """out = the float64 values of src in out's dtype: floats rounded to nearest, integers rounded half
    to even and saturated (the interpreter's cast back)."""
    emit = g.body
    flat_out, flat_src, i = emit.fresh("flat_out"), emit.fresh("flat_src"), emit.fresh("i")
    emit(f"{flat_out} = {out}.reshape(-1)")
    emit(f"{flat_src} = {src}.reshape(-1)")
    with emit.block(f"for {i} in range({flat_out}.size):"):
        if dtype.kind == "f":
            emit(f"{flat_out}[{i}] = {flat_src}[{i}]")
            return
        info = np.iinfo(dtype)
        clipped = f"min(max(np.rint({flat_src}[{i}]), {float(info.min)!r}), {float(info.max)!r})"
        if dtype.name in ("int32", "int64"):
            emit(f"{flat_out}[{i}] = _m.float_to_{dtype.name}({clipped})")
        else:
            emit(f"{flat_out}[{i}] = {dtype_name(dtype)}({clipped})")
