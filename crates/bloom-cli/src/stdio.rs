//! What standard output is, for a snapshot or an export written there. Rust's runtime gives a
//! closed standard output `/dev/null` before `main`, and Rust's standard library counts a
//! write that fails with `EBADF` (a standard output open for reading only) as written: a
//! snapshot sent to either would be lost without a word. So `-o -` refuses them, and the
//! devices that discard what they are given.

/// Why standard output would lose what is written to it, or `None` when it would not (or
/// this cannot be told).
pub(crate) fn stdout_loses_writes() -> Option<&'static str> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        if !open_for_writing() {
            return Some("standard output is not open for writing");
        }
        let out = std::fs::metadata("/dev/fd/1").ok()?;
        if !out.file_type().is_char_device() {
            return None;
        }
        for (device, why) in [
            ("/dev/null", "standard output is /dev/null (or was closed)"),
            ("/dev/zero", "standard output is /dev/zero"),
        ] {
            if std::fs::metadata(device).is_ok_and(|d| d.rdev() == out.rdev()) {
                return Some(why);
            }
        }
        None
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Whether descriptor 1 was opened for writing, as Linux's `/proc/self/fdinfo/1` says
/// (its `flags` in octal, the access mode in the low two bits: 0 is read-only). Where that
/// cannot be read, it is taken as open for writing.
#[cfg(unix)]
fn open_for_writing() -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/fdinfo/1") else {
        return true;
    };
    info.lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .and_then(|flags| u32::from_str_radix(flags.trim(), 8).ok())
        .is_none_or(|flags| flags & 0o3 != 0)
}
