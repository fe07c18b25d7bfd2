"""Int8 products on Intel's AMX tiles, where the CPU has them: 16 rows at a time, 64 products a row by
one instruction.

An AMX tile multiply (`tdpbusd`) adds to a tile of 16 x 16 int32 sums the products of a 16 x 64
tile of uint8 by a 64 x 16 tile of int8 (four consecutive rows of the int8 matrix side by side, as
quant_rt's quad panels already hold them): 16,384 multiply-adds an instruction, eight times what
AVX-512's VNNI does. The hoisted input product of a quantised LSTM, every step's at once, is one
such product: 200 x 128 x 1024 (192 rows of it on tiles) took 66-69 µs against 178-181 with VNNI
(a 2-core Xeon with AMX, 2026-11-28; three rounds, ad hoc). A recurrent step at batch 1 is one row: it stays with VNNI (quant_rt.py).

The tiles use quant_rt's panels as they are: a panel is 8 columns, so a B tile is 16 units of one
panel (16 rows of 32 bytes, contiguous) and a C tile 16 rows of 8 sums. Products whose inner
dimension is a multiple of 64 run here, on their rows in blocks of 16 (two blocks by two panels, four
C tiles, at a time); the rows left (fewer than 16) return to the VNNI path. Exact, as every integer
path.

Linux gives a process AMX's state only when it asks (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16 and
later); without that an AMX instruction faults, so nothing here runs unless the request succeeded.
Each product loads its tile configuration and releases the tiles when it is done (the state is
per thread). RNNLOOP_AMX=0 keeps products on VNNI.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

ROWS = 16  # rows of an A or C tile
DEPTH = 64  # bytes of a row of an A tile: the inner dimension one tile multiply takes
_ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA, _SYS_ARCH_PRCTL = 0x1023, 18, 158  # (x86-64 Linux)


def _available() -> bool:
    """Whether the CPU Numba compiles for has AMX's int8 tiles and Linux lets this process use them."""
    from numba import config
    from numba.core.codegen import get_host_cpu_features

    if os.environ.get("RNNLOOP_AMX", "1") == "0":
        return False
    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else get_host_cpu_features()
    if not {"+amx-tile", "+amx-int8"} <= set(features.split(",")):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.syscall(_SYS_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):
        return False


AVAILABLE = _available()

# The tile configuration (ldtilecfg's 64 bytes: palette 1; bytes per row of each tile, then rows):
# tiles 0-3 the C tiles (16 x 8 int32), 4 and 5 the A tiles (16 x 64 uint8), 6 and 7 the B tiles (16
# units of a panel, 16 x 32 int8).
CONFIG = np.zeros(64, np.uint8)
CONFIG[0] = 1
CONFIG[16:48] = np.array([32, 32, 32, 32, DEPTH, DEPTH, 32, 32] + [0] * 8, np.uint16).view(np.uint8)
CONFIG[48:56] = ROWS


def _call(builder, name, args, types_=None):
    signature = ir.FunctionType(ir.VoidType(), types_ or [a.type for a in args])
    return builder.call(cgutils.get_or_insert_function(builder.module, signature, name), args)


def _byte_address(context, builder, array_type, array, offset):
    data = context.make_array(array_type)(context, builder, array).data
    i8p = ir.IntType(8).as_pointer()
    return builder.gep(builder.bitcast(data, i8p), [offset])


@intrinsic
def _configure(typingctx, config):
    """Load the tile configuration from `config` (64 bytes)."""
    def codegen(context, builder, sig, args):
        _call(builder, "llvm.x86.ldtilecfg", [_byte_address(context, builder, sig.args[0], args[0],
                                                            ir.Constant(ir.IntType(64), 0))])
        return context.get_dummy_value()
    return types.none(config), codegen


@intrinsic
def _release(typingctx):
    """Give the tiles' state back (the end of every product)."""
    def codegen(context, builder, sig, args):
        _call(builder, "llvm.x86.tilerelease", [])
        return context.get_dummy_value()
    return types.none(), codegen


def _tile(tile):
    return ir.Constant(ir.IntType(8), tile.literal_value)


