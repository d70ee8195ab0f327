"""Sweep throughput of `nudma.sweep` per backend and worker count.

    python python/bench_sweep.py                      # 10,000 points, every backend, 1 and 2 workers
    python python/bench_sweep.py --points 500 --backends local,dask

The workload is examples/borrowed_gpu.toml (a K40c lent over back-to-back PXH830s, DMA
both ways through the borrower's IOMMU window), over a short window; the grid sweeps both
streams' outstanding requests, the transfer size, the read stream's direction and the
borrower's IOMMU. Every run's rows must equal the first run's: the backends differ in
speed only. Prints a Markdown table of points per second.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

# Run as a script, this directory comes first on sys.path and its nudma/ (the sources,
# without the built extension) would shadow the installed package.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import pandas as pd  # noqa: E402

import nudma  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "examples" / "borrowed_gpu.toml"


def grid(points: int) -> dict:
    """At least `points` points: outstanding counts grow until the product is reached."""
    fixed = {
        "workload.to_borrower.transfer_bytes": ["4 KiB", "16 KiB", "64 KiB", "256 KiB"],
        "workload.from_borrower.op": ["read", "write"],
        "host.borrower.iommu": [True, False],
    }
    side = math.ceil(math.sqrt(points / math.prod(len(v) for v in fixed.values())))
    return {
        "workload.to_borrower.outstanding": list(range(1, side + 1)),
        "workload.from_borrower.outstanding": list(range(1, side + 1)),
        **fixed,
    }


def run(backend: str, workers: int, sc: nudma.Scenario, g: dict) -> tuple[float, pd.DataFrame]:
    start = time.perf_counter()
    if backend == "ray":
        import ray

        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        try:
            start = time.perf_counter()  # cluster start-up is not sweep time
            df = nudma.sweep(sc, g, backend="ray", workers=workers, progress=False)
            return time.perf_counter() - start, df
        finally:
            ray.shutdown()
    if backend == "dask":
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=None) as cluster:
            with Client(cluster):
                start = time.perf_counter()
                df = nudma.sweep(sc, g, backend="dask", workers=workers, progress=False)
                return time.perf_counter() - start, df
    df = nudma.sweep(sc, g, backend="local", workers=workers, progress=False)
    return time.perf_counter() - start, df


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=10_000)
    ap.add_argument("--backends", default="local,ray,dask")
    ap.add_argument("--workers", default="1,2")
    ap.add_argument("--window", default="20 us", help="measure.duration of each point")
    a = ap.parse_args()
    sc = nudma.scenario(SCENARIO, set={"measure.warmup": "5 us", "measure.duration": a.window})
    g = grid(a.points)
    n = math.prod(len(v) for v in g.values())
    print(f"{n} points of {SCENARIO.name}, window {a.window}\n")
    print("| backend | workers | points | seconds | points/s |")
    print("|---|---:|---:|---:|---:|")
    first = None
    for backend in a.backends.split(","):
        for w in [int(x) for x in a.workers.split(",")]:
            secs, df = run(backend, w, sc, g)
            if first is None:
                first = df
            else:
                pd.testing.assert_frame_equal(df, first)
            print(f"| {backend} | {w} | {n} | {secs:.1f} | {n / secs:.0f} |", flush=True)


if __name__ == "__main__":
    main()
