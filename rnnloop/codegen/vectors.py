"""Vectors of the CPU's width in compiled code: the type, and the operations rnnloop's kernels build on.

Numba has no vector types, and LLVM's loop vectoriser does not keep a block of accumulators in
registers across a loop (it reloads and stores them at every step, behind runtime alias checks). So
the register-blocked products (simd.py) and the convolutions (conv_rt.py) spell their vectors out:
a vector type of VECTOR_BYTES bytes of one float dtype, and zero, load, store, splat, broadcast of
an element, multiply-add (`llvm.fmuladd`: an FMA where the CPU has one, as in BLAS) and a clamp. A
vector is 64 bytes (16 float32) where the CPU has AVX-512, else 32 (8 float32, AVX2): the width is
read from the CPU Numba compiles for, so a kernel cached on one machine is not reused on another
(Numba's cache is keyed by the CPU and its features).
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, models, register_model


def _vector_bytes() -> int:
    """64 when the CPU Numba compiles for has AVX-512 (NUMBA_CPU_FEATURES, else the host's), else 32."""
    from numba import config
    from numba.core.codegen import get_host_cpu_features
    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else get_host_cpu_features()
    return 64 if "+avx512f" in features.split(",") else 32


VECTOR_BYTES = _vector_bytes()


class Vector(types.Type):
    """An LLVM vector of VECTOR_BYTES bytes of one float dtype, held in a register."""

    def __init__(self, dtype: types.Float):
        self.dtype = dtype
        super().__init__(name=f"vector({dtype})")


@register_model(Vector)
class _VectorModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        element = ir.FloatType() if fe_type.dtype == types.float32 else ir.DoubleType()
        super().__init__(dmm, fe_type, ir.VectorType(element, VECTOR_BYTES // (fe_type.dtype.bitwidth // 8)))


def _splat(builder, vector_type, x):
    """The LLVM vector of vector_type with every lane x (an insert and a shuffle: one broadcast)."""
    one = builder.insert_element(ir.Constant(vector_type, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(one, one, ir.Constant(ir.VectorType(ir.IntType(32), vector_type.count), None))


def _address(context, builder, array_type, array, index):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.gep(data, [index])


@intrinsic
def _vload(typingctx, array, index):
    """The vector at element `index` of array's data (flat, from its first element; unaligned)."""
    vector = Vector(array.dtype)

    def codegen(context, builder, sig, args):
        llty = context.get_value_type(vector)
        return builder.load(builder.bitcast(_address(context, builder, array, *args), llty.as_pointer()),
                            align=array.dtype.bitwidth // 8)
    return vector(array, types.intp), codegen


@intrinsic
def _vstore(typingctx, array, index, value):
    def codegen(context, builder, sig, args):
        llty = context.get_value_type(value)
        address = _address(context, builder, array, args[0], args[1])
        builder.store(args[2], builder.bitcast(address, llty.as_pointer()), align=array.dtype.bitwidth // 8)
        return context.get_dummy_value()
    return types.none(array, types.intp, value), codegen


@intrinsic
def _vsplat(typingctx, x):
    """A vector with every lane x."""
    vector = Vector(x)

    def codegen(context, builder, sig, args):
        return _splat(builder, context.get_value_type(vector), args[0])
    return vector(x), codegen


@intrinsic
def _vbroadcast(typingctx, array, index):
    """A vector with every lane array's element `index` (flat, from its first element). Unlike
    _vsplat(array[index]) it has no code for negative indices, which in _block's loop would cost
    more instructions than its multiply-adds."""
    vector = Vector(array.dtype)

    def codegen(context, builder, sig, args):
        return _splat(builder, context.get_value_type(vector), builder.load(_address(context, builder, array, *args)))
    return vector(array, types.intp), codegen


@intrinsic
def _vzero(typingctx, array):
    """A vector of zeros of array's dtype."""
    vector = Vector(array.dtype)

    def codegen(context, builder, sig, args):
        return ir.Constant(context.get_value_type(vector), None)
    return vector(array), codegen


@intrinsic
def _vfma(typingctx, a, b, c):
    """a * b + c, lane by lane."""
    def codegen(context, builder, sig, args):
        llty = context.get_value_type(a)
        name = f"llvm.fmuladd.v{llty.count}f{a.dtype.bitwidth}"
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(llty, [llty] * 3), name)
        return builder.call(fn, args)
    return a(a, a, a), codegen


@intrinsic
def _vclamp(typingctx, v, lo, hi):
    """v held to [lo, hi] lane by lane (a lane below lo is lo, above hi is hi), NaN kept: np.clip's
    values, as np.minimum(np.maximum(v, lo), hi) gives them. With lo -inf and hi inf, v itself."""
    def codegen(context, builder, sig, args):
        x, low, high = args
        x = builder.select(builder.fcmp_ordered("<", x, low), low, x)
        return builder.select(builder.fcmp_ordered(">", x, high), high, x)
    return v(v, v, v), codegen


@intrinsic
def _lanes(typingctx, array):
    """The elements of array's dtype in a vector, as a constant. Numba reads `array.itemsize` from
    the array at run time: offsets computed from it are registers, which in _row_eight's loop cost
    spills and addressing (1.60 against 1.31 µs at 128 x 512)."""
    def codegen(context, builder, sig, args):
        return context.get_constant(types.intp, VECTOR_BYTES // (array.dtype.bitwidth // 8))
    return types.intp(array), codegen
