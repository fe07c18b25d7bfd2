"""Generates the kernel of one loop: a Numba function holding the whole loop (see ir.Loop).

The kernel takes the loop's scalars and arrays, runs every iteration natively, and returns the
finals and the joined stacked outputs. Buffers are allocated on first use and reused while their
shape holds ("ensure" below), carried state is double-buffered, sliced inputs are views, stacked
outputs are written in place into one buffer that grows geometrically when the trip count is not
known. A run-time error sets `status` (code, iteration, two details) and raises; the Python side
turns the code into a message naming the op (see KernelModule.error).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from .. import __version__
from ..ir import Graph, If, Loop, Op, Region, SequenceType, TensorType
from .emitter import (Emitter, NoRule, Var, code_text, debug_level, dtype_name, generator_failure, literal, permuted,
                      shape_tuple)

# A rule writes one op: it reads Vars of the inputs (None for an omitted input), emits code and
# returns the Vars of the outputs.
Rule = Callable[["LoopGen", Op, list], list]
RULES: dict[str, Rule] = {}


def emits(*op_types: str):
    """Register a code generation rule for the named ops."""
    def register(fn: Rule) -> Rule:
        for op_type in op_types:
            if op_type in RULES:
                raise ValueError(f"two code generation rules for '{op_type}'")
            RULES[op_type] = fn
        return fn
    return register


# Decorators of the generated functions. Only the kernel is called from Python; the functions it
# calls (fused nests, reductions, inner loops) need neither Numba's Python wrapper nor its C one,
# and building them was a tenth of an LSTM kernel's compile time.
ENTRY = '@njit(cache=True, nogil=True, error_model="numpy", no_cfunc_wrapper=True)'
HELPER = '@njit(cache=True, nogil=True, error_model="numpy", no_cfunc_wrapper=True, no_cpython_wrapper=True)'

# Constants of at most this many elements are globals of the generated module (frozen into the
# code); larger ones (weights) are arguments. Globals are named CONSTANT_PREFIX + a number, a prefix
# Emitter.fresh never gives a local name.
SMALL_CONSTANT = 64
CONSTANT_PREFIX = "K_"

# The kernel reports errors in an int64 status array: [code, iteration, detail a, detail b, code of
# the op running, rank r of two shapes, the r dims of one shape, the r dims of the other]. Its caller
# puts two things for the call after those: the threads it may use and the address of the workers'
# block (pool.py), which products read.
MAX_RANK = 8
STATUS_SHAPES = 6
STATUS_THREADS = STATUS_SHAPES + 2 * MAX_RANK
STATUS_POOL = STATUS_THREADS + 1
STATUS_SIZE = STATUS_POOL + 1



def matmul_call(a: str, b: str, out: str, a_rank: int = 2, b_rank: int = 2, panels: str | None = None,
                backwards: str = "t % 2 == 1") -> str:
    """The statement out = a @ b for float operands through rnnloop.codegen.blas (any strides; a
    vector operand is read as a one-row or one-column matrix), by b's `panels` (LoopGen.panels) if
    given, read in reverse order when `backwards` (an expression; by default on every other
    iteration: see simd.matmul_packed_ilp64)."""
    from . import blas  # finds the BLAS library: only when a kernel has a product

    if a_rank == 1:
        a, out = f"{a}[None, :]", f"{out}[None, :]"
    if b_rank == 1:
        b, out = f"{b}[:, None]", f"{out}[:, None]"
    if panels is not None:
        from . import simd
        return (f"_s.{simd.MATMUL_PACKED}({a}, {b}, {panels}, {out}, {backwards}, "
                f"status[{STATUS_THREADS}], status[{STATUS_POOL}])")
    # Every operand as a view of layout 'A' (x[:, :]): one compiled product per dtype serves every
    # kernel, where each combination of layouts took 4 s to compile.
    a, b, out = (f"{e}[:, :]" if re.fullmatch(r"[\w.]+(\[[^\[\]]*\])*", e) else f"({e})[:, :]" for e in (a, b, out))
    return f"_b.{blas.MATMUL}({a}, {b}, {out})"

@dataclass
class KernelModule:
    """The generated source of one loop and what its caller needs: entry name, arguments, errors."""

    source: str
    entry: str
    constants: list[np.ndarray]  # passed after the loop's inputs, in this order
    errors: list[tuple[str, str]] = field(default_factory=list)  # code-1 -> (op origin, message)
    fallbacks: set[int] = field(default_factory=set)  # codes meaning "run this loop in the interpreter"
    bound: bool = False  # the constants passed as one table (fused.bind), not an argument each
    concurrent: list[tuple[Loop, Loop]] = field(default_factory=list)  # loops run at once (_emit_concurrent_loops)
    layers: list[list[str]] = field(default_factory=list)  # the nodes whose parts share a function (region.outlined)
    shared_calls: int = 0  # calls that share their range with a worker (emit_shared_call)

    def error(self, status: np.ndarray, exc: BaseException) -> str | None:
        """The message for a kernel that stopped: by the code it set, or by the op it was running."""
        code = int(status[0]) or int(status[4])
        if not code:
            return None
        where, message = self.errors[code - 1]
        t, a, b = (int(v) for v in status[1:4])
        shapes = [int(v) for v in status[STATUS_SHAPES:STATUS_SHAPES + 2 * int(status[STATUS_SHAPES - 1])]]
        half = len(shapes) // 2
        before, after = shapes[:half], shapes[half:]
        listed = ", ".join(map(str, before))
        return f"{where}: {message.format(t=t, a=a, b=b, error=exc, before=before, after=after, listed=listed)}"


class ModuleGen:
    """State shared by the functions of one generated module: names, errors, functions."""

    def __init__(self, label: str):
        self.label = label
        self.functions: list[str] = []
        self.errors: list[tuple[str, str]] = []
        self.fallbacks: set[int] = set()
        self.names: set[str] = {"math", "np", "njit", "_m", "_r", "_b", "_rz", "_cv", "_s", "_sig", "eb", "rev", "kernel", "status", "_p", "max_iter", "trip", "cond", "limit", "t"}
        self.loops = 0
        self.helpers: dict[str, str] = {}
        self.products: set[str] = set()  # dtypes of the packed products called (simd.require)
        self.small_constants: dict[tuple, str] = {}  # (dtype, shape, bytes) -> its global's name
        self.loop_functions: dict[str, str] = {}  # canonical text of an inner loop -> its name
        self.loop_calls: dict[str, int] = {}  # inner loop function -> its call sites (see _any_layout)
        self.tasks: dict[tuple, str] = {}  # a call as a job (_task, emit_shared_call) -> its task's name
        self.concurrent: list[tuple[Loop, Loop]] = []  # pairs of loops run at once
        self.at_once = True  # whether work may be shared with a worker (loops at once, emit_shared_call)
        self.shared_calls = 0  # calls that share their range with a worker (emit_shared_call)
        self.parts: dict[str, list[Region]] = {}  # a nested Region's function -> the parts it is called for

    def error_code(self, where: str, message: str) -> int:
        self.errors.append((where, message))
        return len(self.errors)

    def add_loop_function(self, name: str, text: str) -> str:
        """Add inner loop function `name`; or, when one of the same canonical text is there (two
        identical layers: only value names and error codes, relative to `eb`, differ), return that
        one's name instead. (The loops and helpers a function calls are globals, named in its
        canonical text: two functions match only if they call the same ones, so nothing added for
        the one dropped is left without a caller.)"""
        key = _canonical(text)
        shared = self.loop_functions.get(key)
        if shared is not None:
            return shared
        self.loop_functions[key] = name
        self.functions.append(text)
        return name

    def helper(self, source: str) -> str:
        """Add a function whose source names itself FUNCTION, once per distinct text; returns its name."""
        name = self.helpers.get(source)
        if name is None:
            name = self.helpers[source] = f"op{len(self.helpers) + 1}"
            self.functions.append(source.replace("FUNCTION", name))
        return name

    def small_constant(self, value: np.ndarray) -> str:
        """A global of the module holding `value` (once per distinct value). Numba freezes it into
        the code: no argument to unbox per call, and its elements are known to the compiler."""
        key = (value.dtype.str, value.shape, value.tobytes())
        name = self.small_constants.get(key)
        if name is None:
            name = self.small_constants[key] = f"{CONSTANT_PREFIX}{len(self.small_constants) + 1}"
        return name

    def kernel_module(self, entry: str, constants: list[np.ndarray]) -> KernelModule:
        """The module's source, its functions under a header, and what its caller needs."""
        header = (f"# generated by rnnloop {__version__} from {code_text(self.label)}; do not edit\n"
                  "import math\n\nimport numpy as np\nfrom numba import njit\n\nfrom rnnloop.codegen import blas as _b\nfrom rnnloop.codegen import mathfn as _m\nfrom rnnloop.codegen import runtime as _r\n")
        code = _ANY_LAYOUT.sub(lambda m: m[3] if self.loop_calls[m[1]] == 1 else f"{m[3]}[{', '.join([':'] * int(m[2]))}]",
                               "\n\n\n".join(self.functions))
        if "_s." in code:  # imported only where used: see cache.OPTIONAL_MODULES
            header += "from rnnloop.codegen import simd as _s\n"
            header += "".join(f"_s.require({dtype!r})\n" for dtype in sorted(self.products))
        if "_p." in code:  # loops run as jobs (_task): the pool's entry points
            header += "from rnnloop.codegen import pool as _p\n"
        if "_sig." in code:  # (likewise)
            header += "from rnnloop.codegen import signal as _sig\n"
        if "_rz." in code:  # imported only where used: see cache.OPTIONAL_MODULES
            header += "from rnnloop.codegen import resize_rt as _rz\n"
        if "_q." in code:  # (likewise)
            header += "from rnnloop.codegen import quant_rt as _q\n"
        if "_cv." in code:  # (likewise; each convolution entry called made callable first, as simd's products)
            header += "from rnnloop.codegen import conv_rt as _cv\n"
            header += "".join(f"_cv.require({name!r})\n" for name in sorted(set(re.findall(r"\b_cv\.(\w+)\(", code))))
        if self.small_constants:  # exact bits, read back as a writable array of the dtype
            header += "\n" + "".join(
                f"{name} = np.frombuffer(bytes.fromhex({data.hex()!r}), np.dtype({dtype!r}))"
                f".reshape({shape_tuple([str(d) for d in shape])}).copy()\n"
                for (dtype, shape, data), name in self.small_constants.items())
        source = header + "\n\n" + code + "\n"
        return KernelModule(source, entry, constants, self.errors, self.fallbacks, concurrent=self.concurrent,
                            shared_calls=self.shared_calls,
                            layers=[[part.where() for part in parts] for parts in self.parts.values()])


