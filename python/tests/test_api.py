"""Each call of the Python API against the CLI's output for the same input, and bad
input as `nudma.NudmaError` with the CLI's located message."""

import json
import subprocess

import pandas as pd
import pyarrow as pa
import pytest

import nudma
from conftest import ROOT, cli_json, nudma_bin

GPU = str(ROOT / "examples" / "borrowed_gpu.toml")
SHORT = {"measure.duration": "20 us", "measure.warmup": "5 us"}


def set_args(sets: dict) -> list:
    out = []
    for k, v in sets.items():
        vals = v if isinstance(v, list) else [v]
        out += ["--set", f"{k}=" + ",".join(str(x).lower() if isinstance(x, bool) else str(x) for x in vals)]
    return out


def test_check_and_topology_are_the_clis():
    sc = nudma.scenario("smartio_chassis_b2b")
    assert sc.source == "builtin:smartio_chassis_b2b.toml"
    assert not sc.is_experiment
    assert sc.check().startswith("smartio_chassis_b2b: ok — 2 host(s)")
    assert sc.topology() == cli_json("topo", "show", "smartio_chassis_b2b")


def test_path_is_the_clis_and_set_changes_the_hardware():
    sc = nudma.scenario("smartio_chassis_b2b")
    p = sc.path("lender.nvme", "borrower.ram", access="write", length=256)
    assert p == cli_json(
        "topo", "path", "smartio_chassis_b2b", "--from", "lender.nvme", "--to", "borrower.ram",
        "--access", "write", "--len", "256",
    )
    assert p["access"] == "write" and p["len"] == 256 and p["hops"] >= 1
    # A one-lane cable: the same route, a stream bound by the cable instead of the NVMe's
    # media reads (2.4 GB/s, below its x4 link's 3.6).
    narrow = nudma.scenario("smartio_chassis_b2b", set={"cable.0.link.width": 1})
    q = narrow.path("lender.nvme", "borrower.ram", access="write", length=256)
    assert q["hops"] == p["hops"]
    assert p["stream"]["bottleneck"].startswith("the device's media read rate")
    assert q["stream"]["bottleneck"].startswith("cable borrower.ntb-lender.ntb")
    assert q["stream"]["gbyte_s"] < p["stream"]["gbyte_s"]


def test_run_rows_are_the_clis():
    grid = {"workload.to_borrower.outstanding": [1, 4], "host.borrower.iommu": [True, False]}
    df = nudma.run(GPU, set={**SHORT, **grid})
    cli = cli_json("run", GPU, *set_args({**SHORT, **grid}))
    pd.testing.assert_frame_equal(df, nudma.frame(cli["results"]))
    assert len(df) == 2 * 2 * 2, "two workloads at four points"
    assert list(df.columns[:2]) == ["experiment", "config"]
    assert {"workload", "workload.to_borrower.outstanding", "throughput_gbyte_s", "latency_ns_p50"} <= set(df.columns)
    # More reads under way: more bandwidth for the write stream.
    w = df[(df.workload == "to_borrower") & df["host.borrower.iommu"]]
    assert w.throughput_gbyte_s.iloc[1] > w.throughput_gbyte_s.iloc[0]
    table = nudma.run(GPU, set=SHORT, arrow=True)
    assert isinstance(table, pa.Table) and table.num_rows == 2


def test_scenario_sets_are_the_first_set_flags():
    sc = nudma.scenario(GPU, set=SHORT)
    df = nudma.run(sc, set={"workload.from_borrower.outstanding": [2, 8]})
    cli = cli_json("run", GPU, *set_args({**SHORT, "workload.from_borrower.outstanding": [2, 8]}))
    pd.testing.assert_frame_equal(df, nudma.frame(cli["results"]))


def test_reproduce_rows_carry_published_values():
    df = nudma.reproduce("smartio.sq_placement")
    cli = cli_json("reproduce", "smartio.sq_placement")
    pd.testing.assert_frame_equal(df, nudma.frame(cli["results"]))
    assert list(df.config) == ["borrower_ram", "lender_ram", "gpu"]
    hops = df.set_index("config").published_value.map(lambda p: p["read_hops"])
    assert hops.to_dict() == {"borrower_ram": 4, "lender_ram": 3, "gpu": 1}
    assert set(df.published_basis.map(lambda b: b["read_hops"])) == {"prediction"}
    assert list(df.read_hops) == [4, 3, 1]
    # Each metric's unit, as the CLI's JSON states it: a latency has one, a count none.
    assert df.attrs["units"] == cli["units"] == {"smartio.sq_placement": {"median_us": "µs"}}
    t = nudma.reproduce("smartio.sq_placement", arrow=True)
    assert t.num_rows == 3 and "published_value" in t.column_names
    assert json.loads(t.schema.metadata[b"units"]) == cli["units"]


