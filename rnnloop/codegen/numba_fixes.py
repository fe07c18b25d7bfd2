"""Three costs of Numba 0.68 that rnnloop works around, installed once per process before a kernel loads
(cache.install_runtime_locator). Each is a small change to Numba's internals, guarded: a Numba
without them keeps its own behaviour, and none changes what the compiled code computes.

- **-O0 caches nothing that calls another jitted function.** Lowering the callee's dispatcher as a
  constant loads a ``numba.dynamic.globals`` pointer that nothing uses; -O0 keeps that dead load,
  and Numba will not cache code that refers to a dynamic global. At -O0 we run LLVM's dead code and
  dead global elimination on each final module (about 0.02 s in all for the 81 modules of the VAD
  model's first load), again after SROA on the few where such a load survives them (a store to a
  stack slot nothing reads keeps it alive: the attention test's Softmax, Mish, the DFT), and such
  code caches as it does at -O1 and above. The tests compile at -O0
  (the cold test command: 687 CPU-seconds, with a plugin recording each compilation, against 774 at
  -O1; one run each on 2026-11-26).
- **Inlining copies the callee's scope once per block.** ``inline="always"`` (the convolution
  entries are built of such functions, conv_rt.py) deep-copies the callee's IR block by block, and
  each block's copy copies the function's whole scope (every variable): blocks times variables,
  40% of compiling the largest entry (5.7 of 14.1 s at -O0). We give the blocks of one copy one
  copy of the scope, as the original blocks share one (0.75 s).
- **Loading cached code first loads every implementation Numba has.** ``Cache.load_overload``
  refreshes the target context, which imports Numba's implementations of NumPy, linear algebra
  (and with it SciPy's ``scipy.linalg``), random numbers, typed containers and more, and registers
  them: 0.3 s of a warm load's 0.6 (the VAD model, 2026-11-26). Machine code from the cache needs
  none of them, only Numba's runtime (NRT), which we initialise; a compile refreshes the context
  itself (``compile_extra``), so a later cache miss still finds every implementation. BLAS is looked
  up when a kernel first calls it, as before.

RNNLOOP_NUMBA_FIXES=0 leaves Numba as it is (should a Numba release change what these rely on).
"""

from __future__ import annotations

import copy
import functools
import os
import types


@functools.cache
def install() -> None:
    if os.environ.get("RNNLOOP_NUMBA_FIXES", "1") == "0":
        return
    _dead_loads_go_at_O0()
    _inlining_copies_a_scope_once()
    _cache_loads_skip_the_registries()


def _dead_loads_go_at_O0() -> None:
    try:
        from numba.core import codegen, config
        library = codegen.CPUCodeLibrary
        optimize = library._optimize_final_module
        create_pass_builder = codegen.create_pass_builder
    except (ImportError, AttributeError):
        return

    def _optimize_final_module(self):
        optimize(self)
        if config.OPT == 0:
            _eliminate(self, sroa=False)
            # A dead load that a store to a stack slot nothing reads keeps alive (a ternary of arrays
            # as an argument): SROA first, where any is left (rarely; SROA costs compile time).
            if any(g.name.startswith("numba.dynamic.globals") for g in self._final_module.global_variables):
                _eliminate(self, sroa=True)

    def _eliminate(library, sroa):
        builder = create_pass_builder(library._codegen._tm, opt=0)
        passes = builder.getModulePassManager()
        if sroa:
            passes.add_sroa_pass()
        passes.add_dead_code_elimination_pass()
        passes.add_global_dead_code_eliminate_pass()
        passes.run(library._final_module, builder)

    library._optimize_final_module = _optimize_final_module


def _inlining_copies_a_scope_once() -> None:
    """InlineWorker.inline_ir copies the callee's IR twice (copy_ir: ``copy.deepcopy`` of each block
    in turn, the module's only use of ``copy``); the second copy is of the first. Within one
    inline_ir, the blocks of one scope get one copy of it: a new inline_ir, or a block of another
    scope, starts afresh (a later inline mutates the scope it copied)."""
    try:
        from numba.core import inline_closurecall, ir
        worker = inline_closurecall.InlineWorker
        inline_ir = worker.inline_ir
        if inline_closurecall.copy is not copy:
            return
    except (ImportError, AttributeError):
        return
    scopes: dict[int, tuple] = {}  # id(scope) -> (scope, its copy), for the current copy only

    def deepcopy(value, memo=None):
        if memo is None and isinstance(value, ir.Block) and isinstance(getattr(value, "scope", None), ir.Scope):
            scope = value.scope
            known = scopes.get(id(scope))
            if known is None or known[0] is not scope:
                scopes.clear()
                known = scopes[id(scope)] = (scope, copy.deepcopy(scope))
            memo = {id(scope): known[1]}
        return copy.deepcopy(value, memo)

    @functools.wraps(inline_ir)
    def _inline_ir(self, *args, **kwargs):
        scopes.clear()
        try:
            return inline_ir(self, *args, **kwargs)
        finally:
            scopes.clear()

    inline_closurecall.copy = types.SimpleNamespace(deepcopy=deepcopy, copy=copy.copy)
    worker.inline_ir = _inline_ir


def _cache_loads_skip_the_registries() -> None:
    try:
        from numba.core import caching
        from numba.core.runtime import rtsys
        cache = caching.Cache
        cache.load_overload, cache._load_overload, cache._guard_against_spurious_io_errors  # noqa: B018
    except (ImportError, AttributeError):
        return

    def load_overload(self, sig, target_context):
        rtsys.initialize(target_context)  # (what the refresh did that loaded code needs)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)
        return None  # (an I/O error the guard swallowed: a miss, as in Numba)

    cache.load_overload = load_overload
