//! The packet-granular network stack on the IOctopus testbed (REFERENCE.md §1).

use fabric::{builtin, Fabric, Topology};
use host::net::{pktgen, stream, NetHost};
use sim::Time;

fn topo() -> Topology {
    let s = builtin::load_builtin("ioctopus_r730").unwrap().unwrap();
    Fabric::from_scenario(s).unwrap().topo
}

fn server(t: &Topology, pf: usize) -> NetHost {
    NetHost::new(t, t.host_by_name("server").unwrap(), "nic", pf, 0, 0).unwrap()
}

fn client(t: &Topology) -> NetHost {
    NetHost::new(t, t.host_by_name("client").unwrap(), "nic", 0, 0, 0).unwrap()
}

fn spec(msg: u64) -> stream::StreamSpec {
    stream::StreamSpec {
        msg_bytes: msg,
        mtu: 1500,
        warmup: Time::from_us(2000),
        window: Time::from_us(5000),
    }
}

#[test]
fn print_numbers() {
    let t = topo();
    for pf in [0, 1] {
        for msg in [64u64, 1500, 65536] {
            let (mut c, mut s) = (client(&t), server(&t, pf));
            let r = stream::run(&mut c, &mut s, spec(msg)).unwrap();
            eprintln!(
                "rx pf{pf} msg {msg}: {:.2} Gb/s mem {:.2} util {:.2}/{:.2} ooo {} ev {}",
                r.throughput_gbps,
                r.receiver_mem_gbps,
                r.receiver_util,
                r.sender_util,
                r.out_of_order,
                r.events
            );
            let (mut c, mut s) = (client(&t), server(&t, pf));
            let r = stream::run(&mut s, &mut c, spec(msg)).unwrap();
            eprintln!(
                "tx pf{pf} msg {msg}: {:.2} Gb/s mem {:.2} util {:.2}/{:.2}",
                r.throughput_gbps, r.sender_mem_gbps, r.sender_util, r.receiver_util
            );
        }
        for pkt in [64u64, 1500] {
            let mut s = server(&t, pf);
            let r = pktgen::run(
                &mut s,
                pktgen::PktgenSpec {
                    pkt_bytes: pkt,
                    warmup: Time::from_us(500),
                    window: Time::from_us(2000),
                },
            )
            .unwrap();
            eprintln!(
                "pktgen pf{pf} {pkt}: {:.3} Mpps {:.2} Gb/s mem {:.2} miss/pkt {:.2}",
                r.mpps, r.throughput_gbps, r.mem_gbps, r.cqe_misses_per_packet
            );
        }
    }
}
