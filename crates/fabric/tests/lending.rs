//! What the fabric knows of Device Lending: `[[lend]]` and `[[borrow]]` declarations,
//! checked with located errors and kept as plain data in the topology; and an MSI write
//! that arrives through an NTB window, which becomes an interrupt of the far host.

use fabric::builtin::BuiltinResolver;
use fabric::scenario::{load, Scenario, Source};
use fabric::{Endpoint, Fabric, Msi, Requester, ScenarioError, Target, MSI_WINDOW};

const BASE: &str = r#"include = ["platforms/smartio.toml", "platforms/devices.toml"]

[scenario]
name = "t"

[[host]]
name = "lender"
platform = "smartio_host"
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"
[[host.device]]
name = "gpu"
device_model = "k420"
parent = "rc0"

[[host]]
name = "borrower"
platform = "smartio_host"
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"

[[cable]]
ends = ["lender.ntb", "borrower.ntb"]
link = { gen = 3, width = 8 }
"#;

fn try_load(extra: &str) -> Result<Scenario, ScenarioError> {
    load(
        Source {
            name: "my.toml".into(),
            text: format!("{BASE}{extra}"),
        },
        &BuiltinResolver,
    )
}

fn err(extra: &str) -> ScenarioError {
    try_load(extra).expect_err("must be refused")
}

/// The 1-based line of the first occurrence of `needle` after the base text.
fn line_of(extra: &str, needle: &str) -> usize {
    BASE.lines().count() + extra[..extra.find(needle).unwrap()].lines().count() + 1
}

const LEND: &str = "[[lend]]\nhost = \"lender\"\ndevice = \"gpu\"\n";

#[test]
fn declarations_are_kept_as_plain_data() {
    let extra = format!(
        "{LEND}[[borrow]]\nhost = \"borrower\"\ndevice = \"lender.gpu\"\nexclusive = true\nname = \"gpu0\"\n"
    );
    let s = try_load(&extra).unwrap();
    let t = &s.topology;
    let f = Fabric::from_scenario(s.clone()).unwrap();
    let Endpoint::Node(gpu) = f.resolve("lender.gpu").unwrap() else {
        panic!()
    };
    assert_eq!(t.lends.len(), 1);
    assert_eq!(t.lends[0].function, gpu);
    assert_eq!(t.lends[0].host, t.host_by_name("lender").unwrap());
    assert_eq!(t.borrows[0].name, "gpu0");
    assert_eq!(t.borrows[0].host, t.host_by_name("borrower").unwrap());
    assert_eq!(t.borrows[0].function, gpu);
    assert!(t.borrows[0].exclusive);
    assert!(try_load("").unwrap().topology.lends.is_empty());
}

#[test]
fn an_unknown_device_is_refused_where_it_is_written() {
    let extra = "[[lend]]\nhost = \"lender\"\ndevice = \"nope\"\n";
    let e = err(extra);
    assert_eq!(e.key.as_deref(), Some("lend[0].device"));
    assert_eq!(e.line, line_of(extra, "device = \"nope\""));
    assert!(
        e.message
            .contains("host `lender` has no device function `nope` (devices: gpu)"),
        "{e}"
    );
    let e = err("[[lend]]\nhost = \"nobody\"\ndevice = \"gpu\"\n");
    assert_eq!(e.key.as_deref(), Some("lend[0].host"));
    assert!(e.message.contains("unknown host `nobody`"), "{e}");
    let extra = format!(
        "{LEND}[[borrow]]\nhost = \"borrower\"\ndevice = \"lender.gpu.pf3\"\nname = \"x\"\n"
    );
    assert!(err(&extra).message.contains("no device function `gpu.pf3`"));
}

#[test]
fn a_borrow_without_a_lend_is_refused() {
    let extra = "[[borrow]]\nhost = \"borrower\"\ndevice = \"lender.gpu\"\nname = \"g\"\n";
    let e = err(extra);
    assert_eq!(e.key.as_deref(), Some("borrow[0].device"));
    assert_eq!(e.line, line_of(extra, "device = \"lender.gpu\""));
    assert!(
        e.message
            .contains("`lender.gpu` is borrowed but no [[lend]] lends it"),
        "{e}"
    );
}

#[test]
fn duplicate_names_lends_and_own_devices_are_refused() {
    let b = "[[borrow]]\nhost = \"borrower\"\ndevice = \"lender.gpu\"\nname = \"g\"\n";
    let extra = format!("{LEND}{b}{b}");
    let e = err(&extra);
    assert_eq!(e.key.as_deref(), Some("borrow[1].name"));
    assert!(
        e.message
            .contains("duplicate borrow name `g` (also borrow[0])"),
        "{e}"
    );
    assert!(e.line > line_of(&extra, "name = \"g\""));
    let e = err(&format!("{LEND}{LEND}"));
    assert_eq!(e.key.as_deref(), Some("lend[1].device"));
    assert!(e.message.contains("already lent by lend[0]"), "{e}");
    let e = err(&format!(
        "{LEND}[[borrow]]\nhost = \"lender\"\ndevice = \"lender.gpu\"\nname = \"g\"\n"
    ));
    assert!(e.message.contains("cannot borrow its own device"), "{e}");
    let e = err(
        "[[borrow]]\nhost = \"borrower\"\ndevice = \"lender.gpu\"\nname = \"g\"\nshared = true\n",
    );
    assert!(
        e.to_string().contains("shared"),
        "unknown keys are refused: {e}"
    );
}

#[test]
fn an_msi_write_through_an_ntb_window_is_an_interrupt_of_the_far_host() {
    for far_iommu in [false, true] {
        let mut s = try_load("").unwrap();
        let b = s.topology.host_by_name("borrower").unwrap();
        s.topology.hosts[b.index()].iommu = far_iommu;
        let mut f = Fabric::from_scenario(s).unwrap();
        let l = f.topo.host_by_name("lender").unwrap();
        let ntb = f.topo.ntb_by_name(l, "ntb").unwrap();
        let Endpoint::Node(gpu) = f.resolve("lender.gpu").unwrap() else {
            panic!()
        };
        let msi = MSI_WINDOW.start | 7 << 12;
        let w = f.ntb_map_window(ntb, b, msi, 4).unwrap();
        f.ntb_add_requester(ntb, f.topo.node(gpu).rid).unwrap();
        let mut p = fabric::Path::default();
        let t = f
            .route(
                &fabric::Request {
                    requester: Requester::Function(gpu),
                    addr: w.local_addr,
                    len: 4,
                    access: fabric::Access::Write,
                },
                &mut p,
            )
            .unwrap();
        assert_eq!(
            t,
            Target::Interrupt {
                host: b,
                apic: 7,
                addr: msi
            },
            "no DMA remapping of an interrupt (far IOMMU {far_iommu})"
        );
        assert_eq!(p.ntb_crossings(), 1);
        f.store(
            Requester::Function(gpu),
            w.local_addr,
            &0x99u32.to_le_bytes(),
        )
        .unwrap();
        assert_eq!(
            f.interrupts(),
            &[Msi {
                host: b,
                apic: 7,
                data: 0x99
            }]
        );
        // A read of the interrupt range through the window is no interrupt.
        let mut x = [0u8; 4];
        let _ = f.load(Requester::Function(gpu), w.local_addr, &mut x);
        assert_eq!(f.interrupts().len(), 1);
    }
}
