"""What the tests share: the repository, the `nudma` binary the CLI tests compare with,
and one Ray and one Dask local cluster for the whole session (Ray starts slowly)."""

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def nudma_bin() -> Path:
    """The binary built by `cargo build --release` (or $NUDMA_BIN)."""
    p = Path(os.environ.get("NUDMA_BIN", ROOT / "target" / "release" / "nudma"))
    assert p.exists(), f"{p} missing: build it with `cargo build --release -p nudma`"
    return p


def cli_json(*args: str) -> dict:
    """`nudma ARGS… --format json`, parsed; the command must succeed."""
    out = subprocess.run(
        [str(nudma_bin()), *args, "--format", "json"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture(scope="session")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="session")
def dask_client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()
