//! The golden fixtures: deterministic snapshots, their key lists and header dumps.
//!
//! Only this module writes `fixtures/`, and only the current format version's directory. The
//! directories of earlier versions are frozen forever: this module never writes them, and
//! `--check` proves them byte for byte against the digests in [`FROZEN`], so an accidental
//! edit fails CI. The golden tests read every version's directory.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use bloom_core::{
    BloomFilter, CountingBloomFilter, FilterConfig, FilterParams, KeyEncoding, Layout,
    PositionRule, Salt, ScalableBloomFilter,
};
use bloom_format::{DatasetGeneration, FormatVersion, HistoryDigest, StoreBinding, StoreIdentity};

use crate::workspace::{sha256_hex, workspace_root};

/// The directory this build generates: the current format version's.
const DIR: &str = "fixtures/v3";

/// The frozen directories of released format versions, with the SHA-256 of every file.
const FROZEN: &[(&str, &[(&str, &str)])] = &[("fixtures/v1", V1_FILES), ("fixtures/v2", V2_FILES)];

const V1_FILES: &[(&str, &str)] = &[
    (
        "large-k.bloom",
        "ef3dc8ae9c148179fae02f4bb538ce5b55ad3d804fe9a071bb7d671863997fcc",
    ),
    (
        "large-k.header.txt",
        "5879649e177f0250353559379a57370812ed6874942f64c4ef47f344360bb618",
    ),
    (
        "large-k.keys",
        "19db9a24789522a1e9a2eddb286178d2eac0c718ff6e3b81e7bc60a9ce6d7bae",
    ),
    (
        "nearly-saturated.bloom",
        "7f887c35c5ece55e7e979d491c2e426baf9e1181b048a8f3de5f73114ec593e4",
    ),
    (
        "nearly-saturated.header.txt",
        "139d9a0880bf49c19f69fd9eb28a86c7c1940f37ea5844d77dcb317789720cdf",
    ),
    (
        "nearly-saturated.keys",
        "f12582eded89a95c53cb522383bbeb9f163f1c4d8204b26f53f77d65d58b0921",
    ),
    (
        "salted-trim-lower.bloom",
        "bb2079413d96e0b95bb2ca9ff10e6f26deef306f18f9aa462d33627f975cf2f4",
    ),
    (
        "salted-trim-lower.header.txt",
        "8af6743e91be274b905202f7c285a5ce5236a0b994dd92224cb2e128bfe45153",
    ),
    (
        "salted-trim-lower.keys",
        "186c6a525f9a9a6239c3c30fe39ac8894b6ea923ca62dc05e65c20e113270d83",
    ),
    (
        "seed-contract.bloom",
        "6982d5bc82181cb0f6afb71cb2560755fa7fd17c45747cbff11a5024311a1259",
    ),
    (
        "seed-contract.header.txt",
        "2cf6e3f767ce920a8bae5d14424d5f7adf0f0e5accb64410d246e0635a8946d0",
    ),
    (
        "seed-contract.keys",
        "6274258f73bfb6f42466e66fdd151dfaa31919b7e71bd2f2b8a1140a640bca16",
    ),
    (
        "unicode-nfc.bloom",
        "3d94c761ce51943a8026537f3dcc63f6856d5a843380fb4e7e450420f2efbb35",
    ),
    (
        "unicode-nfc.header.txt",
        "2529ade5865437ae16ca1d2606bd00d86142bc6e43a6ebb13286d6a4d23c9c25",
    ),
    (
        "unicode-nfc.keys",
        "650c5f65ea81b4ea98d5ed2c732ee27a909cdaac511985f8c6ae9eded2db2364",
    ),
    (
        "unicode-utf8.bloom",
        "fe9a6585b2b35b4a671a0e0d97f3d475934331864d9a913fa4702ec878730096",
    ),
    (
        "unicode-utf8.header.txt",
        "1a224a71e598028777e18710df73cfc0f2f17e6a985006db890efa27b9067660",
    ),
    (
        "unicode-utf8.keys",
        "650c5f65ea81b4ea98d5ed2c732ee27a909cdaac511985f8c6ae9eded2db2364",
    ),
];

