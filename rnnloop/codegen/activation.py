"""Activations folded into the convolution that computes their input.

A Conv followed by a Relu (or a Clip of constant bounds: ReLU6, hardtanh) is how every exporter
writes a convolutional layer. Run as two ops, the activation is a second pass over the Conv's whole
output and a buffer of its size: 800 KiB read and written again after the CRNN's first layer.
onnxruntime fuses the pair (its FusedConv); here the convolution entries (conv_rt.py) hold every
output to bounds (lo, hi) as they store it, and `fold` gives the Conv those bounds.

It folds an activation when its input is a Conv's only output, read by nothing else and not an
output of the graph. The folded Conv exists only while a kernel is generated: the session's graph,
the interpreter and a fallback still see the two ops. (A NaN bound is not folded: Clip's maximum
and minimum with NaN make every value NaN, where the entries' comparisons would keep them.)
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from ..interp.math_ops import finite_limits
from ..ir import Graph, Op, TensorType

BOUNDS = "rnnloop.bounds"  # the folded Conv's attribute: (lo, hi), floats
PRODUCERS = frozenset({"Conv", "ConvTranspose"})  # ops whose code generation rule applies BOUNDS


def fold(body: Graph, const: Callable[[str], np.ndarray | None]) -> tuple[Graph, dict[int, Op]]:
    """`body` with each foldable activation folded into its Conv, and the op each folded Conv
    stands for (by id() of the folded Conv: errors name the Conv). `const` gives the value of a
    constant (LoopGen.const)."""
    readers: dict[str, int] = {}
    for op in body.ops:
        for name in op.inputs:
            readers[name] = readers.get(name, 0) + 1
    producers = {op.outputs[0]: op for op in body.ops
                 if type(op) is Op and op.op_type in PRODUCERS and len(op.outputs) == 1 and BOUNDS not in op.attrs}
    folded: dict[int, Op | None] = {}
    originals: dict[int, Op] = {}
    for op in body.ops:
        producer = producers.get(op.inputs[0]) if type(op) is Op and op.inputs else None
        if producer is None or readers[op.inputs[0]] != 1 or op.inputs[0] in body.outputs:
            continue
        t = body.type_of(op.inputs[0])
        bounds = _bounds(op, const, np.dtype(t.dtype) if isinstance(t, TensorType) and t.dtype is not None else None)
        if bounds is None:
            continue
        conv = dataclasses.replace(producer, outputs=list(op.outputs), attrs={**producer.attrs, BOUNDS: bounds})
        folded[id(producer)], folded[id(op)] = conv, None
        originals[id(conv)] = producer
    if not folded:
        return body, {}
    ops = [folded.get(id(op), op) for op in body.ops]
    return dataclasses.replace(body, ops=[op for op in ops if op is not None]), originals


def _bounds(op: Op, const: Callable[[str], np.ndarray | None], dtype: np.dtype | None) -> tuple[float, float] | None:
    """The bounds (lo, hi) that apply activation `op` to a value of `dtype`, or None."""
    if dtype is None or dtype.kind != "f" or len(op.outputs) != 1:
        return None
    if op.op_type == "Relu" and len(op.inputs) == 1:
        return 0.0, np.inf
    if op.op_type == "Clip":
        lo, hi = finite_limits(dtype)  # (Clip's defaults: the finite limits, to which it clips infinities)
        values = []
        for name, default in zip((op.inputs + ["", ""])[1:3], (lo, hi)):
            value = const(name) if name else np.asarray(default, dtype)
            if not isinstance(value, np.ndarray) or value.size != 1 or value.dtype != dtype or np.isnan(value):
                return None
            values.append(float(value.reshape(-1)[0]))
        return values[0], values[1]
    return None
