//! The `nvme_share` workload's `sq`: where every client's submission queue is decides
//! how far the controller's SQ-entry fetch goes, which a latency-bound client feels; no
//! `sq` is the SQ's hints (the catalog's `smartio.nvme_sharing`); a placement it does not
//! know is refused where it was given.

use fabric::scenario::Source;
use serde_json::{Map, Value};
use studies::run::{self, overrides::Override};

type Fields = Map<String, Value>;

/// `clients` clients of h00's NVMe on the 60-host cluster, the catalog's window, the
/// lender's IOMMU as given, each SQ at `sq` (its hints without).
fn sharing(lender_iommu: bool, clients: u32, sq: Option<&str>) -> Result<Fields, String> {
    let base = run::source("smartio_cluster60").unwrap();
    let sq = sq.map_or(String::new(), |sq| format!("sq = \"{sq}\"\n"));
    let src = Source {
        name: "share.toml".into(),
        text: format!(
            "{}\n[[workload]]\nname = \"share\"\nkind = \"nvme_share\"\n\
             device = \"h00.nvme\"\nclients = {clients}\n{sq}\
             [measure]\nwarmup = \"100 us\"\nduration = \"2 ms\"\n",
            base.text
        ),
    };
    let iommu = [Override::parse(&format!("host.h00.iommu={lender_iommu}")).unwrap()];
    let p = run::run_point(&src, &run::sweep(&iommu)[0], 1).map_err(|e| e.0)?;
    Ok(p.rows[0].metrics.clone())
}

fn median_us(f: &Fields) -> f64 {
    f["median_us"].as_f64().unwrap()
}

#[test]
fn one_client_waits_longer_the_further_its_sq_is_from_the_controller() {
    let at = |iommu, sq| sharing(iommu, 1, Some(sq)).unwrap();
    let (client, lender, gpu) = (
        at(false, "borrower_ram"),
        at(false, "lender_ram"),
        at(false, "h00.gpu.bar1"),
    );
    // The fetch's round trip: through the cluster switches from the client's RAM, up to
    // the lender's root from its RAM, one chassis switch from the GPU beside the NVMe.
    assert!(
        median_us(&client) > median_us(&lender),
        "{client:?} {lender:?}"
    );
    assert!(median_us(&lender) > median_us(&gpu), "{lender:?} {gpu:?}");
    for f in [&client, &lender, &gpu] {
        assert_eq!(f["clients_ok"], Value::from(1));
        // At QD 1 on an idle fabric nothing varies: the p99 is the median.
        assert_eq!(f["p99_us"], f["median_us"]);
    }
    // The lender's IOMMU sends every TLP of its devices up to its root (docs/hardware.md §1),
    // the GPU's memory included: the peer-to-peer fetch loses its short cut and the SQ
    // in the lender's RAM, already at the root, is then the nearest.
    let (lender_on, gpu_on) = (at(true, "lender_ram"), at(true, "h00.gpu.bar1"));
    assert!(
        median_us(&gpu_on) > median_us(&lender_on),
        "{gpu_on:?} {lender_on:?}"
    );
    assert!(median_us(&gpu_on) > median_us(&gpu), "{gpu_on:?} {gpu:?}");
}

#[test]
fn without_sq_every_client_places_it_by_its_hints() {
    for clients in [1, 8] {
        let hints = sharing(false, clients, None).unwrap();
        assert_eq!(hints, sharing(false, clients, Some("lender_ram")).unwrap());
        assert_ne!(
            hints,
            sharing(false, clients, Some("borrower_ram")).unwrap()
        );
    }
}

#[test]
fn many_clients_with_their_sqs_in_the_gpu_all_complete_their_reads() {
    let f = sharing(false, 8, Some("h00.gpu.bar1")).unwrap();
    assert_eq!(f["clients_ok"], Value::from(8));
    assert!(f["error"].is_null(), "{f:?}");
    // Every client is served: none starves behind another's queue.
    assert!(
        f["min_client_kiops"].as_f64().unwrap() > 0.9 * f["total_kiops"].as_f64().unwrap() / 8.0
    );
}

#[test]
fn an_unknown_placement_is_refused_where_it_is_written() {
    let e = sharing(false, 1, Some("gpu")).unwrap_err();
    assert!(
        e.starts_with("share.toml (with --set):") && e.contains("(key `workload.share.sq`)"),
        "{e}"
    );
    assert!(
        e.contains("sq = `gpu`") && e.contains("borrower_ram"),
        "{e}"
    );
    let e = sharing(false, 1, Some("h00.gpu.bar7")).unwrap_err();
    assert!(
        e.starts_with("share.toml (with --set):")
            && e.contains("workload `share`")
            && e.contains("no BAR7"),
        "{e}"
    );
}
