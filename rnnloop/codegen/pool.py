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

A worker spins (with `pause`) for about half a millisecond after its last job, then naps: it sleeps
NAP_US at a time in its compiled loop, NAPS times (about 50 ms), and a caller that finds it napping
calls it back to spinning (NAPPING -> IDLE) for the products after this one. Only then does it fall
asleep: its compiled loop returns and the thread blocks on an Event, which the next call of a
session that uses the pool sets (wake). Without the naps, a worker slept through whatever a kernel
did between two loops for longer than its spin: the glue between the layers of a stacked
bidirectional LSTM encoder took 0.6-1 ms at batch 12, and its layers 2 and 3 then ran alone (a
batch-1 call took 7.8-8.2 against 7.1-7.5 ms; at batch 12, unsplit, 96-104 against 61-64). A nap
costs the core it runs on a wake-up every 0.1 ms or so.

Where there are more runnable threads than cores (a busy process on the worker's core), a spinning
worker yields its core every YIELD pauses, and callers back off from a worker whose share kept them
waiting (take_back). Fork: a child has the block but no threads; it starts a pool afresh.

A worker also takes a whole loop (post_job, join_job): the two directions of a bidirectional layer
run at once, the caller's on one core and the worker's on the other, with no hand-off per step
(kernel._emit_concurrent_loops). The job's function is made inside the kernel's code (job_of), its
first argument the address of words that hold the loop's arguments and, after it, its results. A
napping worker is claimed for a loop too: it starts within a nap, little against a loop's time.

A worker also takes a share of a convolution (the Winograd path on panels: its input transforms by
channels, its 16 products, its output transforms by rows of tiles, each step's units taken one at a
time by the caller and the worker: conv_rt._winograd_shared): an idle worker only, as for a product,
since a convolution takes only a few hundred microseconds; the convolution calls a napping worker back
to spinning first, while it pads its input.

Every session of several threads uses the pool, unless RNNLOOP_SHARE_PRODUCTS=0 (session._workers).
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
from numba import cfunc, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

# A worker's slot: its state and its callers' back-off (see take_back) in a cache line, then its job in
# the lines after it: the address of a compiled function of ARITY int64 arguments, and those arguments.
SLOT = 40
UNTIL, WINDOW = 1, 2  # within a slot: the tick until which callers leave the worker alone; that pause
JOB = 8  # the job's first element within a slot
ARITY = 28
HEADER = 8  # block[0]: the workers, block[SHARED]: products shared so far, block[BACKED_OFF]: times
SHARED, BACKED_OFF, JOBS = 1, 2, 3  # callers backed off from a worker, block[JOBS]: jobs workers ran
#                                     (post_job; all three for tests); then the slots

IDLE, CLAIMED, POSTED, RUNNING, DONE, ASLEEP, STOP, NAPPING = range(8)

SPIN = 20_000  # idle pauses before a worker naps: about half a millisecond on the Zen 4
# An idle worker yields its core every YIELD pauses (sched_yield: a fraction of a microsecond when no
# other thread wants the core). Without it, on a machine with more runnable threads than cores, a
# spinning worker took the time of the threads that work: with a busy process on the other core, a
# batch-1 LSTM (1, 128, 256, 200) took 6.8-7.1 ms a call on two threads against 3.2 on one (ad hoc).
YIELD = 64
# A worker whose share kept its caller waiting for more than twice the caller's own share and SLOW
# ticks has been descheduled. Its callers then leave it alone for BACK_OFF ticks, twice as long for
# each such wait within RECENT of the end of the last pause, up to LONGEST (ticks of rdtsc: about
# 0.4 ns on the Zen 4; 1 ms, 2 ms, 1 s and 0.1 s). Measured on the 2-core Zen 4, a batch-1 LSTM's
# shares: alone, waits of 0.04-0.4 ms a few dozen times a second (interrupts) and of 0.4-4 ms about
# twice; with a busy process on the worker's core, waits of over 4 ms (its time slices) 30 times.
SLOW = 2_500_000
BACK_OFF = 5_000_000
RECENT = 2_600_000_000
LONGEST = 260_000_000
NAP_US = 50  # a nap: usleep(NAP_US), about 0.1 ms with Linux's default timer slack
NAPS = 500  # naps before a worker falls asleep: about 50 ms


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
def ticks(typingctx):
    """The CPU's cycle counter (x86's rdtsc: a constant rate), or 0 where the target has none."""
    def codegen(context, builder, sig, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.IntType(64), []),
                                            "llvm.readcyclecounter")
        return builder.call(fn, [])
    return types.int64(), codegen


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