/// Format version 2, frozen when version 3 shipped.
const V2_FILES: &[(&str, &str)] = &[
    (
        "counting-sha256-salted-saturated.bloom",
        "17c03d8a0786dacbb726e362a23ded26a8aeb1be3f8efcdca7e1ef5980c6dc14",
    ),
    (
        "counting-sha256-salted-saturated.header.txt",
        "9df4d0f3e479adbe4a56c1191db02148ed6b505436cd73d2de08f0251d2df432",
    ),
    (
        "counting-sha256-salted-saturated.keys",
        "22a775727b4775167567807d3efc7222aee7cc98eaa86945cb964b8bf0263a2a",
    ),
    (
        "counting-sha256-salted-saturated.removed",
        "00160384a644224204ebf99b2c23bb1c1c4f2f86a348b89c76a9c102610216f9",
    ),
    (
        "counting-xxh3.bloom",
        "307d0cb8730c72fd61b4e601a2bddd7e60ada4140fef6c4fa315ae308937d584",
    ),
    (
        "counting-xxh3.header.txt",
        "bf99bd881a4eb010d8ae7e7003fb0e93dcf5f4a8076c5ded5da9a1973167811d",
    ),
    (
        "counting-xxh3.keys",
        "ea5e83f28a210736ed670c8a7daf00dbdfe65da509e27af04e9a7e0b4ca2da72",
    ),
    (
        "counting-xxh3.removed",
        "86cbfd36c0538870c6e5e160b85887a486e766cf8981d9f5df66c3faf2805d04",
    ),
    (
        "large-k.bloom",
        "251aea01df2a8c8eeec6194562bac1b844ea572cbef9cc78a7f644469276a78f",
    ),
    (
        "large-k.header.txt",
        "cad15ebe5166f8f5652582e95c421d7f34e3d448dfe32463343d5f81831d5edc",
    ),
    (
        "large-k.keys",
        "19db9a24789522a1e9a2eddb286178d2eac0c718ff6e3b81e7bc60a9ce6d7bae",
    ),
    (
        "nearly-saturated.bloom",
        "059cb2083cc9fad229c4ea2856d8306ef34b84a471643c1733a7c855cdac4ecf",
    ),
    (
        "nearly-saturated.header.txt",
        "2877d12460285850cc16f903cf39ebe9c09ac66d302dd33e44894b0c626d8d06",
    ),
    (
        "nearly-saturated.keys",
        "f12582eded89a95c53cb522383bbeb9f163f1c4d8204b26f53f77d65d58b0921",
    ),
    (
        "salted-trim-lower.bloom",
        "7396f68da5b92d44139d0ab56699f73bca276d4b08de2800f120d47a043ad138",
    ),
    (
        "salted-trim-lower.header.txt",
        "92a01ff3ab3679b7397ae637298df52c785606c6d603943830bbcf9c86ca7f4a",
    ),
    (
        "salted-trim-lower.keys",
        "186c6a525f9a9a6239c3c30fe39ac8894b6ea923ca62dc05e65c20e113270d83",
    ),
    (
        "seed-contract.bloom",
        "74a13fa5db3b48a40e44b50ceca6959ef4b5ede1890d73666af8f6bf96a4e21f",
    ),
    (
        "seed-contract.header.txt",
        "f17fafe52393a41a5669a7f6a2ce3c3bb9ff7cbfe8110944f9f0908473dae094",
    ),
    (
        "seed-contract.keys",
        "6274258f73bfb6f42466e66fdd151dfaa31919b7e71bd2f2b8a1140a640bca16",
    ),
    (
        "sha256-blocked-salted.bloom",
        "012521bcbd9335930b39aea41c89142bf0c146d0bc5a702c685d64e984b01c97",
    ),
    (
        "sha256-blocked-salted.header.txt",
        "843a196ede30dbb61454e160071191321ae2c734d9eb7d1b7c70683b1e753518",
    ),
    (
        "sha256-blocked-salted.keys",
        "186c6a525f9a9a6239c3c30fe39ac8894b6ea923ca62dc05e65c20e113270d83",
    ),
    (
        "sha256-blocked.bloom",
        "7b2d4f5ec764dab20ef528a9b28a892919aca7788750fd1112db36d52bffd6c9",
    ),
    (
        "sha256-blocked.header.txt",
        "08e856d4facac4ea573fc6e26b30d3f5429be519b493898f43e0d1f780f6da74",
    ),
    (
        "sha256-blocked.keys",
        "f12582eded89a95c53cb522383bbeb9f163f1c4d8204b26f53f77d65d58b0921",
    ),
    (
        "sha256-sharded-salted.bloom",
        "934c4321a8545388911396a695f4ea073c4fc970c05d2a46ef9d5f00ef6a9376",
    ),
    (
        "sha256-sharded-salted.header.txt",
        "c76e6bda449dc2b7e67d8831c8edcc2aad7229aba61594e0a8237295adaeab89",
    ),
    (
        "sha256-sharded-salted.keys",
        "650c5f65ea81b4ea98d5ed2c732ee27a909cdaac511985f8c6ae9eded2db2364",
    ),
    (
        "sha256-sharded-v2-salted.bloom",
        "eada00d35678634986cc6676803024cd9ab49ce11923b5a9b10ae726cf14f310",
    ),
    (
        "sha256-sharded-v2-salted.header.txt",
        "53d90502676b722a9af6b3e09ffc441bd65d0f23b0c4debd0ac951e94c3f87d3",
    ),
    (
        "sha256-sharded-v2-salted.keys",
        "650c5f65ea81b4ea98d5ed2c732ee27a909cdaac511985f8c6ae9eded2db2364",
    ),
    (
        "store-bound.bloom",
        "b1429855585094a45098c93504ece9cf3cea6754408421a76e2ff16f31f30ef9",
    ),
    (
        "store-bound.header.txt",
        "285bba73e1325d61f0097a5237475976990cfe560be14a7eede01549e3599d7e",
    ),
    (
        "store-bound.keys",
        "22a775727b4775167567807d3efc7222aee7cc98eaa86945cb964b8bf0263a2a",
    ),
    (
        "unicode-nfc.bloom",
        "f0d95724db2d438d8c5c6968a519fb03d1ce87a5d9994b0307fdbc6f68cc6bb1",
    ),
    (
        "unicode-nfc.header.txt",
        "a46d19fb05c51b05c24febe4360b2babccfc71d7aaafc208cc7673ed5222a330",
    ),
    (
        "unicode-nfc.keys",
        "650c5f65ea81b4ea98d5ed2c732ee27a909cdaac511985f8c6ae9eded2db2364",
    ),
    (
        "unicode-utf8.bloom",
        "dda4a03676661c7cdcd8aa4c813476c459445c8b9ccb7d9cbcb6b924a32228d1",
    ),
    (
        "unicode-utf8.header.txt",
        "c58cc452a63743c525d559a25d792d9a7f816521a9910cd567d28e851bffc6fb",
    ),
    (
        "unicode-utf8.keys",
        "650c5f65ea81b4ea98d5ed2c732ee27a909cdaac511985f8c6ae9eded2db2364",
    ),
    (
        "xxh3-blocked-salted-large-k.bloom",
        "f840714fe5caa36acee2dbd6c501ff37e950ea5d486a613e9d53e90c5f5d36b6",
    ),
    (
        "xxh3-blocked-salted-large-k.header.txt",
        "479f126787ae35544e1e82a59a65003c95efe7c91e4ebee8adeadd1afd59fb2d",
    ),
    (
        "xxh3-blocked-salted-large-k.keys",
        "650c5f65ea81b4ea98d5ed2c732ee27a909cdaac511985f8c6ae9eded2db2364",
    ),
    (
        "xxh3-blocked.bloom",
        "c0bcd9de4904caa282012508a5cf5148c511c53b8eb9d949d87d0e403bb26d5f",
    ),
    (
        "xxh3-blocked.header.txt",
        "556b5dc2a15ecb8adaefe6bb42e4ea1f4307229ba44e0375b56c78def4524cfc",
    ),
    (
        "xxh3-blocked.keys",
        "f12582eded89a95c53cb522383bbeb9f163f1c4d8204b26f53f77d65d58b0921",
    ),
    (
        "xxh3-sharded-v2.bloom",
        "c3fb8b273eca5e82a4d7673fe3437dd1c2409871eb2f1da9f630121e6092caac",
    ),
    (
        "xxh3-sharded-v2.header.txt",
        "9b1f8f69fa28dd866fc2c28a6c5a0f31dcc35d252f312a55d6c5e8b26b00e911",
    ),
    (
        "xxh3-sharded-v2.keys",
        "22a775727b4775167567807d3efc7222aee7cc98eaa86945cb964b8bf0263a2a",
    ),
    (
        "xxh3-sharded.bloom",
        "8b7fe89dd6fd7d048d1102c911eeb6dc59f52a584c4041cb7da6258781f44ef2",
    ),
    (
        "xxh3-sharded.header.txt",
        "0c76c8ca1cf3084ad8d1e4cf1396c09d0a5898754a2c6d2fe87d2789bbf20505",
    ),
    (
        "xxh3-sharded.keys",
        "22a775727b4775167567807d3efc7222aee7cc98eaa86945cb964b8bf0263a2a",
    ),
    (
        "xxh3-standard.bloom",
        "07541ad6d767052d924704abdf1ee1828da2317afe7191f2d968a5f56afaf8d3",
    ),
    (
        "xxh3-standard.header.txt",
        "09d7965a715877ae7bea6ac5e1383c39a3d7578d05b13c981392f772608b8cea",
    ),
    (
        "xxh3-standard.keys",
        "19db9a24789522a1e9a2eddb286178d2eac0c718ff6e3b81e7bc60a9ce6d7bae",
    ),
];

