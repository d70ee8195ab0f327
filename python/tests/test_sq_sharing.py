"""The notebook's sweep, CI-sized: SQ placement × clients (the experiment file's own
sweep) × the lender's IOMMU (a `nudma.sweep` grid) gives the same rows on local threads,
Ray and Dask, the CLI's `nudma run` rows, and at the catalog's placement the rows of
`nudma reproduce smartio.nvme_sharing`."""

import re

import pandas as pd

import nudma
from conftest import ROOT, cli_json

EXAMPLE = ROOT / "examples" / "sq_sharing_cluster.toml"
GRID = {"host.h00.iommu": [False, True]}
METRICS = ["total_kiops", "min_client_kiops", "clients_ok"]


def small_copy(tmp_path) -> str:
    """The example with a smaller sweep: two placements × two client counts."""
    text = EXAMPLE.read_text()
    text, n = re.subn(r"(?m)^sq = \[.*\]$", 'sq = ["lender_ram", "h00.gpu.bar1"]', text)
    text, m = re.subn(r"(?m)^clients = \[.*\]$", "clients = [1, 8]", text)
    assert (n, m) == (1, 1), "the example's [sweep] lines moved"
    p = tmp_path / "sq_sharing_small.toml"
    p.write_text(text)
    return str(p)


def test_backends_agree_with_the_cli_and_the_catalog(tmp_path, ray_cluster, dask_client):
    path = small_copy(tmp_path)
    local = nudma.sweep(path, GRID, backend="local", workers=2, points_per_task=1, progress=False)
    assert len(local) == 2 * 2 * 2, "two grid points × two placements × two client counts"
    on_ray = nudma.sweep(path, GRID, backend="ray", points_per_task=1, progress=False)
    on_dask = nudma.sweep(path, GRID, backend="dask", points_per_task=2, progress=False)
    pd.testing.assert_frame_equal(on_ray, local)
    pd.testing.assert_frame_equal(on_dask, local)
    cli = cli_json("run", path, "--set", "host.h00.iommu=false,true")
    pd.testing.assert_frame_equal(local, nudma.frame(cli["results"]))

    # The lender's IOMMU changes the model's answer (it sends the GPU's peer-to-peer
    # fetches up to the root): one client with its SQ in the GPU is slower with it on.
    one = local[(local.clients == 1) & (local.sq == "h00.gpu.bar1")]
    off = one[~one["host.h00.iommu"]].median_us.item()
    on = one[one["host.h00.iommu"]].median_us.item()
    assert on > off, (on, off)

    # With the lender's IOMMU off (the catalog's hardware) and the SQ by its hints, the
    # catalog's own rows.
    catalog = nudma.reproduce("smartio.nvme_sharing").set_index("clients")
    ours = local[(local.sq == "lender_ram") & ~local["host.h00.iommu"]]
    assert list(ours.clients) == [1, 8]
    for _, row in ours.iterrows():
        for m in METRICS:
            assert row[m] == catalog.loc[row.clients, m], (row.clients, m)


def test_an_unknown_placement_is_a_located_error(tmp_path):
    text = EXAMPLE.read_text().replace('"h00.gpu.bar1"]', '"gpu"]')
    p = tmp_path / "bad.toml"
    p.write_text(text)
    try:
        nudma.run(str(p))
    except nudma.NudmaError as e:
        msg = str(e)
        assert "example.sq_sharing_cluster" in msg and "sq = `gpu`" in msg, msg
    else:
        raise AssertionError("sq = gpu was accepted")
