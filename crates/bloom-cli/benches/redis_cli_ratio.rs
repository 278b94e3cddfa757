//! `bloom redis add` / `bloom redis check` against the server's own rate, on one local
//! `redis-server` (no persistence), measured in the same run as paired ratios: each round runs
//! a minimal raw-protocol client and then the CLI over the same 10^6 keys of 24 bytes, and the
//! report gives the median and its interquartile range.
//!
//! - The raw client (this file: a plain `TcpStream`, RESP by hand, 1,000 keys a command, 8
//!   commands in flight, the keys already in memory) sends `BF.MADD` / `BF.MEXISTS` to
//!   RedisBloom (`BF.RESERVE rb 0.01 1000000 NONSCALING`) when `REDISBLOOM_MODULE` names its
//!   shared object; otherwise the `bloom` module's own `BLOOM.MADD` / `BLOOM.MEXISTS` on a
//!   filter made as the CLI's is (each key hashed here to find its shard, 1,000 keys a
//!   command per shard). Either way its rate is the server's.
//! - The CLI: `bloom redis create --items 1000000 --fpr 0.01` (not timed), then `bloom redis
//!   add --keys FILE` and `bloom redis check --keys FILE > FILE` as whole processes (start,
//!   connection, metadata and all), with the module loaded.
//! - Per side: keys per second; client CPU per key (µs): the raw client's thread
//!   (`/proc/thread-self/schedstat`), the CLI's user + system time (bash's `time`, from
//!   `getrusage`, 1 ms resolution); and the server's CPU per key (`INFO cpu`).
//!
//! Run `cargo build --release -p bloom-redis-module`, then
//! `REDISBLOOM_MODULE=/path/to/redisbloom.so cargo bench -p bloom-cli --bench redis_cli_ratio`
//! (or without `REDISBLOOM_MODULE`). It loads the release build of the module (or
//! `$BLOOM_REDIS_MODULE`). RedisBloom v2.8 builds from its public source (with its
//! submodules) and loads into Redis 7.0.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use bloom_core::EncodedKey;
use bloom_redis::redis;
use bloom_testing::bench::report;
use bloom_testing::keys::SplitMix;
use bloom_testing::redis::{RedisServer, server_cpu};

const KEYS: usize = 1_000_000;
const KEY_BYTES: usize = 24;
const ROUNDS: usize = 7;
const PER_COMMAND: usize = 1_000;
const IN_FLIGHT: usize = 8;

/// One timed pass: keys per second, and client and server CPU µs per key.
#[derive(Clone, Copy)]
struct Pass {
    rate: f64,
    cpu: f64,
    server: f64,
}

/// `pass`, with the server's CPU per key over it (`INFO cpu` before and after).
fn with_server_cpu(server: &RedisServer, pass: impl FnOnce() -> Pass) -> Pass {
    let before = server_cpu(server);
    let pass = pass();
    Pass {
        server: (server_cpu(server) - before) / KEYS as f64 * 1e6,
        ..pass
    }
}

/// What the raw client sends, and to what.
enum Peer {
    RedisBloom,
    /// The `bloom` module's commands, on the shards it hashes keys to.
    Module(Shards),
}

/// A filter's shards as a raw client needs them: how to find a key's shard, and each
/// command's fixed words.
struct Shards {
    config: bloom_core::FilterConfig,
    shard_bits: u64,
    /// Per shard: the command's words after its name (shard key, creation, config, `ENCODED`).
    heads: Vec<Vec<Vec<u8>>>,
}