class LoopGen:
    """Generates one function, a loop's or a region's (loop None: straight-line code run once);
    rules call its helpers to emit code."""

    def __init__(self, module: ModuleGen, graph: Graph, known: dict[str, np.ndarray], where: str,
                 loop: Loop | None = None):
        self.module, self.loop, self.where = module, loop, where
        # Inputs whose value the enclosing graph fixes (its constants), by input name.
        self.known = known
        self.names: set[str] = set(module.names)
        # The function's parameters, and the values its caller passes after the loop's inputs.
        self.params: list[str] = ["status", "max_iter", "trip", "cond"]
        # Error codes (ModuleGen.error_code) are literals in an entry function; an inner loop's are
        # relative to its parameter `eb`, the code of its first error, so that one function serves
        # every loop of the same text, each with its own messages (ModuleGen.add_loop_function).
        self.code_base: int | None = None
        # An inner loop whose slices and stacks all run one way takes that way as a parameter `rev`
        # (1: reverse), so that the two directions of a bidirectional layer share one function.
        self.reverse: str | None = None
        self.constants: list[np.ndarray] = []
        self.pre = Emitter(self.names)    # before the loop
        self.hoist = Emitter(self.names)  # before the loop, once it is sure to run: hoisted work
        self.body = Emitter(self.names)   # inside the loop (rules write here; see hoisted())
        self.post = Emitter(self.names)   # after the loop
        self.pre.depth, self.hoist.depth, self.body.depth, self.post.depth = 1, 2, 2, 1
        if loop is None:  # run once: nothing to hoist, and the body is the function's top level
            self.hoist = self.body
            self.body.depth = 1
        self.top_depth = self.body.depth  # a line at this depth runs whenever the function does
        self.values: dict[str, Var] = {}
        # Values whose every iteration is one row of an array the hoisted section computes:
        # name -> (that array, the body's expression of the row index).
        self.rows: dict[str, tuple[Var, str]] = {}
        # Parts of one slice that keep the sliced axis (OpenVINO's): name -> (its rows, the row
        # index, that axis). Squeezing the axis away makes the result a row of `rows`.
        self.kept_rows: dict[str, tuple[Var, str, int]] = {}
        self._contiguous: dict[str, str] = {}
        # Views of consecutive columns of a buffer or carried value (an LSTM's gates, split from one
        # product): view -> (that array, the first column). Fused loop nests read them from it.
        self.column_parts: dict[str, tuple[Var, str]] = {}
        self._panels: dict[str, str] = {}  # invariant matrix expression -> its panels (see panels())
        self.owned: dict[str, set[str]] = {}  # name -> the lines that only serve it (droppable)
        self._buffer_dims: dict[str, tuple[str, ...]] = {}  # buffer -> the sizes it is allocated with
        # Checked broadcast dims (fusion._broadcast_dims): name -> the sizes it is the broadcast of.
        self.dim_sizes: dict[str, frozenset[str]] = {}
        # The checked dim of each set of sizes, and the emitter (hoist or body) it was made in.
        self.checked_dims: dict[frozenset[str], tuple[str, Emitter]] = {}
        self._prepacked: set[str] = set()  # panels packed at load, passed in
        self.graph: Graph = graph
        self.slice_info: dict[str, tuple] = {}
        # Carried sequences the body appends to: body name -> (storage array, count, element type).
        self.sequences: dict[str, tuple[str, str, TensorType]] = {}
        self.prepended: set[str] = set()  # carried sequences inserted into at 0: held reversed
        # Loops run together (region.concurrent_loops): the first's id -> the second, which is then
        # emitted with it and skipped where it stands (`joined`, by id).
        self.partners: dict[int, Loop] = {}
        self.joined: set[int] = set()

    # -- helpers for rules ------------------------------------------------------------------

    @contextmanager
    def emitting_to(self, emitter: Emitter) -> Iterator[None]:
        """Rules (and fail_if) called inside write to `emitter` instead of the loop body."""
        body, self.body = self.body, emitter
        try:
            yield
        finally:
            self.body = body

    def hoisted(self):
        """Rules called inside emit into the hoisted section instead of the loop body."""
        return self.emitting_to(self.hoist)

    @property
    def hoisting(self) -> bool:
        return self.body is self.hoist

    def contiguous(self, v: Var) -> str:
        """A C-contiguous expression of v's array; made once before the loop when v is invariant."""
        if v.kind != "invariant" or self.loop is None:  # (run once: nothing to gain by naming it)
            return f"np.ascontiguousarray({v.expr})"
        if v.expr not in self._contiguous:
            name = self.hoist.fresh(f"{v.expr}_c")
            self.hoist(f"{name} = np.ascontiguousarray({v.expr})")
            self._contiguous[v.expr] = name
        return self._contiguous[v.expr]

    def panels(self, b: Var, b_expr: str, rows: str, value: np.ndarray | None = None) -> str | None:
        """For a product of `rows` rows (a body expression) by the float matrix b, read as b_expr:
        the name of b_expr packed into panels (codegen/simd.py), or None when b is not a loop invariant.

        When the model fixes b (`value`, b_expr's value: weights), it is packed once, here, and the
        panels are passed in. Otherwise packing happens on the first product with rows the panels
        serve (so a run whose products all have more rows than simd.MAX_ROWS never pays for it),
        once per run.
        """
        if b.kind != "invariant" or b.dtype.name not in ("float32", "float64"):
            return None
        self.module.products.add(b.dtype.name)
        name = self._panels.get(b_expr)
        if name is None:
            if value is not None and value.ndim == 2 and value.dtype == b.dtype:
                from . import simd
                name = self._panels[b_expr] = self.pass_constant(simd.pack_weights(value), "k_panels")
                self._prepacked.add(name)
            else:
                name = self._panels[b_expr] = self.pre.fresh("panels")
                self.pre(f"{name} = np.empty((0, 0, 0), {dtype_name(b.dtype)})")
        if name not in self._prepacked:
            self.body(f"{name} = _s.pack({b_expr}, {name}, {rows})")
        return name

    def add_rows(self, name: str, full: Var, index: str) -> None:
        """Record that `name` is row `index` (a body expression) of the invariant array `full`."""
        if not self.hoisting:
            self.rows[name] = (full, index)

    def type_of(self, name: str) -> TensorType:
        t = self.graph.type_of(name)
        if not isinstance(t, TensorType) or t.dtype is None or t.shape is None:
            raise NoRule(f"the type of '{name}' is not a tensor of known dtype and rank ({t})")
        return t

    def declared_shape(self, name: str, rank: int) -> tuple | None:
        """The sizes the model declares for `name` (ints, or None/names for unknown ones) when it
        declares a shape of `rank` axes, else None."""
        t = self.graph.type_of(name)
        return tuple(t.shape) if isinstance(t, TensorType) and t.shape is not None and len(t.shape) == rank else None

    def out_type(self, name: str, rank: int, dtype: np.dtype | None = None) -> tuple[np.dtype, int]:
        """The dtype and rank of an op output: the rule computes the rank, the model gives the dtype.

        Shape inference often leaves ranks unknown inside loop bodies; where the model does declare
        one, it must agree with the rule's.
        """
        t = self.graph.type_of(name)
        declared = t.dtype if isinstance(t, TensorType) else None
        if dtype is None:
            dtype = declared
        if dtype is None:
            raise NoRule(f"the dtype of '{name}' is not known")
        if declared is not None and declared != dtype:
            raise NoRule(f"'{name}' is declared {declared} but computes {dtype}")
        if isinstance(t, TensorType) and t.shape is not None and len(t.shape) != rank:
            raise NoRule(f"'{name}' is declared with rank {len(t.shape)} but computes rank {rank}")
        return np.dtype(dtype), rank

    def const(self, name: str) -> np.ndarray | None:
        """The value of a body constant or of an invariant that is a constant outside (else None)."""
        value = self.graph.constants.get(name, self.known.get(name))
        return value if isinstance(value, np.ndarray) else None

    def buffer(self, hint: str, dtype: np.dtype, shape: list[str]) -> str:
        """A buffer written by one op each iteration: allocated once, again only if its shape changes."""
        name = self.body.fresh(f"b_{hint}")
        self._buffer_dims[name] = tuple(shape)
        if self.loop is None and self.body.depth == self.top_depth:  # runs once: allocate here
            self.body(f"{name} = np.empty({shape_tuple(shape)}, {dtype_name(dtype)})")
            return name
        self.pre(f"{name} = np.empty({shape_tuple(['0'] * len(shape))}, {dtype_name(dtype)})")
        if shape:
            # A branch, not a call returning the buffer: its reference counting was 10 ns an
            # iteration, a third of a small loop's.
            shp = shape_tuple(shape)
            with self.body.block(f"if {name}.shape != {shp}:"):
                self.body(f"{name} = np.empty({shp}, {dtype_name(dtype)})")
        return name

    def view(self, hint: str, expr: str) -> str:
        """A new name for `expr`, a view that cannot fail (a basic slice, a transpose); its line is
        dropped from the function if nothing reads the name (drop_unused)."""
        name = self.body.fresh(hint)
        self.droppable(name, self.body, f"{name} = {expr}")
        return name

    def droppable(self, name: str, emitter: Emitter, line: str) -> None:
        """Emit `line`, which only serves `name`: dropped if no other line mentions the name."""
        emitter(line)
        self.owned.setdefault(name, set()).add(line)

    def fail_if(self, condition: str, op: Op | None, message: str, a: str = "0", b: str = "0",
                shapes: tuple[str, str, int] | None = None, fallback: bool = False) -> None:
        """Stop the kernel with a clear error when `condition` holds.

        The message may use {t}, {a}, {b}, and with `shapes` (two shape tuple expressions of one
        rank, at most MAX_RANK) {before} and {after}, the two shapes as lists, and {listed}, the
        first one's values separated by commas. With `fallback` the condition is not an error but
        an input beyond the kernel: the loop runs again in the interpreter, with a warning.
        """
        if _static_truth(condition) is False:  # (sizes the model fixes: nothing to check at run time)
            return
        where = op.where() if op is not None else self.where
        code = self.module.error_code(where, message)
        if fallback:
            self.module.fallbacks.add(code)
        with self.body.block(f"if {condition}:"):
            if shapes is not None and shapes[2] <= MAX_RANK:
                before, after, rank = shapes
                self.body(f"status[{STATUS_SHAPES - 1}] = {rank}")
                for d in range(rank):
                    self.body(f"status[{STATUS_SHAPES + d}] = {before}[{d}]; "
                              f"status[{STATUS_SHAPES + rank + d}] = {after}[{d}]")
            self.body(f"_r.stop(status, {self.code(code)}, t, {a}, {b})")

    def code(self, code: int) -> str:
        """The expression of error code `code` in this function (see code_base)."""
        return str(code) if self.code_base is None else f"eb + {code - self.code_base}"

    def pass_constant(self, value: np.ndarray, hint: str) -> str:
        """A name for `value`: a parameter its caller passes it to, or for a small value in an entry
        function a global of the module (ModuleGen.small_constant). An inner loop takes even a small
        one as a parameter (the caller passes the global; a native call unboxes nothing): two layers
        that differ only in a bias then have one text, and share one function."""
        if value.size <= SMALL_CONSTANT and self.code_base is None:
            return self.module.small_constant(value)
        arg = self.pre.fresh(hint)
        self.params.append(arg)
        self.constants.append(value)
        return arg

    def add_constant(self, name: str, value: np.ndarray) -> None:
        """A body constant, passed as an argument."""
        self.define(name, Var(self.pass_constant(value, f"k_{name}"), value.dtype, value.ndim, "invariant",
                              tuple(map(str, value.shape))))

    def define_constants(self, graph: Graph, what: str) -> None:
        """The constants of a body or branch: a 0-d one as a literal, any other passed in."""
        for name, value in graph.constants.items():
            if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
                raise NoRule(f"{what} constant '{name}' is not a numeric tensor")
            if value.ndim == 0:
                self.define(name, Var(literal(value[()], value.dtype), value.dtype, 0, "scalar"))
            else:
                self.add_constant(name, value)

    def mark(self, op: Op) -> None:
        """Record `op` as running, so an error NumPy raises inside the kernel can name it."""
        code = self.module.error_code(op.where(), "{error}")
        self.body(f"status[4] = {self.code(code)}")

    def define(self, name: str, var: Var) -> None:
        dims = self._buffer_dims.get(var.expr)
        if var.kind == "buffer" and var.shape is None and dims is not None and len(dims) == var.rank:
            # Its sizes by the expressions it was allocated with: broadcast checks then see that
            # two buffers share a size (fusion._broadcast_dims).
            var = replace(var, shape=dims)
        self.values[name] = var

    def var(self, name: str) -> Var | None:
        return self.values[name] if name else None


