"""Converters for OpenVINO layers into IR ops (the IR speaks ONNX: OpenVINO forms are rewritten).

Each converter takes the layer (rnnloop.frontends.openvino.LayerContext) and its input values.
Attributes that must be known at load (axes, permutations, masks) come from `<data>` or from Const
inputs; a computed one is rejected by name.
"""

from __future__ import annotations

import math

import numpy as np

from .openvino_ir import ELEMENT_TYPES
from .registry import converts

FMT = "openvino"
INT64_MAX, INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min


def _op(type_: str, since: int = 1):
    return converts(type_, since, fmt=FMT)


def _constant(n, name: str, what: str) -> np.ndarray:
    """The value of an input that must be a Const layer."""
    value = n.b.graph.constants.get(name)
    if value is None:
        raise n.unsupported(f"its {what} input must be a Const layer (a computed {what} is not supported)")
    return value


def _axis(n, name: str) -> int:
    """An axis input: a Const of one value, a scalar or of shape [1] (OpenVINO's ONNX importer writes those)."""
    value = _constant(n, name, "axis")
    if value.size != 1:
        raise n.fail(f"the axis input holds {value.size} values; it must hold one")
    return int(value.reshape(()))


def _broadcast(n) -> None:
    mode = n.attr("auto_broadcast", "numpy").lower()
    if mode not in ("numpy", "none"):
        raise n.unsupported(f"auto_broadcast='{mode}' is not supported (numpy and none are)")


def _dtype(n, key: str) -> np.dtype:
    name = n.attr(key)
    if name not in ELEMENT_TYPES:
        raise n.unsupported(f"{key}='{name}' is not a supported element type ({', '.join(ELEMENT_TYPES)})")
    return np.dtype(ELEMENT_TYPES[name])


# ---------------------------------------------------------------------------------------------
# elementwise

_BINARY = {"Add": "Add", "Subtract": "Sub", "Multiply": "Mul", "Power": "Pow", "Maximum": "Max",
           "Minimum": "Min", "Equal": "Equal", "Less": "Less", "LessEqual": "LessOrEqual",
           "Greater": "Greater", "GreaterEqual": "GreaterOrEqual", "LogicalAnd": "And",
           "LogicalOr": "Or", "LogicalXor": "Xor"}
_UNARY = {"Sigmoid": "Sigmoid", "Tanh": "Tanh", "ReLU": "Relu", "Exp": "Exp", "Log": "Log",
          "Sqrt": "Sqrt", "Abs": "Abs", "Negative": "Neg", "Floor": "Floor", "Ceiling": "Ceil",
          "Sin": "Sin", "Cos": "Cos", "Erf": "Erf", "Sign": "Sign", "LogicalNot": "Not"}
# (IR files name Relu and Softmax "ReLU" and "SoftMax": OpenVINO's serializer renames them)


def _binary(ir_type: str):
    def convert(n, a, b):
        _broadcast(n)
        n.emit(ir_type, [a, b])
    return convert


def _unary(ir_type: str):
    def convert(n, x):
        n.emit(ir_type, [x])
    return convert


for _type, _ir in _BINARY.items():
    _op(_type)(_binary(_ir))
for _type, _ir in _UNARY.items():
    _op(_type)(_unary(_ir))
_op("SoftPlus", 4)(_unary("Softplus"))


@_op("NotEqual")
def convert_not_equal(n, a, b):
    _broadcast(n)
    n.emit("Not", [n.b.op1("Equal", a, b)])


@_op("Divide")
def convert_divide(n, a, b):
    """Integer division floors (python_divide, the default) or truncates; floats divide."""
    _broadcast(n)
    dtype = n.out_dtype()
    if dtype is not None and dtype.kind in "iu" and n.attr_bool("m_pythondiv", True):
        # a - mod(a, b) is an exact multiple of b, so truncating division of it floors a / b
        n.emit("Div", [n.b.op1("Sub", a, n.b.op1("Mod", a, b, fmod=0)), b])
    else:
        n.emit("Div", [a, b])


@_op("SquaredDifference")
def convert_squared_difference(n, a, b):
    _broadcast(n)
    d = n.b.op1("Sub", a, b)
    n.emit("Mul", [d, d])


@_op("FloorMod")
def convert_floor_mod(n, a, b):
    _broadcast(n)
    n.emit("Mod", [a, b], fmod=0)


@_op("Mod")
def convert_mod(n, a, b):
    _broadcast(n)
    n.emit("Mod", [a, b], fmod=1)


@_op("Clamp")
def convert_clamp(n, x):
    lo, hi = n.attr_float("min"), n.attr_float("max")
    dtype = n.out_dtype() or np.dtype(np.float32)
    if dtype.kind in "iu":  # integer bounds round inwards, and beyond the type's range do nothing, as in OpenVINO
        info = np.iinfo(dtype)
        lo, hi = max(math.ceil(lo), int(info.min)), min(math.floor(hi), int(info.max))
    n.emit("Clip", [x, n.const(lo, dtype), n.const(hi, dtype)])


@_op("Elu")
def convert_elu(n, x):
    n.emit("Elu", [x], alpha=n.attr_float("alpha"))


@_op("HSigmoid", 5)
def convert_hsigmoid(n, x):
    n.emit("HardSigmoid", [x], alpha=1 / 6, beta=0.5)


@_op("HSwish", 4)
def convert_hswish(n, x):
    n.emit("Mul", [x, n.b.op1("HardSigmoid", x, alpha=1 / 6, beta=0.5)])


@_op("Swish", 4)
def convert_swish(n, x, beta=""):
    n.emit("Mul", [x, n.b.op1("Sigmoid", n.b.op1("Mul", x, beta) if beta else x)])


