//! What standard output is, for a snapshot written there. Rust's runtime gives a closed
//! standard output `/dev/null` before `main`, so a snapshot "written" to a closed standard
//! output would be discarded without a word: `-o -` refuses the null device.

/// Whether standard output is the null device: redirected there, or closed when the process
/// started. Where this cannot be told, it is taken as not.
pub(crate) fn stdout_is_null() -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let (Ok(out), Ok(null)) = (
            std::fs::metadata("/dev/fd/1"),
            std::fs::metadata("/dev/null"),
        ) else {
            return false;
        };
        out.file_type().is_char_device() && out.rdev() == null.rdev()
    }
    #[cfg(not(unix))]
    {
        false
    }
}
