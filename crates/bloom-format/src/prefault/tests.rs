//! The prefault tests: every byte filled in order, each chunk's pages made before its read
//! and none far ahead, and the helper stopped however the reads end.

use std::sync::mpsc;
use std::time::Duration;

use super::pages::{Pages, SMALLEST};
use super::{Tuning, fill_in_order};

const PAGE: usize = 4096;
const MIB: usize = 1 << 20;
/// Slack for transparent huge pages: where the system makes 2 MiB pages, making a range
/// makes the rest of its huge page too.
const HUGE: usize = 2 * MIB;

/// A helper for every buffer, 1 MiB ahead.
const EAGER: Tuning = Tuning {
    threaded: 0,
    ahead: MIB,
};

/// Fresh memory: above glibc's largest mmap threshold (32 MiB), so its pages are made only
/// when first written or made ahead.
const FRESH: usize = 40 * MIB;

/// Runs `f` on another thread and fails if it has not returned within a generous bound: a
/// hang fails the test instead of stalling the suite.
fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    });
    match rx.recv_timeout(Duration::from_secs(300)) {
        Ok(Ok(value)) => value,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("fill_in_order hung"),
    }
}

/// Whether each whole page of the `len` bytes at address `addr` is resident (`mincore`).
/// Only the addresses are used: the bytes may be borrowed elsewhere.
fn resident(addr: usize, len: usize) -> Vec<bool> {
    let start = addr.next_multiple_of(PAGE);
    let end = (addr + len) & !(PAGE - 1);
    if end <= start {
        return Vec::new();
    }
    let mut vec = vec![0u8; (end - start) / PAGE];
    // SAFETY: the range is whole pages of a live buffer the caller holds, and `vec` has one
    // byte for each of them, as `mincore` writes; `mincore` reads no byte of the range.
    #[allow(unsafe_code)]
    let status = unsafe {
        libc::mincore(
            std::ptr::without_provenance_mut(start),
            end - start,
            vec.as_mut_ptr(),
        )
    };
    assert_eq!(status, 0, "mincore failed");
    vec.iter().map(|b| b & 1 == 1).collect()
}

/// How many whole pages of `bytes` are resident.
fn resident_count(bytes: &[u8]) -> usize {
    resident(bytes.as_ptr().addr(), bytes.len())
        .iter()
        .filter(|r| **r)
        .count()
}

/// Whether this kernel makes pages on request (Linux 5.14 and later).
fn kernel_makes_pages() -> bool {
    let buf = vec![0u8; FRESH];
    Pages::inside(&buf).is_some_and(|p| p.part(p.start, p.start + SMALLEST).make())
}

#[test]
fn whole_pages_are_found_at_every_boundary() {
    let at = 0x10_0000;
    assert_eq!(
        Pages::within(at, SMALLEST, PAGE),
        Some(Pages {
            start: at,
            end: at + SMALLEST,
            page: PAGE
        })
    );
    assert_eq!(Pages::within(at, SMALLEST - 1, PAGE), None);
    // Off a boundary: the start goes up and the end down to whole pages.
    assert_eq!(
        Pages::within(at + 1, SMALLEST + PAGE, PAGE),
        Some(Pages {
            start: at + PAGE,
            end: at + SMALLEST + PAGE,
            page: PAGE
        })
    );
    assert_eq!(Pages::within(at + 1, SMALLEST + PAGE - 2, PAGE), None);
    assert_eq!(
        Pages::within(at, SMALLEST, 3000),
        None,
        "not a power of two"
    );
    assert_eq!(Pages::within(usize::MAX - 10, 5, PAGE), None);
    assert_eq!(Pages::within(usize::MAX - SMALLEST, SMALLEST, PAGE), None);
    let pages = Pages::within(at, 4 * SMALLEST, PAGE).unwrap();
    // A part ends on a whole page, never past the end, never before its start.
    assert_eq!(pages.part(at, at + PAGE + 5).end, at + PAGE);
    assert_eq!(pages.part(at + PAGE, usize::MAX).end, at + 4 * SMALLEST);
    assert_eq!(
        pages.part(at + PAGE, at + 5),
        Pages {
            start: at,
            end: at,
            page: PAGE
        }
    );
}

/// Fills `buf` with a pattern, recording the chunks' lengths.
fn fill_pattern(buf: &mut [u8], chunk: usize, tuning: Tuning) -> Vec<usize> {
    let mut seen = Vec::new();
    let mut offset = 0usize;
    fill_in_order(buf, chunk, tuning, |part| {
        for (i, b) in part.iter_mut().enumerate() {
            *b = ((offset + i) * 7 + 3) as u8;
        }
        offset += part.len();
        seen.push(part.len());
        Ok::<bool, ()>(true)
    })
    .unwrap();
    seen
}