def _gelu(n, x, mode: str):
    b, dtype = n.b, n.out_dtype() or np.dtype(np.float32)
    if mode == "erf":  # 0.5 x (1 + erf(x / sqrt 2))
        inner = b.op1("Erf", b.op1("Mul", x, n.const(1 / math.sqrt(2), dtype)))
    elif mode == "tanh":  # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
        cube = b.op1("Mul", b.op1("Mul", x, x), x)
        inner = b.op1("Tanh", b.op1("Mul", n.const(math.sqrt(2 / math.pi), dtype),
                                    b.op1("Add", x, b.op1("Mul", cube, n.const(0.044715, dtype)))))
    else:
        raise n.unsupported(f"approximation_mode '{mode}' is not supported (erf and tanh are)")
    n.emit("Mul", [b.op1("Mul", x, n.const(0.5, dtype)), b.op1("Add", inner, n.const(1, dtype))])


@_op("Gelu", 2)
def convert_gelu_2(n, x):
    _gelu(n, x, "erf")


@_op("Gelu", 7)
def convert_gelu_7(n, x):
    _gelu(n, x, n.attr("approximation_mode", "ERF").lower())


@_op("Select")
def convert_select(n, cond, then, else_):
    _broadcast(n)
    n.emit("Where", [cond, then, else_])


@_op("Convert")
def convert_convert(n, x):
    n.emit("Cast", [x], to=_dtype(n, "destination_type"))


@_op("ConvertLike")
def convert_convert_like(n, x, like):
    n.emit("CastLike", [x, like])


# ---------------------------------------------------------------------------------------------
# matrix products and reductions


@_op("MatMul")
def convert_matmul(n, a, b):
    def operand(value, k, transpose):
        shape = n.in_shape(k)
        if transpose and shape is None:
            raise n.unsupported(f"transposing input {k} needs its rank, which the model does not give")
        if not transpose or len(shape) < 2:
            return value  # OpenVINO ignores transposition of a 1-D operand
        rank = len(shape)
        return n.b.op1("Transpose", value, perm=list(range(rank - 2)) + [rank - 1, rank - 2])

    n.emit("MatMul", [operand(a, 0, n.attr_bool("transpose_a", False)),
                      operand(b, 1, n.attr_bool("transpose_b", False))])


def _reduce(ir_type: str):
    def convert(n, x, axes):
        n.emit(ir_type, [x, axes], keepdims=int(n.attr_bool("keep_dims", False)), noop_with_empty_axes=1)
    return convert


for _type in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"):
    _op(_type)(_reduce(_type))


@_op("SoftMax")  # Softmax's name in IR files
def convert_softmax(n, x):
    n.emit("Softmax", [x], axis=n.attr_int("axis", 1))


@_op("LogSoftmax", 5)
def convert_log_softmax(n, x):
    n.emit("LogSoftmax", [x], axis=n.attr_int("axis", 1))


@_op("TopK")
def convert_topk(n, x, k):
    axis, sort = n.attr_int("axis"), n.attr("sort", "none").lower()
    mode = n.attr("mode").lower()
    if mode not in ("max", "min") or sort not in ("value", "index", "none"):
        raise n.fail(f"mode '{mode}' / sort '{sort}' are not OpenVINO TopK values")
    b = n.b
    k1 = b.op1("Reshape", b.op1("Cast", k, to=np.dtype(np.int64)), n.const([1]))
    values, indices = b.op("TopK", [x, k1], 2, axis=axis, largest=int(mode == "max"), sorted=1)
    if sort == "index":  # reorder the k picks by their index, ascending
        indices, where = b.op("TopK", [indices, k1], 2, axis=axis, largest=0, sorted=1)
        values = b.op1("GatherElements", values, where, axis=axis)
    out_type = n.out_dtype(1) or np.dtype(np.int32)
    b.op("Identity", [values], [n.outputs[0]])
    b.op("Cast", [indices], [n.outputs[1]], to=out_type)


# ---------------------------------------------------------------------------------------------
# shapes and data movement


@_op("Concat")
def convert_concat(n, *xs):
    n.emit("Concat", xs, axis=n.attr_int("axis"))


@_op("Split")
def convert_split(n, x, axis):
    axis = _axis(n, axis)
    n.emit("Split", [x, ""], axis=axis, num_outputs=n.attr_int("num_splits"))


@_op("VariadicSplit")
def convert_variadic_split(n, x, axis, lengths):
    axis = _axis(n, axis)
    given = _constant(n, lengths, "split_lengths").astype(np.int64).reshape(-1)
    b = n.b
    if (given == -1).sum() > 1:
        raise n.fail(f"split_lengths {given.tolist()} has more than one -1")
    if -1 in given:  # the part that takes what the others leave
        k = int(np.flatnonzero(given == -1)[0])
        rank = len(n.in_shape(0) or ()) or None
        start = axis if axis >= 0 else (axis + rank if rank else None)
        if start is None:
            raise n.unsupported("a negative axis needs the input's rank, which the model does not give")
        dim = b.op1("Shape", x, start=start, end=start + 1)
        rest = b.op1("Sub", dim, n.const([int(given[given >= 0].sum())]))
        lengths = b.op1("Concat", n.const(given[:k]), rest, n.const(given[k + 1:]), axis=0)
    n.emit("Split", [x, lengths], axis=axis)


@_op("Squeeze")
def convert_squeeze(n, x, axes=""):
    shape, picked = n.in_shape(0), n.b.graph.constants.get(axes) if axes else None
    if picked is not None and shape:  # OpenVINO keeps a listed axis whose size is not 1; ONNX rejects it
        rank, picked = len(shape), [int(a) for a in picked.reshape(-1)]
        kept = [a for a in picked if not -rank <= a < rank or shape[a] in (1, None)]
        if kept != picked:
            axes = n.const(kept)
    n.emit("Squeeze", [x, axes])


@_op("Unsqueeze")
def convert_unsqueeze(n, x, axes):
    picked, rank = n.b.graph.constants.get(axes), len(n.in_shape(0) or ())
    if picked is not None:  # OpenVINO inserts an axis listed twice once; ONNX rejects it
        picked = picked.reshape(-1).astype(np.int64)
        picked = np.where(picked < 0, picked + rank + picked.size, picked)  # from the rank with every axis
        unique = sorted(set(picked.tolist()))
        if len(unique) != picked.size:  # and an axis past the end of the smaller result goes last
            axes = n.const([min(a, rank + i) for i, a in enumerate(unique)])
    n.emit("Unsqueeze", [x, axes])


