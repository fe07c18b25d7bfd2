"""Small compiled helpers that generated kernels call: index arithmetic, shapes, copies."""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic


@njit(cache=True, nogil=True, error_model="numpy")
def slice_range(start, end, step, n):
    """ONNX Slice on one axis of size n: the first index and the element count (step != 0)."""
    start, end = int(start), int(end)
    if start < 0:
        start += n
    if end < 0:
        end += n
    if step > 0:
        start = min(max(start, 0), n)
        end = min(max(end, 0), n)
        return start, max(0, (end - start + step - 1) // step)
    start = min(max(start, 0), n - 1)
    end = min(max(end, -1), n - 1)
    return start, max(0, (start - end - step - 1) // -step)


@njit(cache=True, nogil=True)
def broadcast_dim(a, b):
    """The size two sizes broadcast to on one axis, or -1 when they do not broadcast."""
    if a == b or b == 1:
        return a
    return b if a == 1 else -1


# The message of a kernel that stopped on an internal check: the fused loop runs in the interpreter.
INTERNAL = "rnnloop internal error: a copy between arrays of different sizes"


@njit(cache=True, nogil=True)
def put(dst, src):
    """dst[...] = src for arrays of one shape, dst C-contiguous.

    Numba's own array assignment compiles into seconds of broadcasting machinery per kernel; this
    loop compiles once per signature into the shared cache.
    """
    if dst.size != src.size:  # a code generator bug: never write past dst, nor leave it part unwritten
        raise ValueError(INTERNAL)
    flat = dst.reshape(-1)
    i = 0
    for x in src.flat:
        flat[i] = x
        i += 1


@njit("void(int64[::1], int64, int64, int64, int64)", cache=True, nogil=True)
def stop(status, code, t, a, b):
    """Stop the kernel with error `code` at iteration t, details a and b (see kernel.KernelModule).

    A raise in the kernel itself would release every array alive there: with a dozen checks, that
    code was a third of an LSTM kernel. A call that raises costs the kernel one branch. The explicit
    signature keeps literal arguments from making a specialisation per call site.
    """
    status[0] = code
    status[1] = t
    status[2] = a
    status[3] = b
    raise RuntimeError("rnnloop kernel error")


@njit(cache=True, nogil=True)
def spread(x, n):
    """x, or when its last axis has size 1 (not n), x repeated n times along it, in a new array. (A
    test and the call of a second function for the rare work: small enough for LLVM to inline.)"""
    return x if x.shape[-1] == n else _spread(x, n)


@njit(cache=True, nogil=True)
def _spread(x, n):
    out = np.empty(x.shape[:-1] + (n,), x.dtype)
    flat = out.reshape(-1)
    i = 0
    for value in x.flat:
        flat[i:i + n] = value
        i += n
    return out


@njit(cache=True, nogil=True, error_model="numpy")
def binary_rows(out, a, b, op):
    """out = a (op) b for 2-d arrays, op 0 to 3: +, -, *, /, a literal at every call (so each op
    compiles to its own loop). a and b have out's sizes or 1 (the caller checked that they
    broadcast); read by rows, and spread along the last axis if needed, the inner loop vectorises."""
    n = out.shape[1]
    a = spread(a, n)
    b = spread(b, n)
    fa = 1 if a.shape[0] != 1 else 0
    fb = 1 if b.shape[0] != 1 else 0
    for i in range(out.shape[0]):
        ra = np.ascontiguousarray(a[i * fa])
        rb = np.ascontiguousarray(b[i * fb])
        for j in range(n):
            if op == 0:
                out[i, j] = ra[j] + rb[j]
            elif op == 1:
                out[i, j] = ra[j] - rb[j]
            elif op == 2:
                out[i, j] = ra[j] * rb[j]
            else:
                out[i, j] = ra[j] / rb[j]


@intrinsic
def bound(typingctx, table, index, dtype, ndim):
    """Constant `index` of a kernel, from the table its caller made once at load (fused.bind: a row of
    its address, sizes and byte strides): a C-contiguous array of `dtype` (a NumPy scalar type) and
    rank `ndim` (a literal) over memory the caller keeps alive, so without a reference count. One
    table unboxed a call instead of an array per constant: about 90 ns a constant (a model of 16)."""
    if not isinstance(ndim, types.IntegerLiteral):
        return None
    rank = ndim.literal_value
    array = types.Array(dtype.instance_type, rank, "C")

    def codegen(context, builder, sig, args):
        from numba.core import cgutils
        from numba.np.arrayobj import populate_array
        table_, index_ = args[0], args[1]
        rows = context.make_array(sig.args[0])(context, builder, table_)
        width = builder.extract_value(rows.strides, 0)  # bytes per row
        start = builder.add(builder.ptrtoint(rows.data, ir.IntType(64)), builder.mul(index_, width))
        row = builder.inttoptr(start, ir.IntType(64).as_pointer())
        fields = [builder.load(builder.gep(row, [ir.Constant(ir.IntType(64), k)])) for k in range(1 + 2 * rank)]
        out = context.make_array(array)(context, builder)
        element = context.get_data_type(array.dtype)
        populate_array(out, data=builder.inttoptr(fields[0], element.as_pointer()),
                       shape=cgutils.pack_array(builder, fields[1:1 + rank]),
                       strides=cgutils.pack_array(builder, fields[1 + rank:]),
                       itemsize=context.get_constant(types.intp, context.get_abi_sizeof(element)), meminfo=None)
        return out._getvalue()
    return array(table, types.int64, dtype, ndim), codegen


# ---------------------------------------------------------------------------------------------
# A call handed to another thread (pool.post_job): its arguments and results as int64 words.
# An array is its address, sizes and byte strides; a result also the reference that keeps it alive.

def _array_from(context, builder, array, words_array, words_value, at, meminfo: bool):
    """`array` (a Numba array type) from the words at `at`: [meminfo,] address, sizes, strides."""
    from numba.core import cgutils
    from numba.np.arrayobj import populate_array
    rank = array.ndim
    words = context.make_array(words_array)(context, builder, words_value)
    base = builder.gep(words.data, [at])
    fields = [builder.load(builder.gep(base, [ir.Constant(ir.IntType(64), k)]))
              for k in range(1 + meminfo + 2 * rank)]
    if meminfo:
        owner, fields = fields[0], fields[1:]
    out = context.make_array(array)(context, builder)
    element = context.get_data_type(array.dtype)
    populate_array(out, data=builder.inttoptr(fields[0], element.as_pointer()),
                   shape=cgutils.pack_array(builder, fields[1:1 + rank], ir.IntType(64)),
                   strides=cgutils.pack_array(builder, fields[1 + rank:], ir.IntType(64)),
                   itemsize=context.get_constant(types.intp, context.get_abi_sizeof(element)),
                   meminfo=builder.inttoptr(owner, context.get_value_type(types.MemInfoPointer(types.voidptr)))
                   if meminfo else None)
    return out._getvalue()


@intrinsic
def view_at(typingctx, words, at, dtype, ndim, contiguous):
    """The array whose address, sizes and strides put_view wrote at words[at:]: of `dtype` and rank
    `ndim`, of layout 'C' if `contiguous` else 'A' (literals), without a reference count: its
    memory is kept alive by whoever wrote the words."""
    if not isinstance(ndim, types.IntegerLiteral) or not isinstance(contiguous, types.BooleanLiteral):
        return None
    array = types.Array(dtype.instance_type, ndim.literal_value, "C" if contiguous.literal_value else "A")

    def codegen(context, builder, sig, args):
        return _array_from(context, builder, array, sig.args[0], args[0], args[1], meminfo=False)
    return array(words, types.int64, dtype, ndim, contiguous), codegen


@njit(cache=True, nogil=True)
def put_view(words, at, a):
    """Write array a's address, sizes and byte strides at words[at:], for view_at (a stays alive
    until the reader is done: its writer waits for it)."""
    words[at] = a.ctypes.data
    for d in range(a.ndim):
        words[at + 1 + d] = a.shape[d]
        words[at + 1 + a.ndim + d] = a.strides[d]


@intrinsic
def keep(typingctx, words, at, array):
    """Write a result at words[at:]: a reference to it, its address, sizes and byte strides, for
    adopt (which takes the reference over). A C-contiguous array (the type adopt gives it)."""
    if not isinstance(array, types.Array) or array.layout != "C":
        return None

    def codegen(context, builder, sig, args):
        words_, at_, value = args
        context.nrt.incref(builder, sig.args[2], value)
        a = context.make_array(sig.args[2])(context, builder, value)
        i64 = ir.IntType(64)
        fields = [builder.ptrtoint(a.meminfo, i64), builder.ptrtoint(a.data, i64)]
        from numba.core import cgutils
        fields += cgutils.unpack_tuple(builder, a.shape) + cgutils.unpack_tuple(builder, a.strides)
        base = builder.gep(context.make_array(sig.args[0])(context, builder, words_).data, [at_])
        for k, field in enumerate(fields):
            builder.store(field, builder.gep(base, [ir.Constant(i64, k)]))
        return context.get_dummy_value()
    return types.void(words, at, array), codegen


@intrinsic
def adopt(typingctx, words, at, dtype, ndim):
    """The C-contiguous result of `dtype` and rank `ndim` that keep wrote at words[at:], owning the
    reference keep took. Words still zero (the call failed) give an empty array that owns nothing."""
    if not isinstance(ndim, types.IntegerLiteral):
        return None
    array = types.Array(dtype.instance_type, ndim.literal_value, "C")

    def codegen(context, builder, sig, args):
        return _array_from(context, builder, array, sig.args[0], args[0], args[1], meminfo=True)
    return array(words, types.int64, dtype, ndim), codegen