/// Whether to write the fixtures or only compare them.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Write,
    Check,
}

struct Fixture {
    name: &'static str,
    config: FilterConfig,
    generation: u64,
    store: Option<StoreBinding>,
    /// Inserted, in order (a key listed twice is inserted twice); all must be found.
    keys: Vec<String>,
    /// `Some` for a counting filter: keys inserted after `keys`, then removed again, in
    /// order (written to `NAME.removed`).
    removed: Option<Vec<String>>,
}

fn params(bits: u64, hashes: u32) -> FilterParams {
    FilterParams::new(bits, hashes).expect("fixture parameters are valid")
}

/// A standard-layout `sha256-double` configuration: the rule every fixture of format
/// version 1 used, named explicitly so that a change of default never changes a fixture.
fn sha256(bits: u64, hashes: u32) -> FilterConfig {
    FilterConfig::new(params(bits, hashes))
        .with_rule(PositionRule::Sha256Double)
        .expect("sha256-double takes any k")
}

fn with(layout: Layout, rule: PositionRule, bits: u64, hashes: u32) -> FilterConfig {
    FilterConfig::new(FilterParams::with_layout(layout, bits, hashes).expect("valid"))
        .with_rule(rule)
        .expect("the rule works with the layout")
}

fn unicode_keys() -> Vec<String> {
    let mut keys: Vec<String> = [
        "",
        "caf\u{e9}",
        "cafe\u{301}",
        "\u{ac00}",
        "\u{1100}\u{1161}",
        "中文键",
        "數據庫記錄",
        "😀🚀",
        "\u{1F468}\u{200D}\u{1F469}\u{200D}\u{1F467}",
        "Ｆｕｌｌｗｉｄｔｈ",
        "tab\there",
        "line\nbreak",
    ]
    .map(String::from)
    .to_vec();
    keys.push("長".repeat(3334)); // 10,002 bytes of UTF-8
    keys.push("k".repeat(10_000));
    keys
}