@_op("Reshape")
def convert_reshape(n, x, shape):
    n.emit("Reshape", [x, shape], allowzero=int(not n.attr_bool("special_zero")))


@_op("Transpose")
def convert_transpose(n, x, perm):
    order = _constant(n, perm, "order").reshape(-1).astype(int).tolist()
    n.emit("Transpose", [x], perm=order or None)


@_op("Gather")
def convert_gather(n, data, indices, axis):
    if n.attr_int("batch_dims", 0) != 0:
        raise n.unsupported("batch_dims other than 0 is not supported")
    n.emit("Gather", [data, indices], axis=_axis(n, axis))


@_op("ShapeOf")
def convert_shape_of(n, x):
    dtype = n.out_dtype() or np.dtype(np.int64)
    if dtype == np.int64:
        n.emit("Shape", [x])
    else:
        n.emit("Cast", [n.b.op1("Shape", x)], to=dtype)


@_op("Broadcast")
def convert_broadcast(n, x, shape, axes_mapping=""):
    mode = n.attr("mode", "numpy").lower()
    if mode in ("numpy", "bidirectional"):
        n.emit("Expand", [x, shape])
        return
    if mode != "explicit":
        raise n.unsupported(f"mode '{mode}' is not supported (numpy, bidirectional and explicit are)")
    axes = _constant(n, axes_mapping, "axes_mapping").reshape(-1).astype(int).tolist()
    target = n.in_shape(1)
    if target is None or len(target) != 1 or target[0] is None:
        raise n.unsupported("explicit mode needs the rank of target_shape, which the model does not give")
    rank = target[0]
    # data's axes go to the mapped positions, size-1 axes everywhere else; then Expand
    missing = [a for a in range(rank) if a not in axes]
    n.emit("Expand", [n.b.op1("Unsqueeze", x, n.const(missing)) if missing else x, shape])


@_op("Slice", 8)
def convert_slice(n, data, start, stop, step, axes=""):
    n.emit("Slice", [data, start, stop, axes, step])


@_op("Tile")
def convert_tile(n, x, repeats):
    """OpenVINO pads the shorter of data's shape and repeats with leading 1s; ONNX wants equal lengths."""
    rank, count = len(n.in_shape(0) or ()), (n.in_shape(1) or (None,))[0]
    if count is not None and count > rank:
        x = n.b.op1("Unsqueeze", x, n.const(list(range(count - rank))))
    elif count is not None and count < rank:
        repeats = n.b.op1("Concat", n.const([1] * (rank - count)), n.b.op1("Cast", repeats, to=np.dtype(np.int64)),
                          axis=0)
    n.emit("Tile", [x, repeats])


@_op("Range", 4)
def convert_range(n, start, stop, step):
    dtype = _dtype(n, "output_type")
    n.emit("Range", [n.b.op1("Cast", v, to=dtype) for v in (start, stop, step)])


@_op("StridedSlice")
def convert_strided_slice(n, data, begin, end, stride=""):
    """Rewritten as Slice, then Squeeze of the shrunk axes, then Unsqueeze of the new ones."""
    begin = _constant(n, begin, "begin").reshape(-1).astype(np.int64)
    end = _constant(n, end, "end").reshape(-1).astype(np.int64)
    stride = (_constant(n, stride, "stride").reshape(-1).astype(np.int64) if stride
              else np.ones(len(begin), np.int64))
    entries = len(begin)
    if len(end) != entries or len(stride) != entries:
        raise n.fail(f"begin, end and stride have different lengths ({len(begin)}, {len(end)}, {len(stride)})")
    if (stride == 0).any():
        raise n.fail("a stride is 0")

    def mask(key):
        bits = n.attr_ints(key, [])
        return bits + [0] * (entries - len(bits))

    begin_mask, end_mask = mask("begin_mask"), mask("end_mask")
    new_axis, shrink, ellipsis = mask("new_axis_mask"), mask("shrink_axis_mask"), mask("ellipsis_mask")
    shape = n.in_shape(0)
    if shape is None:
        raise n.unsupported("StridedSlice needs the input's rank, which the model does not give")
    rank = len(shape)
    consuming = sum(1 for i in range(entries) if not new_axis[i] and not ellipsis[i])
    starts, ends, axes, steps, squeezed, inserted = [], [], [], [], [], []
    d = out = 0
    for i in range(entries):
        if ellipsis[i]:
            covered = rank - consuming
            d, out = d + covered, out + covered
        elif new_axis[i]:
            inserted.append(out)
            out += 1
        else:
            s = int(stride[i])
            if shrink[i]:
                first = int(begin[i])
                starts.append(first)
                ends.append(INT64_MAX if first == -1 else first + 1)
                steps.append(1)
                squeezed.append(d)
            else:
                starts.append((0 if s > 0 else INT64_MAX) if begin_mask[i] else int(begin[i]))
                ends.append((INT64_MAX if s > 0 else INT64_MIN) if end_mask[i] else int(end[i]))
                steps.append(s)
                out += 1
            axes.append(d)
            d += 1
    if d > rank:
        raise n.fail(f"begin has {entries} entries for an input of rank {rank}")
    b = n.b
    y = b.op1("Slice", data, n.const(starts), n.const(ends), n.const(axes), n.const(steps)) if axes else data
    if squeezed:
        y = b.op1("Squeeze", y, n.const(squeezed))
    n.emit("Unsqueeze" if inserted else "Identity", [y, n.const(inserted)] if inserted else [y])


# ---------------------------------------------------------------------------------------------
# pooling and normalisation (into the IR ops of rnnloop/interp/nn_ops.py and reductions)

_OV_AUTO_PAD = {"explicit": "NOTSET", "notset": "NOTSET", "same_upper": "SAME_UPPER", "same_lower": "SAME_LOWER",
                "valid": "VALID"}


