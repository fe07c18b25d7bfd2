"""Converters for ONNX tensor ops: the current forms pass through, older forms are rewritten to them."""

from __future__ import annotations

import numpy as np

from ..errors import UnsupportedModelError
from .registry import converts

# The opset since which each op has the input/attribute form the IR uses (the interpreter's
# signatures). Nodes from these versions on pass through unchanged.
CURRENT_FORMS: dict[str, int] = {
    **dict.fromkeys(["Add", "Sub", "Mul", "Div", "Pow", "Sin", "Cos", "And", "Or", "Xor", "Equal",
                     "Less", "Greater", "Gemm", "PRelu"], 7),
    **dict.fromkeys(["Neg", "Abs", "Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Ceil", "Relu",
                     "Sigmoid", "Tanh", "LeakyRelu", "Elu", "Selu", "HardSigmoid", "Min", "Max",
                     "Sum", "Mean", "Tile", "Cast"], 6),
    **dict.fromkeys(["Softplus", "Softsign", "Not", "MatMul", "Identity", "Flatten", "Transpose",
                     "Size", "Shape", "ArgMax", "ArgMin", "Gather"], 1),
    **dict.fromkeys(["Sign", "Erf", "IsNaN", "Where", "ConstantOfShape", "NonZero", "OneHot"], 9),
    **dict.fromkeys(["Mod", "IsInf", "ThresholdedRelu"], 10),
    **dict.fromkeys(["Round", "GatherElements", "GatherND", "ScatterND", "ScatterElements", "Range",
                     "Pad", "CumSum", "TopK", "Clip", "SequenceEmpty", "SequenceConstruct",
                     "SequenceInsert", "SequenceAt", "SequenceErase", "SequenceLength",
                     "ConcatFromSequence", "SplitToSequence"], 11),
    **dict.fromkeys(["LessOrEqual", "GreaterOrEqual", "Einsum", "Dropout"], 12),
    **dict.fromkeys(["Squeeze", "Unsqueeze", "ReduceSum", "Softmax", "LogSoftmax"], 13),
    **dict.fromkeys(["Trilu"], 14),
    **dict.fromkeys(["CastLike", "Optional", "OptionalHasElement", "OptionalGetElement"], 15),
    **dict.fromkeys(["ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2",
                     "ReduceLogSumExp"], 18),
    "Reshape": 5, "Expand": 8, "Concat": 4, "Slice": 10,
    "Conv": 1, "ConvTranspose": 1,  # (opset 11 and 22 only clarify the text and add types)
}


def convert_as_is(n, *inputs, **attrs) -> None:
    """The node already has the IR's form."""
    n.emit(n.op_type, inputs, **attrs)


for _op, _since in CURRENT_FORMS.items():
    converts(_op, since=_since)(convert_as_is)


def _const_input(n, value, dtype=np.int64) -> str:
    return "" if value is None else n.b.constant(np.asarray(value, dtype=dtype))


@converts("Split", since=13)
def convert_split_13(n, x, split="", *, axis=0, num_outputs=None):
    """Split-13 infers the part count from the node's outputs; Split-18 names it."""
    if not split and num_outputs is None:
        num_outputs = len(n.outputs)
    attrs = {} if split else {"num_outputs": num_outputs}
    n.emit("Split", [x, split], axis=axis, **attrs)


@converts("Split", since=18)
def convert_split_18(n, x, split="", *, axis=0, num_outputs=None):
    n.emit("Split", [x, split], axis=axis, **({} if split else {"num_outputs": num_outputs}))


@converts("Split", since=2)
def convert_split_2(n, x, *, axis=0, split=None):
    if split is not None:
        n.emit("Split", [x, _const_input(n, split)], axis=axis)
    else:
        n.emit("Split", [x, ""], axis=axis, num_outputs=len(n.outputs))


@converts("Slice", since=1)
def convert_slice_1(n, x, *, starts, ends, axes=None):
    n.emit("Slice", [x, _const_input(n, starts), _const_input(n, ends), _const_input(n, axes)])


for _op in ("Squeeze", "Unsqueeze"):
    @converts(_op, since=1)
    def convert_axes_attr(n, x, *, axes=None):
        """Squeeze/Unsqueeze before 13 took axes as an attribute."""
        n.emit(n.op_type, [x, _const_input(n, axes)])


for _op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceLogSumExp"):
    @converts(_op, since=1)
    def convert_reduce_axes_attr(n, x, *, axes=None, keepdims=1):
        """Reductions took axes as an attribute before 13 (ReduceSum) or 18 (the others)."""
        n.emit(n.op_type, [x, _const_input(n, axes)], keepdims=keepdims)


@converts("Clip", since=6)
def convert_clip_6(n, x, *, min=-3.4028234663852886e38, max=3.4028234663852886e38):
    dtype = n.dtype_of(x) or np.float32
    n.emit("Clip", [x, _const_input(n, min, dtype), _const_input(n, max, dtype)])


@converts("Pad", since=2)
def convert_pad_2(n, x, *, pads, mode="constant", value=0.0):
    dtype = n.dtype_of(x) or np.float32
    n.emit("Pad", [x, _const_input(n, pads), _const_input(n, value, dtype)], mode=mode)


@converts("TopK", since=1)
def convert_topk_1(n, x, *, k, axis=-1):
    n.emit("TopK", [x, _const_input(n, [k])], axis=axis)


@converts("Dropout", since=7)
def convert_dropout_7(n, x, *, ratio=0.5):
    """Inference: Dropout passes its input through (the ratio only matters in training)."""
    n.emit("Dropout", [x])


for _op in ("Softmax", "LogSoftmax"):
    @converts(_op, since=1)
    def convert_softmax_1(n, x, *, axis=1):
        """Before 13 the input was coerced to 2-D at `axis` and normalised over the flattened tail."""
        flat = n.b.op1("Flatten", x, axis=axis)
        y = n.b.op1(n.op_type, flat, axis=-1)
        n.emit("Reshape", [y, n.b.op1("Shape", x)])


@converts("Reshape", since=1)
def convert_reshape_1(n, x, *, shape):
    n.emit("Reshape", [x, _const_input(n, shape)])


@converts("Constant", since=1)
def convert_constant(n, *, value=None, value_float=None, value_floats=None, value_int=None,
                     value_ints=None, value_string=None, value_strings=None, sparse_value=None):
    """A Constant node becomes a constant of the IR graph."""
    if sparse_value is not None:
        raise UnsupportedModelError(f"{n.origin}: sparse constants are not supported; "
                                    "store the value as a dense tensor")
    if value is None:
        for v, dtype in ((value_float, np.float32), (value_floats, np.float32), (value_int, np.int64),
                         (value_ints, np.int64), (value_string, object), (value_strings, object)):
            if v is not None:
                value = np.asarray(v, dtype=dtype)
                break
    n.b.constant(value, name=n.outputs[0])