_LITERAL_CONDITION = re.compile(r"[\d\s()+\-*/%<>=!]*(\b(or|and|not)\b[\d\s()+\-*/%<>=!]*)*")


def _static_truth(condition: str) -> bool | None:
    """The value of a condition of integer literals alone (e.g. `1 != 1`), else None."""
    if not _LITERAL_CONDITION.fullmatch(condition) or not re.search(r"\d", condition):
        return None
    try:
        return bool(eval(condition, {"__builtins__": {}}, {}))  # noqa: S307 - digits and operators only
    except Exception:  # noqa: BLE001 - e.g. a division by zero: left to run time
        return None


# ------------------------------------------------------------------------------------------
# The loop function


def generate(loop: Loop, label: str, known: dict[str, np.ndarray]) -> KernelModule:
    """The kernel module of `loop`; raises NoRule when some op or value cannot be compiled.

    `known` holds the constants of the enclosing graph, so invariants fed from them are constants too.
    """
    module = ModuleGen(label)
    entry, constants, *_ = _loop_function(module, loop, known)
    return module.kernel_module(entry, constants)


class LoopFunction(NamedTuple):
    """A loop's generated function, and what its caller passes and gets."""

    name: str  # an earlier loop's function, when the text is the same (ModuleGen.add_loop_function)
    constants: list[np.ndarray]  # passed after the loop's inputs
    out_types: list[tuple[np.dtype, int]]  # (dtype, rank) of each output
    first_code: int | None  # passed as eb (an inner loop's: see LoopGen.code_base)
    reverse: bool | None  # passed as rev, when the function takes it (see LoopGen.reverse)