def _libc(name: str, signature) -> types.ExternalFunction:
    """The C library's function `name`, callable from compiled code; where there is none, a compiled
    function that returns 0 at once (a worker there spins without yielding or napping). Registered by
    name, as blas.py registers BLAS, so that `serve` stays in Numba's cache across processes."""
    try:
        address = ctypes.cast(getattr(ctypes.CDLL(None), name), ctypes.c_void_p).value
    except (OSError, AttributeError, TypeError):
        address = cfunc(signature)(lambda *args: 0).address
    llvm.add_symbol(f"rnnloop_{name}", address)
    return types.ExternalFunction(f"rnnloop_{name}", signature)


_usleep = _libc("usleep", types.int32(types.uint32))
_yield = _libc("sched_yield", types.int32())


# ---------------------------------------------------------------------------------------------
# memory by its address, for compiled code: the block, a product's operands (simd), a job's words

def _array_value(context, builder, array, address, shape, strides):
    """An array of Numba type `array` over memory at `address` (LLVM values: the address, the sizes
    and byte strides as lists or packed tuples), without a reference count."""
    from numba.np.arrayobj import populate_array
    out = context.make_array(array)(context, builder)
    element = context.get_data_type(array.dtype)
    pack = (lambda v: cgutils.pack_array(builder, v)) if isinstance(shape, list) else (lambda v: v)
    populate_array(out, data=builder.inttoptr(address, element.as_pointer()), shape=pack(shape), strides=pack(strides),
                   itemsize=context.get_constant(types.intp, context.get_abi_sizeof(element)), meminfo=None)
    return out._getvalue()


@intrinsic
def as_array(typingctx, address, shape, strides, dtype):
    """The array of `dtype` (a NumPy scalar type) at `address`, of `shape` and byte `strides`
    (tuples of ints): a view of memory its caller keeps alive, so without reference counting."""
    array = types.Array(dtype.instance_type, len(shape), "A")

    def codegen(context, builder, sig, args):
        return _array_value(context, builder, array, *args[:3])
    return array(address, shape, strides, dtype), codegen


@njit(nogil=True, inline="always")
def block_at(address):
    """The pool's block at `address` (Pool.address, as a kernel's status holds it)."""
    workers = as_array(address, (HEADER,), (8,), np.int64)[0]
    return as_array(address, (HEADER + workers * SLOT,), (8,), np.int64)


# ---------------------------------------------------------------------------------------------
# the caller's side, for compiled code

@njit(nogil=True, inline="always")
def claim(block, wanted):
    """Up to `wanted` idle workers, CLAIMED for the caller: their indices' bitmask. A napping worker
    is called back to spinning, for the products after this one (wanted 0: only that, ahead of work
    to share); one that callers back off from (take_back) is left alone."""
    claimed = 0
    now = ticks()
    for w in range(min(block[0], 62)):
        state = block[HEADER + w * SLOT]
        if now < block[HEADER + w * SLOT + UNTIL]:
            continue
        if state == IDLE and wanted > 0 and swap(block, HEADER + w * SLOT, IDLE, CLAIMED):
            claimed |= 1 << w
            wanted -= 1
        elif state == NAPPING:
            swap(block, HEADER + w * SLOT, NAPPING, IDLE)
    return claimed


