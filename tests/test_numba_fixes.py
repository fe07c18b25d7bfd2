"""rnnloop's workarounds of Numba's costs (rnnloop/codegen/numba_fixes.py): code that calls another
jitted function caches at -O0, inlining copies a callee's scope once per copy, not per block, and
loading cached code does not load every implementation Numba has."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

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


def test_a_call_with_a_ternary_in_its_arguments_caches_at_O0(monkeypatch):
    """The dead load there is stored to a stack slot that nothing reads (a phi of the ternary's
    arms), which dead code elimination alone leaves; SROA first removes it."""
    monkeypatch.setattr(config, "OPT", type(config.OPT)(0))

    @njit
    def callee(x, y):
        return x.sum() + y.sum()

    @njit
    def caller(x, a, b):
        return callee(x.reshape(((a if b == 1 else b), x.size // (a if b == 1 else b))), x)

    assert caller(np.ones(6), 2, 3) == 12.0
    assert not caller.overloads[caller.signatures[0]].library.has_dynamic_globals


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


_WARM_PROCESS = """
import json, sys
import numpy as np
import rnnloop
from rnnloop import models
model, feeds = models.MODELS["elementwise_chain"](ops=3)
got = rnnloop.load(model, strict=True).run(None, feeds)[0]
loaded_everything = "numba.np.linalg" in sys.modules
# A cache miss afterwards compiles with every implementation Numba has (a new kernel: chain of 4).
model, feeds = models.MODELS["elementwise_chain"](ops=4)
after = rnnloop.load(model, strict=True).run(None, feeds)[0]
print(json.dumps({"got": got.tolist(), "loaded_everything": loaded_everything, "after": after.tolist()}))
"""


def test_a_kernel_loads_from_the_cache_without_numbas_implementations_and_a_later_compile_has_them(tmp_path):
    """Loading cached machine code skips the import of Numba's implementations (0.3 s of a warm
    load), and a compile later in that process still finds them."""
    env = dict(os.environ, RNNLOOP_CACHE_DIR=str(tmp_path))
    env.pop("RNNLOOP_NUMBA_FIXES", None)

    def process() -> dict:
        done = subprocess.run([sys.executable, "-c", _WARM_PROCESS], env=env, capture_output=True, text=True,
                              check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    cold, warm = process(), process()
    assert cold["loaded_everything"]  # (it compiled)
    assert not warm["loaded_everything"]
    assert warm["got"] == cold["got"] and warm["after"] == cold["after"]
    import rnnloop
    from rnnloop import models
    model, feeds = models.MODELS["elementwise_chain"](ops=4)
    np.testing.assert_allclose(warm["after"], rnnloop.load(model, backend="interp").run(None, feeds)[0], rtol=1e-6)