fn main() {
    let module = bloom_testing::redis::release_module_path();
    let redisbloom = std::env::var_os("REDISBLOOM_MODULE").map(PathBuf::from);
    let extra: Vec<String> = redisbloom
        .iter()
        .flat_map(|so| ["--loadmodule".to_owned(), so.display().to_string()])
        .collect();
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let server = RedisServer::start_with_module_file(module, &extra);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keys");
    let keys = key_file(&file);
    let bloom = env!("CARGO_BIN_EXE_bloom");

    let peer_name = if redisbloom.is_some() {
        "raw client, RedisBloom BF.MADD/BF.MEXISTS"
    } else {
        "raw client, bloom module BLOOM.MADD/BLOOM.MEXISTS"
    };
    println!(
        "==== {KEYS} keys of {KEY_BYTES} bytes; {peer_name}: {PER_COMMAND} keys a command, {IN_FLIGHT} in flight"
    );
    let mut raw: Vec<(Pass, Pass)> = Vec::new();
    let mut cli: Vec<(Pass, Pass)> = Vec::new();
    for _round in 0..ROUNDS {
        let peer = if redisbloom.is_some() {
            let _ = server.cli(&["DEL", "rb"]);
            assert_eq!(
                server
                    .cli(&["BF.RESERVE", "rb", "0.01", "1000000", "NONSCALING"])
                    .trim(),
                "OK"
            );
            Peer::RedisBloom
        } else {
            create(bloom, &server, "raw");
            Peer::Module(shards(&server, "raw"))
        };
        raw.push(raw_client(&server, &peer, &keys));
        if redisbloom.is_none() {
            bloom_cmd(bloom, &server, &["delete", "--name", "raw"]);
        }
        create(bloom, &server, "cli");
        let out = dir.path().join("answers");
        let add = with_server_cpu(&server, || {
            timed_cli(bloom, &server, "add", &file, &dir.path().join("added"))
        });
        let check = with_server_cpu(&server, || timed_cli(bloom, &server, "check", &file, &out));
        let answers = std::fs::read(&out).unwrap();
        assert_eq!(answers.iter().filter(|&&b| b == b'\n').count(), KEYS);
        assert!(!answers.starts_with(b"absent"));
        cli.push((add, check));
        bloom_cmd(bloom, &server, &["delete", "--name", "cli"]);
    }
    for (name, runs) in [(peer_name, &raw), ("bloom redis add / check", &cli)] {
        println!("== {name}");
        report("add keys/s", runs.iter().map(|r| r.0.rate).collect());
        report("check keys/s", runs.iter().map(|r| r.1.rate).collect());
        report(
            "add: client CPU per key (us)",
            runs.iter().map(|r| r.0.cpu).collect(),
        );
        report(
            "check: client CPU per key (us)",
            runs.iter().map(|r| r.1.cpu).collect(),
        );
        report(
            "add: server CPU per key (us)",
            runs.iter().map(|r| r.0.server).collect(),
        );
        report(
            "check: server CPU per key (us)",
            runs.iter().map(|r| r.1.server).collect(),
        );
    }
    let ratio = |f: fn(&(Pass, Pass)) -> f64| -> Vec<f64> {
        cli.iter().zip(&raw).map(|(c, r)| f(c) / f(r)).collect()
    };
    println!("== CLI / raw client, paired by round");
    report("add keys/s ratio", ratio(|r| r.0.rate));
    report("check keys/s ratio", ratio(|r| r.1.rate));
    report("add client CPU per key ratio", ratio(|r| r.0.cpu));
    report("check client CPU per key ratio", ratio(|r| r.1.cpu));
}

/// Writes `KEYS` distinct keys of `KEY_BYTES` bytes, one a line; returns the file's bytes.
fn key_file(path: &Path) -> Vec<u8> {
    let mut random = SplitMix(40);
    let mut bytes = Vec::with_capacity(KEYS * (KEY_BYTES + 1));
    for i in 0..KEYS {
        let key = format!("{:08x}-{:015x}", i, random.next() >> 4);
        assert_eq!(key.len(), KEY_BYTES);
        bytes.extend_from_slice(key.as_bytes());
        bytes.push(b'\n');
    }
    std::fs::write(path, &bytes).unwrap();
    bytes
}

fn bloom_cmd(bloom: &str, server: &RedisServer, args: &[&str]) {
    let status = Command::new(bloom)
        .arg("redis")
        .args(&args[..1])
        .args(["--url", &server.url()])
        .args(&args[1..])
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "bloom redis {args:?}: {status}");
}