@njit(nogil=True, inline="always")
def post(block, w):
    """Hand worker w the job written in its slot (after claim)."""
    store_release(block, HEADER + w * SLOT, POSTED)


@njit(nogil=True, inline="always")
def take_back(block, w, own):
    """After the caller's own share, which took `own` ticks: True if worker w had not started its job
    (the caller does it), else once the worker has done it. The worker is IDLE again either way.

    A worker that kept the caller waiting far longer than its share should take was descheduled:
    callers back off from it (claim), for twice as long as the last time if that was recent. With a
    busy process on the other core, a batch-1 LSTM (1, 128, 256, 200) took 6.2-6.9 ms a call on two
    threads against 3.1-3.2 on one without this (ad hoc), most of it waiting for the worker's turn."""
    state = HEADER + w * SLOT
    if swap(block, state, POSTED, IDLE):
        return True
    start = ticks()
    while load_acquire(block, state) != DONE:
        pause()
    end = ticks()
    store_release(block, state, IDLE)
    if end - start > 2 * own + SLOW:
        slot = HEADER + w * SLOT
        window = min(2 * block[slot + WINDOW], LONGEST) if end < block[slot + UNTIL] + RECENT else BACK_OFF
        block[BACKED_OFF] += 1  # (a count for tests, as SHARED)
        block[slot + WINDOW] = window
        block[slot + UNTIL] = end + window
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
        """Wake the workers that sleep or nap (a call that may use them is about to run)."""
        block = self.block
        for w, event in enumerate(self.events):
            if block[HEADER + w * SLOT] in (ASLEEP, NAPPING) and _wake(block, w):
                event.set()

    def stop(self) -> None:
        """At exit: stop the workers that are idle or asleep. One with a job finishes it (its caller
        waits for it) and dies with the process."""
        for w, event in enumerate(self.events):
            if _stop(self.block, w):
                event.set()


@njit(nogil=True, cache=True)
def serve(block, w):
    """Worker w's loop: run each job posted to its slot; nap when it has been idle for SPIN pauses
    (NAPPING, until a caller sets it IDLE again); return after NAPS naps (then ASLEEP) or when it is
    stopped."""
    state = HEADER + w * SLOT
    idle = naps = 0
    while True:
        s = load_acquire(block, state)
        if s == POSTED:
            if swap(block, state, POSTED, RUNNING):
                call_job(block, state + JOB)
                store_release(block, state, DONE)
            idle = naps = 0
        elif s == STOP:
            return
        elif s == IDLE:
            if idle > SPIN:  # (it was NAPPING: a caller called it back to spin)
                idle = naps = 0
            idle += 1
            if idle > SPIN:
                swap(block, state, IDLE, NAPPING)
            if idle % YIELD == 0:
                _yield()
            else:
                pause()
        elif s == NAPPING:
            if naps >= NAPS and swap(block, state, NAPPING, ASLEEP):
                return
            _usleep(NAP_US)
            naps += 1
        else:  # CLAIMED (the caller writes the job) or DONE (the caller has not collected it yet)
            pause()


@njit(nogil=True, cache=True)
def _wake(block, w):
    """Whether worker w was asleep (its thread then needs its Event set); a napping one spins again."""
    state = HEADER + w * SLOT
    if swap(block, state, ASLEEP, IDLE):
        return True
    swap(block, state, NAPPING, IDLE)
    return False


@njit(nogil=True, cache=True)
def _stop(block, w):
    state = HEADER + w * SLOT
    return swap(block, state, IDLE, STOP) or swap(block, state, ASLEEP, STOP) or swap(block, state, NAPPING, STOP)


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


# ---------------------------------------------------------------------------------------------
# whole calls as jobs: a loop of a kernel run by a worker while the caller runs another
# (the directions of a bidirectional layer; kernel._emit_concurrent_loops)

