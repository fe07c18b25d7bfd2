"""Threads inside a kernel: native workers that take a share of a product while the kernel runs.

A session of several threads splits a call by rows where it can (rnnloop/threads.py), but a
recurrent step cannot be split in time, and at batch 16 to 64 both halves of a row split read all
of the recurrent weights every step. Splitting each product by columns instead gives each core
half of the weights, which then stay in its cache: onnxruntime's way. That needs a hand-off within
a kernel, every step, far cheaper than a Python thread pool: this module's workers are Python
threads that spend their working time inside a nogil compiled loop (serve), waiting for a job
in a slot of a shared int64 block and running it, synchronised by atomic loads, stores and
compare-and-swap on that block.

A kernel learns the block's address and its thread budget from its status array (STATUS_POOL and
STATUS_THREADS, set per call by fused.Compiled.call_ready); a budget of 1, or no block, is
today's single-threaded code. A caller claims only idle workers (IDLE -> CLAIMED) and never waits
for one that has not started its job: after its own share it takes a job back that is still
POSTED and does it itself. So a product is never slower than alone by more than the hand-off, a
busy or sleeping worker costs nothing, and two sessions never wait for each other.

A worker spins (with `pause`) for about a millisecond after its last job, then falls asleep: its
compiled loop returns and the thread blocks on an Event, which the next call of a session that
uses the pool sets (wake). Fork: a child has the block but no threads; it starts a pool afresh.

Every session of several threads uses the pool, unless RNNLOOP_SHARE_PRODUCTS=0 (session._workers).
"""

from __future__ import annotations

import atexit
import os
import threading

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

# A worker's slot: its state alone in a cache line, then its job in the lines after it: the address
# of a compiled function of ARITY int64 arguments, and those arguments.
SLOT = 40
JOB = 8  # the job's first element within a slot
ARITY = 28
HEADER = 8  # block[0]: the workers, block[SHARED]: products shared so far (for tests); then the slots
SHARED = 1

IDLE, CLAIMED, POSTED, RUNNING, DONE, ASLEEP, STOP = range(7)

SPIN = 20_000  # idle pauses before a worker sleeps: about a millisecond


# ---------------------------------------------------------------------------------------------
# atomics on an int64 array (the block), for compiled code

def _element(context, builder, array_type, array, index):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.gep(data, [index])


@intrinsic
def load_acquire(typingctx, array, index):
    """array[index], read with acquire ordering: what the writer wrote before its release is seen."""
    def codegen(context, builder, sig, args):
        return builder.load_atomic(_element(context, builder, sig.args[0], *args), "acquire", 8)
    return types.int64(array, index), codegen


@intrinsic
def store_release(typingctx, array, index, value):
    """array[index] = value with release ordering: everything written before is seen with it."""
    def codegen(context, builder, sig, args):
        array_, index_, value_ = args
        builder.store_atomic(value_, _element(context, builder, sig.args[0], array_, index_), "release", 8)
        return context.get_dummy_value()
    return types.void(array, index, value), codegen


@intrinsic
def swap(typingctx, array, index, expected, new):
    """If array[index] == expected, make it `new` (acquire and release); whether it did."""
    def codegen(context, builder, sig, args):
        array_, index_, expected_, new_ = args
        pair = builder.cmpxchg(_element(context, builder, sig.args[0], array_, index_), expected_, new_,
                               "acq_rel", "acquire")
        return builder.extract_value(pair, 1)
    return types.boolean(array, index, expected, new), codegen


