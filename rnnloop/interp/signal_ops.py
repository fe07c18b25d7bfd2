"""The audio front ends: STFT, DFT, the Hann, Hamming and Blackman windows and MelWeightMatrix.

Complex values travel as a last axis of two reals (real, imaginary); a real signal has a last axis
of one. Transforms compute in float64 and round once to the input's dtype. Windows and the mel
matrix compute in float64 and convert to `output_datatype` (a NumPy dtype, as the ONNX front end
passes it, or a TensorProto code).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ..errors import OpError
from ..ir import Op, TensorType
from .args import as_int
from .registry import interprets

# cos-sum window coefficients: w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N), N = size for a
# periodic window, size - 1 for a symmetric one (ONNX's function bodies of the three ops).
WINDOWS = {"HannWindow": (0.5, 0.5, 0.0), "HammingWindow": (25 / 46, 21 / 46, 0.0),
           "BlackmanWindow": (0.42, 0.5, 0.08)}


def _flag(value, name: str) -> int:
    if value not in (0, 1):
        raise OpError(f"{name}={value!r} is not 0 or 1")
    return int(value)


def _float(x: np.ndarray, what: str) -> np.ndarray:
    if x.dtype.kind != "f" and x.dtype.name != "bfloat16":
        raise OpError(f"{what} must be a float tensor, got {x.dtype}")
    return x


def _complex(x: np.ndarray) -> np.ndarray:
    """[..., 1] real or [..., 2] (real, imaginary) as complex128 [...]."""
    wide = x.astype(np.float64)
    return wide[..., 0] + 1j * wide[..., 1] if x.shape[-1] == 2 else wide[..., 0].astype(np.complex128)


def _pairs(z: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """complex [...] as [..., 2] of dtype."""
    return np.stack([z.real, z.imag], axis=-1).astype(dtype)


@interprets("DFT")
def run_dft(x: np.ndarray, dft_length: np.ndarray | None = None, axis_input: np.ndarray | None = None, *,
            axis: int = 1, inverse: int = 0, onesided: int = 0) -> np.ndarray:
    """y = the DFT of x along axis, or its inverse (scaled by 1 / dft_length); onesided keeps the
    dft_length // 2 + 1 unique bins of a real input's transform (RFFT), or with inverse turns such
    bins into a real signal of dft_length samples (IRFFT, as numpy.fft.irfft). x is zero-padded or
    cut to dft_length along axis (default: its size there, 2 * (size - 1) for IRFFT). DFT-17's form,
    with the axis attribute; a DFT-20 whose axis input the model computes passes it as axis_input."""
    _float(x, "the input")
    if axis_input is not None:
        axis = as_int(axis_input, "axis")
    inverse, onesided = _flag(inverse, "inverse"), _flag(onesided, "onesided")
    rank = x.ndim
    if rank < 2 or x.shape[-1] not in (1, 2):
        raise OpError(f"the input must end in an axis of 1 (real) or 2 (complex) values, got shape {x.shape}")
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        raise OpError(f"axis {axis} is outside [{-rank}, -2] and [0, {rank - 2}] for an input of rank {rank} "
                      "(the last axis holds the real and imaginary parts)")
    axis %= rank
    size = x.shape[axis]
    if dft_length is None:
        n = 2 * (size - 1) if inverse and onesided else size
    else:
        n = as_int(dft_length, "dft_length")
    if n < 1:
        raise OpError(f"dft_length {n} must be at least 1")
    complex_input = x.shape[-1] == 2
    if onesided and not inverse and complex_input:
        raise OpError("a one-sided forward DFT (RFFT) takes a real input (last axis 1), got a complex one")
    if onesided and inverse and not complex_input:
        raise OpError("a one-sided inverse DFT (IRFFT) takes a complex input (last axis 2), got a real one")
    z = _complex(x)
    if inverse and onesided:
        return np.fft.irfft(z, n=n, axis=axis)[..., None].astype(x.dtype)
    y = np.fft.ifft(z, n=n, axis=axis) if inverse else np.fft.fft(z, n=n, axis=axis)
    if onesided:
        y = np.take(y, np.arange(n // 2 + 1), axis=axis)
    return _pairs(y, x.dtype)


@interprets("STFT")
def run_stft(signal: np.ndarray, frame_step: np.ndarray, window: np.ndarray | None = None,
             frame_length: np.ndarray | None = None, *, onesided: int = 1) -> np.ndarray:
    """y[b, f] = the DFT of signal[b, f * frame_step : f * frame_step + frame_length] * window, for
    the floor((signal_length - frame_length) / frame_step) + 1 frames that fit; onesided keeps the
    frame_length // 2 + 1 first bins. signal is [batch, length, 1 or 2], or [batch, length] (real,
    as torch exports it and onnxruntime reads it); y is [batch, frames, bins, 2]."""
    _float(signal, "the signal")
    onesided = _flag(onesided, "onesided")
    if signal.ndim == 2:
        signal = signal[..., None]
    if signal.ndim != 3 or signal.shape[-1] not in (1, 2):
        raise OpError(f"the signal must be [batch, length, 1 or 2] (or [batch, length]), got shape {signal.shape}")
    length = signal.shape[1]
    step = as_int(frame_step, "frame_step")
    if step < 1:
        raise OpError(f"frame_step {step} must be at least 1")
    if window is not None and np.ndim(window) != 1:
        raise OpError(f"the window must be 1-D, got shape {np.shape(window)}")
    if frame_length is not None:
        n = as_int(frame_length, "frame_length")
        if window is not None and window.shape[0] != n:
            raise OpError(f"the window has {window.shape[0]} values but frame_length is {n}; they must agree")
    else:
        n = window.shape[0] if window is not None else length
    if n < 1:
        raise OpError(f"frame_length {n} must be at least 1")
    if n > length:
        raise OpError(f"frame_length {n} is longer than the signal ({length} samples): no frame fits")
    frames = (length - n) // step + 1
    at = np.arange(frames)[:, None] * step + np.arange(n)[None, :]
    z = _complex(signal[:, at, :])  # [batch, frames, n]
    if window is not None:
        z = z * window.astype(np.float64)
    y = np.fft.fft(z, axis=-1)
    if onesided:
        y = y[..., :n // 2 + 1]
    return _pairs(y, signal.dtype)


# ONNX's TensorProto codes of the types the windows and MelWeightMatrix make, for an IR built with the
# ONNX spelling (Network: output_datatype=11); the ONNX front end passes NumPy dtypes.
_CODES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 10: "float16",
          11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16"}


def output_dtype(output_datatype) -> np.dtype:
    """output_datatype (a NumPy dtype, or an ONNX TensorProto code) as a dtype; an OpError for others."""
    if isinstance(output_datatype, (int, np.integer)):
        if int(output_datatype) not in _CODES:
            raise OpError(f"output_datatype {int(output_datatype)} is not the code of an integer or float type")
        name = _CODES[int(output_datatype)]
        output_datatype = ml_dtypes.bfloat16 if name == "bfloat16" else name
    dtype = np.dtype(output_datatype)
    if dtype.kind not in "iuf" and dtype.name != "bfloat16":
        raise OpError(f"output_datatype {dtype} is not a numeric type (the op makes integers or floats)")
    return dtype


def cosine_sum_window(size: int, periodic: int, coefficients: tuple[float, float, float]) -> np.ndarray:
    """The float64 window; a symmetric window of one value is 0 / 0, NaN, as ONNX's function body makes it."""
    a0, a1, a2 = coefficients
    denominator = size if periodic else size - 1
    with np.errstate(all="ignore"):
        increment = np.float64(2 * math.pi) / np.float64(denominator)
        angle = np.arange(max(size, 0), dtype=np.float64) * increment
        # (the cosines first: a window value that is an integer, as 1 at a centre, comes out exact)
        return (-a1 * np.cos(angle) + a2 * np.cos(2 * angle)) + a0


