"""Converters for ONNX's audio front ends (the interpreter's forms: rnnloop/interp/signal_ops.py).

STFT-17 passes through, with a [batch, length] signal (torch's export) given its real axis and
onesided written out; DFT-20's axis input becomes DFT-17's attribute (the IR's form, the one ONNX
opset 18 knows); the windows' and MelWeightMatrix's output_datatype code becomes a NumPy dtype.
Attribute values outside the spec are rejected here, at load, by name.
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from ..errors import UnsupportedModelError
from ..ir import TensorType
from .registry import converts

# output_datatype codes the windows and MelWeightMatrix may make (their T2/T3 type constraints)
_NUMERIC = {TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64, TensorProto.INT8,
            TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.FLOAT16, TensorProto.FLOAT,
            TensorProto.DOUBLE, TensorProto.BFLOAT16}


def _unsupported(n, message: str) -> UnsupportedModelError:
    return UnsupportedModelError(f"{n.origin}: {message}")


def _flag(n, name: str, value) -> int:
    if value not in (0, 1):
        raise _unsupported(n, f"{name}={value!r} is not supported (the spec allows 0 or 1)")
    return int(value)


def _dtype(n, code) -> np.dtype:
    if code not in _NUMERIC:
        name = TensorProto.DataType.Name(code) if code in TensorProto.DataType.values() else str(code)
        raise _unsupported(n, f"output_datatype {name} is not supported (the spec allows the integer and "
                              "float types)")
    return np.dtype(helper.tensor_dtype_to_np_dtype(code))


def _trimmed(inputs: list[str]) -> list[str]:
    """The inputs without trailing omitted ones."""
    while inputs and not inputs[-1]:
        inputs = inputs[:-1]
    return inputs


@converts("STFT", since=17)
def convert_stft(n, signal, frame_step, window="", frame_length="", *, onesided=1):
    """A [batch, length] signal (torch.onnx's export of torch.stft; onnxruntime reads it as real)
    gets its axis of one real value, so the IR's STFT always sees the spec's rank 3."""
    onesided = _flag(n, "onesided", onesided)
    t = n.type_of(signal)
    if isinstance(t, TensorType) and t.shape is not None and len(t.shape) == 2:
        signal = n.b.op1("Unsqueeze", signal, n.b.constant(np.array([2], np.int64)))
    _forget_wrong_bins(n, window, frame_length, onesided)
    n.emit("STFT", _trimmed([signal, frame_step, window, frame_length]), onesided=onesided)


def _forget_wrong_bins(n, window: str, frame_length: str, onesided: int) -> None:
    """ONNX's shape inference (onnx 1.23) reads an absent onesided as 0, not the spec's default 1,
    and gives a node without the attribute frame_length bins instead of frame_length // 2 + 1: the
    model's inferred type of the output is then forgotten, and rnnloop's inference (which sees
    onesided written out) types it."""
    output = n.outputs[0]
    t = n.type_of(output)
    constants = n.b.graph.constants
    length = constants.get(frame_length) if frame_length else None
    size = int(np.asarray(length).reshape(-1)[0]) if length is not None and np.size(length) == 1 else \
        np.shape(constants[window])[0] if window in constants and np.ndim(constants[window]) == 1 else None
    if size is None or not isinstance(t, TensorType) or t.shape is None or len(t.shape) != 4:
        return
    if isinstance(t.shape[2], int) and t.shape[2] != (size // 2 + 1 if onesided else size):
        n.converter.types.pop(output, None)


@converts("DFT", since=17)
def convert_dft_17(n, x, dft_length="", *, axis=1, inverse=0, onesided=0):
    n.emit("DFT", _trimmed([x, dft_length]), axis=axis, inverse=_flag(n, "inverse", inverse),
           onesided=_flag(n, "onesided", onesided))


@converts("DFT", since=20)
def convert_dft_20(n, x, dft_length="", axis="", *, inverse=0, onesided=0):
    """The axis input (default -2) becomes the attribute when it is a constant of the node's graph;
    an axis the model computes stays a third input, which the interpreter reads (DFT-20's form:
    kernels compile only a constant axis)."""
    found = n.b.graph.constants.get(axis) if axis else np.array(-2)
    if isinstance(found, np.ndarray) and found.size == 1 and found.dtype.kind in "iu":
        convert_dft_17(n, x, dft_length, axis=int(found.reshape(-1)[0]), inverse=inverse, onesided=onesided)
    else:
        n.emit("DFT", [x, dft_length, axis], inverse=_flag(n, "inverse", inverse),
               onesided=_flag(n, "onesided", onesided))


for _op in ("HannWindow", "HammingWindow", "BlackmanWindow"):
    @converts(_op, since=17)
    def convert_window(n, size, *, periodic=1, output_datatype=TensorProto.FLOAT):
        n.emit(n.op_type, [size], periodic=_flag(n, "periodic", periodic),
               output_datatype=_dtype(n, output_datatype))


@converts("MelWeightMatrix", since=17)
def convert_mel_weight_matrix(n, num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz, *,
                              output_datatype=TensorProto.FLOAT):
    n.emit("MelWeightMatrix", [num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz],
           output_datatype=_dtype(n, output_datatype))
