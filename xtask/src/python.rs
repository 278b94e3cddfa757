//! The Python package's tests, run by `cargo xtask test`: a virtual environment under
//! `target/` with the pinned maturin and pytest (`crates/bloom-py/requirements-test.txt`),
//! the package built into it with `maturin develop`, then pytest over
//! `crates/bloom-py/tests` against the `bloom` command built beside it.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::step::run;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The virtual environment, created (and its tools installed) when missing or when the
/// pinned versions changed.
fn environment(target: &Path) -> Result<PathBuf, String> {
    let venv = target.join("python-venv");
    let requirements = root().join("crates/bloom-py/requirements-test.txt");
    let wanted = std::fs::read_to_string(&requirements)
        .map_err(|e| format!("{}: {e}", requirements.display()))?;
    let stamp = venv.join("requirements-installed.txt");
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(venv);
    }
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
    run(
        Command::new(&python).args(["-m", "venv", "--clear"]).arg(&venv),
        &format!("{python} -m venv {}", venv.display()),
    )
    .map_err(|e| {
        format!("{e}; the Python tests need Python 3.9 or later with its venv module (Debian: `apt-get install python3-venv`)")
    })?;
    run(
        Command::new(venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
            ])
            .arg(&requirements),
        "pip install -r crates/bloom-py/requirements-test.txt",
    )?;
    std::fs::write(&stamp, wanted).map_err(|e| format!("{}: {e}", stamp.display()))?;
    Ok(venv)
}

/// Builds the package into the environment and runs its tests.
pub(crate) fn test(target: &Path) -> Result<(), String> {
    let venv = environment(target)?;
    let path = std::env::join_paths(std::iter::once(venv.join("bin")).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .map_err(|e| e.to_string())?;
    run(
        Command::new(venv.join("bin/maturin"))
            .args(["develop", "--locked", "--quiet", "-m"])
            .arg(root().join("crates/bloom-py/Cargo.toml"))
            .env("VIRTUAL_ENV", &venv)
            .env("PATH", &path),
        "maturin develop -m crates/bloom-py/Cargo.toml",
    )?;
    run(
        Command::new(venv.join("bin/python"))
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(root().join("crates/bloom-py/tests"))
            .env("BLOOM_CLI", target.join("debug/bloom"))
            .env("PATH", &path),
        "pytest crates/bloom-py/tests",
    )
}
