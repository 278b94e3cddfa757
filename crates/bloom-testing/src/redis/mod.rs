//! Real Redis servers for the tests: Debian's `redis-server`, on 127.0.0.1 with random free
//! ports and temporary directories, always stopped (killed on drop). Also Redis Cluster,
//! Sentinel and TLS (a throwaway certificate authority by `openssl`). `cargo xtask test`
//! installs the programs when they are missing.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bloom_redis::RedisTarget;

mod tls;

pub use self::tls::{Certificates, tls_server};

/// Redis refuses a cluster node whose port is above this: its cluster bus listens on the
/// port + 10000.
const MAX_CLUSTER_PORT: u16 = 55535;

/// A loopback port that was free a moment ago. For a cluster node, the port is at most
/// [`MAX_CLUSTER_PORT`] and its bus port was free too; these are drawn from 20000..=55535
/// because the system's ephemeral range may lie above it.
fn free_port(cluster: bool) -> u16 {
    if !cluster {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a free loopback port");
        return listener.local_addr().unwrap().port();
    }
    let span = u32::from(MAX_CLUSTER_PORT - 20000) + 1;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let start = (std::process::id().wrapping_mul(7919) ^ nanos) % span;
    for i in 0..span {
        let port = 20000 + u16::try_from((start + i) % span).unwrap();
        if TcpListener::bind(("127.0.0.1", port)).is_ok()
            && TcpListener::bind(("127.0.0.1", port + 10000)).is_ok()
        {
            return port;
        }
    }
    panic!("no free loopback port at most {MAX_CLUSTER_PORT} with a free bus port");
}

fn redis_cli(port: u16, args: &[&str]) -> Option<String> {
    redis_cli_as(port, None, args)
}

