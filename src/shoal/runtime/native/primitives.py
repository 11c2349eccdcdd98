"""What compiled workers need that Numba does not offer: atomics, a cheap clock, a pause and a
futex.

Each is an LLVM instruction or a C library call emitted inline (``numba.extending.intrinsic``),
so a worker loop compiled with ``nogil=True`` uses them with no Python and no lock:

- :func:`atomic_add`, :func:`atomic_cas`, :func:`atomic_load`: sequentially consistent
  read-modify-writes on one element of an integer array (LLVM ``atomicrmw``, ``cmpxchg``);
- :func:`monotonic_ns`: ``clock_gettime(CLOCK_MONOTONIC)``, answered by the vDSO without a
  system call (tens of nanoseconds, where ``time.thread_time()`` costs a system call);
- :func:`thread_cpu_ns`: the thread's CPU time (a system call);
- :func:`cpu_relax`: the x86 ``pause`` of a spin-wait (nothing elsewhere);
- :func:`futex_wait`, :func:`futex_wait_for`, :func:`futex_wake`: Linux's futex, so an idle
  worker sleeps in the kernel instead of spinning on a shared core, and a producer wakes
  exactly one.
"""

from __future__ import annotations

import platform
import sys

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

X86 = platform.machine().lower() in ("x86_64", "amd64")
# syscall numbers of futex; operations on a process-private word
SYS_FUTEX = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98}.get(platform.machine().lower(), -1)
FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129
CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID = 1, 3  # Linux's clock ids
HAS_FUTEX = sys.platform.startswith("linux") and SYS_FUTEX >= 0


def _element(context, builder, sig, args):
    """A pointer to ``args[0][args[1]]`` (an array and an index)."""
    ary = context.make_array(sig.args[0])(context, builder, args[0])
    return cgutils.get_item_pointer(context, builder, sig.args[0], ary, [args[1]], wraparound=False)


@intrinsic
def atomic_add(typingctx, array, index, value):
    """``array[index] += value`` atomically; returns the value before."""
    def codegen(context, builder, sig, args):
        value = context.cast(builder, args[2], sig.args[2], sig.return_type)
        return builder.atomic_rmw("add", _element(context, builder, sig, args), value, "seq_cst")
    return array.dtype(array, index, value), codegen


@intrinsic
def atomic_cas(typingctx, array, index, expected, new):
    """``array[index] = new`` if it holds ``expected``, atomically; returns the value before."""
    def codegen(context, builder, sig, args):
        dtype = sig.return_type
        old = builder.cmpxchg(_element(context, builder, sig, args),
                              context.cast(builder, args[2], sig.args[2], dtype),
                              context.cast(builder, args[3], sig.args[3], dtype), "seq_cst", "seq_cst")
        return builder.extract_value(old, 0)
    return array.dtype(array, index, expected, new), codegen


@intrinsic
def atomic_load(typingctx, array, index):
    """``array[index]``, read atomically (never from a register a loop kept)."""
    def codegen(context, builder, sig, args):
        ptr = _element(context, builder, sig, args)
        return builder.load_atomic(ptr, "seq_cst", context.get_abi_alignment(ptr.type.pointee))
    return array.dtype(array, index), codegen


def _clock_gettime(builder, clock: int):
    """``clock_gettime(clock)`` in nanoseconds."""
    i64, i32 = ir.IntType(64), ir.IntType(32)
    timespec = ir.LiteralStructType([i64, i64])
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i32, [i32, timespec.as_pointer()]),
                                        "clock_gettime")
    ts = cgutils.alloca_once(builder, timespec)
    builder.call(fn, [ir.Constant(i32, clock), ts])
    seconds = builder.load(cgutils.gep_inbounds(builder, ts, 0, 0))
    nanoseconds = builder.load(cgutils.gep_inbounds(builder, ts, 0, 1))
    return builder.add(builder.mul(seconds, ir.Constant(i64, 1_000_000_000)), nanoseconds)


@intrinsic
def monotonic_ns(typingctx):
    """Nanoseconds of ``CLOCK_MONOTONIC`` (the clock of ``time.monotonic_ns``)."""
    def codegen(context, builder, sig, args):
        return _clock_gettime(builder, CLOCK_MONOTONIC)
    return types.int64(), codegen


@intrinsic
def thread_cpu_ns(typingctx):
    """Nanoseconds of the calling thread's CPU time (``CLOCK_THREAD_CPUTIME_ID``, the clock of
    ``time.thread_time_ns``: a system call, so read per step, not per task)."""
    def codegen(context, builder, sig, args):
        return _clock_gettime(builder, CLOCK_THREAD_CPUTIME_ID)
    return types.int64(), codegen


@intrinsic
def cpu_relax(typingctx):
    """Tell the core this thread spins (x86 ``pause``: the other hyper-thread runs faster)."""
    def codegen(context, builder, sig, args):
        if X86:
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), []),
                                                "llvm.x86.sse2.pause")
            builder.call(fn, [])
        return context.get_dummy_value()
    return types.void(), codegen


def _futex(builder, context, sig, args, op, timeout=None):
    i64, i32, i8p = ir.IntType(64), ir.IntType(32), ir.IntType(8).as_pointer()
    if not HAS_FUTEX:
        return ir.Constant(i64, -1)
    ptr = _element(context, builder, sig, args)
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64], var_arg=True), "syscall")
    value = builder.trunc(context.cast(builder, args[2], sig.args[2], types.int64), i32)
    null = ir.Constant(i8p, None)
    when = null
    if timeout is not None:  # a relative timespec of ``timeout`` nanoseconds
        billion = ir.Constant(i64, 1_000_000_000)
        ts = cgutils.alloca_once(builder, ir.LiteralStructType([i64, i64]))
        builder.store(builder.sdiv(timeout, billion), cgutils.gep_inbounds(builder, ts, 0, 0))
        builder.store(builder.srem(timeout, billion), cgutils.gep_inbounds(builder, ts, 0, 1))
        when = builder.bitcast(ts, i8p)
    return builder.call(fn, [ir.Constant(i64, SYS_FUTEX), builder.bitcast(ptr, i8p), ir.Constant(i32, op), value,
                             when, null, ir.Constant(i32, 0)])


@intrinsic
def futex_wait(typingctx, words, index, expected):
    """Sleep while the int32 ``words[index]`` holds ``expected`` (returns at once if it does not,
    on a wake, or spuriously: callers re-check). Returns -1 without a futex (callers spin)."""
    def codegen(context, builder, sig, args):
        return _futex(builder, context, sig, args, FUTEX_WAIT_PRIVATE)
    return types.int64(words, index, expected), codegen


@intrinsic
def futex_wait_for(typingctx, words, index, expected, ns):
    """:func:`futex_wait`, for at most ``ns`` nanoseconds."""
    def codegen(context, builder, sig, args):
        return _futex(builder, context, sig, args, FUTEX_WAIT_PRIVATE,
                      context.cast(builder, args[3], sig.args[3], types.int64))
    return types.int64(words, index, expected, ns), codegen


@intrinsic
def futex_wake(typingctx, words, index, count):
    """Wake up to ``count`` threads sleeping on the int32 ``words[index]``."""
    def codegen(context, builder, sig, args):
        return _futex(builder, context, sig, args, FUTEX_WAKE_PRIVATE)
    return types.int64(words, index, count), codegen
