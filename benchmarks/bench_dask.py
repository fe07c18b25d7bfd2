"""rnnloop.dask: throughput of 1 against 2 worker processes, and the overhead of a task.

    python benchmarks/bench_dask.py [--seconds 25] [--hidden 64] [--rounds 3] [--quick]

The job: a GRU encoder (32 features -> `hidden`, compiled, numba backend) over variable-length
sequences (40, 50, 60 or 70 steps) through rnnloop.dask.map_bag at its defaults (PARTITION_SIZE
items a partition, BATCH_SIZE items a model call), every output (y, [T, 1, hidden] an item)
gathered back. The items are sized so that the same work in this process, partition after
partition, takes --seconds (at least 20 by default: the issue's job). Then:

- local: that work in this process, one partition after another (run_items, as a task does), on one
  thread as a worker's Session runs; the mean of a run before the cluster runs and one after;
- 1 worker, 2 workers: a LocalCluster of that many worker processes of one thread, wall time of
  bag.compute() after a warm-up job (every worker has loaded the model);
- throughput ratio: 1 worker's time / 2 workers' time (target: >= 1.7 on 2 cores);
- overhead per task: (1 worker's time - local time) / tasks: Dask's scheduling, the Session lookup,
  pickling the outputs (gathered here) and the task's inputs, as a share of a task's time
  (target: <= 5 %), and how much of it lies outside the tasks (the task stream's compute time).

Gathering every item's output here costs Dask about 60 µs an array (serialized one by one); with
--persist the outputs stay on the workers, as in a job that writes them out from there.

Every process runs one thread (BLAS, Numba); the machine should have two idle cores. The workers
start without Dask's MALLOC_TRIM_THRESHOLD_ (see the README's Dask section; --malloc-trim keeps it) and the
scheduler without root-task queuing (worker-saturation inf; --queue keeps Dask's 1.1). --quick runs a
job of a few seconds to check the script, not to measure.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time

for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_name, "1")  # (before NumPy loads; workers inherit it)

import numpy as np

LENGTHS = (40, 50, 60, 70)
FEATURES = 32


def gru_model(hidden: int, seed: int = 0):
    """A GRU over x[T, N, FEATURES] (batch on axis 1) with outputs y[T, 1, N, hidden], h[1, N, hidden]."""
    import onnx
    from onnx import numpy_helper
    rng = np.random.default_rng(seed)
    model = onnx.parser.parse_model(f"""<ir_version: 8, opset_import: ["" : 17]>
    encoder (float[T, N, {FEATURES}] x) => (float[T, 1, N, {hidden}] y, float[1, N, {hidden}] h) {{
        y, h = GRU <hidden_size = {hidden}> (x, W, R, B)
    }}""")
    scale = 1 / np.sqrt(hidden)
    for name, shape in (("W", (1, 3 * hidden, FEATURES)), ("R", (1, 3 * hidden, hidden)), ("B", (1, 6 * hidden))):
        model.graph.initializer.append(numpy_helper.from_array(
            rng.uniform(-scale, scale, shape).astype(np.float32), name))
    return model.SerializeToString()


def read(partition: int, size: int) -> list[np.ndarray]:
    """The items of one partition, as a task would read them from storage: made from a seed where
    they are used, so that the job measures the model and Dask, not shipping the data from here."""
    rng = np.random.default_rng(partition)
    return [rng.standard_normal((LENGTHS[k % len(LENGTHS)], FEATURES)).astype(np.float32) for k in range(size)]


def run_local(session, partitions: int, size: int, options: dict) -> float:
    """Seconds for the job in this process, partition by partition as the tasks run it."""
    from rnnloop.dask import run_items
    start = time.perf_counter()
    for p in range(partitions):
        run_items(session, read(p, size), **options)
    return time.perf_counter() - start


def run_direct(model, partitions: int, size: int, options: dict) -> float:
    """Seconds for the job's work in one task: the worker's own Session (as its tasks find it),
    partition after partition, without a task each."""
    from rnnloop.dask import run_items
    from rnnloop.portable import shared
    session = shared(model)
    start = time.perf_counter()
    for p in range(partitions):
        run_items(session, read(p, size), **options)
    return time.perf_counter() - start


def run_cluster(model: bytes, partitions: int, size: int, workers: int, outputs: str,
                persist: bool, direct: dict | None = None) -> tuple[list[float], float, list[float]]:
    """Wall seconds of the job on a LocalCluster of `workers` processes once every worker has
    loaded the model, and the seconds its tasks computed (Dask's task stream, all workers). With
    `direct` (run_items' options), two jobs, each followed by the same work in one task on the same
    worker (run_direct): the seconds of each job and of each direct run, which the machine's drift
    between two runs of a process affects far less than a comparison with another process."""
    import dask.bag as db
    import distributed
    import rnnloop.dask as rd

    def bag(count: int):
        return db.from_sequence(range(count), npartitions=count).map_partitions(lambda ps: read(ps[0], size))
    jobs, baselines = [], []
    with distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=logging.ERROR) as cluster, \
            distributed.Client(cluster) as client:
        assert rd.preload(model, client) and len(client.scheduler_info()["workers"]) == workers
        for _ in range(1 if direct is None else 2):
            job = rd.map_bag(model, bag(partitions), batch_axis=1, outputs=outputs)
            with distributed.get_task_stream(client) as stream:
                start = time.perf_counter()
                if persist:  # the outputs stay on the workers (a job that writes them out from there)
                    job = job.persist()
                    distributed.wait(job)
                else:
                    results = job.compute()
                jobs.append(time.perf_counter() - start)
            if persist:  # (counted after the clock stops: not part of the job)
                results = job.map_partitions(lambda items: [len(items)]).compute()
                del job
            assert (sum(results) if persist else len(results)) == partitions * size
            if direct is not None:
                portable = rd._model(model, {})[0]
                baselines.append(client.submit(run_direct, portable, partitions, size, direct, pure=False).result())
    computing = sum(s["stop"] - s["start"] for task in stream.data for s in task["startstops"]
                    if s["action"] == "compute")
    return jobs, computing, baselines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=25.0, help="the job's time in one process (default 25)")
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--outputs", choices=("h", "y"), default="h",
                        help="gather h (the last state, [1, hidden] an item: default) or y (every step's)")
    parser.add_argument("--partition-size", type=int, default=None,
                        help="items a partition (default: rnnloop.dask.PARTITION_SIZE)")
    parser.add_argument("--persist", action="store_true",
                        help="keep the outputs on the workers instead of gathering them here")
    parser.add_argument("--malloc-trim", action="store_true",
                        help="keep Dask's MALLOC_TRIM_THRESHOLD_=65536 for the workers (by default this script "
                             "unsets it, as the README advises: it costs rnnloop's kernels 15-25 %% more CPU)")
    parser.add_argument("--queue", action="store_true",
                        help="keep Dask's root-task queuing (worker-saturation 1.1: a worker is sent its next "
                             "input task only when it has room; by default this script sends them at once, as "
                             "the README advises for batch inference)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="rounds of the four runs (local, 1 worker, 2 workers, local): median and range")
    parser.add_argument("--quick", action="store_true", help="a job of about 2 s: checks the script, measures nothing")
    args = parser.parse_args()
    import dask
    import rnnloop
    from rnnloop.dask import BATCH_SIZE, PARTITION_SIZE

    if not args.malloc_trim:  # (glibc stops adapting its mmap threshold: large arrays mmap'ed afresh each call)
        dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None})
    if not args.queue:  # (each worker then holds its next tasks instead of waiting for the scheduler's)
        dask.config.set({"distributed.scheduler.worker-saturation": float("inf")})

    model = gru_model(args.hidden)
    # One thread, as each worker runs its Session (rnnloop.dask loads them with threads=1): the
    # default, every core, would split the local run's batches over both cores.
    session = rnnloop.load(model, backend="numba", strict=True, threads=1)  # compiles into the cache, once
    options = dict(outputs=[args.outputs], single=True, input="x", batch_axes={"x": 1},
                   output_axes={args.outputs: 2 if args.outputs == "y" else 1}, batch_size=BATCH_SIZE)
    size = args.partition_size or PARTITION_SIZE
    run_local(session, 1, size, options)  # (first calls: warm)
    per_task = run_local(session, 2, size, options) / 2
    seconds = 2.0 if args.quick else args.seconds
    tasks = max(2, round(seconds / per_task))
    print(f"job: {tasks * size} sequences of {LENGTHS} steps, GRU {FEATURES} -> {args.hidden}, output "
          f"{args.outputs}; {tasks} tasks of {size} items ({BATCH_SIZE} a model call)")
    speedups, overheads, outside = [], [], []
    for r in range(args.rounds):
        print(f"round {r + 1} of {args.rounds}")
        before = run_local(session, tasks, size, options)
        ones, computing, directs = run_cluster(model, tasks, size, 1, args.outputs, args.persist, options)
        one = ones[-1]
        print(f"1 worker process:               {one:8.2f} s  (tasks computing {computing:.2f} s; the job before "
              f"it {ones[0]:.2f} s)")
        print(f"  the same work in one task:    {directs[-1]:8.2f} s  (after the first job {directs[0]:.2f} s)")
        (two,), _, _ = run_cluster(model, tasks, size, 2, args.outputs, args.persist)
        print(f"2 worker processes:             {two:8.2f} s")
        after = run_local(session, tasks, size, options)
        local = (before + after) / 2  # (before and after the cluster runs: the machine's speed drifts)
        print(f"local (one process, no Dask):   {local:8.2f} s  ({before:.2f} s before, {after:.2f} s after)")
        print(f"throughput, 2 workers / 1:      {one / two:8.2f}x  (target >= 1.7)")
        # Against the same work in the worker, right after each job: the machine drifts by up to a tenth
        # between the runs of different processes a minute apart (the local runs above).
        overhead = statistics.mean((job - baseline) / job for job, baseline in zip(ones, directs))
        print(f"overhead per task (1 worker):   {1000 * overhead * one / tasks:8.1f} ms of {1000 * one / tasks:.1f} ms "
              f"a task = {100 * overhead:.1f} %  (target <= 5 %); of it outside the tasks (scheduling, "
              f"gathering the outputs): {1000 * (one - computing) / tasks:.1f} ms; against this process: "
              f"{100 * (one - local) / one:.1f} %")
        speedups.append(one / two)
        overheads.append(100 * overhead)
        outside.append(100 * (one - computing) / one)
    if args.rounds > 1:
        for name, values, unit in (("throughput, 2 workers / 1", speedups, "x"), ("overhead per task", overheads, " %"),
                                   ("of it outside the tasks", outside, " %")):
            print(f"{name + ':':31s} median {statistics.median(values):.2f}{unit} "
                  f"({min(values):.2f}-{max(values):.2f}) over {args.rounds} rounds")

if __name__ == "__main__":
    main()