fn create(bloom: &str, server: &RedisServer, name: &str) {
    let args = [
        "create", "--name", name, "--items", "1000000", "--fpr", "0.01",
    ];
    bloom_cmd(bloom, server, &args);
}

/// Runs `bloom redis OP --keys FILE > OUT` under bash's `time`: its rate and CPU per key.
fn timed_cli(bloom: &str, server: &RedisServer, op: &str, keys: &Path, out: &Path) -> Pass {
    let url = server.url();
    let output = Command::new("bash")
        .args([
            "-c",
            "TIMEFORMAT='%3R %3U %3S'; time \"$@\" > \"$OUT\" 2>/dev/null",
            "bash",
        ])
        .env("OUT", out)
        .args([bloom, "redis", op, "--url", &url, "--name", "cli", "--keys"])
        .arg(keys)
        .output()
        .unwrap();
    assert!(output.status.success(), "bloom redis {op}: {output:?}");
    let times = String::from_utf8(output.stderr).unwrap();
    let t: Vec<f64> = times
        .split_whitespace()
        .map(|t| t.parse().unwrap())
        .collect();
    let [real, user, sys] = t[..] else {
        panic!("bash's time printed {times:?}");
    };
    Pass {
        rate: KEYS as f64 / real,
        cpu: (user + sys) / KEYS as f64 * 1e6,
        server: 0.0,
    }
}

/// This thread's CPU time so far, in seconds.
fn thread_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    let ns: u64 = stat.split_whitespace().next().unwrap().parse().unwrap();
    ns as f64 / 1e9
}

/// The filter `name`'s shards, from its metadata, as a raw client needs them.
fn shards(server: &RedisServer, name: &str) -> Shards {
    let filter = bloom_redis::RedisFilter::open(&server.target(), name).unwrap();
    let config = filter.config().clone();
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let fields: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(bloom_redis::meta_key(name))
        .query(&mut conn)
        .unwrap();
    let meta =
        bloom_redis_protocol::meta::parse(|f| fields.get(f).map_or("", String::as_str)).unwrap();
    let text = bloom_redis_protocol::config::config_text(&meta.header);
    let count = config.layout().shards();
    let heads = (0..count)
        .map(|shard| {
            vec![
                bloom_redis::shard_key(name, shard).into_bytes(),
                meta.creation.hex().into_bytes(),
                text.clone().into_bytes(),
                bloom_redis_protocol::module::ENCODED.to_vec(),
            ]
        })
        .collect();
    Shards {
        shard_bits: config.bits() / u64::from(count),
        config,
        heads,
    }
}

/// The raw client's add and check passes over `keys` (one a line).
fn raw_client(server: &RedisServer, peer: &Peer, keys: &[u8]) -> (Pass, Pass) {
    let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream.set_nodelay(true).unwrap();
    let mut conn = Raw {
        reader: BufReader::with_capacity(1 << 16, stream.try_clone().unwrap()),
        writer: stream,
        command: Vec::new(),
        in_flight: 0,
        ones: 0,
        ints_answer: matches!(peer, Peer::RedisBloom),
    };
    let add = with_server_cpu(server, || conn.pass(peer, true, keys));
    let check = with_server_cpu(server, || conn.pass(peer, false, keys));
    assert_eq!(conn.ones, KEYS, "every key is found after it was added");
    (add, check)
}

/// A connection that keeps up to `IN_FLIGHT` commands unanswered.
struct Raw {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    command: Vec<u8>,
    in_flight: usize,
    /// `1` answers in the replies of the last pass.
    ones: usize,
    /// Whether integer replies are answers (RedisBloom's), or markers and counts (the
    /// module's, whose answers are one flag string).
    ints_answer: bool,
}