fn fixtures() -> Vec<Fixture> {
    let records = |n: usize| (0..n).map(|i| format!("record-{i}")).collect::<Vec<_>>();
    // Keys a counting fixture inserts after its own and then removes.
    let removed = |range: std::ops::Range<usize>| {
        Some(range.map(|i| format!("removed-{i}")).collect::<Vec<_>>())
    };
    let mut seed_keys = records(80);
    seed_keys.push(String::new());
    // The same two filters in each sharded layout: layout 3 (`sharded`) and layout 5.
    let sharded = |names: [&'static str; 2], layout: fn(u32) -> Result<Layout, _>| {
        [
            Fixture {
                name: names[0],
                config: with(
                    layout(8).expect("8 shards"),
                    PositionRule::Xxh3_128,
                    8192,
                    7,
                )
                .with_encoding(KeyEncoding::Nfc),
                generation: 120,
                store: None,
                removed: None,
                keys: records(120),
            },
            Fixture {
                name: names[1],
                config: with(
                    layout(3).expect("3 shards"),
                    PositionRule::Sha256Double,
                    3072,
                    5,
                )
                .with_encoding(KeyEncoding::Utf8)
                .with_salt(Salt::new(b"golden-fixture-salt-shards").expect("short salt"))
                .expect("salted sha256"),
                generation: 64,
                store: None,
                removed: None,
                keys: unicode_keys(),
            },
        ]
    };
    let mut all = vec![
        Fixture {
            name: "seed-contract",
            config: FilterConfig::seed_teaching(),
            generation: 0,
            store: None,
            removed: None,
            keys: seed_keys,
        },
        Fixture {
            name: "unicode-nfc",
            config: sha256(2048, 7).with_encoding(KeyEncoding::Nfc),
            generation: 14,
            store: None,
            removed: None,
            keys: unicode_keys(),
        },
        Fixture {
            name: "unicode-utf8",
            config: sha256(2048, 7).with_encoding(KeyEncoding::Utf8),
            generation: 14,
            store: None,
            removed: None,
            keys: unicode_keys(),
        },
        Fixture {
            name: "salted-trim-lower",
            config: sha256(1000, 5)
                .with_encoding(KeyEncoding::NfcTrimLowercase)
                .with_salt(Salt::new(b"golden-fixture-salt-v1").expect("short salt"))
                .expect("salted sha256"),
            generation: 3,
            store: None,
            removed: None,
            keys: [
                "  Record-1",
                "RECORD-2 ",
                "Straße",
                "ÉCOLE",
                "\u{3000}中文\u{3000}",
            ]
            .map(String::from)
            .to_vec(),
        },
        Fixture {
            name: "large-k",
            config: sha256(65_537, 48).with_encoding(KeyEncoding::Bytes),
            generation: 1_000_000,
            store: None,
            removed: None,
            keys: records(200),
        },
        Fixture {
            name: "nearly-saturated",
            config: FilterConfig::new(params(256, 4))
                .with_rule(PositionRule::Sha256Split4)
                .expect("k = 4 fits split4")
                .with_encoding(KeyEncoding::Utf8),
            generation: u64::MAX,
            store: None,
            removed: None,
            keys: records(300),
        },
        Fixture {
            name: "store-bound",
            config: sha256(4096, 7).with_encoding(KeyEncoding::Nfc),
            generation: 120,
            store: Some(StoreBinding::new(
                StoreIdentity::from_bytes(*b"golden-store-id!"),
                HistoryDigest::from_bytes(*b"history@gen-120!"),
            )),
            removed: None,
            keys: records(120),
        },
        Fixture {
            name: "xxh3-standard",
            config: with(Layout::Standard, PositionRule::Xxh3_128, 3001, 7)
                .with_encoding(KeyEncoding::Nfc),
            generation: 200,
            store: None,
            removed: None,
            keys: records(200),
        },
        Fixture {
            name: "xxh3-blocked",
            config: with(Layout::Blocked512, PositionRule::Xxh3_128, 4096, 6)
                .with_encoding(KeyEncoding::Nfc),
            generation: 300,
            store: None,
            removed: None,
            keys: records(300),
        },
        Fixture {
            name: "xxh3-blocked-salted-large-k",
            config: with(Layout::Blocked512, PositionRule::Xxh3_128, 2048, 23)
                .with_encoding(KeyEncoding::Utf8)
                .with_salt(Salt::new(b"golden-fixture-salt-xxh3").expect("short salt"))
                .expect("salted xxh3"),
            generation: 50,
            store: None,
            removed: None,
            keys: unicode_keys(),
        },
        Fixture {
            name: "sha256-blocked",
            config: with(Layout::Blocked512, PositionRule::Sha256Double, 4096, 6)
                .with_encoding(KeyEncoding::Bytes),
            generation: 300,
            store: None,
            removed: None,
            keys: records(300),
        },
        Fixture {
            name: "sha256-blocked-salted",
            config: with(Layout::Blocked512, PositionRule::Sha256Double, 1536, 9)
                .with_encoding(KeyEncoding::NfcTrimLowercase)
                .with_salt(Salt::new(b"golden-fixture-salt-v2").expect("short salt"))
                .expect("salted sha256"),
            generation: 7,
            store: None,
            removed: None,
            keys: [
                "  Record-1",
                "RECORD-2 ",
                "Straße",
                "ÉCOLE",
                "\u{3000}中文\u{3000}",
            ]
            .map(String::from)
            .to_vec(),
        },
        Fixture {
            // An odd m, so the last byte's high nibble is padding; "record-0" is counted
            // three times.
            name: "counting-xxh3",
            config: with(Layout::Standard, PositionRule::Xxh3_128, 2001, 5)
                .with_encoding(KeyEncoding::Utf8),
            generation: 250,
            store: None,
            removed: removed(152..202),
            keys: [records(150), vec!["record-0".into(), "record-0".into()]].concat(),
        },
        Fixture {
            // Too small for its keys: many counters saturate, and removals leave them at 15.
            name: "counting-sha256-salted-saturated",
            config: with(Layout::Standard, PositionRule::Sha256Double, 61, 4)
                .with_encoding(KeyEncoding::Nfc)
                .with_salt(Salt::new(b"golden-fixture-salt-counting").expect("short salt"))
                .expect("salted sha256"),
            generation: 160,
            store: None,
            removed: removed(120..160),
            keys: records(120),
        },
    ];
    // Format version 3: plans recorded, within and past them, and the split-block layouts.
    all.extend([
        Fixture {
            name: "planned-split-512",
            config: FilterConfig::planned(500, 0.01).expect("a valid plan"),
            generation: 400,
            store: None,
            removed: None,
            keys: records(400),
        },
        Fixture {
            name: "planned-over-capacity",
            config: bloom_core::FilterBuilder::new(100)
                .false_positive_rate(0.01)
                .layout(Layout::Blocked512)
                .rule(PositionRule::Sha256Double)
                .config()
                .expect("a valid plan"),
            generation: 300,
            store: None,
            removed: None,
            keys: records(300),
        },
        Fixture {
            name: "split-256-xxh64",
            config: with(Layout::SplitBlock256, PositionRule::Xxh64, 4096, 8)
                .with_encoding(KeyEncoding::Bytes),
            generation: 200,
            store: None,
            removed: None,
            keys: records(200),
        },
    ]);
    all.extend(sharded(
        ["xxh3-sharded", "sha256-sharded-salted"],
        Layout::sharded_v1,
    ));
    all.extend(sharded(
        ["xxh3-sharded-v2", "sha256-sharded-v2-salted"],
        Layout::sharded,
    ));
    all
}

