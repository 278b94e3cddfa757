//! Guava interop against files written and answered by real Guava (`fixtures/guava/`, made by
//! `cargo xtask guava-fixtures`; no Java needed here):
//!
//! - every stream imports, answers every probe exactly as Guava's `mightContain` did, and
//!   exports back byte for byte;
//! - building from the same keys with `FilterParams::for_guava` gives Guava's stream byte
//!   for byte (same m, same k, same bits);
//! - the `rust-*` streams, built by bloom and read back by Guava's `readFrom`, got the same
//!   answers from Guava as from bloom.

use std::path::{Path, PathBuf};

use bloom_core::{BloomFilter, Filter, FilterConfig, FilterParams, KeyEncoding, PositionRule};
use bloom_format::{DecodeOptions, GuavaFunnel, export_guava, import_guava};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/guava")
}

struct Case {
    name: String,
    rule: PositionRule,
    funnel: String,
    items: u64,
    fpr: f64,
}

fn cases() -> Vec<Case> {
    let index = std::fs::read_to_string(dir().join("INDEX")).unwrap();
    index
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            Case {
                name: f[0].to_owned(),
                rule: match f[1] {
                    "MURMUR128_MITZ_64" => PositionRule::GuavaMitz64,
                    "MURMUR128_MITZ_32" => PositionRule::GuavaMitz32,
                    other => panic!("unknown strategy {other}"),
                },
                funnel: f[2].to_owned(),
                items: f[3].parse().unwrap(),
                fpr: f[4].parse().unwrap(),
            }
        })
        .collect()
}

impl Case {
    fn funnel(&self) -> GuavaFunnel {
        match self.funnel.as_str() {
            "utf8" => GuavaFunnel::Utf8,
            "chars" => GuavaFunnel::Chars,
            // Funnels.longFunnel() hashes the number's 8 little-endian bytes.
            "long" => GuavaFunnel::Bytes,
            other => panic!("unknown funnel {other}"),
        }
    }

    fn key(&self, line: &str) -> Vec<u8> {
        if self.funnel == "long" {
            line.parse::<i64>().unwrap().to_le_bytes().to_vec()
        } else {
            line.as_bytes().to_vec()
        }
    }

    fn read(&self, ext: &str) -> Vec<u8> {
        std::fs::read(dir().join(format!("{}.{ext}", self.name))).unwrap()
    }
}

#[test]
fn every_guava_stream_answers_as_guava_and_exports_byte_for_byte() {
    let cases = cases();
    assert!(cases.len() >= 12, "{} cases", cases.len());
    let mut probes_checked = 0;
    let mut maybes = 0;
    for case in &cases {
        let stream = case.read("guava");
        let snapshot = import_guava(&stream[..], case.funnel(), &DecodeOptions::unlimited())
            .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        assert_eq!(
            snapshot.header().position_rule,
            case.rule.id(),
            "{}",
            case.name
        );
        let filter = BloomFilter::from_snapshot(&snapshot).unwrap();
        let probes = String::from_utf8(case.read("probes")).unwrap();
        for line in probes.lines() {
            let (answer, key) = line.split_once('\t').unwrap();
            let ours = filter.contains(&case.key(key)).unwrap();
            assert_eq!(ours, answer == "1", "{}: {key:?}", case.name);
            probes_checked += 1;
            maybes += usize::from(ours);
        }
        let mut back = Vec::new();
        export_guava(&snapshot, &mut back).unwrap();
        assert!(back == stream, "{}: export differs", case.name);
    }
    // Both answers occur: the probes include inserted and never-inserted keys.
    assert!(probes_checked > 30_000, "{probes_checked}");
    assert!(
        maybes > 5_000 && maybes < probes_checked - 15_000,
        "{maybes}"
    );
}