def _pool_attrs(n, roundings: tuple[str, ...], dilations: bool = True) -> dict:
    """An OpenVINO pool's attributes as ONNX's. Rounding "floor" is ceil_mode=0 and "ceil_torch" is
    ceil_mode=1 (a window that would start in the end padding is dropped); "ceil" keeps such windows:
    it is floor over end pads longer by stride - 1 (pads_extra, which AvgPool's divisor must not count).
    With auto_pad same_upper/same_lower the rounding changes nothing (the output is ceil(size / stride)).
    """
    kernel = n.attr_ints("kernel")
    nd = len(kernel)
    strides = n.attr_ints("strides", [1] * nd)
    dilation = n.attr_ints("dilations", [1] * nd) if dilations else [1] * nd
    auto_pad = n.attr("auto_pad", "explicit").lower()
    rounding = n.attr("rounding_type", "floor").lower()
    if auto_pad not in _OV_AUTO_PAD:
        raise n.unsupported(f"auto_pad='{auto_pad}' is not supported ({', '.join(_OV_AUTO_PAD)} are)")
    if rounding not in roundings:
        raise n.unsupported(f"rounding_type='{rounding}' is not supported in this version ({', '.join(roundings)} are)")
    begin = n.attr_ints("pads_begin", [0] * nd) if auto_pad in ("explicit", "notset") else [0] * nd
    end = n.attr_ints("pads_end", [0] * nd) if auto_pad in ("explicit", "notset") else [0] * nd
    if not nd or any(len(v) != nd for v in (strides, dilation, begin, end)):
        raise n.fail(f"kernel {kernel}, strides {strides}, dilations {dilation} and pads {begin}, {end} "
                     "do not have one value per spatial axis")
    attrs = {"kernel_shape": kernel, "strides": strides, "dilations": dilation}
    same = auto_pad in ("same_upper", "same_lower")
    extra = [s - 1 for s in strides] if rounding == "ceil" and not same else [0] * nd
    if same:
        attrs["auto_pad"] = _OV_AUTO_PAD[auto_pad]
        rounding = "floor"
    else:
        attrs["pads"] = begin + [e + x for e, x in zip(end, extra)]
        attrs["ceil_mode"] = int(rounding == "ceil_torch")
    return {"attrs": attrs, "pads_begin": begin, "pads_end": end, "rounding": rounding}


def _max_pool(n, x, roundings: tuple[str, ...], indices: bool) -> None:
    pool = _pool_attrs(n, roundings, dilations=indices)
    b = n.b
    if not indices:
        n.emit("MaxPool", [x], **pool["attrs"])
        return
    axis = n.attr_int("axis", 0)
    index_type = _dtype(n, "index_element_type") if "index_element_type" in n.data else np.dtype(np.int64)
    shape = n.in_shape(0)
    if axis < 0:
        if shape is None:
            raise n.unsupported("a negative axis needs the input's rank, which the model does not give")
        axis += len(shape)
    exact = axis == 0 and index_type == np.int64  # ONNX's Indices: flat over the whole input, int64
    flat = n.outputs[1] if exact else b.fresh("indices")
    b.op("MaxPool", [x], [n.outputs[0], flat], **pool["attrs"])
    if exact:
        return
    if axis:  # OpenVINO's indices count from `axis` on: the flat index modulo the size of those axes
        dims = shape[axis:] if shape is not None else None
        if dims is not None and all(isinstance(d, int) for d in dims):
            size = n.const(math.prod(dims))
        else:
            size = b.op1("ReduceProd", b.op1("Shape", x, start=axis), n.const([0]), keepdims=0)
        flat = b.op1("Mod", flat, size, fmod=0)
    b.op("Cast", [flat], [n.outputs[1]], to=index_type)


@_op("MaxPool")
def convert_max_pool_1(n, x):
    _max_pool(n, x, ("floor", "ceil"), indices=False)


@_op("MaxPool", 8)
def convert_max_pool_8(n, x):
    """MaxPool-8: dilations, and the indices of the maxima, flat from axis `axis` on."""
    _max_pool(n, x, ("floor", "ceil"), indices=True)


@_op("MaxPool", 14)
def convert_max_pool_14(n, x):
    """MaxPool-14: rounding_type ceil_torch."""
    _max_pool(n, x, ("floor", "ceil", "ceil_torch"), indices=True)


