//! `cargo xtask test`: the README's test command. Makes sure the servers the tests start
//! themselves are installed (installing Debian's packages when they are missing and we run as
//! root or have password-less sudo, or saying exactly what to run otherwise), then runs the
//! whole suite with
//! `--no-fail-fast`, so that one failing test binary never hides the others, and the Python
//! package's tests (`python.rs`).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// A program the test suite starts by itself, and the Debian package that provides it.
struct Requirement {
    /// The program, as the tests look it up.
    program: &'static str,
    /// Directories searched besides `PATH` (Debian puts PostgreSQL's server programs in a
    /// versioned directory that is not on `PATH`).
    extra_dirs: fn() -> Vec<PathBuf>,
    /// The Debian package to install when it is missing.
    package: &'static str,
    /// Which tests need it.
    used_by: &'static str,
    /// Whether `program` is a library file (found in `extra_dirs` only, executable or not)
    /// rather than a program.
    library: bool,
}

const fn no_extra_dirs() -> Vec<PathBuf> {
    Vec::new()
}

/// Debian's `/usr/lib/postgresql/VERSION/bin` directories.
fn postgres_dirs() -> Vec<PathBuf> {
    std::fs::read_dir("/usr/lib/postgresql")
        .map(|dirs| dirs.flatten().map(|d| d.path().join("bin")).collect())
        .unwrap_or_default()
}

/// Everything the suite starts on 127.0.0.1 by itself. No test is skipped when one is missing:
/// the tests that need it fail and say so, which is why this command installs them first.
const REQUIREMENTS: &[Requirement] = &[
    Requirement {
        program: "redis-server",
        extra_dirs: no_extra_dirs,
        package: "redis-server",
        used_by: "bloom-redis and bloom-cli's Redis tests",
        library: false,
    },
    Requirement {
        program: "redis-cli",
        extra_dirs: no_extra_dirs,
        package: "redis-tools",
        used_by: "the Redis Cluster tests (redis-cli --cluster create)",
        library: false,
    },
    Requirement {
        program: "redis-sentinel",
        extra_dirs: no_extra_dirs,
        package: "redis-sentinel",
        used_by: "the Redis Sentinel failover tests",
        library: false,
    },
    Requirement {
        program: "initdb",
        extra_dirs: postgres_dirs,
        package: "postgresql",
        used_by: "bloom-postgres's tests (a throwaway cluster per test: initdb, postgres, pg_ctl, pg_dump)",
        library: false,
    },
    Requirement {
        program: "psql",
        extra_dirs: postgres_dirs,
        package: "postgresql-client",
        used_by: "bloom-postgres's crash probe (restores a pg_dump)",
        library: false,
    },
    Requirement {
        program: "openssl",
        extra_dirs: no_extra_dirs,
        package: "openssl",
        used_by: "the Redis TLS tests (a throwaway certificate authority)",
        library: false,
    },
    Requirement {
        program: "valgrind",
        extra_dirs: no_extra_dirs,
        package: "valgrind",
        used_by: "bloom-ffi's C tests (leaks and invalid accesses through the C ABI)",
        library: false,
    },
    Requirement {
        program: "cc",
        extra_dirs: no_extra_dirs,
        package: "gcc",
        used_by: "bloom-ffi's C tests (a C program against the static library)",
        library: false,
    },
    Requirement {
        program: "python3",
        extra_dirs: no_extra_dirs,
        package: "python3-venv",
        used_by: "the Python package's tests (a virtual environment with maturin and pytest)",
        library: false,
    },
    Requirement {
        program: "libclang.so",
        extra_dirs: clang_dirs,
        package: "libclang-dev",
        used_by: "building bloom-redis-module (the redis-module crate's bindgen reads redismodule.h)",
        library: true,
    },
];

/// Where Debian puts `libclang.so`.
fn clang_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib")
        .map(|dirs| {
            dirs.flatten()
                .map(|d| d.path())
                .filter(|p| {
                    p.file_name()
                        .is_some_and(|n| n.to_string_lossy().starts_with("llvm-"))
                })
                .map(|p| p.join("lib"))
                .collect()
        })
        .unwrap_or_default();
    dirs.push(PathBuf::from("/usr/lib/x86_64-linux-gnu"));
    dirs
}

impl Requirement {
    fn is_present(&self) -> bool {
        if self.library {
            (self.extra_dirs)()
                .iter()
                .any(|dir| dir.join(self.program).exists())
        } else {
            find(self.program, &(self.extra_dirs)()).is_some()
        }
    }
}

