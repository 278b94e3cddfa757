//! The helper thread that makes a buffer's pages ahead of the reads, and what the reader
//! and the helper tell each other.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::pages::Pages;
use super::{fill_inline, make_pages};

/// What the reader and the helper tell each other.
#[derive(Default)]
struct State {
    /// Bytes of the buffer from its start whose pages the reader need not make: up to the
    /// end of the pages made (by the helper, or by the reader for the chunks it skipped
    /// past; the bytes before the first whole page are left to fault), or all of them once
    /// the helper is done.
    made: usize,
    /// Where the chunk the reader fills starts; `None` before the first, when the helper
    /// skips nothing.
    read: Option<usize>,
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

/// Marks one side done when dropped, however it ends (a panic included): the other side
/// must never be left waiting for it.
struct Done<'a> {
    shared: &'a Shared,
    mark: fn(&mut State),
}

impl Drop for Done<'_> {
    fn drop(&mut self) {
        self.shared.update(self.mark);
    }
}

/// [`super::fill_in_order`] with the pages of `buf` (`pages`) made by a helper thread, at
/// most `ahead` bytes past the start of the chunk being read. The reader never waits for
/// the helper: a chunk whose pages the helper has not made yet has them made by the reader,
/// as without a helper, and the helper goes on past it. (Waiting cost a hand-over between
/// the threads per chunk: when both ran on one CPU, a 1 GiB load took up to three times as
/// long.) Without a thread, the chunks fill as for a smaller buffer.
pub(super) fn fill_with_helper<E>(
    buf: &mut [u8],
    chunk: usize,
    pages: Pages,
    ahead: usize,
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
            .stack_size(64 << 10)
            .spawn_scoped(scope, || {
                let _done = Done {
                    shared: &shared,
                    mark: |s| {
                        s.helper_done = true;
                        s.made = usize::MAX;
                    },
                };
                block_signals();
                make_ahead(&shared, pages, base, len, chunk, ahead);
            });
        if helper.is_err() {
            return fill_inline(buf, chunk, &mut fill);
        }
        let _done = Done {
            shared: &shared,
            mark: |s| s.reader_done = true,
        };
        let mut offset = 0;
        for part in buf.chunks_mut(chunk) {
            let end = offset + part.len();
            let made = {
                let mut state = shared.lock();
                state.read = Some(offset);
                shared.changed.notify_all();
                state.made >= end || state.helper_done
            };
            if !made {
                make_pages(part);
            }
            if !fill(part)? {
                break;
            }
            offset = end;
        }
        Ok(())
    })
}

/// The helper: makes `pages` a step at a time, front to back, never past `ahead` bytes (at
/// least two steps) beyond the start of the chunk being read, and never behind the end of
/// that chunk (whose pages the reader makes when the helper has not), until every page is
/// made, the kernel refuses, or the reader is done.
fn make_ahead(shared: &Shared, pages: Pages, base: usize, len: usize, chunk: usize, ahead: usize) {
    let step = chunk.max(pages.page);
    // The chunk being read ends at most a step past where it starts: from its end (taken
    // down to a page) the helper can always make the next step.
    let ahead = ahead.max(step.saturating_mul(2));
    let mut next = pages.start;
    loop {
        {
            let mut state = shared.lock();
            while !state.reader_done
                && (next - base).saturating_add(step)
                    > state.read.unwrap_or(0).saturating_add(ahead)
            {
                state = shared.wait(state);
            }
            if state.reader_done {
                return;
            }
            // Past the whole pages of the chunk being read: the reader makes them when the
            // helper has not. Taken down to a page, so that the page the chunk ends in is
            // made here, and the next step ends within `ahead`.
            if let Some(read) = state.read {
                let reading_end = (base + read).saturating_add(chunk) & !(pages.page - 1);
                next = next.max(reading_end.min(pages.end));
            }
        }
        let part = pages.part(next, next.saturating_add(step));
        let made = part.make();
        next = part.end;
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

/// Keeps signals sent to the process from landing on the helper: they go to the program's
/// own threads, as before it had one.
fn block_signals() {
    let mut set = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
    // SAFETY: `sigfillset` initialises the set on our stack before `pthread_sigmask` reads
    // it, and `pthread_sigmask` changes the mask of this thread alone, which runs no code of
    // anyone else's. On failure the mask is unchanged, which is only what it was before.
    #[allow(unsafe_code)]
    unsafe {
        if libc::sigfillset(set.as_mut_ptr()) == 0 {
            libc::pthread_sigmask(libc::SIG_BLOCK, set.as_ptr(), std::ptr::null_mut());
        }
    }
}