/// The scalable fixtures: name, chain, keys, generation.
fn scalable_fixtures() -> Vec<(&'static str, ScalableBloomFilter, Vec<String>, u64)> {
    let records = |n: usize| (0..n).map(|i| format!("record-{i}")).collect::<Vec<_>>();
    vec![
        (
            "scalable-xxh3",
            ScalableBloomFilter::builder(100)
                .build()
                .expect("a valid chain"),
            records(1000),
            1000,
        ),
        (
            "scalable-sha256-salted",
            ScalableBloomFilter::builder(8)
                .growth(3)
                .tightening(0.8)
                .false_positive_rate(0.05)
                .rule(PositionRule::Sha256Double)
                .encoding(KeyEncoding::NfcTrimLowercase)
                .salt(Salt::new(b"golden-fixture-salt-scalable").expect("short salt"))
                .build()
                .expect("a valid chain"),
            unicode_keys(),
            17,
        ),
    ]
}

/// Every file this build generates, by path relative to the workspace root.
fn generate() -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = BTreeMap::new();
    let json_lines = |keys: &[String]| -> Vec<u8> {
        keys.iter()
            .map(|k| serde_json::to_string(k).expect("strings serialize") + "\n")
            .collect::<String>()
            .into_bytes()
    };
    for (name, mut chain, keys, generation) in scalable_fixtures() {
        chain.insert_all(&keys);
        let snapshot = chain.to_snapshot_at(generation);
        assert_eq!(snapshot.format_version(), FormatVersion::CURRENT);
        let dir = Path::new(DIR);
        files.insert(
            dir.join(format!("{name}.bloom")),
            snapshot.encode().to_vec(),
        );
        files.insert(dir.join(format!("{name}.keys")), json_lines(&keys));
        files.insert(
            dir.join(format!("{name}.header.txt")),
            snapshot.dump_header().into_bytes(),
        );
    }
    for fixture in fixtures() {
        let generation = DatasetGeneration::new(fixture.generation);
        let (mut header, payload) = match &fixture.removed {
            None => {
                let mut filter =
                    BloomFilter::new(fixture.config).expect("small fixture filters allocate");
                filter.insert_all(&fixture.keys);
                (filter.to_header_at(generation), filter.to_bytes())
            }
            Some(removed) => {
                let mut filter = CountingBloomFilter::new(fixture.config)
                    .expect("small counting fixtures allocate");
                filter.insert_all(fixture.keys.iter().chain(removed));
                for key in removed {
                    filter.remove(key).expect("an inserted key is removable");
                }
                (filter.to_header_at(generation), filter.to_bytes())
            }
        };
        header.store = fixture.store;
        let snapshot = bloom_format::Snapshot::new(header, payload)
            .expect("a filter's own header and bits are a valid snapshot");
        assert_eq!(snapshot.format_version(), FormatVersion::CURRENT);
        let keys: String = fixture
            .keys
            .iter()
            .map(|k| serde_json::to_string(k).expect("strings serialize") + "\n")
            .collect();
        let dir = Path::new(DIR);
        if let Some(removed) = &fixture.removed {
            let removed: String = removed
                .iter()
                .map(|k| serde_json::to_string(k).expect("strings serialize") + "\n")
                .collect();
            files.insert(
                dir.join(format!("{}.removed", fixture.name)),
                removed.into_bytes(),
            );
        }
        files.insert(
            dir.join(format!("{}.bloom", fixture.name)),
            snapshot.encode().to_vec(),
        );
        files.insert(
            dir.join(format!("{}.keys", fixture.name)),
            keys.into_bytes(),
        );
        files.insert(
            dir.join(format!("{}.header.txt", fixture.name)),
            snapshot.dump_header().into_bytes(),
        );
    }
    files
}

