"""Compiled helpers of the quantisation rules (rnnloop/codegen/quant.py); kernels import this module
as _q. Each is checked against rnnloop/interp/quant_ops.py in tests/test_quant.py.

matmul_integer computes (a - za) @ (b - zb) in int32, exactly, as the ONNX spec says. A constant b
(weights) is packed once, at load (pack), into panels of 8 columns by pairs of rows, [panels, K/2,
8, 2], so that with AVX2 one `vpmaddwd` multiplies 16 pairs of 16-bit values and adds each pair
into 8 int32 lanes: a[k] b[k, n] + a[k+1] b[k+1, n] for 8 columns n. The operands are widened to
16 bits first (sign- or zero-extended, as their type is), which keeps every product and pair sum
exact: onnxruntime's AVX2 kernel without VNNI multiplies bytes (`vpmaddubsw`) and saturates each
pair sum of uint8 x int8 to 16 bits, which changes results where activations and weights are both
near the ends of their ranges (see tests/test_quant.py). The zero points come in afterwards:
sum (a - za)(b - zb) = sum ab - za colsum(b) - zb rowsum(a) + K za zb, with colsum(b) packed too.
Rows are done two at a time over four panels (32 columns: 8 accumulators in registers), or
with AVX-512's 32 registers four at a time (16 accumulators) where a row is its own quads; a lone
row (an LSTM step at batch 1) reads two units of a panel with each 64-byte load where AVX-512 has
VNNI (_packed_row_wide).

Weights within [-64, 64] (onnxruntime's quantiser with reduce_range=True writes 7-bit weights) times
uint8 activations cannot saturate 16 bits (255 * 64 * 2 = 32640), so for them pack(b, unsigned_a=True)
makes panels by quads of rows, [panels, K/4, 8, 4]: `vpmaddubsw` multiplies 32 bytes by 32 bytes
unwidened and adds each pair into 16 bits, `vpmaddwd` by ones adds those pairs into 8 int32 lanes, a
column's four products. The weights are not widened, and a 32-byte load serves 32 products, not
16: a 1 x 256 x 1024 product (an LSTM step at batch 1) took 4.1-4.3 against 5.5-5.7 µs (znver3,
alternating runs). Exact all the same.

With VNNI (AVX512-VNNI with AVX512-VL, or AVX-VNNI), `vpdpbusd` does those three steps in one: it adds
the four products of a uint8 quad by an int8 quad into each int32 lane, with no 16-bit step to
saturate, so quads then serve every int8 weight times uint8, not only 7-bit ones.

Without AVX2, or for b that is not constant, a plain loop computes the same.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, models, overload, register_model

from . import amx
from .lanes import contiguous, lane, load8, max8, min8
from .mathfn import maximum, minimum
from .simd import aligned_empty


def _features() -> list[str]:
    from numba import config
    from numba.core.codegen import get_host_cpu_features
    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else get_host_cpu_features()
    return features.split(",")


_FEATURES = set(_features())
HAVE_AVX2 = "+avx2" in _FEATURES
# vpdpbusd on 32-byte vectors: AVX512-VNNI's needs AVX512-VL; AVX-VNNI's is the same instruction, VEX-coded.
HAVE_VNNI = HAVE_AVX2 and ({"+avx512vnni", "+avx512vl"} <= _FEATURES or "+avxvnni" in _FEATURES)
# Thirty-two vector registers (AVX-512): room for four rows' sixteen accumulators (_packed_rows4).
WIDE = "+avx512f" in _FEATURES
LANES = 8  # int32 lanes of a 32-byte vector: the columns of a panel
# Weights (bytes) from which a lone row's product takes two units a 64-byte vpdpbusd (_packed_row_wide):
# that reads them at a higher rate, but a 64-byte vpdpbusd issues at half the rate of a 32-byte one
# (Intel), so smaller products gain nothing (1 x 64 x 128: 0.34 against 0.32 µs).
WIDE_ROW = 1 << 16
GROUP = 4  # panels per pass


class IntVector(types.Type):
    """Eight int32 lanes in a register."""

    def __init__(self):
        super().__init__(name="int32x8")


int32x8 = IntVector()


@register_model(IntVector)
class _IntVectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.VectorType(ir.IntType(32), LANES))


@intrinsic
def _izero(typingctx, dummy):
    """A vector of zeros."""
    def codegen(context, builder, sig, args):
        return ir.Constant(ir.VectorType(ir.IntType(32), LANES), None)
    return int32x8(dummy), codegen


def _x86(builder, name, result, *args):
    signature = ir.FunctionType(result, [a.type for a in args])
    fn = builder.module.globals.get(name) or ir.Function(builder.module, signature, name)
    return builder.call(fn, list(args))


@intrinsic
def _imadd(typingctx, acc, packed, offset, unit):
    """acc + the products of one unit of rows of every column of a panel, from element `offset` of packed.

    `unit` is an int32 (pair panels): the int16 values of two rows (low half: the even row's);
    pmaddwd of 16 bytes widened to int16 by it in every lane gives lane n packed[2n] * lo +
    packed[2n + 1] * hi. A uint32 `unit` (quad panels): the uint8 values of four rows (lowest byte:
    the first row's); pmaddubsw of 32 bytes (int8) by it in every lane, then pmaddwd by ones,
    gives lane n the sum over t < 4 of packed[4n + t] * byte t (with VNNI, vpdpbusd, in one step).
    """
    signed = packed.dtype == types.int8
    quads = unit == types.uint32

    def codegen(context, builder, sig, args):
        vacc, array, index, p = args
        data = context.make_array(sig.args[1])(context, builder, array).data
        i8x32, i16x16, i32x8 = (ir.VectorType(ir.IntType(w), c) for w, c in ((8, 32), (16, 16), (32, LANES)))
        one = builder.insert_element(ir.Constant(i32x8, ir.Undefined), p, ir.Constant(ir.IntType(32), 0))
        splat = builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(ir.IntType(32), LANES), None))
        if quads and HAVE_VNNI:  # (the i32 operand form, which LLVM 21 and later upgrade)
            weights = builder.load(builder.bitcast(builder.gep(data, [index]), i32x8.as_pointer()), align=1)
            return _x86(builder, "llvm.x86.avx512.vpdpbusd.256", i32x8, vacc, splat, weights)
        if quads:
            weights = builder.load(builder.bitcast(builder.gep(data, [index]), i8x32.as_pointer()), align=1)
            pairs = _x86(builder, "llvm.x86.avx2.pmadd.ub.sw", i16x16, builder.bitcast(splat, i8x32), weights)
            ones = ir.Constant(i16x16, [1] * 16)
            return builder.add(vacc, _x86(builder, "llvm.x86.avx2.pmadd.wd", i32x8, pairs, ones))
        sixteen = ir.VectorType(ir.IntType(8), 16).as_pointer()
        bytes_ = builder.load(builder.bitcast(builder.gep(data, [index]), sixteen), align=1)
        wide = builder.sext(bytes_, i16x16) if signed else builder.zext(bytes_, i16x16)
        return builder.add(vacc, _x86(builder, "llvm.x86.avx2.pmadd.wd", i32x8, wide, builder.bitcast(splat, i16x16)))
    return int32x8(acc, packed, types.intp, unit), codegen


@intrinsic
def _istore(typingctx, array, index, value):
    """Store the 8 lanes at element `index` of an int32 array (flat, unaligned)."""
    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        address = builder.bitcast(builder.gep(data, [args[1]]), ir.VectorType(ir.IntType(32), LANES).as_pointer())
        builder.store(args[2], address, align=4)
        return context.get_dummy_value()
    return types.none(array, types.intp, value), codegen


class IntVector16(types.Type):
    """Sixteen int32 lanes in a register (AVX-512): two units of a panel side by side (see _imadd2)."""

    def __init__(self):
        super().__init__(name="int32x16")


int32x16 = IntVector16()


@register_model(IntVector16)
class _IntVector16Model(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, ir.VectorType(ir.IntType(32), 2 * LANES))


@intrinsic
def _izero2(typingctx, dummy):
    """Sixteen int32 zeros."""
    def codegen(context, builder, sig, args):
        return ir.Constant(ir.VectorType(ir.IntType(32), 2 * LANES), None)
    return int32x16(dummy), codegen


@intrinsic
def _imadd2(typingctx, acc, packed, offset, units):
    """acc + two consecutive quad units of a panel at once, from element `offset` of packed (64 bytes:
    unit j's 8 columns, then unit j + 1's): `units` is a uint64 holding unit j's four bytes of a row
    (low half) and unit j + 1's (high half), so one 64-byte vpdpbusd gives lanes 0-7 unit j's sums and
    lanes 8-15 unit j + 1's, added together by _ifold (integers: exactly)."""
    def codegen(context, builder, sig, args):
        vacc, array, index, pair = args
        data = context.make_array(sig.args[1])(context, builder, array).data
        i32x16 = ir.VectorType(ir.IntType(32), 2 * LANES)
        two = builder.bitcast(pair, ir.VectorType(ir.IntType(32), 2))
        mask = ir.Constant(ir.VectorType(ir.IntType(32), 2 * LANES), [0] * LANES + [1] * LANES)
        multiplier = builder.shuffle_vector(two, two, mask)
        weights = builder.load(builder.bitcast(builder.gep(data, [index]), i32x16.as_pointer()), align=1)
        return _x86(builder, "llvm.x86.avx512.vpdpbusd.512", i32x16, vacc, multiplier, weights)
    return int32x16(acc, packed, types.intp, units), codegen


@intrinsic
def _ifold(typingctx, acc):
    """The eight lanes of unit j's sums plus unit j + 1's (see _imadd2)."""
    def codegen(context, builder, sig, args):
        v = args[0]
        low = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(ir.IntType(32), LANES), list(range(LANES))))
        high = builder.shuffle_vector(v, v, ir.Constant(ir.VectorType(ir.IntType(32), LANES),
                                                        list(range(LANES, 2 * LANES))))
        return builder.add(low, high)
    return int32x8(acc), codegen


