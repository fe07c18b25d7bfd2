"""Converters for ONNX pooling and normalisation ops (the interpreter's forms: rnnloop/interp/nn_ops.py).

Every opset form of the pools takes a subset of the newest form's attributes with the same
defaults, so the nodes pass through as they are. BatchNormalization is inference only: its
training forms are rejected by name. GroupNormalization-18 (scale and bias per group) is rewritten
to the opset 21 form (per channel).
"""

from __future__ import annotations

import numpy as np
from onnx import helper

from ..errors import UnsupportedModelError
from .onnx_ops import convert_as_is
from .registry import converts

# Ops whose every form the IR's (newest) form covers: since-version of the oldest one.
AS_IS: dict[str, int] = {
    "MaxPool": 1, "AveragePool": 1, "LpPool": 1, "GlobalAveragePool": 1, "GlobalMaxPool": 1,
    "InstanceNormalization": 6, "LayerNormalization": 17, "GroupNormalization": 21, "LpNormalization": 1,
    "MeanVarianceNormalization": 9,
}

for _op, _since in AS_IS.items():
    converts(_op, since=_since)(convert_as_is)

_TRAINING = ("rnnloop runs inference only: export the model in eval mode (torch: model.eval(); "
             "BatchNormalization with training_mode=0 and the output Y alone)")


def _inference_only(n, training: str = "") -> None:
    """BatchNormalization computes batch statistics (training) when its attribute, `training`, asks
    for it or when its node lists the running or saved statistics as outputs; both are rejected by name."""
    extra = [o for o in n.outputs[1:] if o]
    if training or extra:
        what = training or f"the training outputs {', '.join(repr(o) for o in extra)}"
        raise UnsupportedModelError(f"{n.origin}: BatchNormalization with {what} is not supported; {_TRAINING}")


@converts("BatchNormalization", since=14)
def convert_batchnormalization_14(n, X, scale, B, input_mean, input_var, *, epsilon=1e-5, momentum=0.9,
                                  training_mode=0):
    """Opset 14 and 15: inference with the stored statistics (training_mode=0)."""
    _inference_only(n, "training_mode=1" if training_mode else "")
    n.emit("BatchNormalization", [X, scale, B, input_mean, input_var], epsilon=epsilon)


@converts("BatchNormalization", since=9)
def convert_batchnormalization_9(n, X, scale, B, mean, var, *, epsilon=1e-5, momentum=0.9):
    """Opset 9: test mode is the node with the output Y alone."""
    _inference_only(n)
    n.emit("BatchNormalization", [X, scale, B, mean, var], epsilon=epsilon)


@converts("BatchNormalization", since=1)
def convert_batchnormalization_1(n, X, scale, B, mean, var, *, epsilon=1e-5, momentum=0.9, spatial=1,
                                 is_test=None, consumed_inputs=None):
    """Opsets 1 to 8: is_test (before 7) and spatial. spatial=0 normalises each activation: the
    statistics have the shape of X without N, so the node becomes elementwise ops."""
    _inference_only(n, "is_test=0" if is_test is not None and not is_test else "")
    if spatial:
        n.emit("BatchNormalization", [X, scale, B, mean, var], epsilon=epsilon)
        return
    b = n.b
    dtype = n.dtype_of(X) or np.dtype(np.float32)
    a = b.op1("Div", scale, b.op1("Sqrt", b.op1("Add", var, b.constant(np.asarray(epsilon, dtype)))))
    n.emit("Add", [b.op1("Mul", X, a), b.op1("Sub", B, b.op1("Mul", mean, a))])


@converts("InstanceNormalization", since=1)
def convert_instancenormalization_1(n, x, scale, B, *, epsilon=1e-5, consumed_inputs=None):
    """Opset 1: consumed_inputs was an optimisation hint of the time; it changes nothing."""
    n.emit("InstanceNormalization", [x, scale, B], epsilon=epsilon)


@converts("GroupNormalization", since=18)
def convert_groupnormalization_18(n, X, scale, bias, *, num_groups=None, epsilon=1e-5):
    """Opset 18 took scale and bias per group, and standardised in X's dtype: each value is
    repeated for the C / num_groups channels of its group (opset 21 form)."""
    if num_groups is None:
        raise UnsupportedModelError(f"{n.origin}: the num_groups attribute is required")
    b = n.b
    t = n.type_of(X)
    channels = t.shape[1] if t is not None and getattr(t, "shape", None) and len(t.shape) > 1 else None
    if isinstance(channels, int) and channels % num_groups == 0:
        per = b.constant(np.array([1, channels // num_groups], np.int64))
    else:  # C known at run time only: [1, C / num_groups]
        c = b.op1("Shape", X, start=1, end=2)
        per = b.op1("Concat", b.constant(np.array([1], np.int64)),
                    b.op1("Div", c, b.constant(np.array([num_groups], np.int64))), axis=0)
    flat = b.constant(np.array([-1], np.int64))
    column = b.constant(np.array([1], np.int64))

    def per_channel(v: str) -> str:
        return b.op1("Reshape", b.op1("Expand", b.op1("Unsqueeze", v, column), per), flat)

    dtype = n.dtype_of(X)
    stash = helper.np_dtype_to_tensor_dtype(dtype) if dtype is not None and dtype.kind == "f" else 1
    n.emit("GroupNormalization", [X, per_channel(scale), per_channel(bias)], num_groups=num_groups,
           epsilon=epsilon, stash_type=int(stash))
