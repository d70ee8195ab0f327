//! A small lending cluster written as scenario text (the built-in platform and device
//! includes), and helpers to reach into it.
#![allow(dead_code)]

use fabric::builtin::{BuiltinResolver, FILES};
use fabric::scenario::{load, Source};
use fabric::{Endpoint, Fabric, HostId, NtbId, Owner, PcieNodeId};
use host::PhysAddr;
use sim::timed::TimedFabric;

/// `lender` (a K40c and a P4800X under a motherboard switch beside its PXH830),
/// `borrower` and `other`, each with a PXH830, cabled lender–borrower and lender–other.
/// `lender_host` adds keys to the lender's `[[host]]` (`mmio64_base = …`).
pub fn text(lender_iommu: bool, borrower_iommu: bool, lender_host: &str, extra: &str) -> String {
    format!(
        r#"include = ["platforms/smartio.toml", "platforms/devices.toml"]

[scenario]
name = "lend"

[[host]]
name = "lender"
platform = "smartio_host"
iommu = {lender_iommu}
{lender_host}
[[host.switch]]
name = "sw"
chip = "mobo_switch"
parent = "rc0"
link = {{ gen = 3, width = 16 }}
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "sw"
[[host.device]]
name = "gpu"
device_model = "k40c"
parent = "sw"
[[host.device]]
name = "nvme"
device_model = "p4800x"
parent = "sw"

[[host]]
name = "borrower"
platform = "smartio_host"
iommu = {borrower_iommu}
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"

[[host]]
name = "other"
platform = "smartio_host"
iommu = {borrower_iommu}
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"

[[cable]]
ends = ["lender.ntb", "borrower.ntb"]
link = {{ gen = 3, width = 8 }}
[[cable]]
ends = ["lender.ntb", "other.ntb"]
link = {{ gen = 3, width = 8 }}
{extra}"#
    )
}

/// The text of built-in scenario `name`, to edit before loading.
pub fn builtin_text(name: &str) -> String {
    FILES
        .iter()
        .find(|(p, _)| *p == format!("{name}.toml"))
        .unwrap_or_else(|| panic!("no built-in {name}"))
        .1
        .to_string()
}

/// A scenario text's timed fabric (seed 1).
pub fn timed(text: &str) -> TimedFabric {
    TimedFabric::new(load_text(text), 1).unwrap()
}

pub fn load_text(text: &str) -> Fabric {
    let s = load(
        Source {
            name: "lend.toml".into(),
            text: text.into(),
        },
        &BuiltinResolver,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    Fabric::from_scenario(s).unwrap()
}

pub fn fabric(lender_iommu: bool, borrower_iommu: bool) -> Fabric {
    load_text(&text(lender_iommu, borrower_iommu, "", ""))
}

pub fn host(f: &Fabric, name: &str) -> HostId {
    f.topo.host_by_name(name).unwrap()
}

pub fn function(f: &Fabric, name: &str) -> PcieNodeId {
    match f.resolve(name).unwrap() {
        Endpoint::Node(n) => n,
        e => panic!("{name}: {e:?}"),
    }
}

pub fn ntb(f: &Fabric, host_name: &str) -> NtbId {
    let h = host(f, host_name);
    f.topo.ntb_by_name(h, "ntb").unwrap()
}

pub fn ram(f: &Fabric, name: &str, offset: u64) -> PhysAddr {
    let (host, addr) = f.resolve_address(name, offset).unwrap();
    PhysAddr { host, addr }
}

pub fn peek(f: &Fabric, at: PhysAddr, len: usize) -> Vec<u8> {
    let h = f.topo.host(at.host);
    let region = h.decode(at.addr).unwrap();
    let Owner::Ram { node, node_offset } = region.owner else {
        panic!("not RAM")
    };
    let mut buf = vec![0; len];
    f.peek_ram(
        at.host,
        node,
        node_offset + (at.addr - region.start),
        &mut buf,
    );
    buf
}

pub fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}