def _of(array, dtype):
    """Whether `array`'s dtype is `dtype` (a NumPy scalar type), as a constant of the compiled code."""


@overload(_of)
def _of_typed(array, dtype):
    answer = array.dtype == dtype.dtype
    return lambda array, dtype: answer


def pack(b: np.ndarray, unsigned_a: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(panels of b's dtype, zero-padded; colsum(b) [N] int32) of b [K, N] uint8 or int8: by pairs of
    rows, [ceil(N / 8), ceil(K / 2), 8, 2] with packed[p, j, c, t] = b[2 j + t, 8 p + c]; or, for a
    product by uint8 (`unsigned_a`) of int8 weights, by quads, [.., ceil(K / 4), 8, 4]: any such weights
    with VNNI, else those within [-64, 64]."""
    k, n = b.shape
    seven_bit = b.size and -64 <= b.min() and b.max() <= 64
    rows = 4 if unsigned_a and b.dtype == np.int8 and (HAVE_VNNI or seven_bit) else 2
    panels, units = -(-n // LANES), -(-k // rows)
    padded = np.zeros((rows * units, panels * LANES), b.dtype)
    padded[:k, :n] = b
    # At a cache line boundary, as the float panels are: NumPy's 16-byte alignment made half of the
    # 64-byte loads of _packed_row_wide straddle two lines, and its 1 x 256 x 1024 product took 2.59
    # against 1.76 µs (medians of 9 rounds of 2,000 alternating, a 2-core Xeon, 2026-11-29).
    packed = aligned_empty((panels, units, LANES, rows), b.dtype)
    packed[...] = padded.reshape(units, rows, panels, LANES).transpose(2, 0, 3, 1)
    return packed, b.astype(np.int32).sum(axis=0).astype(np.int32)


@njit(cache=True, nogil=True)
def _units(a, m, k, out):
    """out[j]: a[m]'s values of unit j (see _imadd): two int16 values in an int32, or, for a uint32
    out, four bytes (rows past k are zeros)."""
    quads = _of(out, np.uint32)
    rows = 4 if quads else 2
    for j in range(out.shape[0]):
        v = np.int64(0)
        for t in range(rows):
            if rows * j + t < k:
                x = np.int64(a[m, rows * j + t])
                v |= (x & (0xFF if quads else 0xFFFF)) << ((8 if quads else 16) * t)
        out[j] = v


@njit(cache=True, nogil=True)
def _packed_rows(packed, raw, two, p0, p1):
    """raw[r, :] = the units of a row (p0, then p1 when `two`; see _units) @ b from b's panels, without
    zero points; raw is C-contiguous with rows of at least the panels' columns."""
    panels, pairs = packed.shape[0], packed.shape[1]
    flat = packed.reshape(-1)
    step = packed.shape[2] * packed.shape[3]  # elements of one unit of a panel: 16 (pairs) or 32
    if not two:
        _packed_row(p0, flat, panels, pairs, raw, step)
        return
    stride = pairs * step  # elements between one panel's units and the next's
    p = 0
    while p < panels:
        count = min(GROUP, panels - p)
        z = _izero(0)
        a0, a1, a2, a3, b0, b1, b2, b3 = z, z, z, z, z, z, z, z
        base = p * stride
        if count == GROUP:
            for j in range(pairs):
                at = base + j * step
                x = p0[j]
                a0 = _imadd(a0, flat, at, x)
                a1 = _imadd(a1, flat, at + stride, x)
                a2 = _imadd(a2, flat, at + 2 * stride, x)
                a3 = _imadd(a3, flat, at + 3 * stride, x)
                if two:
                    y = p1[j]
                    b0 = _imadd(b0, flat, at, y)
                    b1 = _imadd(b1, flat, at + stride, y)
                    b2 = _imadd(b2, flat, at + 2 * stride, y)
                    b3 = _imadd(b3, flat, at + 3 * stride, y)
            _istore(raw, p * LANES, a0)
            _istore(raw, (p + 1) * LANES, a1)
            _istore(raw, (p + 2) * LANES, a2)
            _istore(raw, (p + 3) * LANES, a3)
            if two:
                row = raw.shape[1]
                _istore(raw, row + p * LANES, b0)
                _istore(raw, row + (p + 1) * LANES, b1)
                _istore(raw, row + (p + 2) * LANES, b2)
                _istore(raw, row + (p + 3) * LANES, b3)
        else:
            for q in range(count):
                a0, b0 = z, z
                at = base + q * stride
                for j in range(pairs):
                    a0 = _imadd(a0, flat, at + j * step, p0[j])
                    if two:
                        b0 = _imadd(b0, flat, at + j * step, p1[j])
                _istore(raw, (p + q) * LANES, a0)
                if two:
                    _istore(raw, raw.shape[1] + (p + q) * LANES, b0)
        p += count


@njit(cache=True, nogil=True)
def _packed_rows4(packed, raw, p0, p1, p2, p3):
    """raw[r, :] = the quads of four rows (p0 .. p3) @ b from b's panels, without zero points: four
    rows by four panels in sixteen accumulators, so that each load of weights serves four rows and
    sixteen chains keep two vpdpbusd a cycle busy (needs AVX-512's 32 registers; raw C-contiguous).
    A 200 x 128 x 1024 product (an LSTM's hoisted input product) took 158 against 233-247 µs by pairs
    of rows (Zen 4, VNNI)."""
    panels, units = packed.shape[0], packed.shape[1]
    flat = packed.reshape(-1)
    step = packed.shape[2] * packed.shape[3]
    stride = units * step
    row = raw.shape[1]
    p = 0
    while p < panels:
        count = min(GROUP, panels - p)
        z = _izero(0)
        base = p * stride
        if count == GROUP:
            a0, a1, a2, a3, b0, b1, b2, b3 = z, z, z, z, z, z, z, z
            c0, c1, c2, c3, d0, d1, d2, d3 = z, z, z, z, z, z, z, z
            for j in range(units):
                at = base + j * step
                x, y, u, v = p0[j], p1[j], p2[j], p3[j]
                a0, b0 = _imadd(a0, flat, at, x), _imadd(b0, flat, at, y)
                c0, d0 = _imadd(c0, flat, at, u), _imadd(d0, flat, at, v)
                a1, b1 = _imadd(a1, flat, at + stride, x), _imadd(b1, flat, at + stride, y)
                c1, d1 = _imadd(c1, flat, at + stride, u), _imadd(d1, flat, at + stride, v)
                a2, b2 = _imadd(a2, flat, at + 2 * stride, x), _imadd(b2, flat, at + 2 * stride, y)
                c2, d2 = _imadd(c2, flat, at + 2 * stride, u), _imadd(d2, flat, at + 2 * stride, v)
                a3, b3 = _imadd(a3, flat, at + 3 * stride, x), _imadd(b3, flat, at + 3 * stride, y)
                c3, d3 = _imadd(c3, flat, at + 3 * stride, u), _imadd(d3, flat, at + 3 * stride, v)
            for q, (e, f, g, h) in enumerate(((a0, b0, c0, d0), (a1, b1, c1, d1), (a2, b2, c2, d2), (a3, b3, c3, d3))):
                at = (p + q) * LANES
                _istore(raw, at, e)
                _istore(raw, row + at, f)
                _istore(raw, 2 * row + at, g)
                _istore(raw, 3 * row + at, h)
        else:
            for q in range(count):
                e, f, g, h = z, z, z, z
                at = base + q * stride
                for j in range(units):
                    e, f = _imadd(e, flat, at + j * step, p0[j]), _imadd(f, flat, at + j * step, p1[j])
                    g, h = _imadd(g, flat, at + j * step, p2[j]), _imadd(h, flat, at + j * step, p3[j])
                at = (p + q) * LANES
                _istore(raw, at, e)
                _istore(raw, row + at, f)
                _istore(raw, 2 * row + at, g)
                _istore(raw, 3 * row + at, h)
        p += count


@njit(cache=True, nogil=True)
def _packed_row_wide(p0, flat, panels, units, raw):
    """_packed_row of a row's quads with AVX-512's VNNI: two units of eight panels at a time, one
    64-byte vpdpbusd each (_imadd2), then the panels left one at a time, and a lone last unit (of an
    odd number) 32 bytes wide. An LSTM step's 1 x 256 x 1024 product: 2.29 against 2.68 µs 32 bytes
    wide (medians of 9 alternating rounds on a 2-core Xeon with AVX-512, 2026-11-28)."""
    step = 4 * LANES  # elements (bytes) of one unit of a panel
    stride = units * step
    pairs = units // 2
    both = p0[:2 * pairs].view(np.uint64)
    p = 0
    while p + 8 <= panels:
        z = _izero2(0)
        a0, a1, a2, a3, a4, a5, a6, a7 = z, z, z, z, z, z, z, z
        at = p * stride
        for j in range(pairs):
            x, o = both[j], at + 2 * j * step
            a0, a1 = _imadd2(a0, flat, o, x), _imadd2(a1, flat, o + stride, x)
            a2, a3 = _imadd2(a2, flat, o + 2 * stride, x), _imadd2(a3, flat, o + 3 * stride, x)
            a4, a5 = _imadd2(a4, flat, o + 4 * stride, x), _imadd2(a5, flat, o + 5 * stride, x)
            a6, a7 = _imadd2(a6, flat, o + 6 * stride, x), _imadd2(a7, flat, o + 7 * stride, x)
        for q, a in enumerate((a0, a1, a2, a3, a4, a5, a6, a7)):
            _istore(raw, (p + q) * LANES, _last_unit(_ifold(a), p0, flat, (p + q) * stride, units, step))
        p += 8
    while p < panels:
        a0 = _izero2(0)
        for j in range(pairs):
            a0 = _imadd2(a0, flat, p * stride + 2 * j * step, both[j])
        _istore(raw, p * LANES, _last_unit(_ifold(a0), p0, flat, p * stride, units, step))
        p += 1


@njit(nogil=True, inline="always")
def _last_unit(folded, p0, flat, at, units, step):
    """folded plus the products of the last unit of the panel at `at` when the units are odd (the
    wide loops take them two at a time)."""
    if units % 2 == 1:
        return _imadd(folded, flat, at + (units - 1) * step, p0[units - 1])
    return folded


@njit(cache=True, nogil=True)
def _packed_row(p0, flat, panels, pairs, raw, step):
    """raw[0, :] = one row's units p0 @ b from b's panels (flat; `step` elements a unit), eight panels
    at a time."""
    stride = pairs * step
    p = 0
    while p + 8 <= panels:
        z = _izero(0)
        a0, a1, a2, a3, a4, a5, a6, a7 = z, z, z, z, z, z, z, z
        at = p * stride
        for j in range(pairs):
            x = p0[j]
            a0 = _imadd(a0, flat, at, x)
            a1 = _imadd(a1, flat, at + stride, x)
            a2 = _imadd(a2, flat, at + 2 * stride, x)
            a3 = _imadd(a3, flat, at + 3 * stride, x)
            a4 = _imadd(a4, flat, at + 4 * stride, x)
            a5 = _imadd(a5, flat, at + 5 * stride, x)
            a6 = _imadd(a6, flat, at + 6 * stride, x)
            a7 = _imadd(a7, flat, at + 7 * stride, x)
            at += step
        _istore(raw, p * LANES, a0)
        _istore(raw, (p + 1) * LANES, a1)
        _istore(raw, (p + 2) * LANES, a2)
        _istore(raw, (p + 3) * LANES, a3)
        _istore(raw, (p + 4) * LANES, a4)
        _istore(raw, (p + 5) * LANES, a5)
        _istore(raw, (p + 6) * LANES, a6)
        _istore(raw, (p + 7) * LANES, a7)
        p += 8
    while p < panels:
        a0 = _izero(0)
        at = p * stride
        for j in range(pairs):
            a0 = _imadd(a0, flat, at + j * step, p0[j])
        _istore(raw, p * LANES, a0)
        p += 1


@njit(cache=True, nogil=True)
def _packed_product(a, za, zb, out, packed, colsum, quads):
    """matmul_integer by b's panels, two rows of a at a time (four by _packed_rows4 where it serves).
    The panels' sums go straight into out's rows when the panels have out's columns (else through a
    scratch pair of rows), and a uint8 row whose length is a multiple of four is its own quads (a
    view). A lone such row (a recurrent step at batch 1) allocates nothing: at 1 x 256 x 1024 the
    call took 2.6 against 2.8 µs with the empty scratch arrays, of which 2.3-2.5 are products."""
    m_rows, k = a.shape
    n = out.shape[1]
    units = packed.shape[1]
    direct = packed.shape[0] * LANES == n
    viewed = quads and k % 4 == 0
    if m_rows == 1 and viewed and direct:
        if WIDE and HAVE_VNNI and k * n >= WIDE_ROW:
            _packed_row_wide(a[0].view(np.uint32), packed.reshape(-1), packed.shape[0], units, out)
        else:
            _packed_row(a[0].view(np.uint32), packed.reshape(-1), packed.shape[0], units, out,
                        packed.shape[2] * packed.shape[3])
        _zero_points(out[0], a[0], za, zb, colsum)
        return
    m = np.int64(0)  # not the literal 0: Numba would compile _packed_rows for Literal[int](0) too
    if amx.AVAILABLE and viewed and direct and m_rows >= amx.ROWS:  # blocks of 16 rows on AMX's tiles
        m = np.int64(amx.product(a, packed, out, amx.CONFIG))
        for r in range(m):
            _zero_points(out[r], a[r], za, zb, colsum)
    scratch = np.empty((0 if direct else 2, packed.shape[0] * LANES), np.int32)
    pairs0, pairs1 = np.empty(0 if quads else units, np.int32), np.empty(0 if quads else units, np.int32)
    kept = 0 if viewed or not quads else units
    quads0, quads1 = np.empty(kept, np.uint32), np.empty(kept, np.uint32)
    while m < m_rows:
        if WIDE and viewed and direct and m + 4 <= m_rows:
            _packed_rows4(packed, out[m:m + 4], a[m].view(np.uint32), a[m + 1].view(np.uint32),
                          a[m + 2].view(np.uint32), a[m + 3].view(np.uint32))
            for r in range(4):
                _zero_points(out[m + r], a[m + r], za, zb, colsum)
            m += 4
            continue
        two = m + 1 < m_rows
        if quads:
            q0, q1 = quads0, quads1
            if viewed:
                q0 = a[m].view(np.uint32)
                q1 = a[m + 1].view(np.uint32) if two else q0
            else:
                _units(a, m, k, q0)
                if two:
                    _units(a, m + 1, k, q1)
            _rows_into(out, m, scratch, direct, packed, two, q0, q1)
        else:
            _units(a, m, k, pairs0)
            if two:
                _units(a, m + 1, k, pairs1)
            _rows_into(out, m, scratch, direct, packed, two, pairs0, pairs1)
        for r in range(2 if two else 1):
            _zero_points(out[m + r], a[m + r], za, zb, colsum)
        m += 2 if two else 1


@njit(cache=True, nogil=True)
def _zero_points(row, a_row, za, zb, colsum):
    """row = sum_k a_row[k] b[k, :] (as the panels give it) turned into sum (a_row - za)(b - zb), in
    place (one array: out read through another view would not vectorise)."""
    k = a_row.shape[0]
    rowsum = np.int32(0)
    for kk in range(k):
        rowsum += np.int32(a_row[kk])
    if zb.shape[0] != 1:
        for j in range(row.shape[0]):
            row[j] += np.int32(k) * za * zb[j] - za * colsum[j] - zb[j] * rowsum
    else:  # (rowsum and the constant term as one number per row)
        c = np.int32(k) * za * zb[0] - zb[0] * rowsum
        for j in range(row.shape[0]):
            row[j] += c - za * colsum[j]


@njit(cache=True, nogil=True)
def _rows_into(out, m, scratch, direct, packed, two, p0, p1):
    """out[m] (and out[m + 1] when `two`) = the units p0 (p1) @ b, without zero points: straight into
    out's rows when `direct`, else through `scratch`."""
    if direct:
        _packed_rows(packed, out[m:m + 2], two, p0, p1)
        return
    _packed_rows(packed, scratch, two, p0, p1)
    for r in range(2 if two else 1):
        for j in range(out.shape[1]):
            out[m + r, j] = scratch[r, j]


@njit(cache=True, nogil=True)
def matmul_integer(a, b, za, zb, out, packed, colsum):
    """out[m, n] = sum_k (a[m, k] - za) * (b[k, n] - zb[n or 0]) in int32; a [M, K] and b [K, N] of
    uint8 or int8, out [M, N] int32, all C-contiguous; packed and colsum from pack(b), or empty
    (quad panels serve only a uint8 a). Returns 1 when the sizes do not agree (nothing written), else 0."""
    m_rows, k = a.shape
    n = b.shape[1]
    if b.shape[0] != k or out.shape[0] != m_rows or out.shape[1] != n or (zb.shape[0] != 1 and zb.shape[0] != n):
        return 1
    per_column = zb.shape[0] != 1
    quads = packed.shape[3] == 4 and _of(a, np.uint8)
    rows = 4 if quads else 2
    if (HAVE_AVX2 and n > 0 and packed.shape[0] == (n + LANES - 1) // LANES
            and packed.shape[1] == (k + rows - 1) // rows and packed.shape[3] == rows and colsum.shape[0] == n):
        _packed_product(a, za, zb, out, packed, colsum, quads)
        return 0
    for i in range(m_rows):
        for j in range(n):
            out[i, j] = 0
        for kk in range(k):
            x = np.int32(a[i, kk]) - za
            if per_column:
                for j in range(n):
                    out[i, j] += x * (np.int32(b[kk, j]) - zb[j])
            else:
                z = zb[0]
                for j in range(n):
                    out[i, j] += x * (np.int32(b[kk, j]) - z)
    return 0


@njit(cache=True, nogil=True)
def _range(x):
    """(min(x, 0), max(x, 0)) of a 1-D float32 x; NaN in both if x holds a NaN. Sixteen at a time in
    four running vectors where x is contiguous: a scalar loop's compare-and-branch did not vectorise
    (an LSTM's 256 states took 0.2 µs, 25,600 inputs 17 µs; with the quantising pass, 0.10 and 6.3 µs
    against 0.21 and 19.6)."""
    lo = np.float32(0.0)
    hi = np.float32(0.0)
    n = x.shape[0]
    i = 0
    if contiguous(x) and n >= 16:
        lo0, hi0, lo1, hi1 = load8(x, 0), load8(x, 0), load8(x, 8), load8(x, 8)
        i = 16
        while i + 16 <= n:
            u, v = load8(x, i), load8(x, i + 8)
            lo0, hi0, lo1, hi1 = min8(lo0, u), max8(hi0, u), min8(lo1, v), max8(hi1, v)
            i += 16
        lo_v, hi_v = min8(lo0, lo1), max8(hi0, hi1)
        for t in range(8):
            lo, hi = minimum(lane(lo_v, t), lo), maximum(lane(hi_v, t), hi)
    for j in range(i, n):
        lo, hi = minimum(x[j], lo), maximum(x[j], hi)
    return lo, hi


@njit(cache=True, nogil=True)
def dynamic_quantize(x, y):
    """y = x as uint8 by the scale and zero point of its range widened to hold 0 (onnxruntime's);
    returns (scale, zero point, 0), or status 1 when x holds NaN or infinity. x and y 1-D."""
    lo, hi = _range(x)
    if not (lo - lo == 0 and hi - hi == 0):  # (NaN, or an infinity at an end of the range)
        return np.float32(1.0), np.uint8(0), 1
    scale = np.float32(1.0) if lo == hi else np.float32((hi - lo) / np.float32(255.0))
    zero = np.float32(0.0) - lo / scale
    zero = min(max(zero, np.float32(0.0)), np.float32(255.0))
    zp = np.float32(np.rint(zero))
    for i in range(x.shape[0]):
        q = np.rint(x[i] / scale) + zp
        y[i] = np.uint8(min(max(q, np.float32(0.0)), np.float32(255.0)))
    return scale, np.uint8(zp), 0
