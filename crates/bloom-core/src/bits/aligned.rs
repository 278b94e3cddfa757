//! The word array's storage: zeroed words from the allocator, the first on a 64-byte boundary.

use super::{AllocError, BitsError, Word, check_padding, word_len};

/// Spare words allocated so that the array can start on a 64-byte boundary.
pub(super) const ALIGN_SPARE: usize = 7;

/// The number of `W`s to skip from `ptr` to reach the next 64-byte boundary.
pub(super) fn align_offset<W>(ptr: *const W) -> usize {
    let size = std::mem::size_of::<W>().max(1);
    ((64 - ptr.addr() % 64) % 64) / size
}

/// A word array whose first word sits on a 64-byte boundary, so that each 512-bit block of
/// the blocked and split-block layouts is exactly one cache line (a plain `Vec` is only
/// 16-byte aligned: a block would straddle two lines). The memory is a `Vec` with padding
/// words before the array, zeroed by the allocator (`calloc`, whose large blocks are fresh
/// pages: an allocation aligned to 64 bytes would be written with zeros up front); it
/// dereferences to the words through a pointer and a length kept from when it was made (an
/// offset sliced on every access cost six instructions of a one-key insert).
pub(crate) struct AlignedWords<W> {
    /// Owns the memory: padding words, then the words, nothing after them. Never resized,
    /// read or written after `from_buf`; only dropped (hence the underscore).
    _buf: Vec<W>,
    /// The first word, inside `_buf`'s allocation.
    first: std::ptr::NonNull<W>,
    /// The number of words from `first` to the end of `_buf`.
    len: usize,
}

// SAFETY: an `AlignedWords` owns its words exactly as the `Vec` it holds does (`first` points
// into that `Vec`'s allocation, and nothing else refers to it), so it may be sent or shared
// between threads when that `Vec` may.
#[allow(unsafe_code)]
unsafe impl<W: Send> Send for AlignedWords<W> {}
// SAFETY: as for `Send`.
#[allow(unsafe_code)]
unsafe impl<W: Sync> Sync for AlignedWords<W> {}

impl<W: Word> AlignedWords<W> {
    /// `len` zero words, reporting allocation failure instead of aborting.
    ///
    /// The memory comes zeroed from the allocator, not written here: a large array is fresh
    /// pages that the system zeroes on first touch, so a filter costs memory as it fills and
    /// a snapshot load writes each page once (with the payload), not twice.
    pub(crate) fn zeroed(len: usize, bytes: u64) -> Result<Self, AllocError> {
        let total = len.checked_add(ALIGN_SPARE).ok_or(AllocError { bytes })?;
        let mut buf = bytemuck::allocation::try_zeroed_slice_box::<W>(total)
            .map_err(|_| AllocError { bytes })?
            .into_vec();
        let offset = align_offset(buf.as_ptr());
        buf.truncate(offset + len);
        Ok(Self::from_buf(buf, offset))
    }

    /// [`AlignedWords::zeroed`], a failed allocation handled as the global allocator handles
    /// it (as `Vec::clone` does): for copies of an array that exists.
    pub(crate) fn zeroed_or_abort(len: usize) -> Self {
        Self::zeroed(len, len as u64 * 8).unwrap_or_else(|_| {
            let layout = std::alloc::Layout::array::<W>(len.saturating_add(ALIGN_SPARE))
                .unwrap_or(std::alloc::Layout::new::<W>());
            std::alloc::handle_alloc_error(layout)
        })
    }

    /// The words of `buf` from `offset` on (none if it is past the end): the one maker of an
    /// `AlignedWords`, which `Deref` rests on.
    pub(super) fn from_buf(mut buf: Vec<W>, offset: usize) -> Self {
        let offset = offset.min(buf.len());
        // `as_mut_ptr` makes no reference to the elements (its documented guarantee for the
        // aliasing model), so `first` stays valid for as long as `buf` is neither used nor
        // dropped, and it never is but dropped with the `AlignedWords`.
        let first = std::ptr::NonNull::new(buf.as_mut_ptr().wrapping_add(offset))
            .unwrap_or(std::ptr::NonNull::dangling());
        Self {
            len: buf.len() - offset,
            _buf: buf,
            first,
        }
    }
}