impl Raw {
    fn pass(&mut self, peer: &Peer, add: bool, keys: &[u8]) -> Pass {
        self.ones = 0;
        let cpu = thread_cpu();
        let start = Instant::now();
        let lines = keys.split(|&b| b == b'\n').filter(|l| !l.is_empty());
        match peer {
            Peer::RedisBloom => {
                let name: &[u8] = if add { b"BF.MADD" } else { b"BF.MEXISTS" };
                let mut batch: Vec<&[u8]> = Vec::with_capacity(PER_COMMAND);
                for key in lines {
                    batch.push(key);
                    if batch.len() == PER_COMMAND {
                        self.send(&[name, b"rb"], &batch);
                        batch.clear();
                    }
                }
                if !batch.is_empty() {
                    self.send(&[name, b"rb"], &batch);
                }
            }
            Peer::Module(shards) => {
                let name: &[u8] = if add { b"BLOOM.MADD" } else { b"BLOOM.MEXISTS" };
                let mut batches: Vec<Vec<&[u8]>> = vec![Vec::new(); shards.heads.len()];
                for key in lines {
                    let positions = shards.config.positions(&EncodedKey::from_encoded(key));
                    let first = positions.as_slice().first().copied().unwrap_or(0);
                    let shard = (first / shards.shard_bits) as usize;
                    batches[shard].push(key);
                    if batches[shard].len() == PER_COMMAND {
                        self.send_module(name, &shards.heads[shard], &batches[shard]);
                        batches[shard].clear();
                    }
                }
                for (shard, batch) in batches.iter().enumerate() {
                    if !batch.is_empty() {
                        self.send_module(name, &shards.heads[shard], batch);
                    }
                }
            }
        }
        while self.in_flight > 0 {
            self.read_reply();
        }
        let rate = KEYS as f64 / start.elapsed().as_secs_f64();
        Pass {
            rate,
            cpu: (thread_cpu() - cpu) / KEYS as f64 * 1e6,
            server: 0.0,
        }
    }

    fn send_module(&mut self, name: &[u8], head: &[Vec<u8>], keys: &[&[u8]]) {
        let mut words: Vec<&[u8]> = vec![name];
        words.extend(head.iter().map(Vec::as_slice));
        self.send(&words, keys);
    }

    /// Sends `words` then `keys` as one command, after reading a reply if `IN_FLIGHT` are out.
    fn send(&mut self, words: &[&[u8]], keys: &[&[u8]]) {
        if self.in_flight == IN_FLIGHT {
            self.read_reply();
        }
        let c = &mut self.command;
        c.clear();
        write!(c, "*{}\r\n", words.len() + keys.len()).unwrap();
        for arg in words.iter().chain(keys) {
            write!(c, "${}\r\n", arg.len()).unwrap();
            c.extend_from_slice(arg);
            c.extend_from_slice(b"\r\n");
        }
        self.writer.write_all(c).unwrap();
        self.in_flight += 1;
    }

    /// Reads one reply, counting its `1`s (integers, or the bytes of a flag string).
    fn read_reply(&mut self) {
        self.value();
        self.in_flight -= 1;
    }

    fn line(&mut self) -> (u8, i64) {
        let buf = self.reader.fill_buf().unwrap();
        if let Some(end) = buf.iter().position(|&b| b == b'\n') {
            let (kind, n) = (buf[0], parse_int(&buf[1..end - 1]));
            self.reader.consume(end + 1);
            return (kind, n);
        }
        let mut line = Vec::new();
        self.reader.read_until(b'\n', &mut line).unwrap();
        (line[0], parse_int(&line[1..line.len() - 2]))
    }

    fn value(&mut self) {
        let (kind, n) = self.line();
        match kind {
            b':' => self.ones += usize::from(self.ints_answer && n == 1),
            b'*' => (0..n).for_each(|_| self.value()),
            b'$' => {
                let mut data = vec![0u8; n as usize + 2];
                std::io::Read::read_exact(&mut self.reader, &mut data).unwrap();
                self.ones += data.iter().filter(|&&b| b == b'1').count();
            }
            b'+' => {}
            _ => panic!(
                "the server refused a command (reply type {:?})",
                kind as char
            ),
        }
    }
}

fn parse_int(digits: &[u8]) -> i64 {
    std::str::from_utf8(digits).unwrap().parse().unwrap_or(0)
}