#[test]
fn building_from_the_same_keys_gives_guavas_stream() {
    for case in cases() {
        let params = FilterParams::for_guava(case.items, case.fpr).unwrap();
        let encoding = match case.funnel.as_str() {
            "chars" => KeyEncoding::Utf16Le,
            "long" => KeyEncoding::Bytes,
            _ => KeyEncoding::Utf8,
        };
        let config = FilterConfig::new(params)
            .with_encoding(encoding)
            .with_rule(case.rule)
            .unwrap();
        let mut filter = BloomFilter::new(config).unwrap();
        let keys = String::from_utf8(case.read("keys")).unwrap();
        assert_eq!(keys.lines().count() as u64, case.items, "{}", case.name);
        for line in keys.lines() {
            filter.insert(&case.key(line)).unwrap();
        }
        let mut stream = Vec::new();
        export_guava(&filter.to_snapshot(0), &mut stream).unwrap();
        assert!(
            stream == case.read("guava"),
            "{}: built stream differs from Guava's (m = {}, k = {})",
            case.name,
            params.bits(),
            params.hashes()
        );
    }
}

#[test]
fn murmur3_matches_the_published_vector() {
    // murmur3 x64 128 of "The quick brown fox jumps over the lazy dog", seed 0, is the bytes
    // 6c1b07bc7bbc4be3 47939ac4a93c437a: h1 = 0xe34bbc7bbc071b6c, h2 = 0x7a433ca9c49a9347.
    // Positions are computed without a filter, at the largest m a Guava stream holds.
    let m = bloom_format::GUAVA_MAX_BITS;
    let config = FilterConfig::new(FilterParams::new(m, 2).unwrap())
        .with_encoding(KeyEncoding::Utf8)
        .with_rule(PositionRule::GuavaMitz64)
        .unwrap();
    let key = config
        .encoding()
        .encode_str("The quick brown fox jumps over the lazy dog");
    let positions: Vec<u64> = config.positions(&key).collect();
    let h1: u64 = 0xe34b_bc7b_bc07_1b6c;
    let h2: u64 = 0x7a43_3ca9_c49a_9347;
    assert_eq!(
        positions,
        [
            (h1 & i64::MAX as u64) % m,
            (h1.wrapping_add(h2) & i64::MAX as u64) % m
        ]
    );
    // MITZ_32 uses h1 alone: a = low 32 bits, b = high 32 bits, as Java ints.
    let config = config.with_rule(PositionRule::GuavaMitz32).unwrap();
    let positions: Vec<u64> = config.positions(&key).collect();
    let (a, b) = (h1 as u32 as i32, (h1 >> 32) as u32 as i32);
    let java = |i: i32| {
        let c = a.wrapping_add(i.wrapping_mul(b));
        u64::from((if c < 0 { !c } else { c }) as u32) % m
    };
    assert_eq!(positions, [java(1), java(2)]);
}

#[test]
fn guava_rules_refuse_what_a_guava_stream_cannot_hold() {
    let rule = PositionRule::GuavaMitz64;
    let odd = FilterConfig::new(FilterParams::new(1000, 3).unwrap()).with_rule(rule);
    assert!(matches!(
        odd,
        Err(bloom_core::ConfigError::GuavaBits { bits: 1000, .. })
    ));
    let salted = FilterConfig::new(FilterParams::new(1024, 3).unwrap())
        .with_rule(rule)
        .unwrap()
        .with_salt(bloom_core::Salt::new(b"secret").unwrap());
    assert!(matches!(
        salted,
        Err(bloom_core::ConfigError::SaltNotSupported { .. })
    ));
    let blocked = FilterConfig::new(
        FilterParams::with_layout(bloom_core::Layout::Blocked512, 1024, 3).unwrap(),
    )
    .with_rule(rule);
    assert!(matches!(
        blocked,
        Err(bloom_core::ConfigError::RuleLayout { .. })
    ));
    // Guava's own refusals: no bits for a rate near 1, and beyond 2^31 - 1 words.
    assert!(matches!(
        FilterParams::for_guava(1, 0.9),
        Err(bloom_core::ParamsError::ZeroBits)
    ));
    assert!(matches!(
        FilterParams::for_guava(u64::MAX / 2, 0.01),
        Err(bloom_core::ParamsError::TooManyBits { .. })
    ));
}