/// `redis-cli` with the server's password (given through the environment, not argv).
fn redis_cli_as(port: u16, password: Option<&str>, args: &[&str]) -> Option<String> {
    let mut cli = Command::new("redis-cli");
    if let Some(password) = password {
        cli.env("REDISCLI_AUTH", password);
    }
    let out = cli
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The `bloom` Redis module's shared object: `$BLOOM_REDIS_MODULE`, or the workspace's debug
/// build (`cargo xtask test` builds it before the tests).
pub fn module_path() -> PathBuf {
    module_build("debug")
}

/// The module the benches load: `$BLOOM_REDIS_MODULE`, or the workspace's release build,
/// which must exist (`cargo build --release -p bloom-redis-module`).
pub fn release_module_path() -> PathBuf {
    let module = module_build("release");
    assert!(
        module.is_file(),
        "build the module first: cargo build --release -p bloom-redis-module ({} is missing)",
        module.display()
    );
    module
}

/// `$BLOOM_REDIS_MODULE`, or the module built with `profile` in the workspace's target
/// directory.
fn module_build(profile: &str) -> PathBuf {
    if let Some(path) = std::env::var_os("BLOOM_REDIS_MODULE") {
        return path.into();
    }
    std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(
            || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
            PathBuf::from,
        )
        .join(profile)
        .join("libbloom_redis_module.so")
}

/// Whether the servers the suite starts load the module (`BLOOM_REDIS_TEST_PATH=module`):
/// every case then runs through the module's commands, as `cargo xtask test` does in its
/// second pass over the Redis suites.
pub fn suite_loads_module() -> bool {
    std::env::var("BLOOM_REDIS_TEST_PATH").is_ok_and(|path| path == "module")
}

/// One `redis-server` process.
pub struct RedisServer {
    /// The loopback port it listens on (plain, no TLS).
    pub port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
    extra: Vec<String>,
    /// The module it loads, if any.
    module: Option<PathBuf>,
}

impl RedisServer {
    /// A server without persistence.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// A server with extra `redis-server` arguments.
    pub fn start_with(extra: &[&str]) -> Self {
        Self::start_node(extra, false)
    }

    /// A server with extra arguments; a cluster node gets a port its cluster bus fits above.
    /// A port taken by someone else between its choice and the server's start (the server
    /// then exits) is replaced by a new one.
    fn start_node(extra: &[&str], cluster: bool) -> Self {
        Self::start_node_loading(extra, cluster, suite_loads_module())
    }

    /// A server that loads the `bloom` module, with extra arguments.
    pub fn start_with_module(extra: &[&str]) -> Self {
        Self::start_node_loading(extra, false, true)
    }

    /// A server that loads the module at `path`, with extra arguments.
    pub fn start_with_module_file(path: PathBuf, extra: &[&str]) -> Self {
        Self::start_node_with(extra, false, Some(path))
    }

    /// A server with extra arguments, loading the module or not.
    fn start_node_loading(extra: &[&str], cluster: bool, module: bool) -> Self {
        Self::start_node_with(extra, cluster, module.then(module_path))
    }

    fn start_node_with(extra: &[&str], cluster: bool, module: Option<PathBuf>) -> Self {
        if let Some(path) = &module {
            assert!(
                path.is_file(),
                "the bloom module is not built at {}: run the tests with `cargo xtask test`, or `cargo build -p bloom-redis-module` first",
                path.display()
            );
        }
        let mut server = Self {
            port: 0,
            child: None,
            dir: tempfile::tempdir().unwrap(),
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
            module,
        };
        let mut failures = Vec::new();
        for _attempt in 0..5 {
            server.port = free_port(cluster);
            match server.spawn() {
                Ok(()) => return server,
                Err(e) => failures.push(e),
            }
        }
        panic!("redis-server did not start: {failures:?}");
    }

    /// Starts `redis-server` on `self.port` and waits until that very process answers (not
    /// another server that holds the port). Err if it exits first.
    fn spawn(&mut self) -> Result<(), String> {
        let mut child = Command::new("redis-server")
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
            .args(match &self.module {
                Some(path) => vec!["--loadmodule".into(), path.clone().into_os_string()],
                None => Vec::new(),
            })
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed: run the tests with `cargo xtask test`, which installs it");
        let pid = format!("process_id:{}", child.id());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return Err(format!(
                    "port {}: redis-server exited ({status})",
                    self.port
                ));
            }
            if redis_cli_as(self.port, self.password(), &["INFO", "server"])
                .is_some_and(|info| info.lines().any(|l| l.trim() == pid))
            {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("port {}: no answer in 30 s", self.port));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its `redis://` URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A target whose deadline only bounds a hang: a busy machine never makes a test's
    /// operation time out.
    pub fn target(&self) -> RedisTarget {
        RedisTarget::single(self.url()).with_timeout(Duration::from_secs(10))
    }

    /// Runs `redis-cli` against it (with its password, if any): the output, or "" on failure.
    pub fn cli(&self, args: &[&str]) -> String {
        redis_cli_as(self.port, self.password(), args).unwrap_or_default()
    }

    /// The `--requirepass` it was started with.
    fn password(&self) -> Option<&str> {
        let at = self.extra.iter().position(|a| a == "--requirepass")?;
        self.extra.get(at + 1).map(String::as_str)
    }

    /// Kills the server with SIGKILL (no shutdown, no save).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills it (SIGKILL) and starts it again on the same port and directory: it comes back
    /// with what its persistence kept (an RDB saved earlier, its AOF).
    pub fn restart(&mut self) {
        self.kill();
        if let Err(e) = self.spawn() {
            panic!("redis-server did not restart: {e}");
        }
    }

    /// Kills it (SIGKILL) and starts it again on the same port and directory with other
    /// extra arguments.
    pub fn restart_with(&mut self, extra: &[&str]) {
        self.kill();
        self.extra = extra.iter().map(|s| (*s).to_owned()).collect();
        if let Err(e) = self.spawn() {
            panic!("redis-server did not restart: {e}");
        }
    }

    /// Kills it (SIGKILL) and starts it again on the same port and directory, without the
    /// module it loaded.
    pub fn restart_without_module(&mut self) {
        self.kill();
        self.module = None;
        if let Err(e) = self.spawn() {
            panic!("redis-server did not restart: {e}");
        }
    }

    /// Starts it again on the same port, empty (no persistence).
    pub fn restart_empty(&mut self) {
        self.kill();
        if let Err(e) = self.spawn() {
            panic!("redis-server did not restart: {e}");
        }
    }

    /// Sends `signal` to the server process (SIGSTOP: it accepts connections but answers
    /// nothing until SIGCONT). A stop or a continue is waited for: the signal is delivered
    /// when the process next runs, and until it is stopped a replica still acknowledges
    /// writes.
    #[cfg(unix)]
    pub fn signal(&self, signal: rustix::process::Signal) {
        let child = self.child.as_ref().expect("a running server");
        rustix::process::kill_process(rustix::process::Pid::from_child(child), signal).unwrap();
        #[cfg(target_os = "linux")]
        {
            use rustix::process::Signal;
            if signal == Signal::STOP || signal == Signal::CONT {
                let stopped = signal == Signal::STOP;
                crate::wait::wait_for("the server to take the signal", || {
                    process_stopped(child.id()) == stopped
                });
            }
        }
    }

    /// Its working directory (where its RDB and AOF files go).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Three masters joined into a Redis Cluster (no replicas, or one each).
pub struct RedisCluster {
    /// Its nodes, in the order they were started (which are masters: [`Self::is_master`]).
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Three masters without replicas, with a node timeout (15 s) no busy machine reaches.
    pub fn start() -> Self {
        // No test of this cluster fails a node over: a node stalled by a busy machine must
        // not be taken for a failed one.
        Self::start_with(0, 15_000)
    }

    /// Three masters with `replicas` replicas each, failing a master over once it has not
    /// answered for `node_timeout_ms` (a replica takes over however far it lags).
    pub fn start_with(replicas: usize, node_timeout_ms: u32) -> Self {
        Self::start_loading(replicas, node_timeout_ms, |_| suite_loads_module())
    }

    /// Three masters without replicas, node `i` loading the module when `module(i)`.
    pub fn start_loading(
        replicas: usize,
        node_timeout_ms: u32,
        module: impl Fn(usize) -> bool,
    ) -> Self {
        let timeout = node_timeout_ms.to_string();
        let nodes: Vec<RedisServer> = (0..3 * (1 + replicas))
            .map(|i| {
                RedisServer::start_node_loading(
                    &[
                        "--cluster-enabled",
                        "yes",
                        "--cluster-config-file",
                        "nodes.conf",
                        "--cluster-node-timeout",
                        &timeout,
                        "--cluster-replica-validity-factor",
                        "0",
                    ],
                    true,
                    module(i),
                )
            })
            .collect();
        let addresses: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        create.args(&addresses);
        create.args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"]);
        let out = create.output().expect(
            "redis-cli must be installed: run the tests with `cargo xtask test`, which installs it",
        );
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        // Readiness is an event (every node reports the cluster ok); the deadline only
        // bounds a hang.
        let deadline = Instant::now() + Duration::from_secs(120);
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

    /// A cluster target seeded with every node, whose deadline only bounds a hang.
    pub fn target(&self) -> RedisTarget {
        RedisTarget::cluster(self.nodes.iter().map(RedisServer::url))
            .with_timeout(Duration::from_secs(10))
    }

    /// The node (index) that is a replica of node `master`, per `CLUSTER NODES`.
    pub fn replica_of(&self, master: usize) -> Option<usize> {
        let id = self.nodes[master]
            .cli(&["CLUSTER", "MYID"])
            .trim()
            .to_owned();
        self.nodes.iter().position(|n| {
            n.cli(&["CLUSTER", "NODES"]).lines().any(|l| {
                let parts: Vec<&str> = l.split_whitespace().collect();
                parts.len() > 3
                    && parts[2].contains("myself")
                    && parts[2].contains("slave")
                    && parts[3] == id
            })
        })
    }

    /// Whether node `i` reports itself a master.
    pub fn is_master(&self, i: usize) -> bool {
        self.nodes[i]
            .cli(&["INFO", "replication"])
            .lines()
            .any(|l| l.trim() == "role:master")
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

/// A Redis Sentinel watching the master at `master_port` as `name` (quorum 1), started on a
/// random port; it is ready once it knows the master and `replicas` replicas of it.
pub struct Sentinel {
    /// The loopback port it listens on.
    pub port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Sentinel {
    /// Starts it and waits until it is ready (see [`Sentinel`]).
    pub fn start(name: &str, master_port: u16, replicas: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port(false);
        let conf = dir.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nsentinel monitor {name} 127.0.0.1 {master_port} 1\nsentinel down-after-milliseconds {name} 5000\nsentinel failover-timeout {name} 60000\n",
                dir.path().display()
            ),
        )
        .unwrap();
        let child = Command::new("redis-sentinel")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-sentinel must be installed: run the tests with `cargo xtask test`");
        let sentinel = Self {
            port,
            child,
            _dir: dir,
        };
        // Ready: an event (it lists the replicas it found); the deadline bounds a hang.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let listed = redis_cli(port, &["SENTINEL", "REPLICAS", name]).unwrap_or_default();
            if listed.matches("flags").count() >= replicas
                && !listed.contains("disconnected")
                && redis_cli(port, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", name])
                    .is_some_and(|a| a.contains(&master_port.to_string()))
            {
                return sentinel;
            }
            assert!(
                Instant::now() < deadline,
                "the Sentinel did not become ready"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Its `redis://` URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The port of the master it names now.
    pub fn master_port(&self, name: &str) -> Option<u16> {
        let out = redis_cli(self.port, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", name])?;
        out.lines().nth(1)?.trim().parse().ok()
    }

    /// Runs `redis-cli` against it: the output, or "" on failure.
    pub fn cli(&self, args: &[&str]) -> String {
        redis_cli(self.port, args).unwrap_or_default()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server's CPU seconds (user + system) so far (`INFO cpu`).
pub fn server_cpu(server: &RedisServer) -> f64 {
    let info = server.cli(&["INFO", "cpu"]);
    let field = |name: &str| {
        info.lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix(name)?
                    .strip_prefix(':')?
                    .parse::<f64>()
                    .ok()
            })
            .unwrap_or(0.0)
    };
    field("used_cpu_user") + field("used_cpu_sys")
}

/// Whether the process `pid` is stopped (state `T` in `/proc/<pid>/stat`, after the command
/// name in parentheses); not, once it is gone.
#[cfg(target_os = "linux")]
fn process_stopped(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('T'))
    })
}
