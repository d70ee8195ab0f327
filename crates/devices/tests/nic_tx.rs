//! The NIC's read engine (`devices::nic::tx`): reads go out in MRRS requests and no more
//! are in flight than the PF has tags, so a read's throughput is ≈ min(link, bytes in
//! flight / round trip) (docs/hardware.md §5).

use std::collections::BTreeMap;

use devices::nic::{tlp_wire_bytes, HostBuf, Nic, NicParams, ReadTags, SendRequests};
use fabric::{builtin, Fabric};
use sim::memsys::{MemSys, MemSysParams, Snoop};
use sim::Time;

fn connectx4() -> Nic {
    let s = builtin::load_builtin("ioctopus_r730").unwrap().unwrap();
    let topo = Fabric::from_scenario(s).unwrap().topo;
    let server = topo.host_by_name("server").unwrap();
    Nic::from_topology(&topo, topo.device_by_name(server, "nic").unwrap()).unwrap()
}

fn memsys() -> MemSys {
    MemSys::new(MemSysParams {
        sockets: 2,
        llc_bytes: 35 << 20,
        llc_ways: 20,
        ddio_ways: 2,
        llc_latency: Time::from_ns(20),
        dram_latency: Time::from_ns(90),
        interconnect_latency: Time::from_ns(25),
        dram_gbps: 60.0,
        interconnect_gbps: 38.4,
        line_fill_buffers: 10,
        snoop: Snoop::HomeDirectory,
    })
}

/// When a 64 KiB read of an uncached buffer on PF 0's own node is in the NIC, from 0.
fn read_64k(tags: u32) -> f64 {
    let mut nic = connectx4();
    let pf = &mut nic.pfs[0];
    assert_eq!(pf.mrrs, 4096, "the connectx4 model's read request size");
    pf.read_tags = ReadTags::new(tags);
    pf.dma_read(Time::ZERO, &mut memsys(), 0, 7, 65536)
        .as_ns_f64()
}

#[test]
fn reads_in_flight_are_bounded_by_the_tags() {
    // One request's round trip at zero load.
    let mut nic = connectx4();
    let rtt = nic.pfs[0]
        .dma_read(Time::ZERO, &mut memsys(), 0, 7, 4096)
        .as_ns_f64();
    // One tag: the 16 requests of 64 KiB go one after another, a round trip each.
    let one = read_64k(1);
    assert!(
        (one - 16.0 * rtt).abs() < 0.01 * one,
        "one tag: {one:.0} ns, 16 round trips are {:.0} ns",
        16.0 * rtt
    );
    // The model's 256 leave the link as the bound: 64 KiB of the root's completions
    // (256 B on the R730, 20 B of header and framing each) at the x8 Gen3 link's
    // ≈ 7.856 GB/s.
    let many = read_64k(256);
    let rcb = connectx4().pfs[0].rcb as f64;
    assert_eq!(rcb, 256.0, "the R730's read completions");
    let link_ns = 65536.0 / rcb * (rcb + 20.0) / 7.855;
    assert!(
        many >= link_ns && many < link_ns + 2.0 * rtt,
        "256 tags: {many:.0} ns; link alone {link_ns:.0} ns, round trip {rtt:.0} ns"
    );
}

#[test]
fn a_send_reads_its_descriptor_then_its_payload_through_the_payloads_pf() {
    let mut nic = connectx4();
    let latency = nic.params.latency;
    let desc = HostBuf {
        node: 0,
        buf: 1,
        bytes: 64,
    };
    let frag = |node, buf| HostBuf {
        node,
        buf,
        bytes: 1500,
    };
    let mut ms = memsys();
    let one = nic.fetch_send(Time::ZERO, &mut ms, 0, desc, &[(0, frag(0, 2))]);
    // The descriptor alone, then the payload after it: never sooner than both in a row.
    let mut solo = connectx4();
    let mut ms2 = memsys();
    let d = solo.pfs[0].dma_read(latency, &mut ms2, 0, 1, 64);
    let p = solo.pfs[0].dma_read(d, &mut ms2, 0, 2, 1500);
    assert_eq!(one, p);
    // A fragment on node 1 read through PF 1 uses PF 1's link, not PF 0's.
    let before = (nic.pfs[0].down.bytes, nic.pfs[1].down.bytes);
    nic.fetch_send(Time::ZERO, &mut ms, 0, desc, &[(1, frag(1, 3))]);
    let rcb = nic.pfs[1].rcb;
    assert_eq!(
        nic.pfs[1].down.bytes - before.1,
        tlp_wire_bytes(1500, rcb, true),
        "the payload's completions"
    );
    assert_eq!(
        nic.pfs[0].down.bytes - before.0,
        tlp_wire_bytes(64, nic.pfs[0].rcb, true),
        "the descriptor's one completion"
    );
}

#[test]
fn a_nic_model_without_its_read_engine_is_refused_by_name() {
    let mut t: BTreeMap<String, f64> = [
        ("nic_line_gbps", 12.5),
        ("nic_latency_ns", 500.0),
        ("nic_wire_ns", 10.0),
        ("nic_coalesce_ns", 8000.0),
        ("nic_coalesce_frames", 128.0),
        ("nic_rx_buffer_bytes", 262016.0),
        ("dma_mrrs_bytes", 4096.0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let e = NicParams::from_timing("nic", &t).unwrap_err();
    assert!(e.contains("`dma_max_reads`"), "{e}");
    t.insert("dma_max_reads".into(), 256.0);
    assert_eq!(NicParams::from_timing("nic", &t).unwrap().max_reads, 256);
}

#[test]
fn a_send_posted_by_pio_reads_only_its_payload() {
    // myri10ge writes its send requests into the NIC: the NIC reads no descriptor, so the
    // payload's reads start right after its pipeline and its link carries only theirs.
    let desc = HostBuf {
        node: 0,
        buf: 1,
        bytes: 64,
    };
    let payload = HostBuf {
        node: 0,
        buf: 2,
        bytes: 1500,
    };
    let mut pio = connectx4();
    assert_eq!(
        pio.send_requests,
        SendRequests::DescriptorRead,
        "the default"
    );
    pio.send_requests = SendRequests::Pio;
    let latency = pio.params.latency;
    let done = pio.fetch_send(Time::ZERO, &mut memsys(), 0, desc, &[(0, payload)]);
    let mut solo = connectx4();
    let alone = solo.pfs[0].dma_read(latency, &mut memsys(), 0, 2, 1500);
    assert_eq!(done, alone);
    assert_eq!(
        pio.pfs[0].down.bytes,
        tlp_wire_bytes(1500, pio.pfs[0].rcb, true)
    );
    let mut dma = connectx4();
    let with_desc = dma.fetch_send(Time::ZERO, &mut memsys(), 0, desc, &[(0, payload)]);
    assert!(with_desc > done, "the descriptor read comes first");
}
