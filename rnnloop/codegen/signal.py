"""Code generation rules for the audio front ends (STFT, DFT, the windows, MelWeightMatrix), and the
compiled helpers their kernels call (`from rnnloop.codegen import signal as _sig`); each checked
against rnnloop/interp/signal_ops.py.

A transform of a length the model fixes (a constant frame_length or window, a constant dft_length or
a declared axis size) is either a product of its frames by a [length, 2 * bins] matrix of twiddles
made at load (the window folded in), on the packed SIMD product (simd.py), or an FFT here with its
twiddle tables made at load: radix 2 for powers of two (a real signal as half as many complex values,
split after), else a direct sum over a table of twiddles, as onnxruntime does. A length known only at
run time takes the FFT, its tables made per call.

Which, measured: one STFT (batch 1, Hann window, onesided) with each forced, and onnxruntime, CPU time
of the calling thread per call in µs, session.run's ~6 µs included, median [quartiles] of 21
interleaved samples (`python benchmarks/bench_signal.py`; 2-core AMD EPYC, Zen 5, AVX-512, shared):

    frames x length   product              FFT                     onnxruntime 1.32
    3 x 64            6.9 [5.5-9.8]        7.5 [6.4-9.2]           19.7 [12.6-27.6]
    3 x 128           7.1 [6.9-7.4]        6.9 [6.8-7.0]           16.1 [15.8-16.4]
    3 x 256           13.8 [13.4-16.5]     10.3 [10.0-11.8]        24.5 [24.0-30.5]   (a VAD chunk)
    3 x 512           38.3 [37.4-41.3]     17.5 [17.2-18.6]        42.8 [41.5-44.0]
    3 x 1024          180.4 [146-186]      60.6 [41.7-61.4]        158 [110-161]
    100 x 128         77.7 [74.8-83.6]     103 [101-109]           228 [220-258]
    100 x 256         222 [215-226]        211 [206-214]           472 [467-492]
    98 x 400          528 [494-575]        28070 [27034-30835]     5210 [4892-6062]
    98 x 512          1003 [961-1120]      627 [514-734]           1463 [1287-1687]

An FFT of 256 points is already cheaper than the product (which reads a 264 KB matrix per call),
and the gap grows with the length; below 256 the product wins with many frames and ties with few.
Lengths that are no power of two have no FFT here (only the direct sum), so they take the product
up to MAX_PRODUCT_LENGTH.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..errors import OpError
from ..interp.signal_ops import WINDOWS, output_dtype
from ..ir import Op, TensorType
from .emitter import NoRule, Var, dtype_name
from .kernel import LoopGen, _scalar_of, emits, matmul_call

# A transform of a length the model fixes is a product by a matrix of twiddles made at load for a
# power of two below FFT_FROM and any other length up to MAX_PRODUCT_LENGTH (a 16 MiB matrix at most);
# else the FFT helper. Measured: see the module's docstring.
FFT_FROM = 256
MAX_PRODUCT_LENGTH = 2048


def by_product(n: int) -> bool:
    """Whether a transform of length n (which the model fixes) is a product by a twiddle matrix."""
    return 1 <= n < FFT_FROM if n & (n - 1) == 0 else 1 <= n <= MAX_PRODUCT_LENGTH


# ---------------------------------------------------------------------------------------------
# Twiddle matrices (made once, at load)


def _angles(rows: int, cols: int, n: int) -> np.ndarray:
    """2 pi (j k mod n) / n for j < rows, k < cols: exact integer products before the one rounding."""
    j = np.arange(rows, dtype=np.int64)[:, None]
    k = np.arange(cols, dtype=np.int64)[None, :]
    return 2 * np.pi * ((j * k) % n) / n


def dft_matrix(n: int, used: int, parts: int, inverse: int, onesided: int,
               window: np.ndarray | None = None) -> np.ndarray:
    """The float64 matrix M with out_row = in_row @ M for one lane of a DFT of length n, rows
    interleaved as the input's last axis holds them ([used samples or bins, parts]), columns as the
    output's ([bins or samples, 2 or 1]); `window` weights the input samples (STFT)."""
    if inverse and onesided:  # IRFFT: x[j] = (1/n) sum_k c_k (Re X_k cos - Im X_k sin), c_k = 1 or 2
        angle = _angles(used, n, n)
        k = np.arange(used)
        weight = np.where((k == 0) | (2 * k == n), 1.0, 2.0)[:, None] / n
        m = np.empty((used, 2, n))
        m[:, 0], m[:, 1] = weight * np.cos(angle), -weight * np.sin(angle)
        return m.reshape(used * 2, n)
    bins = n // 2 + 1 if onesided else n
    angle = _angles(used, bins, n)
    cos, sin = np.cos(angle), np.sin(angle) * (1.0 if inverse else -1.0)  # exp(+-i angle)
    scale = 1.0 / n if inverse else 1.0
    if window is not None:
        scale = scale * window.astype(np.float64)[:used, None]
    m = np.empty((used, parts, bins, 2))
    m[:, 0, :, 0], m[:, 0, :, 1] = cos * scale, sin * scale  # (re + i im) (cos + i sin)
    if parts == 2:
        m[:, 1, :, 0], m[:, 1, :, 1] = -sin * scale, cos * scale
    return m.reshape(used * parts, bins * 2)


