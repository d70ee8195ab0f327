"""Sweeps: the same rows, in the same order, on local threads, a two-worker Ray cluster
and a Dask LocalCluster, and the same as the CLI's `--set` sweep."""

import pandas as pd

import nudma
from conftest import ROOT, cli_json

GPU = str(ROOT / "examples" / "borrowed_gpu.toml")
BASE = {"measure.duration": "10 us", "measure.warmup": "2 us"}
# 5 × 4 × 2 × 2 = 80 points, 160 rows: CI-sized, yet many points per task.
GRID = {
    "workload.to_borrower.outstanding": [1, 2, 4, 8, 16],
    "workload.to_borrower.transfer_bytes": ["4 KiB", "16 KiB", "64 KiB", "256 KiB"],
    "workload.from_borrower.op": ["read", "write"],
    "host.borrower.iommu": [True, False],
}


def cli_sweep() -> pd.DataFrame:
    args = []
    for k, v in {**BASE, **GRID}.items():
        vals = v if isinstance(v, list) else [v]
        args += ["--set", f"{k}=" + ",".join(str(x).lower() if isinstance(x, bool) else str(x) for x in vals)]
    return nudma.frame(cli_json("run", GPU, "--jobs", "2", *args)["results"])


def test_local_sweep_is_the_cli_sweep():
    sc = nudma.scenario(GPU, set=BASE)
    df = nudma.sweep(sc, GRID, backend="local", workers=2, points_per_task=7, progress=False)
    assert len(df) == 80 * 2
    pd.testing.assert_frame_equal(df, cli_sweep())
    # The first key varies slowest, as on the command line.
    assert list(df["workload.to_borrower.outstanding"][:32:16]) == [1, 1]
    assert df["workload.to_borrower.outstanding"].iloc[32] == 2


def test_ray_and_dask_give_the_local_rows(ray_cluster, dask_client):
    sc = nudma.scenario(GPU, set=BASE)
    local = nudma.sweep(sc, GRID, backend="local", progress=False)
    on_ray = nudma.sweep(sc, GRID, backend="ray", points_per_task=9, progress=False)
    on_dask = nudma.sweep(sc, GRID, backend="dask", points_per_task=11, progress=False)
    pd.testing.assert_frame_equal(on_ray, local)
    pd.testing.assert_frame_equal(on_dask, local)
    t = nudma.sweep(sc, GRID, backend="dask", arrow=True, progress=False)
    assert t.num_rows == len(local)


def test_a_workers_error_reaches_the_caller(ray_cluster, dask_client):
    bad = {"workload.to_borrower.outstanding": [1, 0]}
    for backend in ["local", "ray", "dask"]:
        try:
            nudma.sweep(GPU, bad, backend=backend, progress=False)
        except nudma.NudmaError as e:
            assert "outstanding" in str(e), backend
        else:
            raise AssertionError(f"{backend}: outstanding = 0 was accepted")
