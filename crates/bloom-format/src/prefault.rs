//! Filling a large buffer front to back with its pages made ahead of the reads.
//!
//! Reading a payload into fresh memory takes one page fault per 4 KiB page, each trapping
//! into the kernel from inside the copy. On Linux 5.14 and later one
//! `madvise(MADV_POPULATE_WRITE)` makes a whole range's pages at once instead, and it
//! changes no byte: it only decides when the pages are made. For a large buffer a helper
//! thread makes them a little ahead of the reads, so that making pages (the larger part of
//! loading fresh memory) and reading and checksumming overlap. Measured in a C program on
//! the development machine, 1 GiB from the page cache: 0.94 s with a fault per page, 0.53 s
//! with each chunk made before its read, 0.40 s with the pages made ahead by a second thread.

/// Buffers at least this long have their pages made by a helper thread.
const THREADED: usize = 32 << 20;

/// How far the helper may make pages past the reads: all a stream that ends early (a header
/// that lies about its length) can make it commit beyond its data.
const AHEAD: usize = 32 << 20;

/// Fills `buf` front to back, `chunk` bytes at a time (the last may be shorter), by calling
/// `fill` on each in order until it returns `Ok(false)` (the input ended) or an error.
/// Each chunk's pages are made before `fill` writes it, when the system can (see the
/// module's documentation); `fill` sees the same chunks in every case.
pub(crate) fn fill_in_order<E>(
    buf: &mut [u8],
    chunk: usize,
    mut fill: impl FnMut(&mut [u8]) -> Result<bool, E>,
) -> Result<(), E> {
    let chunk = chunk.max(1);
    #[cfg(target_os = "linux")]
    if buf.len() >= THREADED
        && let Some(pages) = linux::Pages::inside(buf)
    {
        return linux::fill_with_helper(buf, chunk, pages, fill);
    }
    fill_inline(buf, chunk, &mut fill)
}

/// [`fill_in_order`] in the calling thread alone, each chunk's pages made just before it
/// is filled.
fn fill_inline<E>(
    buf: &mut [u8],
    chunk: usize,
    fill: &mut impl FnMut(&mut [u8]) -> Result<bool, E>,
) -> Result<(), E> {
    for part in buf.chunks_mut(chunk) {
        #[cfg(target_os = "linux")]
        if let Some(pages) = linux::Pages::inside(part) {
            pages.make();
        }
        if !fill(part)? {
            break;
        }
    }
    Ok(())
}

#[cfg(target_os = "linux")]
mod linux {
    use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

    use super::{AHEAD, fill_inline};

    /// Ranges smaller than this are left to fault: a few faults cost less than the call.
    const SMALLEST: usize = 64 << 10;

    /// The whole pages inside a buffer, by address: `[start, end)`, both on page
    /// boundaries, `end - start` at least [`SMALLEST`].
    #[derive(Clone, Copy)]
    pub(super) struct Pages {
        start: usize,
        end: usize,
        page: usize,
    }

    impl Pages {
        /// The whole pages inside `buf`, if they are worth a call.
        pub(super) fn inside(buf: &[u8]) -> Option<Self> {
            if buf.len() < SMALLEST {
                return None;
            }
            // SAFETY: `sysconf` reads a constant of the process; it touches no memory of ours.
            #[allow(unsafe_code)]
            let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
            let page = usize::try_from(page).ok().filter(|p| p.is_power_of_two())?;
            let start = buf.as_ptr().addr().checked_next_multiple_of(page)?;
            let end = (buf.as_ptr().addr() + buf.len()) & !(page - 1);
            (end >= start.checked_add(SMALLEST)?).then_some(Self { start, end, page })
        }

        /// The pages from `from` (an address on a page boundary) to `to` (clamped to the
        /// end, and taken down to a page boundary).
        fn part(self, from: usize, to: usize) -> Self {
            let end = to.min(self.end) & !(self.page - 1);
            Self {
                start: from.min(end),
                end,
                ..self
            }
        }

        /// Asks the kernel to make these pages present and writable; returns whether it did.
        pub(super) fn make(self) -> bool {
            if self.end == self.start {
                return true;
            }
            // SAFETY: every `Pages` is made by `inside` from a buffer, narrowed by `part`, so
            // its range lies inside that buffer, which the caller of `fill_in_order` holds
            // mutably until every use of the range is over (the helper thread is joined
            // before `fill_with_helper` returns). MADV_POPULATE_WRITE faults the pages in as
            // if each were written with its own value: it changes no byte, mapping or
            // protection, whatever else writes the pages at the same time (the kernel
            // serialises faults on a page), and on failure (EINVAL before Linux 5.14,
            // ENOMEM, EINTR, EFAULT) it has done nothing a write would not do.
            #[allow(unsafe_code)]
            let done = unsafe {
                libc::madvise(
                    std::ptr::without_provenance_mut(self.start),
                    self.end - self.start,
                    libc::MADV_POPULATE_WRITE,
                )
            };
            done == 0
        }
    }

    /// What the reader and the helper tell each other.
    #[derive(Default)]
    struct State {
        /// Bytes of the buffer from its start whose pages the helper made.
        made: usize,
        /// Bytes the reader has filled.
        read: usize,
        /// The helper is done: every page made, or the kernel would not make them.
        helper_done: bool,
        /// The reader is done: the helper stops.
        reader_done: bool,
    }

    struct Shared {
        state: Mutex<State>,
        changed: Condvar,
    }

    impl Shared {
        fn lock(&self) -> MutexGuard<'_, State> {
            // Neither side panics while holding the lock; a poisoned one is still sound.
            self.state.lock().unwrap_or_else(PoisonError::into_inner)
        }