/// Whether `program` can be found on `PATH` or in `extra`.
fn find(program: &str, extra: &[PathBuf]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(extra.iter().cloned())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether this process runs as root (so that apt-get can install without sudo).
fn is_root() -> bool {
    // /proc/self/status has "Uid:\treal\teffective\t...".
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// Whether `sudo` runs commands without asking for a password (as on CI machines).
fn can_sudo() -> bool {
    find("sudo", &[]).is_some()
        && Command::new("sudo")
            .args(["-n", "true"])
            .status()
            .is_ok_and(|s| s.success())
}

fn apt_get(sudo: bool, args: &[&str]) -> Result<(), String> {
    let mut command = if sudo {
        let mut c = Command::new("sudo");
        c.args(["-n", "env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]);
        c
    } else {
        Command::new("apt-get")
    };
    let status = command
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .map_err(|e| format!("cannot run apt-get: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`apt-get {}` failed ({status})", args.join(" ")))
    }
}

/// `cargo xtask setup`: installs what the build and the tests need, or explains what to run.
pub(crate) fn setup() -> ExitCode {
    match ensure_requirements() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Installs what is missing, or explains what to run.
fn ensure_requirements() -> Result<(), String> {
    let missing: Vec<&Requirement> = REQUIREMENTS.iter().filter(|r| !r.is_present()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut packages: Vec<&str> = missing.iter().map(|r| r.package).collect();
    packages.dedup();
    for r in &missing {
        eprintln!(
            "missing: {} (package {}), needed by {}",
            r.program, r.package, r.used_by
        );
    }
    let can_apt = find("apt-get", &[]).is_some();
    let sudo = !is_root() && can_sudo();
    if !(is_root() || sudo) || !can_apt {
        let why = if can_apt {
            "this command installs them only as root (or with sudo that needs no password)"
        } else {
            "this machine has no apt-get"
        };
        return Err(format!(
            "the test servers are missing and {why}; install them, then run `cargo xtask test` again:\n    sudo apt-get update && sudo apt-get install -y {}",
            packages.join(" ")
        ));
    }
    eprintln!("installing {} with apt-get", packages.join(" "));
    apt_get(sudo, &["update", "-qq"])?;
    let mut install = vec!["install", "-y", "-qq", "--no-install-recommends"];
    install.extend(&packages);
    apt_get(sudo, &install)?;
    let still: Vec<&str> = missing
        .iter()
        .filter(|r| !r.is_present())
        .map(|r| r.program)
        .collect();
    if still.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "still missing after apt-get install: {}",
            still.join(", ")
        ))
    }
}

/// Runs the suite: every test binary and the doc tests, with `extra` passed on to
/// `cargo test` (for example `-p bloom-store`, which then replaces `--workspace`, or
/// `-- --test-threads 1`).
pub(crate) fn run(extra: &[&str]) -> ExitCode {
    if let Err(e) = ensure_requirements() {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    // `--workspace` would override a package chosen in `extra`.
    let chosen = extra
        .iter()
        .take_while(|a| **a != "--")
        .any(|a| a.starts_with("-p") || a.starts_with("--package"));
    // The Redis tests load the module into their servers, and the C and Python tests run
    // the `bloom` command: built first, where they look.
    let first = [
        "build",
        "--locked",
        "-p",
        "bloom-redis-module",
        "-p",
        "bloom-cli",
    ];
    if !cargo_ok(&cargo, &first, None) {
        return ExitCode::FAILURE;
    }
    let mut args = vec!["test"];
    if !chosen {
        args.push("--workspace");
    }
    args.extend(["--locked", "--no-fail-fast"]);
    args.extend(extra);
    let mut ok = cargo_ok(&cargo, &args, None);
    // The Redis suites once more with the module in every server they start, so that each
    // of their cases (faults included: eviction, restarts, failovers, a reshard) runs through
    // the module's commands as well. The Sentinel suite is left out: finding the master is
    // the same with or without the module, and its failovers are judged as lost_writes'.
    if !chosen {
        let again = [
            "test",
            "--locked",
            "--no-fail-fast",
            "-p",
            "bloom-redis",
            "--test",
            "filter",
            "--test",
            "lost_writes",
            "--test",
            "cluster",
            "--test",
            "shared_store",
        ];
        ok &= cargo_ok(&cargo, &again, Some(("BLOOM_REDIS_TEST_PATH", "module")));
    }
    // The Python package, built with maturin and tested with pytest.
    let python = extra
        .iter()
        .take_while(|a| **a != "--")
        .any(|a| a.contains("bloom-py"));
    if !chosen || python {
        let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"),
            PathBuf::from,
        );
        if let Err(e) = crate::python::test(&target) {
            eprintln!("error: {e}");
            ok = false;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        eprintln!("error: the test suite failed");
        ExitCode::FAILURE
    }
}

/// Runs cargo with `args` (and one environment variable); whether it succeeded.
fn cargo_ok(cargo: &std::ffi::OsStr, args: &[&str], env: Option<(&str, &str)>) -> bool {
    let mut command = Command::new(cargo);
    command.args(args);
    let shown = env.map_or(String::new(), |(k, v)| format!("{k}={v} "));
    if let Some((key, value)) = env {
        command.env(key, value);
    }
    crate::step::run(&mut command, &format!("{shown}cargo {}", args.join(" ")))
        .map_err(|e| eprintln!("error: {e}"))
        .is_ok()
}