#[test]
fn every_byte_is_filled_once_in_order_at_any_size() {
    for tuning in [Tuning::LOADS, EAGER] {
        for (len, start, chunk) in [
            (10, 0, MIB),
            (200_000, 1, 65_536),
            (3 * MIB, 17, MIB),
            (5 * MIB + 5, 4095, MIB),
            // A chunk larger than `ahead`.
            (3 * MIB, 0, 4 * MIB),
        ] {
            let (memory, chunks) = bounded(move || {
                let mut memory = vec![0u8; len + start];
                let chunks = fill_pattern(&mut memory[start..], chunk, tuning);
                (memory, chunks)
            });
            assert_eq!(chunks.iter().sum::<usize>(), len);
            assert!(chunks.iter().rev().skip(1).all(|&c| c == chunk));
            assert!(
                memory[start..]
                    .iter()
                    .enumerate()
                    .all(|(i, &b)| b == (i * 7 + 3) as u8),
                "len {len}"
            );
            assert!(memory[..start].iter().all(|&b| b == 0));
        }
    }
}

#[test]
fn each_chunk_finds_its_pages_made_and_none_far_ahead() {
    if !kernel_makes_pages() {
        return;
    }
    let chunk = 256 << 10;
    let (faults, far) = bounded(move || {
        let mut buf = vec![0u8; FRESH];
        let (mut unmade, mut far_ahead) = (0usize, 0usize);
        let mut offset = 0;
        let base = buf.as_ptr().addr();
        let len = buf.len();
        fill_in_order(&mut buf, chunk, EAGER, |part| {
            // Before the chunk is written: its whole pages are made, and no page more than
            // `ahead` past its start (with slack for a huge page and the unaligned start).
            unmade += resident(part.as_ptr().addr(), part.len())
                .iter()
                .filter(|r| !**r)
                .count();
            let beyond = offset + EAGER.ahead + HUGE + 2 * PAGE;
            if beyond < len {
                far_ahead += resident(base + beyond, len - beyond)
                    .iter()
                    .filter(|r| **r)
                    .count();
            }
            part.fill(0xa5);
            offset += part.len();
            Ok::<bool, ()>(true)
        })
        .unwrap();
        assert!(buf.iter().all(|&b| b == 0xa5));
        (unmade, far_ahead)
    });
    assert_eq!(faults, 0, "pages of chunks not made before their reads");
    assert_eq!(far, 0, "pages made more than `ahead` past the reads");
}

/// The helper makes the next chunk's pages while the reader is on this one: the reader
/// waits at a few chunks until they are there (only the helper can make them; the watchdog
/// bounds a helper that never does).
#[test]
fn the_helper_makes_the_next_chunk_while_the_reader_is_on_this_one() {
    if !kernel_makes_pages() {
        return;
    }
    let chunk = 256 << 10;
    let waited = bounded(move || {
        let mut buf = vec![0u8; FRESH];
        let base = buf.as_ptr().addr();
        let mut offset = 0;
        let mut waited = 0;
        fill_in_order(&mut buf, chunk, EAGER, |part| {
            if (1..=8).contains(&(offset / chunk)) {
                while !resident(base + offset + chunk, chunk).iter().all(|r| *r) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                waited += 1;
            }
            part.fill(0x5a);
            offset += part.len();
            Ok::<bool, ()>(true)
        })
        .unwrap();
        assert!(buf.iter().all(|&b| b == 0x5a));
        waited
    });
    assert_eq!(waited, 8);
}

#[test]
fn reads_that_end_at_the_first_chunk_stop_the_helper() {
    // By the input's end, its failure and a panic of the reader: each returns (a helper
    // left waiting would hang the scope), and pages past `ahead` were never made.
    let makes = kernel_makes_pages();
    for how in ["end", "error", "panic"] {
        let made_far = bounded(move || {
            let mut buf = vec![0u8; FRESH];
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                fill_in_order(&mut buf, MIB, EAGER, |_| match how {
                    "end" => Ok(false),
                    "error" => Err("input failed"),
                    _ => panic!("the input's reader panicked"),
                })
            }));
            match how {
                "end" => assert_eq!(outcome.ok(), Some(Ok(()))),
                "error" => assert_eq!(outcome.ok(), Some(Err("input failed"))),
                _ => assert!(outcome.is_err()),
            }
            resident_count(&buf[EAGER.ahead + HUGE + 2 * PAGE..])
        });
        if makes {
            assert_eq!(made_far, 0, "{how}: pages made past `ahead`");
        }
    }
}