        fn wait<'a>(&self, guard: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
            self.changed
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner)
        }

        fn update(&self, change: impl FnOnce(&mut State)) {
            change(&mut self.lock());
            self.changed.notify_all();
        }
    }

    /// [`super::fill_in_order`] with the pages of `buf` (`pages`) made by a helper thread, at
    /// most [`AHEAD`] bytes past the reads; each chunk waits for its pages unless the helper is
    /// done. Without a thread, the chunks fill as for a smaller buffer.
    pub(super) fn fill_with_helper<E>(
        buf: &mut [u8],
        chunk: usize,
        pages: Pages,
        mut fill: impl FnMut(&mut [u8]) -> Result<bool, E>,
    ) -> Result<(), E> {
        let base = buf.as_ptr().addr();
        let len = buf.len();
        let shared = Shared {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        };
        std::thread::scope(|scope| {
            let helper = std::thread::Builder::new()
                .name("bloom-prefault".into())
                .spawn_scoped(scope, || make_ahead(&shared, pages, base, len, chunk));
            if helper.is_err() {
                return fill_inline(buf, chunk, &mut fill);
            }
            // Tells the helper to stop however the reads end, a panic of `fill` included:
            // the scope joins the helper, which must not be left waiting.
            let _stop = ReaderDone(&shared);
            let mut offset = 0;
            for part in buf.chunks_mut(chunk) {
                let end = offset + part.len();
                {
                    let mut state = shared.lock();
                    state.read = offset;
                    shared.changed.notify_all();
                    while state.made < end && !state.helper_done {
                        state = shared.wait(state);
                    }
                }
                if !fill(part)? {
                    break;
                }
                offset = end;
            }
            Ok(())
        })
    }

    /// Marks the reads over when dropped.
    struct ReaderDone<'a>(&'a Shared);

    impl Drop for ReaderDone<'_> {
        fn drop(&mut self) {
            self.0.update(|s| s.reader_done = true);
        }
    }

    /// The helper: makes `pages` a chunk at a time, front to back, staying at most
    /// [`AHEAD`] bytes past the reader, until every page is made, the kernel refuses, or
    /// the reader is done.
    fn make_ahead(shared: &Shared, pages: Pages, base: usize, len: usize, chunk: usize) {
        // Never less than two chunks ahead: the reader waits for a whole chunk's pages.
        let ahead = AHEAD.max(chunk.saturating_mul(2));
        let mut next = pages.start;
        loop {
            {
                let mut state = shared.lock();
                while !state.reader_done && next - base >= state.read.saturating_add(ahead) {
                    state = shared.wait(state);
                }
                if state.reader_done {
                    return;
                }
            }
            let part = pages.part(next, next.saturating_add(chunk.max(pages.page)));
            let made = part.make();
            next = part.end;
            // The bytes before the buffer's first whole page and after its last are left to
            // fault; once the last page is made, so is all the helper will make.
            let done = !made || next >= pages.end;
            shared.update(|s| {
                s.made = if done { len } else { next - base };
                s.helper_done = done;
            });
            if done {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fills `buf` with a pattern through [`fill_in_order`], recording the chunks' lengths;
    /// stops after `stop_after` chunks when given.
    fn fill_pattern(buf: &mut [u8], chunk: usize, stop_after: Option<usize>) -> Vec<usize> {
        let mut seen = Vec::new();
        let mut offset = 0usize;
        fill_in_order(buf, chunk, |part| {
            for (i, b) in part.iter_mut().enumerate() {
                *b = ((offset + i) * 7 + 3) as u8;
            }
            offset += part.len();
            seen.push(part.len());
            Ok::<bool, ()>(stop_after != Some(seen.len()))
        })
        .unwrap();
        seen
    }

    #[test]
    fn every_byte_is_filled_once_in_order_at_any_size() {
        // Under the smallest range, inline, and with the helper; starts off page boundaries.
        for (len, start) in [(10, 0), (200_000, 1), (3 << 20, 17), (THREADED + 5, 4095)] {
            let mut memory = vec![0u8; len + start];
            let buf = &mut memory[start..];
            let chunks = fill_pattern(buf, 1 << 20, None);
            assert_eq!(chunks.iter().sum::<usize>(), len);
            assert!(chunks.iter().rev().skip(1).all(|&c| c == 1 << 20));
            assert!(
                buf.iter().enumerate().all(|(i, &b)| b == (i * 7 + 3) as u8),
                "len {len}"
            );
            assert!(memory[..start].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn a_fill_that_panics_stops_the_helper() {
        // The scope joins the helper: were it left waiting, this would hang.
        let mut buf = vec![0u8; THREADED + 4096];
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut calls = 0;
            fill_in_order(&mut buf, 1 << 20, |_| {
                calls += 1;
                assert!(calls < 2, "the input's reader panicked");
                Ok::<bool, ()>(true)
            })
        }));
        assert!(caught.is_err());
    }

    #[test]
    fn a_fill_that_stops_or_fails_leaves_the_rest_untouched() {
        let len = THREADED + 4096;
        let mut buf = vec![0x5au8; len];
        let chunks = fill_pattern(&mut buf, 1 << 20, Some(3));
        assert_eq!(chunks.len(), 3);
        assert!(
            buf[3 << 20..].iter().all(|&b| b == 0x5a),
            "made pages keep their bytes"
        );

        let mut calls = 0;
        let result = fill_in_order(&mut buf, 1 << 20, |_| {
            calls += 1;
            if calls == 2 {
                Err("input failed")
            } else {
                Ok(true)
            }
        });
        assert_eq!(result, Err("input failed"));
        assert_eq!(calls, 2);
    }
}
