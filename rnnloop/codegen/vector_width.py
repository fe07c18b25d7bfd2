"""rnnloop's compiled code vectorises 512 bits wide where the CPU has AVX-512.

LLVM's loop vectoriser picks its width from the tuning of the CPU it compiles for, and for Intel's
cores with AVX-512 (Skylake-SP to Sapphire Rapids, the Ice Lake and Rocket Lake clients) that tuning
prefers 256-bit vectors ("prefer-256-bit": the first of those cores lowered their clock under 512-bit
work). So every elementwise nest of a generated kernel (an RNN cell's gates, activations, norms)
ran 8 float32 lanes wide where 16 fit. Numba has no option for it; LLVM reads a function attribute,
"prefer-vector-width", which we give every function lowered from an rnnloop module or a generated
kernel (`BaseLower.setup_function`, the one place Numba makes a function's LLVM declaration) and
nothing else the process compiles. Measured on a 2-core Xeon with AVX-512 (2026-11-28, ad hoc): an
LSTM step's fused gates at batch 12 and hidden 256 took 7.5 µs against 20.1.

`RNNLOOP_VECTOR_WIDTH=256` leaves LLVM's choice. The width keys the kernel and helper caches
(cache.py), so code compiled for one setting never loads under the other. rnnloop's own product
kernels (simd.py, quant_rt.py) spell their vectors out and are not affected.
"""

from __future__ import annotations

import functools
import os

ATTRIBUTE = "prefer-vector-width"


@functools.cache
def preferred() -> str:
    """The vector width rnnloop's functions ask LLVM for ("512"), or "" to leave LLVM's own choice:
    on a CPU without AVX-512 (NUMBA_CPU_FEATURES, else the host's), or with RNNLOOP_VECTOR_WIDTH=256."""
    from numba import config
    from numba.core.codegen import get_host_cpu_features

    if os.environ.get("RNNLOOP_VECTOR_WIDTH", "") == "256":
        return ""
    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else get_host_cpu_features()
    return "512" if "+avx512f" in features.split(",") else ""


def _ours(module_name: str | None) -> bool:
    """Whether a function of this Python module is rnnloop's: its package or a generated kernel."""
    return bool(module_name) and (module_name == "rnnloop" or module_name.startswith(("rnnloop.", "rnnloop_kernel_")))


@functools.cache
def install() -> None:
    """Give the functions rnnloop compiles from now on the preferred width (once per process)."""
    width = preferred()
    if not width:
        return
    try:
        from numba.core.lowering import BaseLower
        setup_function = BaseLower.setup_function
    except (ImportError, AttributeError):  # a Numba without it compiles at LLVM's width, as before
        return

    def _setup_function(self, fndesc):
        setup_function(self, fndesc)
        if _ours(getattr(fndesc, "modname", None)):
            # llvmlite's attribute set accepts only LLVM's enum attributes by name; a string attribute
            # is printed as given, which LLVM parses as "key"="value".
            set.add(self.function.attributes, f'"{ATTRIBUTE}"="{width}"')

    BaseLower.setup_function = _setup_function