def _loop_function(module: ModuleGen, loop: Loop, known: dict[str, np.ndarray]) -> LoopFunction:
    """Emit the function of one loop (inner loops become functions of their own, emitted first).

    Its parameters are status, (for an inner loop) eb and perhaps rev, max_iter, trip (-1: none),
    cond, the loop's carried, sliced and invariant inputs, then the constants of its body; it
    returns the finals and stacked outputs.
    """
    # The outermost loop is `kernel`; inner loops are numbered in the order they are met.
    fn_name = f"inner_loop{module.loops}" if module.loops else "kernel"
    module.loops += 1
    # Invariants the enclosing graph fixes (its constants) are known by their body input names.
    _, _, outer = loop.input_groups()
    inner = loop.body.inputs[len(loop.body.inputs) - len(outer):]
    g = LoopGen(module, loop.body, {b: known[o] for o, b in zip(outer, inner) if o in known}, loop.where(), loop)
    reverse = None  # the value of the parameter `rev`, when the function takes one
    if fn_name != "kernel":
        g.code_base = len(module.errors) + 1
        g.params.insert(1, "eb")
        ways = {s.reverse for s in (*loop.sliced, *loop.stacked)}
        if loop.sliced and len(ways) == 1:
            reverse = ways.pop()
            g.reverse = "rev"
            g.params.insert(2, "rev")
    pre, emit = g.pre, g.body
    n_params = loop.body_iteration + loop.body_cond_in
    nc, ns = loop.n_carried, len(loop.sliced)
    b_in = loop.body.inputs
    b_carried = b_in[n_params:n_params + nc]
    b_slices = b_in[n_params + nc:n_params + nc + ns]
    b_invariants = b_in[n_params + nc + ns:]
    cond_out, carried_next, stacked_values = loop.body_groups()

    params = g.params
    carried = []
    for name, nxt in zip(b_carried, carried_next):
        if isinstance(loop.body.type_of(name), SequenceType):
            carried.append(_carried_sequence(g, name, nxt, params, fn_name == "kernel"))
            continue
        t = g.type_of(name)
        arg = pre.fresh(f"init_{name}")
        cur = pre.fresh(f"c_{name}")
        params.append(arg)
        # The state starts as the caller's array, which is never written; contiguous for a stable type.
        pre(f"{cur} = {arg}" if not t.shape else f"{cur} = np.ascontiguousarray({arg})")
        g.define(name, Var(cur, t.dtype, len(t.shape), "state"))
        carried.append((name, cur, t))
    slices = []
    for name, spec in zip(b_slices, loop.sliced):
        src = pre.fresh(f"src_{name}")
        params.append(src)
        slices.append((name, spec, src, g.type_of(name)))
    for name in b_invariants:
        t = g.type_of(name)
        arg = pre.fresh(f"inv_{name}")
        params.append(arg)
        value = g.known.get(name)  # a constant of the enclosing graph: its sizes are known
        dims = tuple(map(str, value.shape)) if isinstance(value, np.ndarray) and value.ndim == len(t.shape) else None
        g.define(name, Var(arg, t.dtype, len(t.shape), "invariant", dims))
    g.define_constants(loop.body, "body")

    pre("limit = trip")
    pre("t = 0")
    for name, spec, src, t in slices:
        _slice_window(g, spec, src, t)
    counts = [g.slice_info[src][3] for _, _, src, _ in slices]
    if len(counts) > 1:
        with g.emitting_to(pre):
            g.fail_if(" or ".join(f"{c} != {counts[0]}" for c in counts[1:]), None,
                      "the sliced inputs give different numbers of iterations ({listed}); "
                      "they must all agree",
                      shapes=(shape_tuple(counts), shape_tuple(counts), len(counts)))
    used = {n for op in loop.body.ops for n in op.inputs} | set(loop.body.outputs)
    # The iteration number and incoming condition are t and cond; the 0-d arrays holding them are
    # dropped unless some op reads them as arrays (a fused nest).
    if loop.body_iteration and b_in[0] in used:
        it = pre.fresh("iteration")
        g.droppable(it, pre, f"{it} = np.empty((), np.int64)")
        g.droppable(it, emit, f"{it}[()] = t")
        g.define(b_in[0], Var(it, np.dtype(np.int64), 0, "param", value="t"))
    if loop.body_cond_in and b_in[loop.body_iteration] in used:
        cin = pre.fresh("cond_in")
        g.droppable(cin, pre, f"{cin} = np.empty((), np.bool_)")
        g.droppable(cin, emit, f"{cin}[()] = cond")
        g.define(b_in[loop.body_iteration], Var(cin, np.dtype(np.bool_), 0, "param", value="cond"))

    g.fail_if("max_iter >= 0 and t >= max_iter", None,
              "still running after {t} iterations, the session's max_iterations; "
              "raise max_iterations if the loop is meant to run longer")
    for name, spec, src, t in slices:
        _slice_part(g, name, spec, src, t)
    emit_ops(g, loop.body, set(b_invariants) | set(loop.body.constants))
    # The next condition is read first (the state swap below may reuse its buffer) but takes
    # effect last: a stacked or carried value may be the incoming condition, read as `cond`.
    cond_next = _read_cond(g, g.values[cond_out[0]]) if cond_out else None
    stacks = [_stack_buffer(g, name) for name in stacked_values]
    # A loop over slices with no condition runs exactly `limit` iterations (or stops with an
    # error): a reversed stack is then written from its end, not reversed by a copy after.
    backwards = [(g.reverse or ("True" if spec.reverse else None)) if slices and cond_next is None else None
                 for spec in loop.stacked]
    for k, stack in enumerate(stacks):
        _stack_append(g, stack, g.values[stacked_values[k]], k, backwards[k])
    _next_state(g, carried, carried_next)
    if cond_next is not None:
        emit(f"cond = {cond_next}")
    emit("t += 1")
    # Every array it returns is its own, so that a region may return them uncopied: a carried
    # value is a buffer of the function's after an iteration, and the caller's array before one
    # (copied then); stacked outputs are always its own.
    outputs = [(f"np.ascontiguousarray({cur}[:{g.sequences[name][1]}][::-1])" if name in g.prepended
                else f"{cur}[:{g.sequences[name][1]}]") if name in g.sequences
               else f"{cur} if t > 0 else np.copy({cur})" for name, cur, _ in carried]
    outputs += [_stack_result(g, stack, spec, k, backwards[k])
                for k, (stack, spec) in enumerate(zip(stacks, loop.stacked))]
    # Hoisted work runs only when the body would, so that it raises no error the body would not.
    # (A hoisted section of comments alone, e.g. of an Identity of a constant, is no block.)
    code = any(not line.strip().startswith("#") for line in g.hoist.lines)
    hoisted = ["    if limit != 0 and cond and max_iter != 0:", *g.hoist.lines] if code else []
    lines = [ENTRY if fn_name == "kernel" else HELPER,
             f"def {fn_name}({', '.join(params)}):",
             f'    """{code_text(loop.where())}"""',
             *pre.lines,
             *hoisted,
             "    while (limit < 0 or t < limit) and cond:",
             *emit.lines,
             *g.post.lines,
             f"    return ({', '.join(outputs)}{',' if len(outputs) == 1 else ''})"]
    text = "\n".join(drop_unused(lines, g.owned))
    if fn_name == "kernel":
        module.functions.append(text)
    else:
        fn_name = module.add_loop_function(fn_name, text)
    # (A carried sequence only exists in the outermost loop, whose caller does not ask for this.)
    out_types = [(t.dtype, len(t.shape)) for name, _, t in carried if name not in g.sequences]
    out_types += [(g.values[n].dtype, g.values[n].rank + (0 if s.concat else 1))
                  for n, s in zip(stacked_values, loop.stacked)]
    return LoopFunction(fn_name, g.constants, out_types, g.code_base, reverse)


# An array argument of an inner loop, marked with the function and the array's rank until the module
# is rendered (ModuleGen.kernel_module): then it becomes a view of layout 'A' if the function has
# several call sites, and stays the array itself if it has one.
_ANY_LAYOUT = re.compile(r"\b_any_layout_(\w+?)_(\d+)\((\w+)\)")
_WORD = re.compile(r"\w+")  # (a name's occurrences are the words equal to it: what \bname\b finds)


def _any_layout(function: str, v: Var) -> str:
    """`v` as an argument of inner loop `function`. Numba compiles a function once per layout of its
    arguments, and the layers that share one (ModuleGen.add_loop_function) often pass arrays of both
    layouts (a transposed view to the first layer of a stack, a contiguous array to the next): as
    views of layout 'A' they compile it once (2-4 s each). A recurrent layer reads its input through
    a product and np.ascontiguousarray (which copies only what is not contiguous at run time), so
    the views cost it nothing; a function called once keeps its arguments' own layouts."""
    if v.rank == 0 or not v.expr.isidentifier():
        return v.expr
    return f"_any_layout_{function}_{v.rank}({v.expr})"


def _canonical(text: str) -> str:
    """A function's text without comment lines and docstring (generated ones: one line each), with
    its local names (its own name, parameters and names assigned by a statement or a for) numbered by
    first appearance: functions that differ only in the names rules derived from the model's value
    names have one canonical text. A name after a dot is an attribute, never renamed, and "@k" is no
    identifier, so a renamed name equals no other; a local this misses (a comprehension's) keeps its
    name, which can only keep two functions apart. (By regular expressions: the tokenize module and
    an ast walk took 10 ms for a layer's function, a tenth of a warm load.)"""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith(("#", '"""'))]
    local: set[str] = set()
    for line in lines:
        if line.startswith("def "):  # (after the decorator)
            local.update(_PARAMETER.findall(line))
            continue
        assigned = _ASSIGNED.match(line)
        if assigned:
            local.update(_PARAMETER.findall(assigned[1]))
    numbers: dict[str, str] = {}

    def number(match: re.Match) -> str:
        name = match[0]
        return numbers.setdefault(name, f"@{len(numbers)}") if name in local else name

    return _NAME.sub(number, "\n".join(lines))


_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*")  # an identifier not after a dot (nor inside a number)
_PARAMETER = re.compile(r"(?<![\w.])(?!(?:def|for|in)\b)[A-Za-z_]\w*")  # (of a def line: the name and parameters)
# The targets of a statement that assigns names (a = b = ..., a, b = ..., for a in ...).
_ASSIGNED = re.compile(r"\s*((?:[A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*\s*=(?!=)\s*)+|for\s+[A-Za-z_]\w*\s+in\b)")


def drop_unused(lines: list[str], owned: dict[str, set[str]]) -> list[str]:
    """`lines` without the lines of names (LoopGen.droppable) that no other line mentions.

    A view's shape is often all that is asked of it, and rules give it as its source's (an LSTM's
    four gate parts, the input row of a hoisted product); Numba would still build each one, a few
    hundred instructions apiece. Likewise the 0-d arrays of the iteration number and condition.
    Each line's words are found once a pass (a search per name and line took 43 of the 136 ms a cached
    VAD model's load spent generating source, under cProfile)."""
    while True:
        words = [(line, set(_WORD.findall(line))) for line in lines]
        dead = {name for name, own in owned.items()
                if all(line.strip() in own for line, found in words if name in found)}
        if not dead:
            return lines
        drop = set().union(*(owned[name] for name in dead))
        lines = [line for line in lines if line.strip() not in drop]
        owned = {name: own for name, own in owned.items() if name not in dead}


