//! `cargo xtask ffi-header [--check]`: generates `crates/bloom-ffi/include/bloom.h` from the
//! C ABI's source with cbindgen, or (with `--check`, as CI runs it) fails when the committed
//! header is not what the source declares.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Write the header, or only check it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Write,
    Check,
}

fn crate_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/bloom-ffi")
}

/// The header the C ABI's source declares.
fn generate(dir: &Path) -> Result<String, String> {
    let config = cbindgen::Config::from_file(dir.join("cbindgen.toml"))
        .map_err(|e| format!("cbindgen.toml: {e}"))?;
    let bindings = cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .map_err(|e| format!("cbindgen: {e}"))?;
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).map_err(|e| format!("cbindgen wrote a header that is not UTF-8: {e}"))
}

pub(crate) fn run(mode: Mode) -> ExitCode {
    let dir = crate_dir();
    let path = dir.join("include/bloom.h");
    let generated = match generate(&dir) {
        Ok(header) => header,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    match mode {
        Mode::Check if committed == generated => ExitCode::SUCCESS,
        Mode::Check => {
            eprintln!(
                "error: {} is not what crates/bloom-ffi/src/c declares; run `cargo xtask ffi-header` and commit it",
                path.display()
            );
            ExitCode::FAILURE
        }
        Mode::Write => match std::fs::write(&path, generated) {
            Ok(()) => {
                eprintln!("wrote {}", path.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: cannot write {}: {e}", path.display());
                ExitCode::FAILURE
            }
        },
    }
}