impl<W: Word> AlignedWords<W> {
    /// A `bits`-bit array filled in place by `fill`, which receives the array's little-endian
    /// byte image (`ceil(bits / 8)` bytes) to write: one copy, straight into the words.
    pub(crate) fn filled_in_place<E: From<BitsError>>(
        bits: u64,
        fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<Self, E> {
        let byte_len = bits.div_ceil(8);
        let mut words = Self::zeroed(word_len(bits).map_err(BitsError::from)?, byte_len)
            .map_err(BitsError::from)?;
        let image = W::bytes_mut(&mut words[..]);
        let used = usize::try_from(byte_len)
            .map_err(|_| BitsError::from(AllocError { bytes: byte_len }))?;
        let image = image.get_mut(..used).ok_or(BitsError::Length {
            bits,
            expected: byte_len,
            found: 0,
        })?;
        fill(image)?;
        check_padding(bits, image.last().copied().unwrap_or(0))?;
        // The image is little-endian; on a big-endian machine the words are swapped once.
        for word in words.iter_mut() {
            word.swap_from_le();
        }
        Ok(words)
    }
}

impl<W> std::ops::Deref for AlignedWords<W> {
    type Target = [W];

    #[inline(always)]
    fn deref(&self) -> &[W] {
        // SAFETY: `first` is `_buf`'s pointer advanced by an offset no greater than its length
        // (`from_buf`, the one maker of an `AlignedWords`), so the `len` words from it are the
        // initialised end of `_buf`, in one allocation that lives, unmoved and otherwise
        // untouched, as long as `self`. The borrow of `self` covers the slice's.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts(self.first.as_ptr(), self.len)
        }
    }
}

impl<W> std::ops::DerefMut for AlignedWords<W> {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [W] {
        // SAFETY: as in `deref`; the exclusive borrow of `self` covers the slice's, and
        // `_buf` is never used to reach the words.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts_mut(self.first.as_ptr(), self.len)
        }
    }
}

// For the kernels, which take their words as a container and reach them only once a key is
// hashed (`kernel::Insert::taken`).
impl<W> AsRef<[W]> for AlignedWords<W> {
    #[inline(always)]
    fn as_ref(&self) -> &[W] {
        self
    }
}

impl<W> AsMut<[W]> for AlignedWords<W> {
    #[inline(always)]
    fn as_mut(&mut self) -> &mut [W] {
        self
    }
}

/// Like `Vec::clone`, a failed allocation is handled as the global allocator handles it.
impl Clone for AlignedWords<u64> {
    fn clone(&self) -> Self {
        let mut copy = Self::zeroed_or_abort(self.len());
        copy.copy_from_slice(self);
        copy
    }
}

impl PartialEq for AlignedWords<u64> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl std::fmt::Debug for AlignedWords<u64> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AlignedWords({} words)", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_arrays_are_aligned_zeroed_and_exactly_their_length() {
        for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 1000] {
            let mut words = AlignedWords::<u64>::zeroed(len, len as u64 * 8).unwrap();
            assert_eq!(words.len(), len);
            assert_eq!(words.as_ptr().addr() % 64, 0, "len {len}");
            assert!(words.iter().all(|&w| w == 0), "len {len}");
            for (i, w) in words.iter_mut().enumerate() {
                *w = i as u64 + 1;
            }
            let copy = words.clone();
            assert_eq!(copy.len(), len);
            assert_eq!(copy.as_ptr().addr() % 64, 0, "len {len}");
            assert!(copy.iter().enumerate().all(|(i, &w)| w == i as u64 + 1));
            assert!(copy == words);

            let atomic =
                AlignedWords::<std::sync::atomic::AtomicU64>::zeroed(len, len as u64 * 8).unwrap();
            assert_eq!(atomic.len(), len);
            assert_eq!(atomic.as_ptr().addr() % 64, 0, "len {len}");
        }
    }
}