@intrinsic
def job_of(typingctx, task, count):
    """The address of a job function (of ARITY int64 arguments) that runs compiled function `task`
    on the `count` int64 words at its first argument (`count` a literal; `task` takes the words as
    an array and catches its errors: see kernel._task). The function is made inside the caller's
    own code, so a kernel from Numba's cache has it, and compiling it costs no second optimisation
    of the loop that `task` runs, as a C function of its own (a cfunc) did: a bidirectional
    encoder's cold compile took 42 s that way, 36-38 without jobs (ad hoc, 2026-12-02)."""
    words = types.Array(types.int64, 1, "C")
    if not isinstance(task, types.Dispatcher) or not isinstance(count, types.IntegerLiteral):
        return None
    task.get_call_type(typingctx, (words,), {})  # (compiles it for its words)
    size = count.literal_value

    def codegen(context, builder, sig, args):
        compiled = task.dispatcher.overloads[(words,)]
        module, i64 = builder.module, ir.IntType(64)
        name = f"rnnloop_job.{compiled.fndesc.mangled_name}"
        function = module.globals.get(name)
        if function is None:
            function = ir.Function(module, ir.FunctionType(i64, [i64] * ARITY), name)
            function.linkage = "internal"
            body = ir.IRBuilder(function.append_basic_block())
            view = _array_value(context, body, words, function.args[0], [ir.Constant(i64, size)], [ir.Constant(i64, 8)])
            callee = context.declare_function(module, compiled.fndesc)
            context.call_conv.call_function(body, callee, compiled.signature.return_type, compiled.signature.args, [view])
            body.ret(ir.Constant(i64, 0))
            context.add_linking_libs([compiled.library])
        return builder.ptrtoint(function, i64)
    return types.int64(task, count), codegen


@njit(nogil=True, cache=True)
def post_job(threads, address, words, entry, napping=True):
    """Hand the job `entry` (job_of, or a C function of ARITY arguments) on `words` to an idle or
    (`napping`) napping worker of the pool at `address` (the call's threads and block: the status
    array's last two elements): the worker's index, or -1 when the call has one thread or no worker
    is free (the caller then runs the job)."""
    if threads < 2 or address == 0:
        return -1
    block = block_at(address)
    now, found = ticks(), -1
    for w in range(block[0]):
        # A napping worker too (unlike claim): it sees the job within a nap, a small delay for a
        # loop, where a product cannot wait for it. (Between the layers of a bidirectional encoder
        # the worker napped: it spins for SPIN pauses, about 0.1 ms on the 2-core Xeon, and a job
        # for an idle worker only found it idle in one layer of three at batch 12.)
        state = HEADER + w * SLOT
        if now >= block[state + UNTIL] and (swap(block, state, IDLE, CLAIMED)
                                            or napping and swap(block, state, NAPPING, CLAIMED)):
            found = w
            break
    if found >= 0:
        job = HEADER + found * SLOT + JOB
        block[job] = entry
        block[job + 1] = words.ctypes.data
        post(block, found)
    return found


@njit(nogil=True, cache=True)
def join_job(address, w, own):
    """After post_job gave worker w (or -1) a job and the caller did its own work in `own` ticks:
    True once the worker has done the job; False if nobody has (the caller runs it now)."""
    if w < 0:
        return False
    block = block_at(address)
    if take_back(block, w, own):
        return False
    block[JOBS] += 1  # (a count for tests, as SHARED)
    return True


@njit(cache=True, nogil=True)
def alive(*arrays):
    """Nothing: a use of `arrays` after the job that reads them through its words, whose views hold no
    reference (runtime.put_view; conv_rt's Winograd job). Numba frees an array after its last use: an
    LSTM's zero initial states, last used when their views were written, were freed there, and the
    loop read whatever the memory held next. (Not inlined: its inlined empty body would no longer use
    them.)"""
    return None
