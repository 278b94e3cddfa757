//! Filling a large buffer front to back with its pages made ahead of the reads.
//!
//! Reading a payload into fresh memory takes one page fault per 4 KiB page, each trapping
//! into the kernel from inside the copy. On Linux 5.14 and later one
//! `madvise(MADV_POPULATE_WRITE)` makes a whole range's pages at once instead, and it
//! changes no byte: it only decides when the pages are made. For a large buffer, on a
//! machine with more than one CPU, a helper thread makes them a little ahead of the reads,
//! so that making pages (the larger part of loading fresh memory) and reading and
//! checksumming overlap; the reader never waits for it, but makes the pages of a chunk
//! the helper has not reached itself. Measured in a C program on the development machine,
//! 1 GiB from the page cache: 0.94 s with a fault per page, 0.53 s with each chunk made
//! before its read, 0.40 s with the pages made ahead by a second thread.

#[cfg(target_os = "linux")]
mod helper;
#[cfg(target_os = "linux")]
mod pages;
#[cfg(all(test, target_os = "linux"))]
mod tests;

/// When a helper thread makes the pages, and how far ahead.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tuning {
    /// Buffers at least this long have their pages made by a helper thread.
    threaded: usize,
    /// How far past the start of the chunk being read the helper may have made pages: all a
    /// stream that ends early (a header that lies about its length) can make the buffer
    /// commit beyond its data. Never less than two chunks (see `helper::make_ahead`).
    ahead: usize,
}

impl Tuning {
    /// What `SnapshotReader::read_payload_into` uses.
    pub(crate) const LOADS: Self = Self {
        threaded: 32 << 20,
        ahead: 32 << 20,
    };
}

/// Fills `buf` front to back, `chunk` bytes at a time (the last may be shorter), by calling
/// `fill` on each in order until it returns `Ok(false)` (the input ended) or an error.
/// Each chunk's pages are made before `fill` writes it, when the system can (see the
/// module's documentation); `fill` sees the same chunks, on the calling thread, in every
/// case.
pub(crate) fn fill_in_order<E>(
    buf: &mut [u8],
    chunk: usize,
    tuning: Tuning,
    mut fill: impl FnMut(&mut [u8]) -> Result<bool, E>,
) -> Result<(), E> {
    let chunk = chunk.max(1);
    #[cfg(target_os = "linux")]
    if buf.len() >= tuning.threaded
        && let Some(pages) = pages::Pages::inside(buf)
        && std::thread::available_parallelism().is_ok_and(|n| n.get() > 1)
    {
        return helper::fill_with_helper(buf, chunk, pages, tuning.ahead, fill);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = tuning;
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
        make_pages(part);
        if !fill(part)? {
            break;
        }
    }
    Ok(())
}

/// Makes the whole pages inside `part`, when the system can (see the module's
/// documentation): what a chunk gets before it is filled, when no helper made them.
fn make_pages(part: &[u8]) {
    #[cfg(target_os = "linux")]
    if let Some(pages) = pages::Pages::inside(part) {
        pages.make();
    }
    #[cfg(not(target_os = "linux"))]
    let _ = part;
}
