//! Real Redis servers for the tests: Debian's `redis-server`, on 127.0.0.1 with random free
//! ports and temporary directories, always stopped (killed on drop).

#![allow(dead_code, unreachable_pub)]

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bloom_redis::RedisTarget;

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
    listener.local_addr().unwrap().port()
}

fn redis_cli(port: u16, args: &[&str]) -> Option<String> {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One `redis-server` process.
pub struct RedisServer {
    pub port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
    extra: Vec<String>,
}

impl RedisServer {
    /// A server without persistence.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// A server with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut server = Self {
            port: free_port(),
            child: None,
            dir,
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--protected-mode",
                "yes",
            ])
            .arg("--dir")
            .arg(self.dir.path())
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install -y redis-server)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while redis_cli(self.port, &["PING"]).as_deref() != Some("PONG\n") {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn target(&self) -> RedisTarget {
        RedisTarget::single(self.url()).with_timeout(Duration::from_secs(2))
    }

    pub fn cli(&self, args: &[&str]) -> String {
        redis_cli(self.port, args).unwrap_or_default()
    }

    /// Kills the server with SIGKILL (no shutdown, no save).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, empty (no persistence).
    pub fn restart_empty(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Three masters joined into a Redis Cluster (no replicas).
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    pub fn start() -> Self {
        let nodes: Vec<RedisServer> = (0..3)
            .map(|_| {
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ])
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        create.args(&addresses);
        create.args(["--cluster-replicas", "0", "--cluster-yes"]);
        let out = create.output().expect("redis-cli must be installed");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in &nodes {
            while !node.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
                assert!(
                    Instant::now() < deadline,
                    "the cluster did not become ready"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Self { nodes }
    }

    pub fn target(&self) -> RedisTarget {
        RedisTarget::cluster(self.nodes.iter().take(1).map(RedisServer::url))
            .with_timeout(Duration::from_secs(3))
    }

    /// The node holding `key`.
    pub fn node_of(&self, key: &str) -> usize {
        let slot: u16 = self.nodes[0]
            .cli(&["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .unwrap();
        let slots = self.nodes[0].cli(&["CLUSTER", "SLOTS"]);
        // redis-cli prints each range as: start, end, ip, port, id (one per line).
        let lines: Vec<&str> = slots.lines().map(str::trim).collect();
        for window in lines.windows(4) {
            if let (Ok(start), Ok(end), Ok(port)) = (
                window[0].parse::<u16>(),
                window[1].parse::<u16>(),
                window[3].parse::<u16>(),
            ) && (start..=end).contains(&slot)
                && window[2] == "127.0.0.1"
                && let Some(i) = self.nodes.iter().position(|n| n.port == port)
            {
                return i;
            }
        }
        panic!("no node owns slot {slot}: {slots}");
    }
}
