"""Round an array larger than the workers' memory with Dask (``chop`` on a Dask array).

``chop`` on a Dask array returns a lazy Dask array; rounding runs block by block
on the workers, so the array never exists in one piece.  This example makes
``n`` standard-normal float64 numbers chunk by chunk (never held whole), rounds
them to bfloat16 (round to nearest) and, with ``Chop(options, rng=seed)``
where that is counter-based, stochastically, and reduces the results to a few
numbers: the largest relative error (at most bfloat16's unit roundoff 2^-8)
and the mean signed error of stochastic rounding (close to 0: it is unbiased).

It runs on a ``dask.distributed.LocalCluster`` of worker processes whose
memory limit, summed, is smaller than the array, and reports each worker's
memory high-water mark (peak resident set size) next to the array's size.

Run ``python examples/dask_out_of_core.py`` (n = 1e8: 800 MB of float64 on two
workers limited to 350 MiB each), ``--n 1e9`` for 8 GB, ``--scheduler threads``
to skip the cluster.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

try:
    import pychop_compat  # noqa: F401
except ImportError:  # running from a source checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from pychop_compat import Chop, chop
from pychop_compat.random import sources as randomness


def _peak_rss_mib() -> float:
    """This process's peak resident set size in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _normal_block(block: np.ndarray, seed: int, block_info=None) -> np.ndarray:
    index = block_info[0]["chunk-location"][0]
    return np.random.default_rng([seed, index]).standard_normal(block.shape)


def run(n: int = 10**8, chunk: int = 2**19, workers: int = 2, memory_limit: str = "350MiB",
        scheduler: str = "distributed", seed: int = 1, verbose: bool = True) -> dict:
    """Round ``n`` numbers; return the measured errors and memory high-water marks."""
    import dask
    import dask.array as da

    # Each block made on its worker from (seed, block index): nothing big is sent anywhere.
    x = da.zeros(n, chunks=chunk, dtype=np.float64).map_blocks(_normal_block, seed, dtype=np.float64,
                                                              meta=np.empty(0))
    nearest = chop(x, {"format": "bfloat16"})
    relative = abs(nearest - x) / abs(x)
    reductions = {"max_relative_error": relative.max(), "inexact_fraction": (nearest != x).mean()}
    stochastic = randomness.__dict__.get("counter_sources") is not None  # Chop(rng=<int>) is counter-based
    if stochastic:
        sr = Chop({"format": "bfloat16", "round": 5}, rng=seed)(x)
        reductions["mean_signed_error_sr"] = (sr - x).mean()
        reductions["mean_abs_error_sr"] = abs(sr - x).mean()

    result = {"n": n, "array_mib": n * 8 / 2**20, "chunk_mib": chunk * 8 / 2**20, "scheduler": scheduler}
    start = time.perf_counter()
    if scheduler == "distributed":
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                          dashboard_address=None, silence_logs=40) as cluster, Client(cluster) as client:
            values = dask.compute(reductions)[0]
            peaks = client.run(_peak_rss_mib)
        result["worker_peak_rss_mib"] = sorted(peaks.values())
        result["workers_memory_limit_mib"] = workers * float(dask.utils.parse_bytes(memory_limit)) / 2**20
    else:
        values = dask.compute(reductions, scheduler=scheduler)[0]
    result["seconds"] = time.perf_counter() - start
    result["client_peak_rss_mib"] = _peak_rss_mib()
    result.update({k: float(v) for k, v in values.items()})
    if verbose:
        for key, value in result.items():
            print(f"{key:>26}: {value}")
    return result


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, default=1e8, help="number of elements (default 1e8; try 1e9)")
    parser.add_argument("--chunk", type=int, default=2**19, help="elements per chunk (default 2**19: 4 MiB)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="350MiB", help="per worker (default 350MiB)")
    parser.add_argument("--scheduler", default="distributed", choices=("distributed", "threads", "synchronous"))
    args = parser.parse_args(argv)
    return run(int(args.n), args.chunk, args.workers, args.memory_limit, args.scheduler)


if __name__ == "__main__":
    main()
