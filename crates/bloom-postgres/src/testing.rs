//! A throwaway PostgreSQL server for tests and examples (feature `testing`): Debian's
//! `initdb` and `postgres`, a cluster in a temporary directory, listening on 127.0.0.1 at a
//! random port and on a socket in that directory, with password-less (`trust`) logins for
//! the user `postgres`. It is stopped, and its directory removed, on drop.
//!
//! PostgreSQL refuses to run as root: run as root, the server runs as the `postgres` user
//! (which Debian's package creates), and its directory is given to that user.

use std::io::Read as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a start waits for the server to accept connections (a bound against a hang,
/// not a pace: the wait ends as soon as it does).
const START_DEADLINE: Duration = Duration::from_secs(120);

/// The line to install the server programs with.
pub const INSTALL_HINT: &str = "sudo apt-get install -y postgresql   (Debian's PostgreSQL server: initdb, postgres, pg_ctl, pg_dump, psql)";

/// Why a throwaway server could not be had.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The server programs are not installed.
    #[error(
        "PostgreSQL's server programs (initdb, postgres, pg_ctl) are not installed; install them: {INSTALL_HINT}"
    )]
    NotInstalled,
    /// Run as root, but there is no `postgres` user to run the server as.
    #[error(
        "PostgreSQL refuses to run as root, and this machine has no `postgres` user to run it as (Debian's postgresql package creates one)"
    )]
    NoServerUser,
    /// A program could not be run, or a file written.
    #[error("{what}: {cause}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed (shown in the message, not returned by `source()`).
        cause: std::io::Error,
    },
    /// A program failed; the end of its output is kept.
    #[error("{what} failed: {output}")]
    Failed {
        /// What was being done.
        what: String,
        /// The end of what it printed.
        output: String,
    },
    /// The client failed.
    #[error("PostgreSQL client: {0}")]
    Client(postgres::Error),
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServerError {
    let what = what.into();
    move |cause| ServerError::Io { what, cause }
}

/// The directory holding `initdb`, `postgres` and `pg_ctl`: on `PATH`, or Debian's
/// `/usr/lib/postgresql/VERSION/bin` (the newest), or `None`.
#[must_use]
pub fn server_programs() -> Option<PathBuf> {
    let has_all = |dir: &Path| {
        ["initdb", "postgres", "pg_ctl"]
            .iter()
            .all(|p| dir.join(p).is_file())
    };
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path = std::env::split_paths(&path).find(|dir| has_all(dir));
    // A link on PATH (Debian's are in /usr/lib/postgresql/V/bin) is followed, so that pg_dump
    // and psql of the same version are found beside it.
    if let Some(dir) = on_path {
        let resolved = std::fs::canonicalize(dir.join("postgres"))
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
            .filter(|d| has_all(d));
        return Some(resolved.unwrap_or(dir));
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, dir)| has_all(dir))
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}

/// The `postgres` user's ids, when this process runs as root (and so must not run the
/// server itself).
fn server_user() -> Result<Option<(u32, u32)>, ServerError> {
    use std::os::unix::fs::MetadataExt as _;
    let euid = std::fs::metadata("/proc/self").map_or(1, |m| m.uid());
    if euid != 0 {
        return Ok(None);
    }
    let passwd = std::fs::read_to_string("/etc/passwd").map_err(io("reading /etc/passwd"))?;
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.first() == Some(&"postgres") && fields.len() > 3)
                .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
                .flatten()
        })
        .map(Some)
        .ok_or(ServerError::NoServerUser)
}

/// A PostgreSQL server of its own, for a test or an example.
pub struct TempServer {
    bin: PathBuf,
    run_as: Option<(u32, u32)>,
    dir: tempfile::TempDir,
    port: u16,
    settings: Vec<(String, String)>,
    child: Option<Child>,
}

impl std::fmt::Debug for TempServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TempServer")
            .field("port", &self.port)
            .field("dir", &self.dir.path())
            .field("running", &self.child.is_some())
            .finish_non_exhaustive()
    }
}

impl TempServer {
    /// A new cluster, started, with PostgreSQL's default settings (every commit flushed to
    /// disk).
    ///
    /// # Errors
    /// [`ServerError`]: not installed, or it did not start.
    pub fn start() -> Result<Self, ServerError> {
        Self::start_with(&[])
    }

