//! Bad scenarios get a clear error naming the file, line and key; no input panics.

use fabric::builtin::BuiltinResolver;
use fabric::scenario::{load, Source};
use proptest::prelude::*;

const GOOD: &str = r#"include = ["platforms/smartio.toml"]

[scenario]
name = "t"
description = "test"

[[host]]
name = "a"
platform = "smartio_host"
[[host.switch]]
name = "sw"
chip = "pex8733"
parent = "rc0"
link = { gen = 3, width = 16 }
[[host.device]]
name = "nvme"
kind = "nvme"
parent = "sw"
link = { gen = 3, width = 4 }
bars = [{ size = "16 KiB" }]
timing = { bar_gbps = 1.0, bar_latency_ns = 200.0, bar_rcb_bytes = 64 }
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"

[[host]]
name = "b"
platform = "smartio_host"
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"

[[cable]]
ends = ["a.ntb", "b.ntb"]
link = { gen = 3, width = 16 }
"#;

fn try_load(text: &str) -> Result<fabric::scenario::Scenario, String> {
    load(
        Source {
            name: "my.toml".into(),
            text: text.into(),
        },
        &BuiltinResolver,
    )
    .map_err(|e| e.to_string())
}

fn err_of(text: &str) -> String {
    try_load(text).expect_err("should be rejected")
}

#[test]
fn a_fixed_bar_at_the_top_of_the_address_space_is_refused_not_overflowed() {
    for bits in [32, 64] {
        let text = GOOD.replace(
            r#"bars = [{ size = "16 KiB" }]"#,
            &format!(
                r#"bars = [{{ size = "4 KiB", bits = {bits}, address = "0xFFFFFFFFFFFFF000" }}]"#
            ),
        );
        let e = err_of(&text);
        assert!(
            e.contains("fit its width") && e.contains("address"),
            "{bits}: {e}"
        );
    }
}

#[test]
fn the_base_scenario_is_valid() {
    try_load(GOOD).unwrap();
}

#[test]
fn unknown_key_is_located() {
    let e = err_of(&GOOD.replace("kind = \"nvme\"", "kind = \"nvme\"\nspeed = 3"));
    assert!(
        e.starts_with("my.toml:18:1: unknown field `speed`, expected one of "),
        "{e}"
    );
    assert!(e.ends_with(" (key `host[0].device[0].speed`)"), "{e}");
    // In an inline table: the key path goes through it.
    let e = err_of(&GOOD.replace("width = 4 }", "width = 4, lanes = 4 }"));
    assert!(
        e.starts_with(
            "my.toml:19:30: unknown field `lanes`, expected one of `gen`, `width`, `cable`"
        ) && e.ends_with(" (key `host[0].device[0].link.lanes`)"),
        "{e}"
    );
}

#[test]
fn wrong_type_is_located() {
    assert_eq!(
        err_of(&GOOD.replace("width = 4 }", "width = \"four\" }")),
        "my.toml:19:27: invalid type: string \"four\", expected a whole number from 0 to 255 \
         (key `host[0].device[0].link.width`)"
    );
    assert_eq!(
        err_of(&GOOD.replace("parent = \"sw\"", "parent = 5")),
        "my.toml:18:10: invalid type: integer `5`, expected a string (key `host[0].device[0].parent`)"
    );
    // The second host's NTB: arrays of tables are counted per host.
    assert_eq!(
        err_of(
            &GOOD
                .replacen("adapter = \"pxh830\"", "adapter = [\"pxh830\"]", 2)
                .replacen("adapter = [\"pxh830\"]", "adapter = \"pxh830\"", 1)
        ),
        "my.toml:32:11: invalid type: sequence, expected a string (key `host[1].ntb[0].adapter`)"
    );
    // In an array of inline tables.
    assert_eq!(
        err_of(&GOOD.replace(
            "bars = [{ size = \"16 KiB\" }]",
            "bars = [{ size = \"16 KiB\" }, { size = true }]"
        )),
        "my.toml:20:39: invalid type: boolean `true`, expected a size: bytes as an integer, or a \
         string like \"256 MiB\" (key `host[0].device[0].bars[1].size`)"
    );
}

#[test]
fn missing_fields_are_named_at_their_table() {
    assert_eq!(
        err_of(&GOOD.replace("chip = \"pex8733\"\n", "")),
        "my.toml:10:1: missing field `chip` (key `host[0].switch[0].chip`)"
    );
    assert_eq!(
        err_of(&GOOD.replace(
            "link = { gen = 3, width = 16 }\n[[host.device]]",
            "link = { gen = 3 }\n[[host.device]]"
        )),
        "my.toml:14:8: missing field `width` (key `host[0].switch[0].link.width`)"
    );
    assert_eq!(
        err_of(&GOOD.replace("[[cable]]\nends = [\"a.ntb\", \"b.ntb\"]\n", "[[cable]]\n")),
        "my.toml:35:1: missing field `ends` (key `cable[0].ends`)"
    );
}