def _window(op_type: str):
    coefficients = WINDOWS[op_type]

    def run_window(size: np.ndarray, *, periodic: int = 1, output_datatype=np.dtype(np.float32)) -> np.ndarray:
        dtype = output_dtype(output_datatype)
        with np.errstate(all="ignore"):  # a NaN (a symmetric window of one value) cast to integers
            return cosine_sum_window(as_int(size, "size"), _flag(periodic, "periodic"), coefficients).astype(dtype)

    run_window.__name__ = f"run_{op_type[:-len('Window')].lower()}_window"
    run_window.__doc__ = (f"y[n] = {coefficients[0]:.6g} - {coefficients[1]:.6g} cos(2 pi n / N)"
                          + (f" + {coefficients[2]:.6g} cos(4 pi n / N)" if coefficients[2] else "")
                          + " for n < size; N = size (periodic) or size - 1 (symmetric); a negative size "
                            "gives no values, as ONNX's function body")
    return run_window


for _op in WINDOWS:
    interprets(_op)(_window(_op))


def _hz_to_mel(hz: float) -> float:
    return 2595 * math.log10(1 + hz / 700)


def _mel_to_hz(mel: float) -> float:
    return 700 * (10 ** (mel / 2595) - 1)


def mel_bins(mels: int, dft_length: int, sample_rate: int, lower: float, upper: float) -> list[int]:
    """The mels + 2 DFT bins at the edges and centres of the triangles, evenly spaced in mel (float64,
    as onnxruntime computes them)."""
    low, high = _hz_to_mel(lower), _hz_to_mel(upper)
    step = (high - low) / (mels + 2)
    return [math.floor(((dft_length + 1) * _mel_to_hz(low + step * i)) / sample_rate) for i in range(mels + 2)]