# ---------------------------------------------------------------------------------------------
# Compiled helpers (cached once per machine, like runtime.py's)


@njit(cache=True, nogil=True, error_model="numpy")
def tables(n):
    """The twiddles of transforms of length n (made at load for a length the model fixes). For a power
    of two: the bit-reversal permutation `rev` and, at s / 2 - 1 + m, the twiddle exp(-2 pi i m / s) of
    each radix-2 stage of size s (the last stage's are those of a real FFT's final split, and rev[2 i]
    is the permutation of the half-length FFT it runs on). Else: rev empty, exp(-2 pi i j / n) at j."""
    if n & (n - 1) == 0:
        rev = np.zeros(n, np.int64)
        bits = 0
        while (1 << bits) < n:
            bits += 1
        for i in range(n):
            r = 0
            for k in range(bits):
                if i >> k & 1:
                    r |= 1 << (bits - 1 - k)
            rev[i] = r
        re, im = np.zeros(max(n - 1, 1)), np.zeros(max(n - 1, 1))
        size = 2
        while size <= n:
            half = size // 2
            for m in range(half):
                angle = -2 * math.pi * m / size
                re[half - 1 + m], im[half - 1 + m] = math.cos(angle), math.sin(angle)
            size *= 2
        return rev, re, im
    re, im = np.empty(n), np.empty(n)
    for j in range(n):
        angle = -2 * math.pi * j / n
        re[j], im[j] = math.cos(angle), math.sin(angle)
    return np.zeros(0, np.int64), re, im


@njit(cache=True, nogil=True, error_model="numpy")
def _butterflies(re, im, n, tw_re, tw_im, sign):
    """The radix-2 stages of an FFT of n (a power of two) on data in bit-reversed order; sign -1: forward."""
    for a in range(0, n - 1, 2):  # size 2: twiddle 1
        xr, xi = re[a + 1], im[a + 1]
        re[a + 1], im[a + 1] = re[a] - xr, im[a] - xi
        re[a], im[a] = re[a] + xr, im[a] + xi
    size = 4
    while size <= n:
        half = size >> 1
        for start in range(0, n, size):
            for m in range(half):
                wr, wi = tw_re[half - 1 + m], -sign * tw_im[half - 1 + m]
                a, b = start + m, start + m + half
                xr = re[b] * wr - im[b] * wi
                xi = re[b] * wi + im[b] * wr
                re[b], im[b] = re[a] - xr, im[a] - xi
                re[a], im[a] = re[a] + xr, im[a] + xi
        size <<= 1