#[test]
fn sizes_with_decimal_looking_units_are_refused_with_a_hint() {
    assert_eq!(
        err_of(&GOOD.replace("size = \"16 KiB\"", "size = \"16 KB\"")),
        "my.toml:20:18: `16 KB` is ambiguous: write `16 KiB` (16 × 2^10 bytes) or `16000` \
         (16 × 10^3 bytes) (key `host[0].device[0].bars[0].size`)"
    );
    assert_eq!(
        err_of(&GOOD.replace("size = \"16 KiB\"", "size = \"1M\"")),
        "my.toml:20:18: `1M` is ambiguous: write `1 MiB` (2^20 bytes) or `1000000` (10^6 \
         bytes) (key `host[0].device[0].bars[0].size`)"
    );
    // What the hint offers loads.
    try_load(&GOOD.replace("size = \"16 KiB\"", "size = 16384")).unwrap();
}

#[test]
fn malformed_toml_is_located() {
    let e = err_of(&GOOD.replace("[[host.switch]]", "[[host.switch"));
    assert!(e.starts_with("my.toml:10:"), "{e}");
}

#[test]
fn dangling_parent_names_the_key_and_the_choices() {
    assert_eq!(
        err_of(&GOOD.replace("parent = \"sw\"", "parent = \"sw9\"")),
        "my.toml:18:10: `sw9` is not a root complex or switch of host `a` (root complexes and \
         switches: rc0, sw) (key `host[0].device[0].parent`)"
    );
}

#[test]
fn duplicate_names_are_refused() {
    let e = err_of(&GOOD.replace("name = \"nvme\"", "name = \"sw\""));
    assert!(e.contains("duplicate name `sw` in host `a`"), "{e}");
    let e = err_of(&GOOD.replace("name = \"b\"", "name = \"a\""));
    assert!(e.contains("duplicate host name `a`"), "{e}");
}

#[test]
fn parent_cycles_are_found() {
    let text = GOOD.replace(
        "[[host.device]]\nname = \"nvme\"",
        "[[host.switch]]\nname = \"s1\"\nchip = \"pex8733\"\nparent = \"s2\"\nlink = { gen = 3, width = 8 }\n[[host.switch]]\nname = \"s2\"\nchip = \"pex8733\"\nparent = \"s1\"\nlink = { gen = 3, width = 8 }\n[[host.device]]\nname = \"nvme\"",
    );
    let e = err_of(&text);
    assert!(e.contains("cycle"), "{e}");
}

#[test]
fn a_device_cannot_be_a_parent() {
    let text = format!("{GOOD}\n").replace(
        "[[host.ntb]]\nname = \"ntb\"\nadapter = \"pxh830\"\nparent = \"rc0\"\n\n[[host]]\nname = \"b\"",
        "[[host.ntb]]\nname = \"ntb\"\nadapter = \"pxh830\"\nparent = \"nvme\"\n\n[[host]]\nname = \"b\"",
    );
    assert!(err_of(&text).contains("only root complexes and switches have downstream ports"));
}