/// Checks every frozen directory against its digests; returns the problems found.
fn check_frozen(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for (dir, files) in FROZEN {
        for (name, digest) in *files {
            let path = Path::new(dir).join(name);
            match fs::read(root.join(&path)) {
                Ok(bytes) => {
                    if sha256_hex(&bytes) != *digest {
                        problems.push(format!(
                            "{} changed: released fixtures are frozen; restore it with `git checkout -- {}`",
                            path.display(),
                            path.display()
                        ));
                    }
                }
                Err(e) => problems.push(format!("{} is missing: {e}", path.display())),
            }
        }
        if let Ok(entries) = fs::read_dir(root.join(dir)) {
            for entry in entries.flatten() {
                let name = entry.file_name();
                if !files.iter().any(|(n, _)| name.to_str() == Some(n)) {
                    problems.push(format!(
                        "{dir}/{} was added to a frozen directory",
                        name.to_string_lossy()
                    ));
                }
            }
        }
    }
    problems
}

pub(crate) fn run(mode: Mode) -> ExitCode {
    let root = workspace_root();
    if FROZEN.iter().any(|(dir, _)| *dir == DIR) {
        eprintln!(
            "error: {DIR} belongs to a released format version and is frozen; refusing to write it"
        );
        return ExitCode::FAILURE;
    }
    let files = generate();
    let mut problems = check_frozen(&root);
    problems.extend(crate::guava::check(&root));
    for (path, contents) in &files {
        let full = root.join(path);
        let current = fs::read(&full).ok();
        if current.as_deref() == Some(contents.as_slice()) {
            continue;
        }
        match mode {
            Mode::Check => problems.push(format!(
                "{} is {}",
                path.display(),
                if current.is_some() {
                    "stale"
                } else {
                    "missing"
                }
            )),
            Mode::Write => {
                if let Err(e) = fs::create_dir_all(full.parent().unwrap_or(&root))
                    .and_then(|()| fs::write(&full, contents))
                {
                    eprintln!("cannot write {}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
                println!("wrote {}", path.display());
            }
        }
    }
    let dir = root.join(DIR);
    if let Ok(entries) = fs::read_dir(&dir) {
        for entry in entries.flatten() {
            let path = Path::new(DIR).join(entry.file_name());
            if !files.contains_key(&path) {
                match mode {
                    Mode::Check => {
                        problems.push(format!("{} is not generated by xtask", path.display()));
                    }
                    Mode::Write => {
                        if let Err(e) = fs::remove_file(root.join(&path)) {
                            eprintln!("cannot remove {}: {e}", path.display());
                            return ExitCode::FAILURE;
                        }
                        println!("removed {}", path.display());
                    }
                }
            }
        }
    }
    if problems.is_empty() {
        println!(
            "{} fixture files in {DIR} are current; {} frozen directories are intact; {} match their manifest",
            files.len(),
            FROZEN.len(),
            crate::guava::DIR,
        );
        return ExitCode::SUCCESS;
    }
    for p in &problems {
        eprintln!("error: {p}");
    }
    eprintln!(
        "the golden fixtures are out of date: run the command named above (`cargo xtask fixtures` for fixtures/v3) and commit the result"
    );
    ExitCode::FAILURE
}