@njit(cache=True, nogil=True, error_model="numpy")
def _transform(re, im, n, sign, rev, tw_re, tw_im, spare_re, spare_im):
    """In place: X[k] = sum_j x[j] exp(sign 2 pi i j k / n) over the first n entries of (re, im), by
    tables(n): radix 2 for a power of two, else the direct sum (twiddle j k mod n from the table)."""
    if rev.size:
        for i in range(n):
            j = rev[i]
            if i < j:
                re[i], re[j] = re[j], re[i]
                im[i], im[j] = im[j], im[i]
        _butterflies(re, im, n, tw_re, tw_im, sign)
        return
    for k in range(n):
        sr, si, at = 0.0, 0.0, 0
        for j in range(n):
            wr, wi = tw_re[at], -sign * tw_im[at]
            sr += re[j] * wr - im[j] * wi
            si += re[j] * wi + im[j] * wr
            at += k
            if at >= n:
                at -= n
        spare_re[k], spare_im[k] = sr, si
    for k in range(n):
        re[k], im[k] = spare_re[k], spare_im[k]


@njit(cache=True, nogil=True, error_model="numpy")
def frame_rows(x, hop, window, frames):
    """frames[b * count + f, j * parts + c] = x[b, f * hop + j, c] * window[j] (an empty window: 1)
    for the count = frames.shape[0] // batch frames; the caller checked that they fit in x."""
    batch, _, parts = x.shape
    n = frames.shape[1] // parts
    count = frames.shape[0] // batch if batch else 0
    for b in range(batch):
        for f in range(count):
            row, start = b * count + f, f * hop
            if window.size == 0:
                for j in range(n):
                    for c in range(parts):
                        frames[row, j * parts + c] = x[b, start + j, c]
            else:
                for j in range(n):
                    for c in range(parts):
                        frames[row, j * parts + c] = x[b, start + j, c] * window[j]


@njit(cache=True, nogil=True, error_model="numpy")
def stft(x, hop, n, window, rev, tw_re, tw_im, out):
    """out[b, f, k] = the DFT of x[b, f * hop:][:n] * window (an empty window: 1) at bin k <
    out.shape[2], by tables(n); the caller checked that the frames fit in x and the window has n
    values or none. A real signal of even length n is transformed as n / 2 complex values (the
    even and odd samples) and split into the spectrum: half the work."""
    batch, _, parts = x.shape
    count, bins = out.shape[1], out.shape[2]
    half = n // 2
    real = parts == 1 and rev.size > 1
    size = half if real else n
    re, im, spare_re, spare_im = np.empty(size), np.empty(size), np.empty(size), np.empty(size)
    weighted = window.size > 0
    for b in range(batch):
        for f in range(count):
            start = f * hop
            if real:  # z[m] = x[2m] + i x[2m + 1], loaded in bit-reversed order
                for m in range(half):
                    p = rev[2 * m]
                    w0, w1 = (window[2 * p], window[2 * p + 1]) if weighted else (1.0, 1.0)
                    re[m], im[m] = x[b, start + 2 * p, 0] * w0, x[b, start + 2 * p + 1, 0] * w1
                _butterflies(re, im, half, tw_re, tw_im, -1.0)
                _split(re, im, half, tw_re, tw_im, out[b, f])
                continue
            for j in range(n):
                w = window[j] if weighted else 1.0
                re[j] = x[b, start + j, 0] * w
                im[j] = x[b, start + j, 1] * w if parts == 2 else 0.0
            _transform(re, im, n, -1.0, rev, tw_re, tw_im, spare_re, spare_im)
            for k in range(bins):
                out[b, f, k, 0] = re[k]
                out[b, f, k, 1] = im[k]