def _carried_sequence(g: LoopGen, name: str, nxt: str, params: list[str], outermost: bool) -> tuple:
    """A carried sequence the body only appends to: its elements stacked in one array that grows
    geometrically, and a count. The caller passes the initial elements stacked (fused.py)."""
    t = g.graph.type_of(name)
    elem = t.elem
    users = [op for op in g.graph.ops if name in op.inputs]
    insert = users[0] if len(users) == 1 else None
    position = g.const(insert.inputs[2]) if insert is not None and len(insert.inputs) == 3 else None
    prepends = position is not None and position.size == 1 and int(position.reshape(-1)[0]) == 0
    appends = (insert is not None and insert.op_type == "SequenceInsert" and (len(insert.inputs) == 2 or prepends)
               and insert.inputs[0] == name and insert.inputs[1] not in ("", name) and insert.outputs[0] == nxt
               and not any(nxt in op.inputs for op in g.graph.ops) and g.graph.outputs.count(nxt) == 1)
    if not appends:
        raise NoRule(f"carried sequence '{name}' is compiled only when the body appends to it (SequenceInsert "
                     "without a position, or at position 0 every time) and reads it nowhere else")
    if not outermost:
        raise NoRule(f"carried sequence '{name}' in an inner loop is not compiled")
    if not isinstance(elem, TensorType) or elem.dtype is None or elem.shape is None:
        raise NoRule(f"carried sequence '{name}' has elements of unknown dtype or rank ({t})")
    arg, cur = g.pre.fresh(f"init_{name}"), g.pre.fresh(f"seq_{name}")
    count = g.pre.fresh(f"{cur}_n")
    params.append(arg)
    if prepends:  # held last first, so that each insert at 0 is an append; reversed at the end
        g.prepended.add(name)
        g.pre(f"{cur} = np.ascontiguousarray({arg}[::-1])")
    else:
        g.pre(f"{cur} = {arg}")
    g.pre(f"{count} = {arg}.shape[0]")
    g.sequences[name] = (cur, count, elem)
    g.define(name, Var(cur, elem.dtype, len(elem.shape) + 1, "sequence"))
    return (name, cur, t)

def _index(rank: int, axis: int, index: str) -> str:
    """An indexing expression selecting `index` on `axis` of an array of `rank`."""
    parts = [":"] * rank
    parts[axis] = index
    return ", ".join(parts)


def _slice_window(g: LoopGen, spec, src: str, t: TensorType) -> None:
    """Before the loop: the window of a sliced input and its part count, which caps the trip count."""
    rank = len(t.shape) + (0 if spec.keep_axis else 1)
    if not -rank <= spec.axis < rank:
        raise NoRule(f"slice axis {spec.axis} is out of range for rank {rank}")
    if not spec.keep_axis and spec.part != 1:
        raise NoRule("a part larger than 1 must keep the sliced axis")
    axis = spec.axis % rank
    n, start, count = (g.pre.fresh(f"{src}_{x}") for x in ("n", "start", "count"))
    g.pre(f"{n} = {src}.shape[{axis}]")
    g.pre(f"{start} = {_clamped(spec.start, n)}")
    end = n if spec.end is None else _clamped(spec.end, n)
    g.pre(f"{count} = max(({end} - {start} - {spec.part}) // {spec.stride} + 1, 0) "
          f"if {end} - {start} >= {spec.part} else 0")
    g.pre(f"limit = {count} if limit < 0 else min(limit, {count})")
    g.slice_info[src] = (axis, rank, start, count)


def _clamped(index: int, n: str) -> str:
    return f"min({index}, {n})" if index >= 0 else f"max({n} - {-index}, 0)"


def _slice_part(g: LoopGen, name: str, spec, src: str, t: TensorType) -> None:
    """In the loop: this iteration's part of a sliced input, as a view."""
    axis, rank, start, count = g.slice_info[src]
    k = f"({count} - 1 - t if {g.reverse} else t)" if g.reverse else f"{count} - 1 - t" if spec.reverse else "t"
    offset = f"{start} + ({k}) * {spec.stride}" if spec.stride != 1 else f"{start} + {k}"
    index = f"{offset}:{offset} + {spec.part}" if spec.keep_axis else offset
    if rank == 1 and not spec.keep_axis:  # a part of a vector is a 0-d array, not an element
        view = g.view(f"part_{name}", f"{src}[{offset}:{offset} + 1].reshape(())")
    else:
        view = g.view(f"part_{name}", f"{src}[{_index(rank, axis, index)}]")
    # Without the sliced axis, the part has the other sizes of src (with it, its own).
    dims = None if spec.keep_axis else tuple(f"{src}.shape[{a}]" for a in range(rank) if a != axis)
    g.define(name, Var(view, t.dtype, len(t.shape), "view", dims))
    if not spec.keep_axis or spec.part == 1:
        rows = src
        if axis != 0:  # rows along the sliced axis: a view with that axis first
            rows = g.pre.fresh(f"{src}_rows")
            g.pre(f"{rows} = {permuted(src, [axis] + [a for a in range(rank) if a != axis])}")
        rows_var = Var(rows, t.dtype, rank, "invariant")
        if spec.keep_axis:
            g.kept_rows[name] = (rows_var, offset, axis)
        else:
            g.add_rows(name, rows_var, offset)


def _stack_buffer(g: LoopGen, name: str) -> str:
    """Before the loop: the buffer of a stacked output, with the static shape of zero iterations."""
    v = g.values[name]
    t = g.graph.type_of(name)
    static = t.shape if isinstance(t, TensorType) and t.shape is not None and len(t.shape) == v.rank \
        else (None,) * v.rank
    buf = g.pre.fresh(f"stack_{name}")
    zero = ["0"] + [str(d) if isinstance(d, int) else "0" for d in static]
    g.pre(f"{buf} = np.empty({shape_tuple(zero)}, {dtype_name(v.dtype)})")
    return buf


def _stack_append(g: LoopGen, buf: str, v: Var, k: int, backwards: str | None) -> None:
    """In the loop: write this iteration's value in place; the buffer grows geometrically, or, when
    the stack is written `backwards` (a condition), has the `limit` iterations the loop runs."""
    emit = g.body
    if v.kind == "scalar":
        shape = "()"
    else:
        shape = shape_tuple([v.dim(a) for a in range(v.rank)])
    cap = "limit if 0 <= limit <= 65536 else 64"  # a trip count is only a bound when a condition may stop early
    if backwards:
        cap = f"limit if {backwards} or 0 <= limit <= 65536 else 64"
    with emit.block("if t == 0:"):
        emit(f"{buf} = np.empty(({cap},) + {shape}, {dtype_name(v.dtype)})")
    name = g.loop.outputs[g.loop.n_carried + k]
    rank = 0 if v.kind == "scalar" else v.rank
    g.fail_if(f"{buf}.shape[1:] != {shape}", None,
              f"stacked output {k} ('{name}') changes from {v.dtype}{{before}} to {v.dtype}{{after}} "
              "at iteration {t}; every iteration must produce the same shape and dtype",
              shapes=(f"{buf}.shape[1:]", shape, rank))
    with emit.block(f"if t == {buf}.shape[0]:"):  # (never when backwards: t < limit)
        grown = emit.fresh("grown")
        emit(f"{grown} = np.empty((2 * t,) + {buf}.shape[1:], {dtype_name(v.dtype)})")
        emit(f"_r.put({grown}[:t], {buf})")
        emit(f"{buf} = {grown}")
    at = "t" if not backwards else "limit - 1 - t" if backwards == "True" else f"(limit - 1 - t if {backwards} else t)"
    if v.kind == "scalar":
        emit(f"{buf}[{at}] = {v.expr}")
    elif v.rank == 0:
        emit(f"{buf}[{at}] = {v.item()}")
    else:
        emit(f"_r.put({buf}[{at}], {v.expr})")