def _avg_pool(n, x, roundings: tuple[str, ...]) -> None:
    pool = _pool_attrs(n, roundings, dilations=False)
    attrs = pool["attrs"]
    exclude = n.attr_bool("exclude-pad", False)
    if exclude or pool["rounding"] == "floor":
        n.emit("AveragePool", [x], count_include_pad=int(not exclude), **attrs)
        return
    # Ceil rounding with the pads counted: OpenVINO counts a window's taps past the end pads too,
    # dividing every sum by the kernel's size. The input is padded with zeros over all the windows
    # reach, then pooled without pads.
    kernel, strides = attrs["kernel_shape"], attrs["strides"]
    begin, end = pool["pads_begin"], pool["pads_end"]
    shape = n.in_shape(0)
    if shape is None:
        raise n.unsupported("rounding_type ceil with exclude-pad=false needs the input's rank, which the model "
                            "does not give")
    lead = len(shape) - len(kernel)
    ends = []
    for a, (k, s, pb, pe) in enumerate(zip(kernel, strides, begin, end)):
        if pool["rounding"] == "ceil" or k - pe >= s:  # (ceil_torch drops no window: as ceil)
            ends.append(pe + s - 1)  # floor over it makes ceil's windows
            continue
        size = shape[lead + a]
        if not isinstance(size, int) or pe >= k:
            raise n.unsupported(f"rounding_type ceil_torch with exclude-pad=false, pads_end {pe} and stride {s} "
                                f"needs the size of spatial axis {a}, which the model does not give, and pads "
                                "narrower than the kernel")
        span = size + pb + pe - k
        out = -(-span // s) + 1
        out -= (out - 1) * s >= size + pb  # the window that would start in the end padding
        ends.append(pe + (out - 1) * s - span)
    padded = n.b.op1("Pad", x, n.const([0] * lead + begin + [0] * lead + ends))
    n.emit("AveragePool", [padded], kernel_shape=kernel, strides=strides)


@_op("AvgPool")
def convert_avg_pool_1(n, x):
    _avg_pool(n, x, ("floor", "ceil"))


@_op("AvgPool", 14)
def convert_avg_pool_14(n, x):
    """AvgPool-14: rounding_type ceil_torch."""
    _avg_pool(n, x, ("floor", "ceil", "ceil_torch"))


@_op("BatchNormInference")
def convert_batch_norm_inference_0(n, gamma, beta, x, mean, variance):
    """BatchNormInference-1 (opset1) takes gamma and beta before the data."""
    n.emit("BatchNormalization", [x, gamma, beta, mean, variance], epsilon=n.attr_float("epsilon"))


@_op("BatchNormInference", 5)
def convert_batch_norm_inference_5(n, x, gamma, beta, mean, variance):
    n.emit("BatchNormalization", [x, gamma, beta, mean, variance], epsilon=n.attr_float("epsilon"))


def _mvn(n, x, axes: str, normalize_variance: bool, eps: float, inside: bool) -> None:
    """(x - mean) / sqrt(var + eps) (inside) or / (sqrt(var) + eps), mean and var over axes."""
    b = n.b
    dtype = n.out_dtype() or np.dtype(np.float32)
    centred = b.op1("Sub", x, b.op1("ReduceMean", x, axes, keepdims=1))
    if not normalize_variance:
        n.emit("Identity", [centred])
        return
    var = b.op1("ReduceMean", b.op1("Mul", centred, centred), axes, keepdims=1)
    epsilon = n.const(eps, dtype)
    std = b.op1("Sqrt", b.op1("Add", var, epsilon)) if inside else b.op1("Add", b.op1("Sqrt", var), epsilon)
    n.emit("Div", [centred, std])


@_op("MVN", 2)
def convert_mvn_2(n, x):
    """MVN-2 (opset2): reduction_axes, or the axes after N (across_channels) or after N and C."""
    if "reduction_axes" in n.data:
        axes = n.attr_ints("reduction_axes")
    else:
        shape = n.in_shape(0)
        if shape is None:
            raise n.unsupported("MVN without reduction_axes needs the input's rank, which the model does not give")
        axes = list(range(1 if n.attr_bool("across_channels", False) else 2, len(shape)))
    _mvn(n, x, n.const(axes), n.attr_bool("normalize_variance", False), n.attr_float("eps"), inside=True)


@_op("MVN", 6)
def convert_mvn_6(n, x, axes):
    """MVN-6: the axes as an input (a Const), eps inside or outside the square root."""
    mode = n.attr("eps_mode").lower()
    if mode not in ("inside_sqrt", "outside_sqrt"):
        raise n.unsupported(f"eps_mode='{mode}' is not supported (inside_sqrt and outside_sqrt are)")
    axes = n.const(_constant(n, axes, "axes").reshape(-1).astype(np.int64))
    _mvn(n, x, axes, n.attr_bool("normalize_variance"), n.attr_float("eps"), inside=mode == "inside_sqrt")


@_op("NormalizeL2")
def convert_normalize_l2(n, x, axes):
    """x / sqrt(max(sum(x^2), eps)) or / sqrt(sum(x^2) + eps) over axes; with no axes each element is
    divided by itself (the spec's special case, as the plugin: 1, and 0 for 0)."""
    mode = n.attr("eps_mode").lower()
    if mode not in ("add", "max"):
        raise n.unsupported(f"eps_mode='{mode}' is not supported (add and max are)")
    b = n.b
    dtype = n.out_dtype() or np.dtype(np.float32)
    picked = _constant(n, axes, "axes").reshape(-1).astype(np.int64)
    if not picked.size:
        n.emit("Abs", [b.op1("Sign", x)])
        return
    axes = n.const(picked)
    total = b.op1("ReduceSum", b.op1("Mul", x, x), axes, keepdims=1, noop_with_empty_axes=1)
    guarded = b.op1("Max" if mode == "max" else "Add", total, n.const(n.attr_float("eps"), dtype))
    n.emit("Div", [x, b.op1("Sqrt", guarded)])


# ---------------------------------------------------------------------------------------------
# front-end layers (issue 23 item 3): Pad, Interpolate, Mish, DepthToSpace, SpaceToDepth,
# ReverseSequence, Identity


@_op("Mish", 4)
def convert_mish(n, x):
    n.emit("Mish", [x])


@_op("Identity", 16)
def convert_identity(n, x):
    n.emit("Identity", [x])


def _as_int64(n, value: str) -> str:
    return n.b.op1("Cast", value, to=np.dtype(np.int64))


def _pad_layer(n, x, begin, end, value, negative: bool):
    """Pad-1 (pads >= 0) and Pad-12 (negative pads crop): constant, edge and reflect are ONNX Pad with
    the begin and end pads joined; symmetric (mirrored with the edge) is sliced from the input
    flanked by its reverse on each padded axis."""
    mode = n.attr("pad_mode", "constant").lower()
    if mode not in ("constant", "edge", "reflect", "symmetric"):
        raise n.unsupported(f"pad_mode '{mode}' is not supported (constant, edge, reflect and symmetric are)")
    if not negative:
        for name, what in ((begin, "pads_begin"), (end, "pads_end")):
            fixed = n.b.graph.constants.get(name)
            if fixed is not None and (fixed < 0).any():
                raise n.fail(f"{what} {fixed.reshape(-1).tolist()} has a negative pad, which Pad-1 does not take "
                             "(Pad-12 crops)")
    if mode == "symmetric":
        _symmetric_pad(n, x, begin, end)
        return
    b = n.b
    fixed = [b.graph.constants.get(v) for v in (begin, end)]
    pads = b.op1("Concat", _as_int64(n, begin), _as_int64(n, end), axis=0)
    if mode == "constant" or not negative or all(f is not None and (f >= 0).all() for f in fixed):
        n.emit("Pad", [x, pads, value] if value and mode == "constant" else [x, pads], mode=mode)
        return
    # OpenVINO pads from the whole input, then crops (ONNX crops first: an edge or reflection would
    # read what the crop removed): pad by the positive parts, then slice the negative ones off.
    zero = n.const([0])
    padded = b.op1("Pad", x, b.op1("Max", pads, zero), mode=mode)
    cut = b.op1("Max", b.op1("Neg", pads), zero)
    shape = n.in_shape(0)
    count = n.const([len(shape)]) if shape is not None else b.op1("Shape", begin)  # (a fixed length compiles)
    starts = b.op1("Slice", cut, zero, count)
    stops = b.op1("Sub", b.op1("Shape", padded), b.op1("Slice", cut, count, n.const([INT64_MAX])))
    n.emit("Slice", [padded, starts, stops])


def _symmetric_pad(n, x, begin, end):
    """Axis by axis: Concat(reverse(x), x, reverse(x))[size - begin : 2 size + end], which is x mirrored
    with its edge for pads up to the axis' size (as OpenVINO requires for this mode)."""
    shape = n.in_shape(0)
    if shape is None:
        raise n.unsupported("pad_mode 'symmetric' needs the input's rank, which the model does not give")
    b = n.b
    fixed = [b.graph.constants.get(v) for v in (begin, end)]
    begin, end = _as_int64(n, begin), _as_int64(n, end)
    for a in range(len(shape)):
        if all(f is not None and f.reshape(-1)[a] == 0 for f in fixed):
            continue
        size = b.op1("Shape", x, start=a, end=a + 1)
        before = b.op1("Slice", begin, n.const([a]), n.const([a + 1]))
        after = b.op1("Slice", end, n.const([a]), n.const([a + 1]))
        mirrored = b.op1("Slice", x, n.const([-1]), n.const([INT64_MIN]), n.const([a]), n.const([-1]))
        flanked = b.op1("Concat", mirrored, x, mirrored, axis=a)
        x = b.op1("Slice", flanked, b.op1("Sub", size, before), b.op1("Add", b.op1("Add", size, size), after),
                  n.const([a]))
    n.emit("Identity", [x])


@_op("Pad", 1)
def convert_pad_1(n, x, begin, end, value=""):
    _pad_layer(n, x, begin, end, value, negative=False)


@_op("Pad", 12)
def convert_pad_12(n, x, begin, end, value=""):
    _pad_layer(n, x, begin, end, value, negative=True)


# Interpolate's modes as Resize's: (mode, exclude_outside). OpenVINO's "linear" is a triangle filter
# that leaves out the taps outside the input and renormalises the rest (exclude_outside);
# "linear_onnx" and "cubic" read the edge for them.
_INTERPOLATE_MODES = {"nearest": ("nearest", 0), "linear_onnx": ("linear", 0), "linear": ("linear", 1),
                      "cubic": ("cubic", 0)}
_INTERPOLATE_COORDINATES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "tf_half_pixel_for_nn", "align_corners")
_INTERPOLATE_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


