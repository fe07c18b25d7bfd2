"""Output types of one IR op from its input types, by ONNX's own shape inference at opset 18.

The Network builder checks every op as it is added: ONNX's inference knows the broadcasting,
matmul, reshape and reduction rules of every op the IR shares with ONNX, and it rejects inputs that
do not fit. Constant inputs are passed as data, so a Reshape to a constant shape gets that shape.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import defs, numpy_helper, shape_inference

from .errors import BuildError
from .export import OPSET, node_proto, type_proto
from .frontends.onnx import ir_type
from .ir import Op, TensorType, Type

# Ops ONNX no longer has, whose output has their input's type; and ops whose output has their input's
# type that ONNX defines by a function body alone (no inference of their own at OPSET).
_SAME_TYPE = frozenset({"Affine", "ScaledTanh", "GroupNormalization", "MeanVarianceNormalization"})
# Ops whose IR form is newer than OPSET: inferred by the schema of that version.
_NEWER = {"AveragePool": 19, "Gelu": 20, "SpaceToDepth": 28, "QuantizeLinear": 25, "DequantizeLinear": 25}
# Ops whose output has their input's rank, which ONNX's inference leaves unknown when their pads or
# axes are computed at run time.
_SAME_RANK = frozenset({"Pad"})
_DATA_LIMIT = 4096  # elements of a constant input passed to inference as data
# Ops whose output ONNX's inference leaves without a shape unless their sizes are constants: their
# rank from interp.signal_ops.output_type.
_SIGNAL = frozenset({"STFT", "DFT", "HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix"})


def schema(op_type: str) -> defs.OpSchema | None:
    """The ONNX schema of an op at the exported opset (None for the ops ONNX dropped)."""
    try:
        return defs.get_schema(op_type, max(OPSET, _NEWER.get(op_type, OPSET)))
    except defs.SchemaError:
        return None


def infer(op: Op, types: list[Type | None], values: dict[str, np.ndarray]) -> list[Type | None]:
    """The types of op's outputs; a BuildError naming the op when its inputs or attributes do not fit."""
    if op.op_type in _SAME_TYPE:
        return [types[0]]
    found = schema(op.op_type)
    if found is None:
        raise BuildError(f"{op.where()}: '{op.op_type}' is not an op rnnloop can build")
    input_types = {n: type_proto(t) for n, t in zip(op.inputs, types) if n}
    data = {n: numpy_helper.from_array(v, n) for n, v in values.items()
            if n in input_types and isinstance(v, np.ndarray) and v.size <= _DATA_LIMIT and v.dtype != object}
    try:
        node = node_proto(op)
        inferred = shape_inference.infer_node_outputs(found, node, input_types, data)
    except (onnx.checker.ValidationError, shape_inference.InferenceError, TypeError, ValueError) as e:
        shown = ", ".join(f"{n}: {t}" for n, t in zip(op.inputs, types) if n)
        reason = str(e).split("] ", 1)[-1].strip()
        raise BuildError(f"{op.where()}: its inputs ({shown}) or attributes ({_attrs(op.attrs)}) do not fit "
                         f"the op: {reason}") from None
    outs = [ir_type(inferred[n]) if n in inferred else None for n in op.outputs]
    if op.op_type in _SAME_RANK and outs[0] is not None and outs[0].shape is None \
            and isinstance(types[0], TensorType) and types[0].shape is not None:
        outs[0] = TensorType(outs[0].dtype, (None,) * len(types[0].shape))
    if op.op_type in _SIGNAL and (outs[0] is None or outs[0].shape is None):  # (sizes ONNX could not compute)
        from .interp.signal_ops import output_type
        outs[0] = output_type(op, types) or outs[0]
    return outs


def _attrs(attrs: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in sorted(attrs.items())) or "none"