def _stack_result(g: LoopGen, buf: str, spec, k: int, backwards: str | None) -> str:
    """After the loop: the t parts, reversed, padded and moved to their axis as the Stack says."""
    post = g.post
    rank = g.values[g.loop.body_groups()[2][k]].rank
    out = post.fresh(f"out_{buf}")
    # Written backwards, its last t rows: all of them, or none when the loop did not start.
    if backwards == "True":
        post(f"{out} = {buf}[limit - t:limit]")
    else:
        # Returned as it is, unless it would hold on to much more memory than it uses (a loop with
        # a large trip count that a condition stopped early).
        post(f"{out} = {buf}[:t] if 2 * t >= {buf}.shape[0] else np.copy({buf}[:t])")
        if backwards:
            post(f"{out} = {buf}[limit - t:limit] if {backwards} else {out}")
        elif g.reverse:
            post(f"{out}_r = np.ascontiguousarray({out}[::-1]) if {g.reverse} else {out}")
            out = f"{out}_r"
        elif spec.reverse:
            post(f"{out}_r = np.ascontiguousarray({out}[::-1])")
            out = f"{out}_r"
    if spec.length is not None:
        code = g.module.error_code(g.loop.where(), f"stacked output {k} has {{a}} iterations, "
                                                   f"more than its padded length {spec.length}")
        with post.block(f"if t > {spec.length}:"):
            post(f"_r.stop(status, {g.code(code)}, t, t, 0)")
        padded = post.fresh(f"{out}_padded")
        post(f"{padded} = np.zeros(({spec.length},) + {out}.shape[1:], {out}.dtype)")
        post(f"_r.put({padded}[:t], {out})")
        out = padded
    if spec.concat:
        axis = spec.axis + rank if spec.axis < 0 else spec.axis
        if not 0 <= axis < rank:
            raise NoRule(f"concat axis {spec.axis} is out of range for rank {rank}")
        if axis == 0:
            dims = [f"{out}.shape[0] * {out}.shape[1]"] + [f"{out}.shape[{d + 1}]" for d in range(1, rank)]
            post(f"{out}_c = np.ascontiguousarray({out}).reshape({shape_tuple(dims)})")
            return f"{out}_c"
        perm = [d + 1 for d in range(axis)] + [0] + [d + 1 for d in range(axis, rank)]
        dims = [f"{out}.shape[{d + 1}]" for d in range(axis)] + [f"{out}.shape[0] * {out}.shape[{axis + 1}]"] \
            + [f"{out}.shape[{d + 1}]" for d in range(axis + 1, rank)]
        post(f"{out}_c = np.ascontiguousarray({permuted(out, perm)}).reshape({shape_tuple(dims)})")
        return f"{out}_c"
    axis = spec.axis + rank + 1 if spec.axis < 0 else spec.axis
    if not 0 <= axis <= rank:
        raise NoRule(f"stack axis {spec.axis} is out of range for rank {rank + 1}")
    if axis == 0:
        return out
    perm = [d + 1 for d in range(axis)] + [0] + [d + 1 for d in range(axis, rank)]
    post(f"{out}_m = np.ascontiguousarray({permuted(out, perm)})")
    return f"{out}_m"


def _read_cond(g: LoopGen, v: Var) -> str | None:
    """In the loop: the body's condition output, which decides whether another iteration runs, read
    into a new name; None when it is the incoming condition passed through."""
    if v.kind == "param" and v.dtype == np.bool_:
        return None
    name = g.body.fresh("cond_next")
    if v.kind == "scalar" or v.rank == 0:
        g.body(f"{name} = {v.item()} != 0")
        return name
    g.fail_if(f"{v.expr}.size != 1", None, "the body condition must hold exactly one value, got {a}",
              a=f"{v.expr}.size")
    g.body(f"{name} = {v.expr}[{', '.join(['0'] * v.rank)}] != 0")
    return name


def _next_state(g: LoopGen, carried: list, carried_next: list[str]) -> None:
    """End of an iteration: the body's results become the state, without copying where possible.

    A result in a buffer of its own becomes the state and the old state's memory becomes that
    buffer (double buffering); anything else (a view, an input, a value taken twice) is copied into
    a buffer of the slot first. Copies come before swaps, since a copy may read the old state.
    """
    swaps, claimed = [], set()
    for (name, cur, t), nxt in zip(carried, carried_next):
        if name in g.sequences:  # appended to in place
            continue
        v = g.values[nxt]
        if v.dtype != t.dtype or v.rank != len(t.shape):
            raise NoRule(f"carried value '{name}' changes from {t} to {v.dtype} rank {v.rank}")
        if v.kind == "buffer" and v.expr not in claimed:
            claimed.add(v.expr)
            swaps.append((cur, v.expr, t))
            continue
        slot = g.buffer(f"next_{name}", t.dtype, [v.dim(a) for a in range(v.rank)] if v.kind != "scalar" else [])
        if v.kind == "scalar":
            g.body(f"{slot}[()] = {v.expr}")
        elif v.rank == 0:
            g.body(f"{slot}[()] = {v.item()}")
        else:
            g.body(f"_r.put({slot}, {v.expr})")
        swaps.append((cur, slot, t))
    for cur, buf, t in swaps:
        # At t == 0 the old state is the caller's array, which must never be written: the buffer
        # gets a fresh placeholder instead (empty, so the next iteration allocates).
        spare = g.body.fresh("spare")
        g.body(f"{spare} = {cur}")
        g.body(f"{cur} = {buf}")
        placeholder = shape_tuple(["0"] * len(t.shape))
        g.body(f"{buf} = {spare} if t > 0 else np.empty({placeholder}, {dtype_name(t.dtype)})")


def emit_ops(g: LoopGen, graph: Graph, invariants: set[str], hoist: bool = True) -> None:
    """The ops of a loop body (or of a branch in it) in order, activations folded into the Conv
    before them (activation.fold), elementwise groups fused into one nest each (fusion.plan); with
    `hoist`, ops that read only `invariants` run once, before the loop."""
    from . import activation, fusion
    graph, originals = activation.fold(graph, g.const)
    graph = g.graph = fusion.split_first(graph, invariants, g.const)  # (its new values' types too)
    groups = fusion.plan(graph, invariants)
    for op in graph.ops:
        group = groups.get(id(op))
        try:
            if group is None:
                _emit_op(g, op, hoist)
            elif op is group.ops[-1]:  # the group runs where its last op would
                g.body(f"# fused: {code_text(', '.join(o.where() for o in group.ops))}")
                try:
                    values = fusion.emit(g, group.ops, group.materialized)
                except NoRule as e:
                    raise NoRule(f"{op.where()}: {e}") from None
                for name, var in values.items():
                    g.define(name, var)
        except NoRule as e:
            # (the op of the outermost graph, once it gets there: what a partition leaves out)
            e.op = originals.get(id(op), op)
            raise
        except Exception as e:  # noqa: BLE001 - a code generator bug costs speed, not the answer
            if debug_level() >= 2:
                raise
            failure = generator_failure(e)
            failure.op = originals.get(id(op), op)
            raise failure from e


def _emit_op(g: LoopGen, op: Op, hoist: bool = True) -> None:
    """One body op: a comment naming it, then its rule's code, in the loop or (with `hoist`, when
    it reads only invariants) before it."""
    from . import conv, nn, reductions, resize, rules, shapes, signal, small_ops  # noqa: F401  (they register the rules)
    from .scalar import ELEMENTWISE
    if isinstance(op, Loop):
        if id(op) in g.joined:  # (emitted with the loop it runs beside)
            return
        partner = g.partners.get(id(op))
        if partner is not None and _job_ready(g, op) and _job_ready(g, partner):
            _emit_concurrent_loops(g, op, partner)
            g.joined.add(id(partner))
            return
        g.body(f"# {code_text(op.where())}")
        outs = _emit_inner_loop(g, op)
    elif isinstance(op, If):
        from . import branch
        outs = branch.emit_if(g, op)
    elif isinstance(op, Region):  # (outlined: a layer of a stack)
        from . import region
        outs = region.emit_part(g, op)
    elif type(op) is not Op:
        raise NoRule(f"{op.where()}: {op.op_type} inside a loop body is not compiled yet")
    else:
        rule = RULES.get(op.op_type) or (RULES["<elementwise>"] if op.op_type in ELEMENTWISE else None)
        if rule is None:
            raise NoRule(f"{op.where()}: no code generation rule for {op.op_type}")
        ins = [g.var(n) for n in op.inputs]
        invariant = hoist and all(v is None or v.kind in ("invariant", "scalar") for v in ins)
        try:
            if invariant:  # the same every iteration: compute it once
                with g.hoisted():
                    g.body(f"# {code_text(op.where())}")
                    outs = [v if v.kind == "scalar" else replace(v, kind="invariant") for v in rule(g, op, ins)]
            elif hoist and op.op_type == "MatMul" and _rows_matmul(g, op, ins):
                return
            else:
                g.body(f"# {code_text(op.where())}")
                outs = rule(g, op, ins)
        except NoRule as e:
            raise NoRule(f"{op.where()}: {e}") from None
    for name, var in zip(op.outputs, outs):
        if name:
            g.define(name, var)


# Product rows a hoisted product computes at a time: enough for an efficient product, few enough
# that the chunk stays in cache. (A whole sequence's product is tens of MB at batch 64: fresh pages
# every run, and every row read back from memory.)
HOIST_CHUNK_ROWS = 128