#[test]
fn impossible_topologies_are_refused() {
    // A two-socket platform with no interconnect link.
    let text = GOOD.replace("include = [\"platforms/smartio.toml\"]\n", "")
        + "\n[platform.smartio_host]\npackages = 2\ncores_per_package = 4\nclock_ghz = 2.0\nllc_bytes = \"8 MiB\"\nllc_ways = 16\nddio_ways = 2\ndram_bytes_per_node = \"1 GiB\"\n";
    let e = err_of(&text);
    assert!(
        e.contains("impossible topology: pkg0 cannot reach pkg1"),
        "{e}"
    );
    // A link's transfer rate is its bandwidth only where its width is known.
    let link = format!(
        "{text}[[platform.smartio_host.interconnect]]\nends = [\"pkg0\", \"pkg1\"]\ngts = 9.6\n"
    );
    let e = err_of(&link);
    assert!(
        e.contains("a generic link's width is unknown, so its gts gives no bandwidth")
            && e.contains("interconnect[0].gts"),
        "{e}"
    );
    let e = err_of(&link.replace("gts = 9.6", "kind = \"qpi\"\ngts = 0.0"));
    assert!(
        e.contains("gts must be a transfer rate in (0, 64] GT/s"),
        "{e}"
    );
    // More lanes than the chip has: named and located as the switch.
    assert_eq!(
        err_of(&GOOD.replace(
            "link = { gen = 3, width = 4 }",
            "link = { gen = 3, width = 32 }",
        )),
        "my.toml:11:8: switch `sw` (pex8733) uses 2 ports and 48 lanes (upstream x16, `nvme` \
         x32); the chip has 18 ports and 32 lanes (key `host[0].switch[0]`)"
    );
    // The second switch of the second host.
    let text = GOOD.replace(
        "[[host]]\nname = \"b\"\nplatform = \"smartio_host\"\n",
        "[[host]]\nname = \"b\"\nplatform = \"smartio_host\"\n[[host.switch]]\nname = \"up\"\nchip = \"pex8733\"\nparent = \"rc0\"\nlink = { gen = 3, width = 8 }\n[[host.switch]]\nname = \"down\"\nchip = \"pex8733\"\nparent = \"up\"\nlink = { gen = 3, width = 16 }\n[[host.device]]\nname = \"gpu\"\nkind = \"other\"\nparent = \"down\"\nlink = { gen = 3, width = 16 }\n[[host.device]]\nname = \"nic\"\nkind = \"nic\"\nparent = \"down\"\nlink = { gen = 3, width = 8 }\n",
    );
    assert_eq!(
        err_of(&text),
        "my.toml:36:8: switch `down` (pex8733) uses 3 ports and 40 lanes (upstream x16, `gpu` \
         x16, `nic` x8); the chip has 18 ports and 32 lanes (key `host[1].switch[1]`)"
    );
    // A cable to an adapter port that is taken, and unknown cable ends.
    let e = err_of(
        &(GOOD.to_string()
            + "[[cable]]\nends = [\"a.ntb\", \"b.ntb\"]\nlink = { gen = 3, width = 8 }\n"),
    );
    assert!(e.contains("already cabled"), "{e}");
    let e = err_of(&GOOD.replace(
        "ends = [\"a.ntb\", \"b.ntb\"]",
        "ends = [\"a.ntb\", \"c.ntb\"]",
    ));
    assert!(e.contains("unknown host `c`"), "{e}");
}

#[test]
fn out_of_range_parameters_are_refused() {
    let e = err_of(&GOOD.replace("width = 4 }", "width = 5 }"));
    assert!(
        e.contains("link width must be 1, 2, 4, 8, 12, 16 or 32, not 5"),
        "{e}"
    );
    let e = err_of(&GOOD.replace("size = \"16 KiB\"", "size = \"12 KiB\""));
    assert!(e.contains("power of two"), "{e}");
    let e = err_of(&GOOD.replace("size = \"16 KiB\"", "size = \"16 furlongs\""));
    assert!(e.contains("unknown size unit `furlongs`"), "{e}");
    let e = err_of(&GOOD.replace(
        "adapter = \"pxh830\"\nparent = \"rc0\"\n\n[[host]]",
        "adapter = \"pxh830\"\nparent = \"rc0\"\nlut_windows = 3\n\n[[host]]",
    ));
    assert!(e.contains("lut_windows must be a power of two"), "{e}");
}

#[test]
fn overlapping_fixed_windows_are_refused() {
    let text = GOOD.replace(
        "bars = [{ size = \"16 KiB\" }]",
        "bars = [{ size = \"16 KiB\", address = 0xD0000000 }, { size = \"16 KiB\", address = 0xD0000000 }]",
    );
    let e = err_of(&text);
    assert!(
        e.contains(
            "overlapping windows: BAR0 of `nvme` [0xd0000000, 0xd0004000) and BAR2 of `nvme`"
        ),
        "{e}"
    );
    assert!(
        e.starts_with("my.toml:20:"),
        "points at the fixed address: {e}"
    );
    let text = GOOD.replace(
        "bars = [{ size = \"16 KiB\" }]",
        "bars = [{ size = \"16 KiB\", address = 0x10000 }]",
    );
    assert!(err_of(&text).contains("RAM of node 0"));
}

#[test]
fn the_32_bit_window_runs_out() {
    let text = GOOD.replace(
        "bars = [{ size = \"16 KiB\" }]",
        "bars = [{ size = \"1 GiB\", bits = 32 }]",
    );
    let e = err_of(&text);
    assert!(
        e.contains("32-bit (below 4 GiB) MMIO window of host `a` exhausted"),
        "{e}"
    );
}

#[test]
fn a_missing_include_and_an_unknown_platform_are_located() {
    let e = err_of(&GOOD.replace("platforms/smartio.toml", "platforms/nope.toml"));
    assert!(
        e.starts_with("my.toml:1:") && e.contains("no built-in file `platforms/nope.toml`"),
        "{e}"
    );
    let e = err_of(&GOOD.replace(
        "platform = \"smartio_host\"\n[[host.switch]]",
        "platform = \"xeon\"\n[[host.switch]]",
    ));
    assert_eq!(
        e,
        "my.toml:9:12: unknown platform `xeon` (defined: smartio_host) (key `host[0].platform`)"
    );
}

