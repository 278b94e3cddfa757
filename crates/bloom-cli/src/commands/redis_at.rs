//! Where `bloom redis` finds Redis: the URL from `--url`, the environment or a file (never
//! repeated in a message), the target with its timeout counted from the command's start, and
//! the exit code of every Redis error.

use std::io::Read as _;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use bloom_redis::{RedisFilter, RedisFilterError, RedisTarget};

use crate::cli::RedisAt;
use crate::error::{CmdResult, Failure};

/// The environment variable read when no URL is given.
const URL_VARIABLE: &str = "BLOOM_REDIS_URL";
/// The longest URL file read.
const MAX_URL_FILE: u64 = 64 << 10;

/// When the command started: `--timeout` counts from here.
static STARTED: OnceLock<Instant> = OnceLock::new();

/// Marks the start of the command.
pub(crate) fn started() {
    STARTED.get_or_init(Instant::now);
}

/// The URLs: --url, --url-env, --url-file, or $BLOOM_REDIS_URL. No message repeats them.
fn urls(at: &RedisAt) -> CmdResult<Vec<String>> {
    let split = |text: &str| -> Vec<String> {
        text.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .flat_map(str::split_whitespace)
            .map(str::to_owned)
            .collect()
    };
    let (urls, from) = if !at.url.is_empty() {
        (at.url.clone(), "--url".to_owned())
    } else if let Some(var) = &at.url_env {
        let value = std::env::var(var).map_err(|e| {
            Failure::usage(format!(
                "--url-env {var}: the variable is {}",
                match e {
                    std::env::VarError::NotPresent => "not set",
                    std::env::VarError::NotUnicode(_) => "not UTF-8",
                }
            ))
        })?;
        (split(&value), format!("--url-env {var}"))
    } else if let Some(path) = &at.url_file {
        (
            split(&read_url_file(at, path)?),
            format!("--url-file {}", path.display()),
        )
    } else if let Ok(value) = std::env::var(URL_VARIABLE) {
        (split(&value), format!("${URL_VARIABLE}"))
    } else {
        return Err(Failure::usage(format!(
            "where is the filter? give --url URL, --url-env VAR or --url-file PATH (or set {URL_VARIABLE})"
        )));
    };
    if urls.is_empty() {
        return Err(Failure::usage(format!("{from} holds no URL")));
    }
    if urls.len() > 1 && !at.cluster && at.sentinel.is_none() {
        return Err(Failure::usage(format!(
            "{from} gives {} URLs: several are for --cluster (nodes) or --sentinel MASTER (Sentinels)",
            urls.len()
        )));
    }
    Ok(urls)
}

/// A URL file: a regular file (or a pipe) of at most 64 KiB of UTF-8.
fn read_url_file(at: &RedisAt, path: &Path) -> CmdResult<String> {
    let name = path.display();
    let bytes = read_small_file(at, path, MAX_URL_FILE, "--url-file")?;
    String::from_utf8(bytes).map_err(|_| Failure::usage(format!("--url-file {name} is not UTF-8")))
}

/// Reads a small file given by `flag` (a URL file, a CA file): at most `limit` bytes, within
/// the command's deadline (its `--timeout`, or the default wait on Redis), so that a named pipe
/// nobody writes to, or a slow one, ends the command instead of hanging it. A directory or
/// a file over the limit is a usage error.
fn read_small_file(at: &RedisAt, path: &Path, limit: u64, flag: &str) -> CmdResult<Vec<u8>> {
    let name = path.display().to_string();
    if std::fs::metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(Failure::usage(format!("{flag} {name} is a directory")));
    }
    let wait = at
        .timeout
        .map_or(bloom_redis::DEFAULT_TIMEOUT, Duration::from_secs_f64);
    let started = *STARTED.get_or_init(Instant::now);
    let left = (started + wait).saturating_duration_since(Instant::now());
    let (tx, rx) = std::sync::mpsc::channel();
    let owned = path.to_path_buf();
    // On a thread of its own: opening a named pipe blocks until a writer comes. Given up on
    // at the deadline (the process then ends, and the thread with it).
    std::thread::spawn(move || {
        let read = std::fs::File::open(&owned).and_then(|file| {
            let mut bytes = Vec::new();
            file.take(limit + 1).read_to_end(&mut bytes).map(|_| bytes)
        });
        let _ = tx.send(read);
    });
    let bytes = match rx.recv_timeout(left) {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => return Err(Failure::environment(format!("{flag} {name}: {e}"))),
        Err(_) => {
            return Err(Failure::environment(format!(
                "{flag} {name}: nothing to read within {} s (a named pipe nobody writes to?)",
                wait.as_secs_f64()
            )));
        }
    };
    if bytes.len() as u64 > limit {
        return Err(Failure::usage(format!(
            "{flag} {name} is over {} KiB: not such a file",
            limit >> 10
        )));
    }
    Ok(bytes)
}

