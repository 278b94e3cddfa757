//! The whole pages of a buffer, and the one call that makes them.

use std::sync::atomic::{AtomicBool, Ordering};

/// Ranges smaller than this are left to fault: a few faults cost less than the call.
pub(super) const SMALLEST: usize = 64 << 10;

/// Set once the kernel answered that it has no `MADV_POPULATE_WRITE` (before Linux 5.14),
/// so that no further call is made to hear it again.
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// The whole pages inside a buffer, by address: `[start, end)`, both on page boundaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Pages {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) page: usize,
}

impl Pages {
    /// The whole pages inside `buf`, if there are at least [`SMALLEST`] bytes of them.
    pub(super) fn inside(buf: &[u8]) -> Option<Self> {
        if buf.len() < SMALLEST {
            return None;
        }
        // SAFETY: `sysconf` reads a constant of the process; it touches no memory of ours.
        #[allow(unsafe_code)]
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        Self::within(buf.as_ptr().addr(), buf.len(), usize::try_from(page).ok()?)
    }

    /// The whole pages of `page` bytes (a power of two) inside the `len` bytes at address
    /// `addr`, if there are at least [`SMALLEST`] bytes of them.
    pub(super) fn within(addr: usize, len: usize, page: usize) -> Option<Self> {
        if !page.is_power_of_two() {
            return None;
        }
        let start = addr.checked_next_multiple_of(page)?;
        let end = addr.checked_add(len)? & !(page - 1);
        (end >= start.checked_add(SMALLEST)?).then_some(Self { start, end, page })
    }

    /// The pages from `from` (an address on a page boundary, at least `start`) up to `to`,
    /// clamped to the end and taken down to a page boundary.
    pub(super) fn part(self, from: usize, to: usize) -> Self {
        let end = to.min(self.end) & !(self.page - 1);
        Self {
            start: from.clamp(self.start, end.max(self.start)),
            end: end.max(self.start),
            ..self
        }
    }

    /// Asks the kernel to make these pages present and writable; returns whether it did.
    /// A call interrupted by a signal is made again, up to three times in all.
    pub(super) fn make(self) -> bool {
        if self.end <= self.start {
            return true;
        }
        if UNSUPPORTED.load(Ordering::Relaxed) {
            return false;
        }
        for _ in 0..3 {
            // SAFETY: every `Pages` comes from `inside` of a buffer, narrowed by `part`, so
            // its range lies inside that buffer, which the caller of `fill_in_order` holds
            // mutably until every use of the range is over (the helper thread is joined
            // before `fill_with_helper` returns). MADV_POPULATE_WRITE faults the pages in as
            // if each were written with its own value: it changes no byte, mapping or
            // protection, whatever else writes the pages at the same time (the kernel
            // serialises faults on a page), and on failure (EINVAL before Linux 5.14,
            // ENOMEM, EINTR, EFAULT) it has done nothing a write would not do. The address is
            // only passed to the kernel, never dereferenced.
            #[allow(unsafe_code)]
            let done = unsafe {
                libc::madvise(
                    std::ptr::without_provenance_mut(self.start),
                    self.end - self.start,
                    libc::MADV_POPULATE_WRITE,
                )
            };
            if done == 0 {
                return true;
            }
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EINVAL) => UNSUPPORTED.store(true, Ordering::Relaxed),
                _ => {}
            }
            return false;
        }
        false
    }
}