@intrinsic
def _zero(typingctx, tile):
    """Tile `tile` (a literal) := zeros."""
    if not isinstance(tile, types.IntegerLiteral):
        return None

    def codegen(context, builder, sig, args):
        _call(builder, "llvm.x86.tilezero", [_tile(tile)])
        return context.get_dummy_value()
    return types.none(tile), codegen


@intrinsic
def _load(typingctx, tile, array, offset, stride):
    """Tile `tile` (a literal) := its rows from byte `offset` of array's data, `stride` bytes apart."""
    if not isinstance(tile, types.IntegerLiteral):
        return None

    def codegen(context, builder, sig, args):
        _call(builder, "llvm.x86.tileloadd64", [_tile(tile), _byte_address(context, builder, sig.args[1], args[1],
                                                                          args[2]), args[3]])
        return context.get_dummy_value()
    return types.none(tile, array, types.int64, types.int64), codegen


@intrinsic
def _store(typingctx, tile, array, offset, stride):
    """Store tile `tile` (a literal) at byte `offset` of array's data, rows `stride` bytes apart."""
    if not isinstance(tile, types.IntegerLiteral):
        return None

    def codegen(context, builder, sig, args):
        _call(builder, "llvm.x86.tilestored64", [_tile(tile), _byte_address(context, builder, sig.args[1], args[1],
                                                                           args[2]), args[3]])
        return context.get_dummy_value()
    return types.none(tile, array, types.int64, types.int64), codegen


@intrinsic
def _multiply(typingctx, c, a, b):
    """Tile c += tile a (uint8) @ tile b (int8, four rows side by side): tdpbusd (literals)."""
    if not all(isinstance(t, types.IntegerLiteral) for t in (c, a, b)):
        return None

    def codegen(context, builder, sig, args):
        _call(builder, "llvm.x86.tdpbusd", [_tile(c), _tile(a), _tile(b)])
        return context.get_dummy_value()
    return types.none(c, a, b), codegen


@njit(cache=True, nogil=True)
def _tiles_product(a, packed, out, config):
    """out[:m] = a[:m] @ b from b's quad panels (quant_rt.pack; [panels, K/4, 8, 4]) for the first m
    rows, m the rows of a rounded down to 16, without zero points; returns m. a [M, K] uint8 with K a
    multiple of 64, out [M, 8 panels] int32, both C-contiguous; `config` is CONFIG."""
    m_rows, k = a.shape
    panels, units = packed.shape[0], packed.shape[1]
    n = out.shape[1]
    blocks = m_rows // ROWS
    if blocks == 0 or k % DEPTH != 0 or units * 4 != k or n != panels * 8:
        return 0
    a_row, out_row, unit, panel = np.int64(k), np.int64(4 * n), np.int64(32), np.int64(32 * units)
    _configure(config)
    for block in range(0, blocks, 2):
        two_rows = block + 1 < blocks
        a0 = np.int64(block * ROWS) * a_row
        for p in range(0, panels, 2):
            two_panels = p + 1 < panels
            _zero(0)
            _zero(1)
            _zero(2)
            _zero(3)
            for k0 in range(0, k, DEPTH):
                b0 = p * panel + (k0 // 4) * unit
                _load(4, a, a0 + k0, a_row)
                _load(6, packed, b0, unit)
                _multiply(0, 4, 6)
                if two_panels:
                    _load(7, packed, b0 + panel, unit)
                    _multiply(1, 4, 7)
                if two_rows:
                    _load(5, a, a0 + ROWS * a_row + k0, a_row)
                    _multiply(2, 5, 6)
                    if two_panels:
                        _multiply(3, 5, 7)
            c0 = np.int64(block * ROWS) * out_row + p * 32
            _store(0, out, c0, out_row)
            if two_panels:
                _store(1, out, c0 + 32, out_row)
            if two_rows:
                _store(2, out, c0 + ROWS * out_row, out_row)
                if two_panels:
                    _store(3, out, c0 + ROWS * out_row + 32, out_row)
    _release()
    return blocks * ROWS


@njit(cache=True, nogil=True)
def _no_tiles(a, packed, out, config):
    """No rows on tiles: where the CPU has no AMX, LLVM cannot emit the tile instructions at all (it
    aborts the process), so their code must not be compiled, not merely never run."""
    return 0


product = _tiles_product if AVAILABLE else _no_tiles