pub(crate) fn target(at: &RedisAt) -> CmdResult<RedisTarget> {
    let urls = urls(at)?;
    let target = match &at.sentinel {
        Some(master) => RedisTarget::sentinel(urls, master.clone()),
        None if at.cluster => RedisTarget::cluster(urls),
        None => RedisTarget::single(urls.into_iter().next().unwrap_or_default()),
    };
    let target = match at.timeout {
        Some(seconds) => {
            let timeout = Duration::from_secs_f64(seconds);
            let started = *STARTED.get_or_init(Instant::now);
            target
                .with_timeout(timeout)
                .with_deadline(started + timeout)
        }
        None => target.with_timeout(bloom_redis::DEFAULT_TIMEOUT),
    };
    let target = target.with_module(at.module);
    match &at.tls_ca {
        Some(path) => Ok(target.with_tls_ca(read_small_file(at, path, 1 << 20, "--tls-ca")?)),
        None => Ok(target),
    }
}

pub(crate) fn failure(at: &RedisAt, error: &RedisFilterError) -> Failure {
    let name = &at.name;
    match error {
        RedisFilterError::InvalidName { .. }
        | RedisFilterError::NotSharded { .. }
        | RedisFilterError::ShardTooLarge { .. }
        | RedisFilterError::InvalidUrl { .. }
        | RedisFilterError::TlsUnavailable => Failure::usage(error),
        RedisFilterError::Unverified { .. } => Failure::unverified(error),
        // A key of the filter holding another type: retyped by hand or by another program,
        // so the filter is damaged (as a lost shard is), not Redis failing.
        RedisFilterError::Server { code, .. } if code == "WRONGTYPE" => Failure::input(format!(
            "redis filter {name}: {error}: a key of the filter holds another type (the filter is damaged; delete it and create it again)"
        )),
        RedisFilterError::Timeout { .. } => Failure::environment(match at.timeout {
            Some(seconds) => format!(
                "redis filter {name}: the command did not finish within --timeout {seconds} s (Redis is slow, stopped or unreachable, or the keys came slowly); nothing more was answered"
            ),
            None => format!(
                "redis filter {name}: {error} (Redis is slow, stopped or unreachable; --timeout SECONDS gives the whole command longer)"
            ),
        }),
        RedisFilterError::Redis(_)
        | RedisFilterError::Server { .. }
        | RedisFilterError::NotAcknowledged { .. }
        | RedisFilterError::NotDurable { .. }
        | RedisFilterError::NodeChanged
        | RedisFilterError::TooLarge { .. }
        | RedisFilterError::Unavailable(_)
        | RedisFilterError::ModuleMissing
        | RedisFilterError::TlsCa(_) => {
            Failure::environment(format!("redis filter {name}: {error}"))
        }
        // These carry no name of their own.
        RedisFilterError::Protocol(_) | RedisFilterError::Key(_) => {
            Failure::input(format!("redis filter {name}: {error}"))
        }
        _ => Failure::input(error),
    }
}

pub(crate) fn open(at: &RedisAt) -> CmdResult<RedisFilter> {
    RedisFilter::open(&target(at)?, &at.name).map_err(|e| failure(at, &e))
}
