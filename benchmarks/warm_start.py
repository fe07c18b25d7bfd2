"""A whole process that serves a built-in model from a filled cache: import rnnloop, build the model,
load it and run it once. Timed from outside, e.g. by farm-bench, against another environment:

    farm-bench -n 5 --vs "env PYTHONPATH=/tmp/ml_dtypes-0.7.0 python benchmarks/warm_start.py vad_stream" \\
        -- python benchmarks/warm_start.py vad_stream

(run it once first, so that the cache holds the model's kernels).
"""

import sys


def main(spec: str) -> None:
    import rnnloop  # (here, not at the top: asv imports every file of benchmarks/ to find benchmarks)
    from rnnloop import models

    name, arguments = models.resolve(spec)
    model, feeds = models.MODELS[name](**arguments)
    rnnloop.load(model, threads=1).run(None, feeds)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "vad_stream")