@intrinsic
def pause(typingctx):
    """A spin-wait hint (x86 `pause`: spares the sibling thread and the memory order machine)."""
    def codegen(context, builder, sig, args):
        if "x86" in (builder.module.triple or ""):  # (elsewhere a plain spin)
            fn = builder.module.globals.get("llvm.x86.sse2.pause") or ir.Function(
                builder.module, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause")
            builder.call(fn, [])
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def call_job(typingctx, block, at):
    """Call the function whose address is block[at] with the ARITY arguments after it."""
    def codegen(context, builder, sig, args):
        block_, at_ = args
        i64 = ir.IntType(64)
        values = [builder.load(_element(context, builder, sig.args[0], block_, builder.add(at_, ir.Constant(i64, k))))
                  for k in range(ARITY + 1)]
        function = builder.inttoptr(values[0], ir.FunctionType(i64, [i64] * ARITY).as_pointer())
        builder.call(function, values[1:])
        return context.get_dummy_value()
    return types.void(block, at), codegen


# ---------------------------------------------------------------------------------------------
# the caller's side, for compiled code

@njit(nogil=True, inline="always")
def claim(block, wanted):
    """Up to `wanted` idle workers, CLAIMED for the caller: their indices' bitmask."""
    claimed = 0
    for w in range(min(block[0], 62)):
        if wanted == 0:
            break
        if block[HEADER + w * SLOT] == IDLE and swap(block, HEADER + w * SLOT, IDLE, CLAIMED):
            claimed |= 1 << w
            wanted -= 1
    return claimed


@njit(nogil=True, inline="always")
def post(block, w):
    """Hand worker w the job written in its slot (after claim)."""
    store_release(block, HEADER + w * SLOT, POSTED)


@njit(nogil=True, inline="always")
def take_back(block, w):
    """After the caller's own share: True if worker w had not started its job (the caller does it),
    else once the worker has done it. The worker is IDLE again either way."""
    state = HEADER + w * SLOT
    if swap(block, state, POSTED, IDLE):
        return True
    while load_acquire(block, state) != DONE:
        pause()
    store_release(block, state, IDLE)
    return False


# ---------------------------------------------------------------------------------------------
# the workers (Python threads)

class Pool:
    """The process's workers and their block."""

    def __init__(self, workers: int):
        size = (HEADER + workers * SLOT) * 8
        raw = np.zeros(size + 64, np.uint8)  # (at a cache line's start, so that each state has a line)
        start = -raw.ctypes.data % 64
        self.block = raw[start:start + size].view(np.int64)
        self.address = self.block.ctypes.data
        self.events = [threading.Event() for _ in range(workers)]
        for w in range(workers):
            self.block[HEADER + w * SLOT] = ASLEEP
            threading.Thread(target=self._work, args=(w,), name=f"rnnloop-worker-{w}", daemon=True).start()
        self.block[0] = workers

    def _work(self, w: int) -> None:
        event, block = self.events[w], self.block
        while True:
            event.wait()
            event.clear()
            if block[HEADER + w * SLOT] == STOP:
                return
            serve(block, w)  # (nogil: returns when the worker falls asleep or is stopped)

    def wake(self) -> None:
        """Wake the workers that sleep (a call that may use them is about to run)."""
        block = self.block
        for w, event in enumerate(self.events):
            if block[HEADER + w * SLOT] == ASLEEP and _wake(block, w):
                event.set()

    def stop(self) -> None:
        """At exit: stop the workers that are idle or asleep. One with a job finishes it (its caller
        waits for it) and dies with the process."""
        for w, event in enumerate(self.events):
            if _stop(self.block, w):
                event.set()


@njit(nogil=True, cache=True)
def serve(block, w):
    """Worker w's loop: run each job posted to its slot; return when it has been idle for SPIN
    pauses (then ASLEEP) or is stopped."""
    state = HEADER + w * SLOT
    idle = 0
    while True:
        s = load_acquire(block, state)
        if s == POSTED:
            if swap(block, state, POSTED, RUNNING):
                call_job(block, state + JOB)
                store_release(block, state, DONE)
            idle = 0
        elif s == STOP:
            return
        elif s == IDLE:
            idle += 1
            if idle > SPIN and swap(block, state, IDLE, ASLEEP):
                return
            pause()
        else:  # CLAIMED (the caller writes the job) or DONE (the caller has not collected it yet)
            pause()


@njit(nogil=True, cache=True)
def _wake(block, w):
    return swap(block, HEADER + w * SLOT, ASLEEP, IDLE)


@njit(nogil=True, cache=True)
def _stop(block, w):
    state = HEADER + w * SLOT
    return swap(block, state, IDLE, STOP) or swap(block, state, ASLEEP, STOP)


_pool: Pool | None = None
_lock = threading.Lock()


def pool(threads: int) -> Pool | None:
    """The process's pool with workers for `threads`-thread calls (the cores this process may use,
    less the caller's), made on first use; None for one thread."""
    global _pool
    if threads < 2:
        return None
    with _lock:
        if _pool is None:
            from ..threads import available_cores
            workers = max(1, available_cores() - 1)
            _pool = Pool(workers)
            atexit.register(_pool.stop)
        return _pool


def _forget() -> None:
    """In a forked child: the parent's workers do not exist there. Sessions loaded before the fork
    keep the parent's block with no workers in it (their products run on one thread); sessions
    loaded after it get a pool of their own."""
    global _pool, _lock
    if _pool is not None:
        _pool.block[0] = 0
    _pool, _lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
