//! A throwaway PostgreSQL cluster per test: `initdb` in a temporary
//! directory, the server listening only on a unix socket inside it, stopped
//! and deleted when the [`Postgres`] is dropped.
//!
//! The server binaries come from `PG_BIN`, else the newest
//! `/usr/lib/postgresql/*/bin` (Debian's `postgresql` package), else `PATH`.
//! Without them the test fails and says how to install them. PostgreSQL
//! refuses to run as root, so under root the cluster belongs to the
//! `postgres` user (or `nobody`).

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The port number in the socket's name; nothing listens on TCP.
const PORT: u16 = 5432;

/// A running throwaway cluster.
pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    server: Option<Child>,
    fsync: bool,
    max_connections: Option<u32>,
}

impl Postgres {
    /// Creates and starts a cluster. `fsync` off is fine for tests: a
    /// server stopped as a crash ([`crash`](Self::crash)) loses nothing
    /// the kernel holds, and no test crashes the kernel; benchmarks keep it
    /// on.
    pub fn start() -> Self {
        Self::start_with(false)
    }

    /// Creates and starts a cluster with fsync on or off.
    pub fn start_with(fsync: bool) -> Self {
        Self::start_with_limits(fsync, Some(200))
    }

    /// A cluster with the server's own connection limit
    /// (`max_connections` = 100), as a default installation has; fsync
    /// off.
    pub fn start_with_default_limits() -> Self {
        Self::start_with_limits(false, None)
    }

    /// A cluster with fsync on or off and `max_connections` (the server's
    /// default, 100, when `None`).
    pub fn start_with_limits(fsync: bool, max_connections: Option<u32>) -> Self {
        let bin = binaries();
        let dir = tempfile::Builder::new()
            .prefix("pod-pg-")
            .tempdir()
            .expect("a temporary directory for the cluster");
        let user = server_user();
        if let Some((uid, gid)) = user {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))
                .expect("chown the cluster directory to the server's user");
        }
        let data = dir.path().join("data");
        let log = dir.path().join("initdb.log");
        let status = as_user(Command::new(bin.join("initdb")), user)
            .args(["-D"])
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("initdb log"))
            .status()
            .expect("run initdb");
        if !status.success() {
            panic!(
                "initdb failed ({status}):\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        let mut pg = Self {
            dir,
            bin,
            server: None,
            fsync,
            max_connections,
        };
        pg.launch();
        pg
    }

    /// Starts the server on the cluster's data directory and waits until
    /// it accepts connections.
    fn launch(&mut self) {
        let user = server_user();
        let server_log = self.dir.path().join("server.log");
        let mut server = as_user(Command::new(self.bin.join("postgres")), user);
        if let Some(max) = self.max_connections {
            server.args(["-c", &format!("max_connections={max}")]);
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&server_log)
            .expect("server log");
        let server = server
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .arg("-k")
            .arg(self.dir.path())
            .args(["-p", &PORT.to_string()])
            .args(["-c", "listen_addresses="])
            .args([
                "-c",
                &format!("fsync={}", if self.fsync { "on" } else { "off" }),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start postgres");
        self.server = Some(server);
        self.wait_ready(&server_log);
    }

    /// Stops the server as a crash would (immediate shutdown: every
    /// connection dropped, no checkpoint) and waits for it to be gone.
    pub fn crash(&mut self) {
        if let Some(mut server) = self.server.take() {
            let _ = Command::new("kill")
                .args(["-QUIT", &server.id().to_string()])
                .status();
            let _ = server.wait();
        }
    }

    /// Starts the server again on the same data (after [`crash`] or
    /// [`stop`]); it recovers from its WAL first.
    ///
    /// [`crash`]: Self::crash
    /// [`stop`]: Self::stop
    pub fn start_again(&mut self) {
        assert!(self.server.is_none(), "the server is running");
        self.launch();
    }

    fn wait_ready(&mut self, server_log: &Path) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ready = Command::new(self.bin.join("pg_isready"))
                .arg("-h")
                .arg(self.dir.path())
                .args(["-p", &PORT.to_string(), "-U", "postgres", "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            let exited = self
                .server
                .as_mut()
                .and_then(|s| s.try_wait().ok().flatten());
            if exited.is_some() || Instant::now() > deadline {
                panic!(
                    "postgres did not start ({exited:?}):\n{}",
                    std::fs::read_to_string(server_log).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The URL of the cluster's `postgres` database.
    pub fn url(&self) -> String {
        format!(
            "postgresql:///postgres?host={}&port={PORT}&user=postgres",
            self.dir.path().display()
        )
    }

    /// The directory holding the cluster and its socket.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops the server now (fast shutdown) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut server) = self.server.take() {
            let _ = Command::new("kill")
                .args(["-INT", &server.id().to_string()])
                .status();
            let _ = server.wait();
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Where the server binaries are.
fn binaries() -> PathBuf {
    if let Some(dir) = std::env::var_os("PG_BIN").map(PathBuf::from) {
        if dir.join("initdb").is_file() {
            return dir;
        }
    }
    let debian = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .filter_map(|e| {
            let version: u32 = e.file_name().to_str()?.parse().ok()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, bin)| bin.join("initdb").is_file())
        .max_by_key(|(version, _)| *version);
    if let Some((_, bin)) = debian {
        return bin;
    }
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|dir| dir.join("initdb").is_file() && dir.join("postgres").is_file());
    on_path.unwrap_or_else(|| {
        panic!(
            "PostgreSQL's server binaries (initdb, postgres, pg_isready) were not found. \
             Install them (Debian/Ubuntu: `apt-get install postgresql`; ./scripts/test does it \
             when run as root) or set PG_BIN to the directory holding them."
        )
    })
}

/// The user the server runs as: ourselves, or under root (which PostgreSQL
/// refuses) the `postgres` user, else `nobody`.
fn server_user() -> Option<(u32, u32)> {
    let euid = std::fs::metadata("/proc/self").map(|m| m.uid()).ok()?;
    if euid != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let find = |name: &str| {
        passwd.lines().find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            (fields.first() == Some(&name) && fields.len() > 3)
                .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
                .flatten()
        })
    };
    Some(
        find("postgres")
            .or_else(|| find("nobody"))
            .unwrap_or((65534, 65534)),
    )
}

fn as_user(mut command: Command, user: Option<(u32, u32)>) -> Command {
    // Root's working directory is not the server user's to enter.
    command.current_dir("/");
    if let Some((uid, gid)) = user {
        command.uid(uid).gid(gid);
        // HOME of root is not the server user's to read.
        command.env("HOME", "/tmp");
    }
    command
}
