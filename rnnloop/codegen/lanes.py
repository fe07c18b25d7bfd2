"""Eight lanes of float32 or float64 in one LLVM vector: NumPy's eight running sums and maxima.

NumPy sums a run of up to 128 floats in eight interleaved partial sums (rnnloop/codegen/reductions.py
renders its order), and its maximum keeps eight running maxima (mathfn.max_of). Written as eight
scalars, Numba's code for them did not vectorise: LLVM's SLP vectoriser did not take the eight
accumulators for one vector. A LogSoftmax over 12 rows of 2000 spent 9 µs in its maxima and 15 in its
sum. As one vector, each lane does what its scalar did, in the same order, so the results stay NumPy's
bit for bit (the lanes are combined as the scalars were).

The lanes are eight whatever the CPU: NumPy's, not simd.py's Vector, which is as wide as the CPU's
vectors (sixteen float32 with AVX-512). The intrinsics read a 1-D array by flat index from its first
element: callers check that the array is contiguous (`contiguous`) and that the eight elements are in
bounds.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic, models, overload, register_model

LANES = 8


class Lanes(types.Type):
    """Eight values of one float dtype in a vector register (two with float64 on AVX2)."""

    def __init__(self, dtype: types.Float):
        self.dtype = dtype
        super().__init__(name=f"lanes8({dtype})")


@register_model(Lanes)
class _LanesModel(models.PrimitiveModel):
    def __init__(self, dmm, fe_type):
        element = ir.FloatType() if fe_type.dtype == types.float32 else ir.DoubleType()
        super().__init__(dmm, fe_type, ir.VectorType(element, LANES))


def _floats(array) -> bool:
    return isinstance(array, types.Array) and array.dtype in (types.float32, types.float64)


@intrinsic
def load8(typingctx, array, index):
    """array's elements index .. index + 7 (flat, from its first element; unaligned)."""
    if not _floats(array):
        return None
    lanes = Lanes(array.dtype)

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        llty = context.get_value_type(lanes)
        return builder.load(builder.bitcast(builder.gep(data, [args[1]]), llty.as_pointer()),
                            align=array.dtype.bitwidth // 8)
    return lanes(array, types.intp), codegen


@intrinsic
def add8(typingctx, u, v):
    """u + v, lane by lane."""
    if not isinstance(u, Lanes) or u != v:
        return None
    return u(u, v), lambda context, builder, sig, args: builder.fadd(*args)


def _extreme8(name: str, wins: str):
    """The intrinsic `name`(u, v): lane by lane u where u `wins` (">" or "<") over v or u is NaN, else v,
    as mathfn.maximum and mathfn.minimum."""
    def typer(typingctx, u, v):
        if not isinstance(u, Lanes) or u != v:
            return None

        def codegen(context, builder, sig, args):
            a, b = args
            take = builder.or_(builder.fcmp_ordered(wins, a, b), builder.fcmp_unordered("uno", a, a))
            return builder.select(take, a, b)
        return u(u, v), codegen
    typer.__name__ = typer.__qualname__ = name
    return intrinsic(typer)


max8 = _extreme8("max8", ">")  # np.maximum(u, v) lane by lane
min8 = _extreme8("min8", "<")  # np.minimum(u, v) lane by lane


@intrinsic
def lane(typingctx, v, k):
    """Lane k of v."""
    if not isinstance(v, Lanes) or not isinstance(k, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.extract_element(args[0], builder.trunc(args[1], ir.IntType(32))
                                       if args[1].type.width > 32 else args[1])
    return v.dtype(v, k), codegen


def contiguous(array) -> bool:
    """Whether a 1-D array's elements are adjacent, so that its flat index is its index (compiled
    code only: the overload below)."""


@overload(contiguous)
def _contiguous(array):
    if isinstance(array, types.Array) and array.layout == "C":
        return lambda array: True
    return lambda array: array.strides[0] == array.itemsize