@njit(cache=True, nogil=True, error_model="numpy")
def _split(re, im, half, tw_re, tw_im, out):
    """out[k] = X[k] for k < out.shape[0] from Z, the FFT of z[m] = x[2m] + i x[2m + 1]:
    X[k] = (Z[k] + conj Z[half - k]) / 2 + exp(-2 pi i k / n) (Z[k] - conj Z[half - k]) / 2i,
    the twiddles those of tables(n)'s last stage; bins past n / 2 by X[n - k] = conj X[k]."""
    n, bins = 2 * half, out.shape[0]
    for k in range(min(bins, half + 1)):
        zr, zi = re[k % half], im[k % half]
        cr, ci = re[(half - k) % half], -im[(half - k) % half]
        er, ei = 0.5 * (zr + cr), 0.5 * (zi + ci)
        orr, oi = 0.5 * (zi - ci), -0.5 * (zr - cr)
        wr, wi = (tw_re[half - 1 + k], tw_im[half - 1 + k]) if k < half else (-1.0, 0.0)
        out[k, 0] = er + wr * orr - wi * oi
        out[k, 1] = ei + wr * oi + wi * orr
    for k in range(half + 1, bins):
        out[k, 0], out[k, 1] = out[n - k, 0], -out[n - k, 1]


@njit(cache=True, nogil=True, error_model="numpy")
def dft(x, n, inverse, onesided, rev, tw_re, tw_im, out):
    """x [outer, size, inner, parts] -> out [outer, bins or n, inner, 2 or 1]: the DFT of length n
    along axis 1 (zero-padded or cut), its inverse, RFFT or IRFFT (as numpy.fft.irfft: the first
    n // 2 + 1 bins, the imaginary parts of bin 0 and of bin n / 2 ignored), by tables(n)."""
    outer, size, inner, parts = x.shape
    bins = out.shape[1]
    re, im, spare_re, spare_im = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
    irfft = inverse and onesided
    used = min(size, n // 2 + 1 if irfft else n)
    scale = 1.0 / n if inverse else 1.0
    for o in range(outer):
        for i in range(inner):
            re[:] = 0.0
            im[:] = 0.0
            for j in range(used):
                re[j] = x[o, j, i, 0]
                im[j] = x[o, j, i, 1] if parts == 2 else 0.0
            if irfft:  # the Hermitian spectrum the bins stand for
                im[0] = 0.0
                if n % 2 == 0 and used > n // 2:
                    im[n // 2] = 0.0
                for k in range(1, used):
                    if n - k > k:
                        re[n - k], im[n - k] = re[k], -im[k]
            _transform(re, im, n, 1.0 if inverse else -1.0, rev, tw_re, tw_im, spare_re, spare_im)
            for k in range(bins):
                out[o, k, i, 0] = re[k] * scale
                if not irfft:
                    out[o, k, i, 1] = im[k] * scale


@njit(cache=True, nogil=True, error_model="numpy")
def mel_weight_matrix(mels, n, rate, lower, upper, out):
    """out [n // 2 + 1, mels] = the mel filter bank of run_mel_weight_matrix (float64, as
    onnxruntime); returns 0, or 1 when an edge falls outside the spectrum, 2 when a band does."""
    spectrum = n // 2 + 1
    for hz in (lower, upper):
        index = math.floor(((n + 1) * hz) / rate) if math.isfinite(hz) else -1
        if not 0 <= index < spectrum:
            return 1
    low = 2595 * math.log10(1 + lower / 700)
    step = (2595 * math.log10(1 + upper / 700) - low) / (mels + 2)
    bins = np.empty(mels + 2, np.int64)
    for i in range(mels + 2):
        hz = 700 * (math.pow(10.0, (low + step * i) / 2595) - 1)
        bins[i] = math.floor(((n + 1) * hz) / rate)
        if mels and not 0 <= bins[i] < spectrum:
            return 2
    out[:, :] = 0
    for i in range(mels):
        left, centre, right = bins[i], bins[i + 1], bins[i + 2]
        if centre == left:
            out[centre, i] = 1
        else:
            for j in range(left, centre + 1):
                out[j, i] = (j - left) / (centre - left)
        for j in range(centre, right):
            out[j, i] = (right - j) / (right - centre)
    return 0


# ---------------------------------------------------------------------------------------------
# Rules


def _parts(g: LoopGen, name: str, x: Var) -> int:
    """1 (real) or 2 (complex): the size of the last axis, which the model must fix."""
    if x.shape is not None and x.shape[-1] in ("1", "2"):
        return int(x.shape[-1])
    t = g.graph.type_of(name)
    last = t.shape[-1] if isinstance(t, TensorType) and t.shape else None
    if last not in (1, 2):
        raise NoRule("the last axis (1: real, 2: complex) is not fixed by the model")
    g.fail_if(f"{x.dim(x.rank - 1)} != {last}", None, f"the last axis of '{name}' has {{a}} values where the "
              f"model declares {last}", a=x.dim(x.rank - 1), fallback=True)
    return last


def _constant_int(g: LoopGen, name: str) -> int | None:
    """The value of a constant integer scalar input, else None."""
    value = g.const(name) if name else None
    return int(value.reshape(-1)[0]) if value is not None and value.size == 1 and value.dtype.kind in "iu" else None


def _int_of(g: LoopGen, op: Op, k: int, v: Var, what: str) -> str:
    """The single integer of input k as an int64 expression: a literal for a constant, else a name."""
    fixed = _constant_int(g, op.inputs[k])
    if fixed is not None:
        return str(fixed)
    name = g.body.fresh(what)
    g.body(f"{name} = np.int64({_scalar_of(g, v, '0', what, op)})")
    return name


def _float_operand(x: Var, what: str) -> None:
    if x.kind == "scalar" or x.dtype.name not in ("float32", "float64"):
        raise NoRule(f"{what} is compiled for float32 and float64 tensors")


def _product(g: LoopGen, rows: str, a: str, matrix: np.ndarray, out: str, dtype: np.dtype) -> None:
    """out [rows, cols] = a [rows, inner] @ matrix (a constant, packed at load)."""
    value = np.ascontiguousarray(matrix.astype(dtype))
    name = g.pass_constant(value, "k_twiddles")
    panels = g.panels(Var(name, dtype, 2, "invariant"), name, rows, value)
    g.body(matmul_call(a, name, out, panels=panels))


@emits("STFT")
def emit_stft(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Frames copied into rows (window applied), times the twiddle matrix (window folded in) when
    the frame length is a constant; else the FFT helper. Checked: frame_step >= 1, the window's
    length, frame_length between 1 and the signal's length."""
    signal, step = ins[0], ins[1]
    window = ins[2] if len(ins) > 2 else None
    length = ins[3] if len(ins) > 3 else None
    _float_operand(signal, "STFT")
    onesided = op.attrs.get("onesided", 1)
    if onesided not in (0, 1) or signal.rank not in (2, 3):
        raise NoRule("onesided or the signal's rank is outside the spec")
    if window is not None and (window.kind == "scalar" or window.rank != 1 or window.dtype != signal.dtype):
        raise NoRule("the window is not a vector of the signal's dtype")
    parts = _parts(g, op.inputs[0], signal) if signal.rank == 3 else 1
    dtype, _ = g.out_type(op.outputs[0], 4, signal.dtype)
    emit = g.body
    batch, samples = signal.dim(0), signal.dim(1)
    x = signal.expr
    if signal.rank == 2:
        x = emit.fresh("signal")
        emit(f"{x} = np.ascontiguousarray({signal.expr}).reshape(({batch}, {samples}, 1))")
    hop = _int_of(g, op, 1, step, "frame_step")
    g.fail_if(f"{hop} < 1", op, "frame_step {a} must be at least 1", a=hop)
    window_value = g.const(op.inputs[2]) if window is not None else None
    given = _int_of(g, op, 3, length, "frame_length") if length is not None else None
    fixed = _constant_int(g, op.inputs[3]) if length is not None else None
    if window_value is not None:
        if fixed is not None and window_value.shape[0] != fixed:
            raise NoRule("the constant window and frame_length disagree")  # (the interpreter says so)
        fixed = window_value.shape[0]
    n = str(fixed) if fixed is not None else given or (window.dim(0) if window is not None else samples)
    if window is not None and given is not None:
        g.fail_if(f"{window.dim(0)} != {given}", op, "the window has {a} values but frame_length is {b}; they must "
                  "agree", a=window.dim(0), b=given)
    g.fail_if(f"{n} < 1", op, "frame_length {a} must be at least 1", a=n)
    g.fail_if(f"{n} > {samples}", op, "frame_length {a} is longer than the signal ({b} samples): no frame fits",
              a=n, b=samples)
    count = emit.fresh("frames")
    emit(f"{count} = ({samples} - {n}) // {hop} + 1")
    bins = str(fixed // 2 + 1 if onesided else fixed) if fixed is not None else \
        (f"{n} // 2 + 1" if onesided else n)
    out = g.buffer(op.outputs[0], dtype, [batch, count, bins, "2"])
    product = fixed is not None and by_product(fixed)
    # The window the helpers apply (an empty one: none): a constant one is in the product's matrix.
    folded = window_value if product else None
    applied = window.expr if window is not None and folded is None else g.pass_constant(np.ones(0, dtype), "k_no_window")
    if product:
        rows = f"{batch} * {count}"
        frames = g.buffer(f"{op.outputs[0]}_frames", dtype, [rows, str(fixed * parts)])
        emit(f"_sig.frame_rows({x}, np.int64({hop}), {applied}, {frames})")
        flat = emit.fresh("spectra")
        emit(f"{flat} = {out}.reshape(({rows}, {2 * int(bins)}))")
        _product(g, rows, frames, dft_matrix(fixed, fixed, parts, 0, onesided, folded), flat, dtype)
    else:
        twiddles = _tables(g, fixed, n)
        emit(f"_sig.stft({x}, np.int64({hop}), np.int64({n}), {applied}, {twiddles}, {out})")
    return [Var(out, dtype, 4, "buffer")]


def _tables(g: LoopGen, fixed: int | None, n: str) -> str:
    """The arguments rev, tw_re, tw_im of tables(n): made at load for a length the model fixes."""
    if fixed is not None and fixed >= 1:
        return ", ".join(g.pass_constant(value, f"k_{what}") for value, what in zip(tables(np.int64(fixed)),
                                                                                  ("rev", "tw_re", "tw_im")))
    names = [g.body.fresh(what) for what in ("rev", "tw_re", "tw_im")]
    g.body(f"{', '.join(names)} = _sig.tables(np.int64({n}))")
    return ", ".join(names)


@emits("DFT")
def emit_dft(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """Along the last signal axis with a length the model fixes: each lane times the twiddle
    matrix; else the FFT helper on the input viewed as [outer, size, inner, parts] (also for an
    axis the model computes, DFT-20's input: the sizes are then expressions of it)."""
    x = ins[0]
    length = ins[1] if len(ins) > 1 else None
    _float_operand(x, "DFT")
    rank = x.rank
    inverse, onesided = op.attrs.get("inverse", 0), op.attrs.get("onesided", 0)
    if rank < 2 or inverse not in (0, 1) or onesided not in (0, 1):
        raise NoRule("the input's rank, inverse or onesided is outside the spec")  # (the interpreter says so)
    parts = _parts(g, op.inputs[0], x)
    irfft = inverse and onesided
    if onesided and parts != (2 if inverse else 1):
        raise NoRule("a one-sided DFT of the wrong kind of input")  # (the interpreter says so)
    emit = g.body
    out_parts = 1 if irfft else 2
    computed = len(op.inputs) > 2 and op.inputs[2] and _constant_int(g, op.inputs[2]) is None
    if computed:  # DFT-20 with an axis the model computes
        axis = None
        at = emit.fresh("axis")
        emit(f"{at} = np.int64({_scalar_of(g, ins[2], '0', 'axis', op)})")
        g.fail_if(f"not (-{rank} <= {at} <= -2 or 0 <= {at} <= {rank - 2})", op,
                  f"axis {{a}} is outside [{-rank}, -2] and [0, {rank - 2}] for an input of rank {rank} (the "
                  "last axis holds the real and imaginary parts)", a=at)
        emit(f"{at} = {at} % {rank}")
        size = f"{x.expr}.shape[{at}]"
    else:
        axis = _constant_int(g, op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] else op.attrs.get("axis", 1)
        if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
            raise NoRule(f"axis {axis} is outside the spec")  # (the interpreter says so)
        axis %= rank
        size = x.dim(axis)
    if length is not None:
        n = _int_of(g, op, 1, length, "dft_length")
    else:
        n = f"2 * ({size} - 1)" if irfft else size
    g.fail_if(f"{n} < 1", op, "dft_length {a} must be at least 1", a=n)
    bins = f"{n} // 2 + 1" if onesided and not inverse else n
    dtype, _ = g.out_type(op.outputs[0], rank, x.dtype)
    if computed:
        outer = " * ".join(f"({x.dim(a)} if {a} < {at} else 1)" for a in range(rank - 1))
        inner = " * ".join(f"({x.dim(a)} if {a} > {at} else 1)" for a in range(rank - 1))
        dims = [f"({bins} if {at} == {a} else {x.dim(a)})" for a in range(rank - 1)]
    else:
        outer = " * ".join(x.dim(a) for a in range(axis)) or "1"
        inner = " * ".join(x.dim(a) for a in range(axis + 1, rank - 1)) or "1"
        dims = [bins if a == axis else x.dim(a) for a in range(rank - 1)]
    out = g.buffer(op.outputs[0], dtype, [*dims, str(out_parts)])
    # The product: a lane is a row of the input when the axis is the last signal axis, and the
    # length is fixed by the model (dft_length, else the size it declares for the axis).
    t = g.graph.type_of(op.inputs[0])
    declared = t.shape[axis] if axis is not None and isinstance(t, TensorType) and t.shape \
        and isinstance(t.shape[axis], int) else None
    fixed = _constant_int(g, op.inputs[1]) if length is not None else \
        None if declared is None else 2 * (declared - 1) if irfft else declared
    if fixed is not None and fixed >= 1 and declared is not None and axis == rank - 2 and by_product(fixed):
        g.fail_if(f"{size} != {declared}", op, f"axis {axis} has {{a}} entries where the model declares {declared}",
                  a=size, fallback=True)
        used = min(declared, fixed // 2 + 1 if irfft else fixed)
        width = (fixed // 2 + 1 if onesided and not inverse else fixed) * out_parts
        lanes = emit.fresh("lanes")
        emit(f"{lanes} = np.ascontiguousarray({x.expr}).reshape(({outer}, {declared * parts}))")
        flat = emit.fresh("spectra")
        emit(f"{flat} = {out}.reshape(({outer}, {width}))")
        a = lanes if used == declared else f"{lanes}[:, :{used * parts}]"
        _product(g, outer, a, dft_matrix(fixed, used, parts, inverse, onesided), flat, dtype)
    else:
        lanes, spectra = emit.fresh("lanes"), emit.fresh("spectra")
        emit(f"{lanes} = np.ascontiguousarray({x.expr}).reshape(({outer}, {size}, {inner}, {parts}))")
        emit(f"{spectra} = {out}.reshape(({outer}, {bins}, {inner}, {out_parts}))")
        known = _constant_int(g, op.inputs[1]) if length is not None else None
        if length is None and declared is not None:  # the declared size sets the length: tables at load
            g.fail_if(f"{size} != {declared}", op, f"axis {axis} has {{a}} entries where the model declares "
                      f"{declared}", a=size, fallback=True)
            known = fixed
        twiddles = _tables(g, known, n)
        emit(f"_sig.dft({lanes}, np.int64({n}), np.int64({inverse}), np.int64({onesided}), {twiddles}, {spectra})")
    return [Var(out, dtype, rank, "buffer")]


def _output_dtype(op: Op) -> np.dtype:
    try:
        dtype = output_dtype(op.attrs.get("output_datatype", np.float32))
    except OpError as e:
        raise NoRule(str(e)) from None  # (the interpreter says so)
    if dtype.kind not in "iuf" or dtype == np.float16:
        raise NoRule(f"output_datatype {dtype} is not compiled")
    return dtype


@emits("HannWindow", "HammingWindow", "BlackmanWindow")
def emit_window(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """w[i] = (-a1 cos(i * inc) + a2 cos(2 i * inc)) + a0, inc = 2 pi / N, in float64 as the interpreter."""
    dtype = _output_dtype(op)
    periodic = op.attrs.get("periodic", 1)
    if periodic not in (0, 1):
        raise NoRule(f"periodic={periodic!r}")
    a0, a1, a2 = WINDOWS[op.op_type]
    g.out_type(op.outputs[0], 1, dtype)
    emit = g.body
    n = emit.fresh("size")
    emit(f"{n} = max(np.int64({_int_of(g, op, 0, ins[0], 'size')}), 0)")
    out = g.buffer(op.outputs[0], dtype, [n])
    inc, i, angle = emit.fresh("increment"), emit.fresh("i"), emit.fresh("angle")
    emit(f"{inc} = np.float64({2 * math.pi!r}) / np.float64({n if periodic else f'{n} - 1'})")
    with emit.block(f"for {i} in range({n}):"):
        emit(f"{angle} = np.float64({i}) * {inc}")
        value = f"({-a1!r} * math.cos({angle}) + {a2!r} * math.cos(2 * {angle})) + {a0!r}"  # as the interpreter
        emit(f"{out}[{i}] = {dtype_name(dtype)}({value})")
    return [Var(out, dtype, 1, "buffer", (n,))]


@emits("MelWeightMatrix")
def emit_mel_weight_matrix(g: LoopGen, op: Op, ins: list[Var | None]) -> list[Var]:
    """The helper fills the [dft_length // 2 + 1, num_mel_bins] buffer; the sizes and edges checked."""
    dtype = _output_dtype(op)
    g.out_type(op.outputs[0], 2, dtype)
    mels, n, rate = (_int_of(g, op, k, ins[k], what) for k, what in enumerate(("num_mel_bins", "dft_length",
                                                                               "sample_rate")))
    lower, upper = (f"np.float64({_scalar_of(g, v, '0', what, op)})"
                    for v, what in zip(ins[3:], ("lower_edge_hertz", "upper_edge_hertz")))
    g.fail_if(f"{mels} < 0 or {n} < 1 or {rate} < 1", op,
              "num_mel_bins {a} must be at least 0, and dft_length and sample_rate at least 1", a=mels)
    out = g.buffer(op.outputs[0], dtype, [f"{n} // 2 + 1", mels])
    code = g.body.fresh("mel_status")
    g.body(f"{code} = _sig.mel_weight_matrix(np.int64({mels}), np.int64({n}), np.int64({rate}), {lower}, {upper}, {out})")
    g.fail_if(f"{code} == 1", op, "lower_edge_hertz or upper_edge_hertz falls outside the {a} bins of a "
              "{b}-point DFT; keep both between 0 and sample_rate / 2", a=f"{n} // 2 + 1", b=n)
    g.fail_if(f"{code} == 2", op, "the mel bands reach outside the {a} bins of a {b}-point DFT",
              a=f"{n} // 2 + 1", b=n)
    return [Var(out, dtype, 2, "buffer")]