@interprets("MelWeightMatrix")
def run_mel_weight_matrix(num_mel_bins: np.ndarray, dft_length: np.ndarray, sample_rate: np.ndarray,
                          lower_edge_hertz: np.ndarray, upper_edge_hertz: np.ndarray, *,
                          output_datatype=np.dtype(np.float32)) -> np.ndarray:
    """y[dft_length // 2 + 1, num_mel_bins]: column i a triangle rising from 0 at bin i to 1 at bin
    i + 1 and falling to 0 at bin i + 2 of the mel-spaced bins (mel(f) = 2595 log10(1 + f / 700))
    between lower_edge_hertz and upper_edge_hertz; both edges must fall inside the spectrum."""
    dtype = output_dtype(output_datatype)
    mels, n, rate = (as_int(v, what) for v, what in ((num_mel_bins, "num_mel_bins"), (dft_length, "dft_length"),
                                                      (sample_rate, "sample_rate")))
    lower, upper = float(np.asarray(lower_edge_hertz).reshape(-1)[0]), float(np.asarray(upper_edge_hertz).reshape(-1)[0])
    if mels < 0 or n < 1 or rate < 1:
        raise OpError(f"num_mel_bins {mels} must be at least 0, dft_length {n} and sample_rate {rate} at least 1")
    spectrum = n // 2 + 1
    for hz, what in ((lower, "lower_edge_hertz"), (upper, "upper_edge_hertz")):
        index = math.floor(((n + 1) * hz) / rate) if math.isfinite(hz) else -1
        if not 0 <= index < spectrum:
            raise OpError(f"{what} {hz:g} falls outside the {spectrum} bins of a {n}-point DFT at {rate} Hz "
                          f"(bin {index}); keep it between 0 and sample_rate / 2")
    bins = mel_bins(mels, n, rate, lower, upper)
    if mels and not 0 <= min(bins) <= max(bins) < spectrum:  # (a rounding at an edge: never index outside)
        raise OpError(f"the mel bands reach DFT bin {min(bins) if min(bins) < 0 else max(bins)}, outside the "
                      f"{spectrum} bins of a {n}-point DFT")
    out = np.zeros((spectrum, mels), np.float64)
    for i in range(mels):
        left, centre, right = bins[i], bins[i + 1], bins[i + 2]
        if centre == left:
            out[centre, i] = 1
        else:
            for j in range(left, centre + 1):
                out[j, i] = (j - left) / (centre - left)
        for j in range(centre, right):
            out[j, i] = (right - j) / (right - centre)
    return out.astype(dtype)


def output_type(op: Op, types: list) -> TensorType | None:
    """The output's dtype and rank (sizes unknown), for type inference where ONNX's leaves them unknown:
    it does unless the sizes are constants (a signal of symbolic length, a computed window size)."""
    first = types[0] if types else None
    dtype = first.dtype if isinstance(first, TensorType) else None
    if op.op_type == "STFT":
        return TensorType(dtype, (None,) * 4)
    if op.op_type == "DFT":
        return TensorType(dtype, (None,) * len(first.shape)) if dtype and first.shape is not None else None
    if op.op_type in WINDOWS:
        return TensorType(output_dtype(op.attrs.get("output_datatype", np.float32)), (None,))
    if op.op_type == "MelWeightMatrix":
        return TensorType(output_dtype(op.attrs.get("output_datatype", np.float32)), (None, None))
    return None
