//! Redis replies from a hostile server. A fake server on loopback answers `INFO`, `CONFIG`
//! and `CLIENT` as a Redis 7 master would, and every other command with the next of the
//! replies the input holds (separated by the bytes `ff fe`; `-ERR` once they run out). Opening, querying and inserting then end by their deadline with an answer
//! or a typed error, memory bounded, never a panic; the metadata is parsed from whatever the
//! first reply (to `HGETALL`) holds.

#![no_main]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bloom_redis::{RedisFilter, RedisTarget};
use libfuzzer_sys::fuzz_target;

const INFO: &str = "# Server\r\nredis_version:7.0.15\r\nrun_id:0123456789abcdef0123456789abcdef01234567\r\n# Replication\r\nrole:master\r\nmaster_replid:89abcdef0123456789abcdef0123456789abcdef\r\nmaster_replid2:0000000000000000000000000000000000000000\r\n# Persistence\r\naof_enabled:0\r\n";

/// One command (an array of bulk strings), or `None` at the end of the connection.
fn command(reader: &mut impl BufRead) -> Option<Vec<Vec<u8>>> {
    let mut line = String::new();
    let mut number = |reader: &mut dyn BufRead, sigil: char| -> Option<usize> {
        line.clear();
        reader.read_line(&mut line).ok()?;
        line.trim_end().strip_prefix(sigil)?.parse().ok()
    };
    let count = number(reader, '*')?;
    let mut parts = Vec::new();
    for _ in 0..count.min(1 << 16) {
        let len = number(reader, '$')?;
        let mut part = vec![0; len.min(1 << 24) + 2];
        reader.read_exact(&mut part).ok()?;
        part.truncate(len);
        parts.push(part);
    }
    Some(parts)
}

fn serve(stream: TcpStream, replies: &[&[u8]]) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    let mut next = replies.iter();
    while let Some(parts) = command(&mut reader) {
        let name = parts
            .first()
            .map(|p| String::from_utf8_lossy(p).to_ascii_uppercase())
            .unwrap_or_default();
        let reply: Vec<u8> = match name.as_str() {
            "INFO" => format!("${}\r\n{INFO}\r\n", INFO.len()).into_bytes(),
            "CONFIG" => b"*2\r\n$11\r\nappendfsync\r\n$8\r\neverysec\r\n".to_vec(),
            "CLIENT" | "PING" => b"+OK\r\n".to_vec(),
            // Once the input's replies are used up, every command is refused at once (a
            // closed connection would be reconnected to, slowly).
            _ => match next.next() {
                Some(reply) => reply.to_vec(),
                None => b"-ERR no more replies\r\n".to_vec(),
            },
        };
        if writer.write_all(&reply).is_err() {
            return;
        }
    }
}

fn split(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(at) = rest.windows(2).position(|w| w == b"\xff\xfe") {
        out.push(&rest[..at]);
        rest = &rest[at + 2..];
    }
    out.push(rest);
    out
}

fuzz_target!(|data: &[u8]| {
    let replies = split(data);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let (listener, stop, replies) = (&listener, &stop, &replies);
        scope.spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let _ = stream.set_nonblocking(false);
                        scope.spawn(move || serve(stream, replies));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(1)),
                }
            }
        });
        let target = RedisTarget::single(format!("redis://127.0.0.1:{port}/"))
            .with_timeout(Duration::from_millis(100));
        if let Ok(filter) = RedisFilter::open(&target, "f") {
            let _ = filter.contains_each(["a", "b", "c"]);
            let _ = filter.insert("k");
            let _ = filter.insert_all(["x", "y"]);
            let _ = filter.check_shards();
        }
        stop.store(true, Ordering::SeqCst);
    });
});