def _interpolate_pads(n, x):
    """x with Interpolate's pads_begin and pads_end added (zeros), which it interpolates from."""
    begin, end = n.attr_ints("pads_begin", [0]), n.attr_ints("pads_end", [0])
    if not any(begin) and not any(end):
        return x
    shape = n.in_shape(0)
    if shape is None:
        raise n.unsupported("pads_begin/pads_end need the input's rank, which the model does not give")
    rank = len(shape)
    if len(begin) > rank or len(end) > rank:
        raise n.fail(f"pads_begin {begin} and pads_end {end} have more entries than the input's rank {rank}")
    pads = begin + [0] * (rank - len(begin)) + end + [0] * (rank - len(end))
    return n.b.op1("Pad", x, n.const(pads), mode="constant")


def _interpolate(n, x, target, calculation: str, axes: list[int] | None, *, mode: str, coordinates: str,
                 nearest: str, antialias: bool, cube: float):
    if mode not in _INTERPOLATE_MODES:
        raise n.unsupported(f"mode '{mode}' is not supported ({', '.join(_INTERPOLATE_MODES)} are)")
    if coordinates not in _INTERPOLATE_COORDINATES:
        raise n.unsupported(f"coordinate_transformation_mode '{coordinates}' is not supported "
                            f"({', '.join(_INTERPOLATE_COORDINATES)} are)")
    if nearest not in _INTERPOLATE_NEAREST:
        raise n.unsupported(f"nearest_mode '{nearest}' is not supported ({', '.join(_INTERPOLATE_NEAREST)} are)")
    if calculation not in ("sizes", "scales"):
        raise n.unsupported(f"shape_calculation_mode '{calculation}' is not supported (sizes and scales are)")
    resize_mode, exclude = _INTERPOLATE_MODES[mode]
    x = _interpolate_pads(n, x)
    b = n.b
    if calculation == "scales" and coordinates == "align_corners":
        # align_corners reads the output length, which OpenVINO computes as floor(length * scale + 1e-3)
        # in float32 (Resize's floor(length * scale) differs just below an integer): the sizes
        dims = b.op1("Shape", x) if axes is None else b.op1("Gather", b.op1("Shape", x), n.const(axes))
        product = b.op1("Mul", b.op1("Cast", dims, to=np.dtype(np.float32)), b.op1("Cast", target, to=np.dtype(np.float32)))
        target = b.op1("Floor", b.op1("Add", product, n.const(1e-3, np.float32)))
        calculation = "sizes"
    if calculation == "sizes":
        inputs = [x, "", "", _as_int64(n, target)]
    else:
        inputs = [x, "", b.op1("Cast", target, to=np.dtype(np.float32))]
    attrs = dict(mode=resize_mode, coordinate_transformation_mode=coordinates, nearest_mode=nearest,
                 cubic_coeff_a=cube, exclude_outside=exclude, antialias=int(antialias))
    if axes is not None:
        attrs["axes"] = axes
    n.emit("Resize", inputs, **attrs)


def _interpolate_axes(n, axes: str) -> list[int] | None:
    return None if not axes else _constant(n, axes, "axes").reshape(-1).astype(int).tolist()