#[test]
fn static_windows_are_checked_when_programmed() {
    let text =
        GOOD.to_string() + "[[window]]\nntb = \"a.ntb\"\nto = \"b.ram.node7\"\nsize = 4096\n";
    let s = try_load(&text).unwrap();
    let e = fabric::Fabric::from_scenario(s).err().unwrap().to_string();
    assert!(
        e.starts_with("my.toml:38:1:") && e.contains("NUMA nodes 0..0"),
        "{e}"
    );
}

#[test]
fn type_errors_name_the_key_in_plain_words() {
    assert_eq!(
        err_of(&GOOD.replacen("width = 4 }", "width = 300 }", 1)),
        "my.toml:19:27: invalid value: integer `300`, expected a whole number from 0 to 255 \
         (key `host[0].device[0].link.width`)"
    );
    assert_eq!(
        err_of(&GOOD.replacen("width = 4 }", "width = -1 }", 1)),
        "my.toml:19:27: invalid value: integer `-1`, expected a whole number from 0 to 255 \
         (key `host[0].device[0].link.width`)"
    );
    assert_eq!(
        err_of(&GOOD.replacen("width = 4 }", "width = \"x4\" }", 1)),
        "my.toml:19:27: invalid type: string \"x4\", expected a whole number from 0 to 255 \
         (key `host[0].device[0].link.width`)"
    );
}

#[test]
fn lists_of_names_in_errors_are_sorted_and_unique() {
    // A single-function device is both a device and a node of the tree: named once.
    let f = fabric::Fabric::from_scenario(try_load(GOOD).unwrap()).unwrap();
    let e = f.resolve("a.nvmex").unwrap_err().to_string();
    assert_eq!(
        e,
        "unknown endpoint `a.nvmex`: host `a` has no device or switch `nvmex` (it has: ntb, nvme, rc0, sw)"
    );
    let e = f.resolve("c.nvme").unwrap_err().to_string();
    assert_eq!(e, "unknown endpoint `c.nvme`: no host `c` (hosts: a, b)");
    // Chips: the built-in catalog and the file's own, each once, sorted.
    let e = err_of(&GOOD.replace("chip = \"pex8733\"", "chip = \"pex9999\""));
    let list = e
        .split("(known: ")
        .nth(1)
        .and_then(|r| r.split(')').next())
        .unwrap_or_else(|| panic!("{e}"));
    let names: Vec<&str> = list.split(", ").collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(names, sorted, "{e}");
    assert!(names.contains(&"pex8733"), "{e}");
}

#[test]
fn a_window_given_twice_is_refused_at_its_second_line() {
    let w = "[[window]]\nntb = \"a.ntb\"\nto = \"b.ram\"\nsize = 4096\n";
    let s = try_load(&(GOOD.to_string() + w + w)).unwrap();
    let e = fabric::Fabric::from_scenario(s).err().unwrap().to_string();
    assert_eq!(
        e,
        "my.toml:42:1: the same window as line 38 (a.ntb → b.ram + 0x0, 4096 bytes) (key `window[1]`)"
    );
    // The same window at another offset is another window.
    let other = w.replace("size = 4096", "offset = 4096\nsize = 4096");
    let s = try_load(&(GOOD.to_string() + w + &other)).unwrap();
    assert!(fabric::Fabric::from_scenario(s).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Arbitrary bytes never panic the loader.
    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,400}") {
        let _ = try_load(&s);
    }

    /// Naming the key of any place in any text never panics.
    #[test]
    fn key_paths_of_arbitrary_text_never_panic(s in "[\\[\\]{}=,.\"'#a-z0-9 \n]{0,200}", off in 0usize..220) {
        let _ = fabric::keypath::key_path_at(&s, off);
        let _ = fabric::keypath::key_of_error(&s, off, "missing field `x`");
    }

    /// Mutating one line of a valid scenario gives Ok or a located error, never a panic.
    #[test]
    fn mutated_scenarios_never_panic(line in 0usize..40, repl in prop::sample::select(vec![
        "", "x = 1", "[[host]]", "name = \"\"", "width = 0", "gen = 9", "parent = \"a\"",
        "bars = [{ size = 0 }]", "size = -1", "packages = 0", "[[cable]]", "ends = []",
        "link = { gen = 3, width = 16, cable = true }", "dma_mask_bits = 8", "lut_windows = 0",
        "bar_size = 1", "[[host.device]]", "functions = []", "kind = \"gpu\"", "address = 0xFFFFFFFFFFFFF000",
    ])) {
        let mut lines: Vec<&str> = GOOD.lines().collect();
        if line < lines.len() {
            lines[line] = repl;
        }
        let text = lines.join("\n");
        if let Err(e) = try_load(&text) {
            prop_assert!(e.starts_with("my.toml"), "error names the file: {}", e);
        }
    }
}