def _rows_matmul(g: LoopGen, op: Op, ins: list[Var | None]) -> bool:
    """Scan hoisting: x_t · W for many t as one product, when x_t is a row of an array known before
    the loop (a sliced input, or Gather of an invariant) and W is invariant.

    The product runs on chunks of consecutive rows: when the body reads a row outside the chunk it
    holds, the chunk around that row is computed. Rows read in order (a scan, either direction) so
    cost one large, efficient product per chunk instead of a small one per iteration; a row read
    out of order (Gather by a data-dependent index) costs the product of that row alone.
    Returns False when the op is not of this form.
    """
    a, b = ins
    if op.inputs[0] not in g.rows or b.kind != "invariant" or b.rank != 2 or a.rank not in (1, 2):
        return False
    if a.dtype != b.dtype or a.dtype.kind != "f":
        return False
    full, index = g.rows[op.inputs[0]]
    dtype, rank = g.out_type(op.outputs[0], a.rank, a.dtype)
    name, k, n = op.outputs[0], full.dim(full.rank - 1), b.dim(1)
    with g.hoisted():
        emit = g.body
        emit(f"# {code_text(op.where())}: by chunks of rows")
        # (W's rows read at run time, not its literal size: layers of other input sizes then share
        # one loop function, as the two LSTMs of a stack do)
        w_rows = f"{b.expr}.shape[0]"
        g.fail_if(f"{k} != {w_rows}", op, "inner dimensions differ ({a} and {b})", a=k, b=w_rows)
        flat = emit.fresh(f"{name}_flat")
        emit(f"{flat} = np.ascontiguousarray({full.expr}).reshape((-1, {k}))")
        per = emit.fresh(f"{name}_per")  # product rows per row of full
        emit(f"{per} = {' * '.join(full.dim(d) for d in range(1, full.rank - 1)) or '1'}")
        size = emit.fresh(f"{name}_size")
        emit(f"{size} = max({HOIST_CHUNK_ROWS} // max({per}, 1), 1)")
        chunk = g.buffer(f"{name}_chunk", dtype, [f"{size} * {per}", n])
    lo, hi, last = (g.pre.fresh(f"{name}_{s}") for s in ("lo", "hi", "last"))
    g.pre(f"{lo} = {hi} = 0")
    g.pre(f"{last} = -1")
    body = g.body
    row = body.fresh(f"{name}_row")
    body(f"# {code_text(op.where())}: row {index} of the hoisted product")
    body(f"{row} = {index}")
    with body.block(f"if {row} < {lo} or {row} >= {hi}:"):
        in_order = body.fresh("in_order")
        body(f"{in_order} = {hi} == 0 or abs({row} - {last}) == 1")
        body(f"{lo} = {row} - {row} % {size} if {in_order} else {row}")
        body(f"{hi} = min({lo} + {size}, {full.dim(0)}) if {in_order} else {row} + 1")
        rows = f"({hi} - {lo}) * {per}"
        panels = g.panels(b, b.expr, rows, g.const(op.inputs[1]))
        body(matmul_call(f"{flat}[{lo} * {per}:{hi} * {per}]", b.expr, f"{chunk}[:{rows}]", panels=panels,
                         backwards="False"))
    body(f"{last} = {row}")
    mine = f"{chunk}[({row} - {lo}) * {per}:({row} - {lo} + 1) * {per}]"  # this row's [per, n] rows
    # (already the product's shape when full is 3-d)
    view = g.view(f"v_{name}", mine if full.rank == 3 else f"{mine}.reshape({full.expr}.shape[1:-1] + ({n},))")
    g.define(name, Var(view, dtype, rank, "view", tuple(full.dim(d) for d in range(1, full.rank - 1)) + (n,)))
    return True


def _scalar_of(g: LoopGen, v: Var | None, default: str, what: str, op: Op) -> str:
    """The single element of a trip count or condition input, checked to be one value."""
    if v is None:
        return default
    if v.kind == "scalar" or v.rank == 0:
        return v.item()
    g.fail_if(f"{v.expr}.size != 1", op, f"the {what} must hold exactly one value, got {{a}}", a=f"{v.expr}.size")
    return f"{v.expr}[{', '.join(['0'] * v.rank)}]"


def _zero_d(g: LoopGen, v: Var) -> Var:
    """A scalar value as a 0-d array, made once before the loop (scalar Vars are constants' literals)."""
    name = g.pre.fresh("zero_d")
    g.pre(f"{name} = np.empty((), {dtype_name(v.dtype)})")
    g.pre(f"{name}[()] = {v.expr}")
    return Var(name, v.dtype, 0, "invariant")


class _LoopCall(NamedTuple):
    """A call of an inner loop's function: its name, arguments and results."""

    name: str
    scalars: list[str]  # eb, perhaps rev, max_iter, trip, then cond (a bool)
    arrays: list[Var]  # the loop's inputs, then the constants of its body
    out_types: list[tuple[np.dtype, int]]


def _loop_call(g: LoopGen, op: Loop) -> _LoopCall:
    """The function of inner loop `op` (emitted into the module) and the arguments to call it with."""
    known = {**g.known, **{n: v for n, v in g.graph.constants.items() if isinstance(v, np.ndarray)}}
    name, inner_constants, out_types, first_code, reverse = _loop_function(g.module, op, known)
    ins = [g.var(n) for n in op.inputs]
    for k, (v, n) in enumerate(zip(ins[2:], op.inputs[2:]), start=2):
        if v is None:
            raise NoRule(f"{op.where()}: input '{n}' is not an array")
        if v.kind == "scalar":  # a 0-d constant held as a literal: the inner loop takes an array
            ins[k] = _zero_d(g, v)
    trip = _scalar_of(g, ins[0], "-1", "trip count", op)
    if ins[0] is not None:
        trip = f"max(np.int64({trip}), 0)"
    cond = _scalar_of(g, ins[1], "True", "condition", op)
    # (np.int64 of a literal is no literal type: one compiled function serves every call site)
    scalars = [f"np.int64({g.code(first_code)})", *([] if reverse is None else [f"np.int64({int(reverse)})"]),
               "max_iter", trip, f"{cond} != 0"]
    # The inner loop's constants pass through this function's parameters.
    constants = [Var(g.pass_constant(value, "k_inner"), value.dtype, value.ndim, "invariant") for value in inner_constants]
    return _LoopCall(name, scalars, ins[2:] + constants, out_types)


def _emit_inner_loop(g: LoopGen, op: Loop, call: _LoopCall | None = None) -> list[Var]:
    """A loop in the body: its own function in the module, called once per outer iteration."""
    call = call or _loop_call(g, op)
    g.module.loop_calls[call.name] = g.module.loop_calls.get(call.name, 0) + 1
    results = g.body.fresh("results")
    n_ins = len(op.inputs) - 2
    args = [_any_layout(call.name, v) for v in call.arrays[:n_ins]] + [v.expr for v in call.arrays[n_ins:]]
    g.body(f"{results} = {call.name}(status, {', '.join(call.scalars + args)})")
    return _loop_results(g, op, call, [f"{results}[{k}]" for k in range(len(call.out_types))])


def _loop_results(g: LoopGen, op: Loop, call: _LoopCall, exprs: list[str]) -> list[Var]:
    """The Vars of a loop's results, each assigned from its expression in `exprs`."""
    outs = []
    for out, (dtype, rank), expr in zip(op.outputs, call.out_types, exprs):
        dtype, rank = g.out_type(out, rank, dtype)
        var = g.body.fresh(f"v_{out}")
        g.body(f"{var} = {expr}")
        outs.append(Var(var, dtype, rank, "fresh"))  # (its own: see _loop_function's outputs)
    return outs


# A loop run as a job (_emit_concurrent_loops): its words are the status array (address, size,
# stride), a flag set when the loop failed, its scalar arguments, its arrays (address, sizes, byte
# strides) and its results (a reference, address, sizes, byte strides).
_FAILED = 3


def _words(call: _LoopCall) -> tuple[list[int], list[int], int]:
    """Where each array argument and each result starts in a job's words, and how many there are."""
    at = _FAILED + 1 + len(call.scalars)
    arrays, results = [], []
    for v in call.arrays:
        arrays.append(at)
        at += 1 + 2 * v.rank
    for _, rank in call.out_types:
        results.append(at)
        at += 2 + 2 * rank
    return arrays, results, at


def _task(g: LoopGen, call: _LoopCall, n_ins: int) -> str:
    """The function that runs `call` on a job's words (a worker calls it through pool.job_of)."""
    arrays, results, _ = _words(call)
    # Inputs of two or more axes as views of layout 'A', as an inner loop of several call sites takes
    # them (_any_layout: x[:, :] is of layout 'A', x[:] keeps a vector's), vectors and the constants
    # C-contiguous: the function is compiled once for both ways of calling it.
    layouts = [v.rank <= 1 or k >= n_ins for k, v in enumerate(call.arrays)]
    key = (call.name, tuple((v.dtype.str, v.rank, c) for v, c in zip(call.arrays, layouts)), len(call.scalars),
           tuple(call.out_types))
    name = g.module.tasks.get(key)
    if name is not None:
        return name
    name = g.module.tasks[key] = f"task{len(g.module.tasks) + 1}"
    first = _FAILED + 1
    scalars = [f"words[{first + k}]" for k in range(len(call.scalars) - 1)] + [f"words[{first + len(call.scalars) - 1}] != 0"]
    views = [f"_r.view_at(words, {at}, np.{v.dtype}, {v.rank}, {c})" for v, at, c in zip(call.arrays, arrays, layouts)]
    keeps = [f"    _r.keep(words, {at}, np.ascontiguousarray(results[{k}]))" for k, at in enumerate(results)]
    g.module.functions.append("\n".join([
        HELPER, f"def {name}(words):",
        f'    """{call.name} on the words of a job (kernel._words)"""',
        "    status = _r.view_at(words, 0, np.int64, 1, True)",
        "    try:",
        f"        results = {call.name}(status, {', '.join(scalars + views)})",
        "    except Exception:  # (the caller raises it: see _emit_concurrent_loops)",
        f"        words[{_FAILED}] = 1",
        "        return",
        *keeps]))
    return name