@_op("Interpolate", 1)
def convert_interpolate_1(n, x, target):
    """Interpolate-1 (target sizes of `axes`), as OpenVINO converts it to Interpolate-4: nearest picks
    the floor (the ceiling where an axis shrinks), linear reads the edge outside, coordinates are
    asymmetric or align_corners."""
    mode = n.attr("mode").lower()
    if mode not in ("nearest", "linear", "cubic"):
        raise n.unsupported(f"mode '{mode}' is not supported (nearest, linear and cubic are)")
    aligned = n.attr_bool("align_corners", False)
    _interpolate(n, x, target, "sizes", n.attr_ints("axes"), mode="linear_onnx" if mode == "linear" else mode,
                 coordinates="align_corners" if aligned else "asymmetric", nearest="simple",
                 antialias=n.attr_bool("antialias", False), cube=-0.75)


def _interpolate_attrs(n) -> dict:
    return dict(mode=n.attr("mode").lower(),
                coordinates=n.attr("coordinate_transformation_mode", "half_pixel").lower(),
                nearest=n.attr("nearest_mode", "round_prefer_floor").lower(),
                antialias=n.attr_bool("antialias", False), cube=n.attr_float("cube_coeff", -0.75))


@_op("Interpolate", 4)
def convert_interpolate_4(n, x, sizes, scales, axes=""):
    calculation = n.attr("shape_calculation_mode").lower()
    _interpolate(n, x, sizes if calculation == "sizes" else scales, calculation, _interpolate_axes(n, axes),
                 **_interpolate_attrs(n))


@_op("Interpolate", 11)
def convert_interpolate_11(n, x, scales_or_sizes, axes=""):
    _interpolate(n, x, scales_or_sizes, n.attr("shape_calculation_mode").lower(), _interpolate_axes(n, axes),
                 **_interpolate_attrs(n))


def _blocks(n) -> tuple[int, str]:
    size, mode = n.attr_int("block_size", 1), n.attr("mode").lower()
    if mode not in ("blocks_first", "depth_first"):
        raise n.unsupported(f"mode '{mode}' is not supported (blocks_first and depth_first are)")
    if size < 1:
        raise n.fail(f"block_size must be at least 1, got {size}")
    return size, mode


def _block_shape(n) -> list[int]:
    """The input's dims after the first, which a layer of rank other than 4 needs fixed."""
    shape = n.in_shape(0)
    if shape is None or len(shape) < 3 or any(not isinstance(d, int) for d in shape[1:]):
        raise n.unsupported(f"a rank other than 4 needs the input's rank and every dim but the first fixed "
                            f"(the model gives {shape})")
    return list(shape)


@_op("DepthToSpace")
def convert_depth_to_space(n, x):
    size, mode = _blocks(n)
    shape = n.in_shape(0)
    if shape is not None and len(shape) == 4:
        n.emit("DepthToSpace", [x], blocksize=size, mode="DCR" if mode == "blocks_first" else "CRD")
        return
    shape = _block_shape(n)
    k, channels, spatial = len(shape) - 2, shape[1], shape[2:]
    depth = channels // size ** k
    if depth * size ** k != channels:
        raise n.fail(f"the {channels} channels do not divide into blocks of {size}^{k}")
    if mode == "blocks_first":
        split = [0] + [size] * k + [depth] + spatial
        perm = [0, k + 1] + [p for i in range(1, k + 1) for p in (k + 1 + i, i)]
    else:
        split = [0, depth] + [size] * k + spatial
        perm = [0, 1] + [p for i in range(1, k + 1) for p in (k + 1 + i, 1 + i)]
    b = n.b
    y = b.op1("Transpose", b.op1("Reshape", x, n.const(split)), perm=perm)
    n.emit("Reshape", [y, n.const([0, depth] + [d * size for d in spatial])])


