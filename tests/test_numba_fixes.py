"""rnnloop's workarounds of Numba's costs (rnnloop/codegen/numba_fixes.py): code that calls another
jitted function caches at -O0, and inlining copies a callee's scope once per copy, not per block."""

from __future__ import annotations

import copy

import numpy as np
from numba import njit
from numba.core import config, inline_closurecall
from numba.core.compiler import run_frontend

from rnnloop.codegen import numba_fixes

numba_fixes.install()


def test_code_that_calls_another_jitted_function_caches_at_O0(monkeypatch):
    """Numba 0.68 will not cache a -O0 function that calls another jitted one (a dead load of the
    callee's dispatcher stays in the code); rnnloop removes those loads so the tests' -O0 kernels
    cache."""
    monkeypatch.setattr(config, "OPT", type(config.OPT)(0))

    @njit
    def callee(x):
        return x * 2.0

    @njit
    def caller(x):
        return callee(x) + 1.0

    assert caller(1.5) == 4.0
    library = caller.overloads[caller.signatures[0]].library
    assert not library.has_dynamic_globals
    assert "numba.dynamic.globals" not in library.get_llvm_str()


def _branchy(x, n):
    total = 0.0
    for i in range(n):
        if x[i] > 0:
            total += x[i]
        else:
            total -= 2 * x[i]
    return total


def test_the_blocks_of_one_copy_share_one_copy_of_their_scope():
    function_ir = run_frontend(_branchy)
    blocks = list(function_ir.blocks.values())
    assert len(blocks) > 3 and all(b.scope is blocks[0].scope for b in blocks)
    deepcopy = inline_closurecall.copy.deepcopy
    assert deepcopy is not copy.deepcopy  # the fix is installed
    copies = [deepcopy(b) for b in blocks]
    scope = copies[0].scope
    assert scope is not blocks[0].scope and all(c.scope is scope for c in copies)
    assert set(scope.localvars._con) == set(blocks[0].scope.localvars._con)
    assert all(v.scope is scope for c in copies for stmt in c.body for v in stmt.list_vars())
    assert [str(c) for c in copies] == [str(b) for b in blocks]  # the same statements
    again = deepcopy(copies[0])  # a copy of the copy (copy_ir's second): a scope of its own
    assert again.scope is not scope and again.scope is not blocks[0].scope


def test_functions_inlined_at_two_call_sites_compute_what_python_does():
    inline = njit(inline="always")(_branchy)

    @njit
    def twice(x, n):
        return inline(x, n) + inline(x[::-1], n - 1)

    x = np.array([1.0, -2.0, 3.0, -4.0, 5.0])
    assert twice(x, 5) == _branchy(x, 5) + _branchy(x[::-1], 4)