    /// A new cluster, started with extra settings (`("fsync", "off")`, say: a test server
    /// that survives `pg_ctl stop -m immediate` and process kills, as those keep what the
    /// operating system was given, but not a power loss).
    ///
    /// # Errors
    /// As [`TempServer::start`].
    pub fn start_with(settings: &[(&str, &str)]) -> Result<Self, ServerError> {
        let bin = server_programs().ok_or(ServerError::NotInstalled)?;
        let run_as = server_user()?;
        let dir = tempfile::Builder::new()
            .prefix("bloom-pg")
            .tempdir()
            .map_err(io("making a temporary directory"))?;
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .map_err(io("giving the directory to the postgres user"))?;
        }
        let mut server = Self {
            bin,
            run_as,
            dir,
            port: 0,
            settings: settings
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            child: None,
        };
        let data = server.data_dir();
        let data = data.to_str().unwrap_or_default().to_owned();
        server.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
        )?;
        // A port that was free a moment ago; another process may take it first, so a start
        // that cannot bind tries another.
        let mut last = None;
        for _ in 0..5 {
            server.port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(io("finding a free port"))?
                .port();
            match server.spawn() {
                Ok(()) => return Ok(server),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(ServerError::NotInstalled))
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// The port it listens on, at 127.0.0.1.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The directory of its socket (and of its cluster).
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Connection parameters for `database` as the user `postgres`, over TCP to 127.0.0.1.
    #[must_use]
    pub fn params(&self, database: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname={database} connect_timeout=10",
            self.port
        )
    }

    /// A client connected to `database`.
    ///
    /// # Errors
    /// The client's error.
    pub fn client(&self, database: &str) -> Result<postgres::Client, ServerError> {
        Ok(postgres::Client::connect(
            &self.params(database),
            postgres::NoTls,
        )?)
    }

    /// Creates the database `name` (a plain identifier).
    ///
    /// # Errors
    /// The client's error.
    pub fn create_database(&self, name: &str) -> Result<(), ServerError> {
        self.client("postgres")?
            .batch_execute(&format!("CREATE DATABASE {name}"))?;
        Ok(())
    }

    /// Drops the database `name`, ending every connection to it.
    ///
    /// # Errors
    /// The client's error.
    pub fn drop_database(&self, name: &str) -> Result<(), ServerError> {
        self.client("postgres")?
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))?;
        Ok(())
    }

    /// `pg_dump` of `database` into `file` (plain SQL).
    ///
    /// # Errors
    /// When `pg_dump` fails.
    pub fn dump(&self, database: &str, file: &Path) -> Result<(), ServerError> {
        self.run_client(
            "pg_dump",
            &["-f".as_ref(), file.as_os_str(), database.as_ref()],
        )
    }

    /// Restores a dump of [`TempServer::dump`] into `database` (which must exist, empty).
    ///
    /// # Errors
    /// When `psql` fails.
    pub fn restore(&self, database: &str, file: &Path) -> Result<(), ServerError> {
        self.run_client(
            "psql",
            &[
                "-q".as_ref(),
                "-v".as_ref(),
                "ON_ERROR_STOP=1".as_ref(),
                "-d".as_ref(),
                database.as_ref(),
                "-f".as_ref(),
                file.as_os_str(),
            ],
        )
    }

    /// `pg_dump --format custom` of `database` into `file`: an archive for
    /// [`TempServer::restore_clean`].
    ///
    /// # Errors
    /// When `pg_dump` fails.
    pub fn dump_archive(&self, database: &str, file: &Path) -> Result<(), ServerError> {
        self.run_client(
            "pg_dump",
            &[
                "--format=custom".as_ref(),
                "-f".as_ref(),
                file.as_os_str(),
                database.as_ref(),
            ],
        )
    }

    /// `pg_restore --clean --if-exists` of an archive of [`TempServer::dump_archive`] into
    /// `database`, which may hold the same objects: they are dropped and made again, as an
    /// operator restores a backup over a live database.
    ///
    /// # Errors
    /// When `pg_restore` fails.
    pub fn restore_clean(&self, database: &str, file: &Path) -> Result<(), ServerError> {
        self.run_client(
            "pg_restore",
            &[
                "--clean".as_ref(),
                "--if-exists".as_ref(),
                "-d".as_ref(),
                database.as_ref(),
                file.as_os_str(),
            ],
        )
    }

    /// `pg_ctl stop -m immediate`: the server stops at once, without a checkpoint, as in a
    /// crash (it recovers from its write-ahead log at the next start).
    ///
    /// # Errors
    /// When `pg_ctl` fails.
    pub fn stop_immediate(&mut self) -> Result<(), ServerError> {
        self.stop_mode("immediate")
    }

    /// `pg_ctl stop -m fast`: a clean shutdown.
    ///
    /// # Errors
    /// When `pg_ctl` fails.
    pub fn stop(&mut self) -> Result<(), ServerError> {
        self.stop_mode("fast")
    }

    fn stop_mode(&mut self, mode: &str) -> Result<(), ServerError> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let data = self.data_dir();
        let stopped = self.run(
            "pg_ctl",
            &[
                "stop",
                "-D",
                data.to_str().unwrap_or_default(),
                "-m",
                mode,
                "-w",
                "-t",
                "60",
            ],
        );
        if stopped.is_err() {
            let _ = child.kill();
        }
        let _ = child.wait();
        stopped
    }

    /// Starts the stopped server again, on the same port and cluster.
    ///
    /// # Errors
    /// When it does not start.
    pub fn start_again(&mut self) -> Result<(), ServerError> {
        if self.child.is_some() {
            return Ok(());
        }
        self.spawn()
    }

    /// The server process's id, while it runs.
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn command(&self, program: &Path) -> Command {
        use std::os::unix::process::CommandExt as _;
        let mut command = Command::new(program);
        if let Some((uid, gid)) = self.run_as {
            command.uid(uid).gid(gid);
        }
        command.env_remove("PGPASSWORD").env("LC_ALL", "C");
        command
    }

    /// Runs one of the server's programs (as the server's user) to its end.
    fn run(&self, program: &str, args: &[&str]) -> Result<(), ServerError> {
        let output = self
            .command(&self.bin.join(program))
            .args(args)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .map_err(io(format!("running {program}")))?;
        check(program, &output)
    }

    /// Runs a client program (`pg_dump`, `psql`) beside the server's, as this process's
    /// user, connected to the server as `postgres` over TCP.
    fn run_client(&self, program: &str, args: &[&std::ffi::OsStr]) -> Result<(), ServerError> {
        let beside = self.bin.join(program);
        let path = if beside.is_file() {
            beside
        } else {
            PathBuf::from(program)
        };
        let output = Command::new(path)
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
            ])
            .args(args)
            .env_remove("PGPASSWORD")
            .stdin(Stdio::null())
            .output()
            .map_err(io(format!("running {program}")))?;
        check(program, &output)
    }

    fn spawn(&mut self) -> Result<(), ServerError> {
        // Appended to: what the server said before a crash is kept.
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .map_err(io("opening the server log"))?;
        if let Some((uid, gid)) = self.run_as {
            std::os::unix::fs::chown(self.log_path(), Some(uid), Some(gid))
                .map_err(io("giving the log to the postgres user"))?;
        }
        let mut command = self.command(&self.bin.join("postgres"));
        command
            .arg("-D")
            .arg(self.data_dir())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.dir.path())
            .args([
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "logging_collector=off",
            ]);
        for (name, value) in &self.settings {
            command.arg("-c").arg(format!("{name}={value}"));
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(io("starting postgres"))?;
        self.child = Some(child);
        let deadline = Instant::now() + START_DEADLINE;
        // Ready once it answers on its own socket, in its own directory: never another
        // server that holds the port.
        let own = format!(
            "host={} port={} user=postgres dbname=postgres connect_timeout=5",
            self.dir.path().display(),
            self.port
        );
        loop {
            let exited = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_none() && postgres::Client::connect(&own, postgres::NoTls).is_ok() {
                return Ok(());
            }
            if exited.is_some() || Instant::now() > deadline {
                if let Some(mut child) = self.child.take() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                return Err(ServerError::Failed {
                    what: format!("starting postgres on port {}", self.port),
                    output: self.log_tail(),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The end of the server's log.
    #[must_use]
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        if let Ok(mut file) = std::fs::File::open(self.log_path()) {
            let _ = file.read_to_string(&mut text);
        }
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    }
}

fn check(program: &str, output: &std::process::Output) -> Result<(), ServerError> {
    if output.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&output.stderr).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stdout));
    let lines: Vec<&str> = text.lines().collect();
    Err(ServerError::Failed {
        what: format!("{program} ({})", output.status),
        output: lines[lines.len().saturating_sub(8)..].join("\n"),
    })
}

/// Stops the server at once and removes its directory.
impl Drop for TempServer {
    fn drop(&mut self) {
        let _ = self.stop_immediate();
    }
}

/// The message shows the client's error, so it is not also the `source`; the conversion is
/// written out.
impl From<postgres::Error> for ServerError {
    fn from(e: postgres::Error) -> Self {
        Self::Client(e)
    }
}