@_op("SpaceToDepth")
def convert_space_to_depth(n, x):
    size, mode = _blocks(n)
    shape = n.in_shape(0)
    if shape is not None and len(shape) == 4:
        n.emit("SpaceToDepth", [x], blocksize=size, mode="DCR" if mode == "blocks_first" else "CRD")
        return
    shape = _block_shape(n)
    k, channels, spatial = len(shape) - 2, shape[1], shape[2:]
    if any(d % size for d in spatial):
        raise n.fail(f"the spatial dims {spatial} must be multiples of the block size {size}")
    split = [0, channels] + [p for d in spatial for p in (d // size, size)]
    blocks, dims = [2 * i + 1 for i in range(1, k + 1)], [2 * i for i in range(1, k + 1)]
    perm = [0] + blocks + [1] + dims if mode == "blocks_first" else [0, 1] + blocks + dims
    b = n.b
    y = b.op1("Transpose", b.op1("Reshape", x, n.const(split)), perm=perm)
    n.emit("Reshape", [y, n.const([0, channels * size ** k] + [d // size for d in spatial])])


@_op("ReverseSequence")
def convert_reverse_sequence(n, x, lengths):
    """ONNX's ReverseSequence takes the batch and time axes among the first two: other axes are
    transposed there and back."""
    batch, seq = n.attr_int("batch_axis", 0), n.attr_int("seq_axis", 1)
    lengths = _as_int64(n, lengths)
    if {batch, seq} == {0, 1}:
        n.emit("ReverseSequence", [x, lengths], batch_axis=batch, time_axis=seq)
        return
    shape = n.in_shape(0)
    if shape is None:
        raise n.unsupported("batch_axis and seq_axis beyond the first two need the input's rank, which the "
                            "model does not give")
    rank = len(shape)
    if not (-rank <= batch < rank and -rank <= seq < rank) or batch % rank == seq % rank:
        raise n.fail(f"batch_axis {batch} and seq_axis {seq} must be two different axes of the rank {rank} input")
    batch, seq = batch % rank, seq % rank
    perm = [batch, seq] + [a for a in range(rank) if a not in (batch, seq)]
    inverse = [perm.index(a) for a in range(rank)]
    b = n.b
    y = b.op1("ReverseSequence", b.op1("Transpose", x, perm=perm), lengths, batch_axis=0, time_axis=1)
    n.emit("Transpose", [y], perm=inverse)


# ---------------------------------------------------------------------------------------------
# convolutions (issue 23 item 1): into the IR's Conv and ConvTranspose (rnnloop/interp/conv_ops.py).
# GroupConvolution's filters [G, O/G, I/G, k...] are the ONNX W [O, I/G, k...] of group G once their
# first two axes merge (at load for a Const); the backprop layers' [G, I/G, O/G, k...] likewise.

_AUTO_PAD = {"explicit": "NOTSET", "notset": "NOTSET", "valid": "VALID", "same_upper": "SAME_UPPER",
             "same_lower": "SAME_LOWER"}


def _conv_attrs(n, spatial: int) -> tuple[str, list[int], list[int], list[int], list[int]]:
    """auto_pad (lower case, checked), strides, dilations, pads_begin and pads_end of `spatial` values each."""
    auto_pad = n.attr("auto_pad", "explicit").lower()
    if auto_pad not in _AUTO_PAD:
        raise n.fail(f"auto_pad '{auto_pad}' is not one of {', '.join(_AUTO_PAD)}")
    values = []
    for key in ("strides", "dilations", "pads_begin", "pads_end"):
        v = n.attr_ints(key, [1 if key in ("strides", "dilations") else 0] * spatial)
        if len(v) != spatial:
            raise n.fail(f"{key} has {len(v)} values for {spatial} spatial axes")
        values.append(v)
    return (auto_pad, *values)


def _spatial(n, k: int = 1) -> int:
    """The spatial rank of a convolution, from its filters' rank (input k), which the IR gives."""
    shape = n.in_shape(k)
    if shape is None:
        raise n.unsupported("the filters' rank is not given")
    return len(shape) - (3 if n.layer.type.startswith("Group") else 2)


def _merged_filters(n, filters: str) -> str:
    """Group filters [G, A, B, k...] as [G * A, B, k...]: reshaped at load when they are a Const."""
    value = n.b.graph.constants.get(filters)
    if value is not None:
        return n.b.constant(np.ascontiguousarray(value.reshape((-1,) + value.shape[2:])))
    shape = n.in_shape(1)
    if shape is None or any(d is None for d in shape[2:]):
        raise n.unsupported("computed group filters need their spatial shape, which the model does not give")
    return n.b.op1("Reshape", filters, n.const([-1] + list(shape[2:])))


def _convolution(n, x, filters, group: int) -> None:
    spatial = _spatial(n)
    auto_pad, strides, dilations, begin, end = _conv_attrs(n, spatial)
    pads = {"pads": begin + end} if _AUTO_PAD[auto_pad] == "NOTSET" else {}
    n.emit("Conv", [x, filters], auto_pad=_AUTO_PAD[auto_pad], strides=strides, dilations=dilations,
           group=group, **pads)


@_op("Convolution")
def convert_convolution(n, x, filters):
    _convolution(n, x, filters, 1)


@_op("GroupConvolution")
def convert_group_convolution(n, x, filters):
    shape = n.in_shape(1)
    if shape is None or shape[0] is None:
        raise n.unsupported("the group count (the filters' first axis) is not given")
    _convolution(n, x, _merged_filters(n, filters), int(shape[0]))


def _backprop(n, x, filters, output_shape: str, group: int) -> None:
    """ConvTranspose with OpenVINO's padding (its CPU plugin's, which the spec's text does not quite
    say): without output_shape, pads_begin/pads_end for explicit and none otherwise (same_* only
    take effect with output_shape); with output_shape, cut pads_begin (explicit), nothing (valid),
    or of the total full - output_shape, ceil(total / 2) (same_upper) or floor(total / 2)
    (same_lower), never less than 0, from the full result's beginning; output past its end is zeros."""
    spatial = _spatial(n)
    auto_pad, strides, dilations, begin, end = _conv_attrs(n, spatial)
    output_padding = n.attr_ints("output_padding", [0] * spatial)
    if len(output_padding) != spatial:
        raise n.fail(f"output_padding has {len(output_padding)} values for {spatial} spatial axes")
    attrs = dict(strides=strides, dilations=dilations, group=group, output_padding=output_padding)
    if not output_shape:
        n.emit("ConvTranspose", [x, filters], pads=(begin + end) if auto_pad in ("explicit", "notset") else
               [0] * (2 * spatial), **attrs)
        return
    wanted = [int(v) for v in _constant(n, output_shape, "output_shape").reshape(-1)]
    sizes, kernel = n.in_shape(0), n.in_shape(1)
    if len(wanted) != spatial:
        raise n.fail(f"output_shape has {len(wanted)} values for {spatial} spatial axes")
    if sizes is None or any(d is None for d in sizes[2:]) or any(d is None for d in kernel[-spatial:]):
        raise n.unsupported("output_shape needs the input's and the filters' spatial sizes, which the model "
                            "does not give")
    cut, trim, short = [], [], []  # from the full result's beginning and end; zeros after it
    for a in range(spatial):
        full = (strides[a] * (sizes[2 + a] - 1) + (kernel[-spatial + a] - 1) * dilations[a] + 1
                + output_padding[a])
        total = full - wanted[a]
        c = {"explicit": begin[a], "notset": begin[a], "valid": 0, "same_upper": total - total // 2,
             "same_lower": total // 2}[auto_pad]
        cut.append(max(c, 0))
        trim.append(max(full - cut[a] - wanted[a], 0))
        short.append(wanted[a] - (full - cut[a] - trim[a]))
    y = n.b.op1("ConvTranspose", x, filters, pads=cut + trim, **attrs)
    if any(short):  # output_shape reaches past the full result: zeros
        n.emit("Pad", [y, n.const([0] * (2 + spatial) + [0, 0] + short)], mode="constant")
    else:
        n.emit("Identity", [y])


@_op("ConvolutionBackpropData")
def convert_convolution_backprop_data(n, x, filters, output_shape=""):
    _backprop(n, x, filters, output_shape, 1)


@_op("GroupConvolutionBackpropData")
def convert_group_convolution_backprop_data(n, x, filters, output_shape=""):
    shape = n.in_shape(1)
    if shape is None or shape[0] is None:
        raise n.unsupported("the group count (the filters' first axis) is not given")
    _backprop(n, x, _merged_filters(n, filters), output_shape, int(shape[0]))