# A loop nest of elementwise ops (fusion.emit) shares its outer range with an idle worker when its
# elements times its ops reach this. The hand-off, and the halves' data moving between the cores'
# caches, cost a few microseconds: on 2 cores (the Xeon, 2026-12-02, each session alone, 5000 calls
# in a row, ad hoc), 2 ops (Add, Tanh) on [1, 32, 2048] (this many element-ops) took 13.3 µs a call
# against 18.0 on one thread, on [1, 64, 2048] 21.0 against 35.4; 10 ops on [1, 8, 2048] 34.5
# against 62.4, on [1, 16, 2048] 65.1 against 121.7.
SPLIT_ELEMENT_OPS = 1 << 17


def emit_shared_call(g: LoopGen, function: str, arrays: list[Var], direct: set[str], scalars: list[str],
                     extent: str, elements: str, least: int) -> None:
    """The call function(arrays..., scalars..., lo, hi), whose last two parameters bound the range of
    one axis it loops over, [0, extent): with at least `least` `elements`, an idle worker of the
    call's pool (pool.post_job) takes the range's second half while the caller does the first.

    Both run it through a task, from words that hold the arguments (the task catches an error and
    flags it in words[0]); a share the worker did not do (no idle worker, or taken back) the caller
    does, and a share that failed the caller does again once the worker is done, through the task
    told to let the error out (words[1]), so that it is raised as on one thread. One path, through
    the task, keeps the function linked into the kernel once, and no try in the kernel: with a direct
    call of the caller's half in a try, FSMN's kernel with three shared nests took 16.8 s to compile
    cold against 9.8 (ad hoc, 2026-12-02). Arrays in `direct`
    (buffers, C-contiguous) are passed as they are, others of two or more axes as views of layout 'A'
    and vectors C-contiguous."""
    g.module.shared_calls += 1
    args = []
    for v in arrays:
        if v.expr in direct or v.rank == 0:
            args.append(v)
        elif v.rank == 1:
            vector = g.body.fresh("vector")
            g.body(f"{vector} = np.ascontiguousarray({v.expr})")
            args.append(replace(v, expr=vector))
        else:
            args.append(replace(v, expr=f"{v.expr}[{', '.join([':'] * v.rank)}]"))
    layouts = [v.expr in direct or v.rank <= 1 for v in arrays]
    at, starts = 2, []  # words[0]: set when the share failed; words[1]: let the error out
    for v in args:
        starts.append(at)
        at += 1 + 2 * v.rank
    first = at  # then the scalars, lo and hi
    lo, size = first + len(scalars), first + len(scalars) + 2
    key = (function, tuple((v.dtype.str, v.rank, c) for v, c in zip(args, layouts)), len(scalars))
    task = g.module.tasks.get(key)
    if task is None:
        task = g.module.tasks[key] = f"task{len(g.module.tasks) + 1}"
        views = [f"_r.view_at(words, {s}, np.{v.dtype}, {v.rank}, {c})" for v, s, c in zip(args, starts, layouts)]
        call = f"{function}({', '.join(views + [f'words[{first + k}]' for k in range(len(scalars) + 2)])})"
        g.module.functions.append("\n".join([
            HELPER, f"def {task}(words):",
            f'    """{function} on the words of a share of its range (kernel.emit_shared_call)"""',
            "    if words[1] != 0:",
            f"        {call}",
            "        return",
            "    try:",
            f"        {call}",
            "    except Exception:",
            "        words[0] = 1"]))
    n, mine, theirs = g.body.fresh("n"), g.body.fresh("words"), g.body.fresh("words")
    g.body(f"{n} = {extent}")
    g.body(f"{mine} = np.zeros({size}, np.int64)")
    for v, s in zip(args, starts):
        g.body(f"_r.put_view({mine}, {s}, {v.expr})")
    for k, scalar in enumerate(scalars):
        g.body(f"{mine}[{first + k}] = {scalar}")
    g.body(f"{mine}[{lo + 1}] = {n}")
    with g.body.block(f"if status[{STATUS_THREADS}] > 1 and {elements} >= {least} and {n} > 1:"):
        worker, started = g.body.fresh("worker"), g.body.fresh("started")
        g.body(f"{theirs} = np.copy({mine})")
        g.body(f"{theirs}[{lo}] = {mine}[{lo + 1}] = {n} // 2")
        g.body(f"{worker} = _p.post_job(status[{STATUS_THREADS}], status[{STATUS_POOL}], {theirs}, "
               f"_p.job_of({task}, {size}))")
        g.body(f"{started} = _p.ticks()")
        g.body(f"{task}({mine})")
        g.body(f"if not _p.join_job(status[{STATUS_POOL}], {worker}, _p.ticks() - {started}):")
        g.body(f"    {task}({theirs})")
        # (the arrays the words point into stay alive until the worker is done: see pool.alive)
        g.body(f"_p.alive({', '.join(dict.fromkeys(v.expr.split('[')[0] for v in args))})")
        g.body(f"if {theirs}[0] != 0 and {mine}[0] == 0:  # (the first error in the range's order)")
        g.body(f"    {theirs}[1] = 1")
        g.body(f"    {task}({theirs})")
    g.body("else:")
    g.body(f"    {task}({mine})")
    g.body(f"if {mine}[0] != 0:")
    g.body(f"    {mine}[1] = 1")
    g.body(f"    {task}({mine})")


def _job_ready(g: LoopGen, op: Loop) -> bool:
    """Whether the inputs of loop `op` are all arrays (or scalars) the function holds at this point:
    what its job's words can carry. (A fused group of ops runs where its last op stands, which may
    be after the second loop of a pair: the pair then runs one loop after the other.)"""
    return all(g.values.get(n) is not None and g.values[n].kind not in ("sequence", "lazy") for n in op.inputs if n)


def _emit_concurrent_loops(g: LoopGen, first: Loop, second: Loop) -> None:
    """Two loops, neither reading the other's results (the directions of a bidirectional layer): the
    second is handed to an idle worker of the call's pool while the caller runs the first, each on
    its own core; without one (one thread, no worker idle), the caller runs both. Each runs through
    its task, from words the caller keeps alive until both are done.

    Only loops of one function (the same code, as the directions of a layer): loops of different
    code may take very different times, and a caller that waits for a long loop on a worker after a
    short one of its own would have run the long one faster, sharing its products with the worker."""
    prepared = [_loop_call(g, op) for op in (first, second)]
    if prepared[0].name != prepared[1].name:
        for op, call in zip((first, second), prepared):
            g.body(f"# {code_text(op.where())}")
            for name, var in zip(op.outputs, _emit_inner_loop(g, op, call)):
                if name:
                    g.define(name, var)
        return
    g.body(f"# {code_text(first.where())} and {code_text(second.where())}, concurrently")
    g.module.concurrent.append((first, second))
    calls, words, tasks, sizes = [], [], [], []
    for op, call in zip((first, second), prepared):
        n_ins = len(op.inputs) - 2
        g.module.loop_calls[call.name] = g.module.loop_calls.get(call.name, 0) + 2  # (see _any_layout)
        task = _task(g, call, n_ins)
        arrays, _, size = _words(call)
        w = g.body.fresh("words")
        status = "status" if op is first else g.body.fresh("status")
        if op is second:  # (its own: an error each, with its own details)
            g.body(f"{status} = np.copy(status)")
        g.body(f"{w} = np.zeros({size}, np.int64)")
        g.body(f"_r.put_view({w}, 0, {status})")
        for k, scalar in enumerate(call.scalars):
            g.body(f"{w}[{_FAILED + 1 + k}] = {scalar}")
        for k, (v, at) in enumerate(zip(call.arrays, arrays)):
            if v.rank == 1 and k < n_ins:  # (a vector the task takes C-contiguous: see _task)
                vector = g.body.fresh("vector")
                g.body(f"{vector} = np.ascontiguousarray({v.expr})")
                call.arrays[k] = v = replace(v, expr=vector)
            g.body(f"_r.put_view({w}, {at}, {v.expr})")
        calls.append((call, status))
        words.append(w)
        tasks.append(task)
        sizes.append(size)
    worker, started = g.body.fresh("worker"), g.body.fresh("started")
    g.body(f"{worker} = _p.post_job(status[{STATUS_THREADS}], status[{STATUS_POOL}], {words[1]}, "
           f"_p.job_of({tasks[1]}, {sizes[1]}))")
    g.body(f"{started} = _p.ticks()")
    g.body(f"{tasks[0]}({words[0]})")
    g.body(f"if not _p.join_job(status[{STATUS_POOL}], {worker}, _p.ticks() - {started}):")
    g.body(f"    {tasks[1]}({words[1]})")
    # (the arrays the words point into stay alive until both loops are done: see pool.alive)
    g.body(f"_p.alive({', '.join(dict.fromkeys([calls[1][1]] + [v.expr for call, _ in calls for v in call.arrays]))})")
    for op, (call, status), w in zip((first, second), calls, words):
        _, results, _ = _words(call)
        exprs = [f"_r.adopt({w}, {at}, np.{dtype}, {rank})" for (dtype, rank), at in zip(call.out_types, results)]
        for name, var in zip(op.outputs, _loop_results(g, op, call, exprs)):
            if name:
                g.define(name, var)
    for (call, status), w in zip(calls, words):  # (after adopting the results, which a failure leaves empty)
        g.body(f"if {w}[{_FAILED}] != 0:")
        if status != "status":
            g.body(f"    _r.put(status, {status})")
        g.body("    _r.stop(status, status[0], status[1], status[2], status[3])")