def test_an_experiment_file_runs_like_the_cli():
    path = str(ROOT / "scenarios" / "experiments" / "smartio.sq_placement.toml")
    assert nudma.scenario(path).is_experiment
    df = nudma.run(path)
    pd.testing.assert_frame_equal(df, nudma.frame(cli_json("run", path)["results"]))
    assert "published_value" in df.columns
    # A --set changes the hardware: no published values, as the CLI.
    swept = nudma.run(path, set={"host.borrower.iommu": False})
    assert "published_value" not in swept.columns


def test_inspect_is_the_clis():
    xml = str(ROOT / "fixtures" / "hwloc" / "xml" / "32em64t-2n8c2t-pci-normalio.xml")
    audit = nudma.inspect(hwloc=xml)
    assert audit == cli_json("inspect", "--hwloc", xml)
    assert audit["numa_nodes"] == 2
    assert nudma.inspect()["numa_nodes"] >= 1, "this machine"


def test_calibrate_measures_this_machine():
    c = nudma.calibrate(size_bytes=1 << 20, iterations=1, threads=1)
    n = len(c["nodes"])
    assert n >= 1
    assert len(c["latency_ns"]) == n and all(len(r) == n for r in c["latency_ns"])
    assert all(x > 0 for r in c["latency_ns"] for x in r)


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: nudma.scenario("no_such_scenario"), ["no_such_scenario"]),
        (lambda: nudma.run(GPU, set={"workload.nope.outstanding": 2}), ["nope", "to_borrower"]),
        (lambda: nudma.run(GPU, set={"workload.to_borrower.outstanding": "many"}), ["outstanding"]),
        (lambda: nudma.scenario(GPU).path("borrower.nothing", "borrower.ram"), ["nothing"]),
        (lambda: nudma.scenario(GPU).path("borrower.cpu0", "borrower.ram", access="poke"), ["poke"]),
        (lambda: nudma.scenario(GPU).path("borrower.cpu0", "borrower.ram", length=8192), ["8192"]),
        (lambda: nudma.scenario(GPU, set={"host.borrower.iommu": [True, False]}), ["one value"]),
        (lambda: nudma.sweep(GPU, {"workload.to_borrower.op": ["a,b"]}), ["comma"]),
        (lambda: nudma.sweep(GPU, {"measure.duration": ["1 us"]}, backend="mpi"), ["mpi"]),
        (lambda: nudma.inspect(hwloc="/nonexistent/x.xml"), ["/nonexistent/x.xml"]),
    ],
)
def test_bad_input_is_a_nudma_error_with_its_message(call, words):
    with pytest.raises(nudma.NudmaError) as e:
        call()
    for w in words:
        assert w in str(e.value)


def test_a_scenario_error_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.toml"
    text = (ROOT / "examples" / "borrowed_gpu.toml").read_text()
    text = text.replace('include = ["platforms/smartio.toml", "platforms/devices.toml"]', "")
    text = text.replace("outstanding = 4\n", "outstanding = -4\n", 1)
    bad.write_text(text)
    with pytest.raises(nudma.NudmaError) as e:
        nudma.run(str(bad))
    assert str(bad) in str(e.value)
    cli = subprocess.run([str(nudma_bin()), "run", str(bad)], capture_output=True, text=True)
    assert cli.returncode == 2
    assert cli.stderr.strip() == f"error: {e.value}"


def test_compare_is_the_clis():
    sets = {"workload.rx.cpu_node": [0, 1], "workload.rx.mem_node": [0, 1]}
    c = nudma.compare("contention/tcp_rx", set=sets)
    assert c == cli_json("compare", "contention/tcp_rx", *set_args(sets))
    assert [k["key"] for k in c["differing_keys"]] == ["workload.rx.cpu_node", "workload.rx.mem_node"]
    rx = next(m for m in c["metrics"] if m["workload"] == "rx" and m["metric"] == "throughput_gbit_s")
    assert rx["b"] < rx["a"] and rx["change"] == pytest.approx(rx["b"] / rx["a"] - 1)
    with pytest.raises(nudma.NudmaError, match="nothing to compare"):
        nudma.compare("contention/tcp_rx")


def test_advise_is_the_clis():
    a = nudma.advise("contention/tcp_rx", fix=["workload.stream"])
    assert a == cli_json("advise", "contention/tcp_rx", "--fix", "workload.stream")
    top = a["recommendations"][0]
    assert top["changes"] == {"workload.rx.cpu_node": "0", "workload.rx.mem_node": "0"}
    assert top["gain"] > 1.5
    with pytest.raises(nudma.NudmaError, match="objective `fastest`"):
        nudma.advise("contention/tcp_rx", objective="fastest")
