//! Programs under test as child processes: the one wrapper every integration test starts
//! `zipwire` (or nginx, sshd, a shell) with.
//!
//! A [`Running`] child has its stdin closed and its stdout and stderr in one log file, which
//! a test polls ([`Running::wait_for`]) rather than reads through a pipe: nothing has to drain
//! it, and the whole log is at hand for a failure message. The child is killed when the
//! value is dropped, so a failing test leaves no process behind.
//!
//! Listeners: a child binds port 0 and the test reads the bound address back from its log
//! ([`Running::addr`]); no port is picked by binding and releasing it first, which a parallel
//! test could take in between. For a program that cannot say where it listens,
//! [`Running::owns_listener`] tells whether the child itself holds the listening socket.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long [`Running::wait_for`] and friends wait (a loaded 2-core machine included).
pub const DEADLINE: Duration = Duration::from_secs(20);

/// How often the log and the child are looked at while waiting.
const POLL: Duration = Duration::from_millis(20);

/// A child process with its output in a log file, killed on drop.
pub struct Running {
    /// Behind a lock so that every method but [`Running::terminate`] takes `&self`.
    child: Mutex<Child>,
    pid: u32,
    log: PathBuf,
}

impl Running {
    /// Starts `command` with stdin closed and stdout and stderr written to the file `log`
    /// (created or truncated).
    ///
    /// # Panics
    ///
    /// When the log file cannot be created or the program cannot start.
    pub fn start(command: &mut Command, log: &Path) -> Running {
        let file = std::fs::File::create(log)
            .unwrap_or_else(|e| panic!("create the log {}: {e}", log.display()));
        let stdout = file
            .try_clone()
            .unwrap_or_else(|e| panic!("duplicate the log's descriptor: {e}"));
        let child = command
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("start {:?}: {e}", command.get_program()));
        Running {
            pid: child.id(),
            child: Mutex::new(child),
            log: log.to_owned(),
        }
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The path of the log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// What the child has written so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log contains `text` and returns the whole log.
    ///
    /// # Panics
    ///
    /// When the child exits without writing it, or after [`DEADLINE`]; the message holds the
    /// log.
    pub fn wait_for(&self, text: &str) -> String {
        self.poll(text, |log| log.contains(text).then(|| log.to_owned()))
    }

    /// Waits for the first line of the log that contains `text` and returns it.
    ///
    /// # Panics
    ///
    /// As [`Running::wait_for`].
    pub fn wait_for_line(&self, text: &str) -> String {
        self.poll(text, |log| {
            log.lines()
                .find(|line| line.contains(text))
                .map(str::to_owned)
        })
    }

    /// Waits for the first log line that contains `text` and reads the address after `key`
    /// in it: where a child started on port 0 says it is bound (`local_addr=`, `listen=`,
    /// `addr=`).
    ///
    /// # Panics
    ///
    /// As [`Running::wait_for`], or when no address follows `key` on that line.
    pub fn addr(&self, text: &str, key: &str) -> SocketAddr {
        let line = self.wait_for_line(text);
        addr_after(&line, key).unwrap_or_else(|| panic!("no address after {key:?} in: {line}"))
    }

    /// Sends the signal `name` (`TERM`, `HUP`, `USR1`…) with `kill(1)`.
    ///
    /// # Panics
    ///
    /// When `kill` fails (the child is gone).
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap_or_else(|e| panic!("run kill: {e}"));
        assert!(status.success(), "kill -{name} {}: {status}", self.pid());
    }

    /// The child's exit status if it has exited.
    ///
    /// # Panics
    ///
    /// When the status cannot be read.
    pub fn try_wait(&self) -> Option<ExitStatus> {
        self.child()
            .try_wait()
            .unwrap_or_else(|e| panic!("wait for the child: {e}"))
    }

    /// Waits for the child to exit by itself and returns its status.
    ///
    /// # Panics
    ///
    /// When it still runs after [`DEADLINE`]; the message holds the log.
    pub fn exits(&self) -> ExitStatus {
        self.exits_within(DEADLINE)
    }

    /// [`Running::exits`], for a child that may take longer than [`DEADLINE`].
    ///
    /// # Panics
    ///
    /// When it still runs after `limit`; the message holds the log.
    pub fn exits_within(&self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.try_wait() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "still running after {limit:?}:\n{}",
                self.log()
            );
            std::thread::sleep(POLL);
        }
    }

    /// Sends SIGTERM, waits for a successful exit and returns the log.
    ///
    /// # Panics
    ///
    /// When the child does not exit within [`DEADLINE`] or exits unsuccessfully.
    pub fn terminate(self) -> String {
        self.signal("TERM");
        let status = self.exits();
        assert!(status.success(), "{status}:\n{}", self.log());
        self.log()
    }

    /// Whether the child itself holds a socket listening on TCP `port` (IPv4 or IPv6): for
    /// a program that cannot report its port, this tells a listener of its own from one
    /// another process happened to bind.
    pub fn owns_listener(&self, port: u16) -> bool {
        let inodes = listening_inodes(port);
        if inodes.is_empty() {
            return false;
        }
        let Ok(fds) = std::fs::read_dir(format!("/proc/{}/fd", self.pid())) else {
            return false;
        };
        fds.filter_map(Result::ok)
            .filter_map(|fd| std::fs::read_link(fd.path()).ok())
            .filter_map(|link| {
                let link = link.to_string_lossy().into_owned();
                link.strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .parse()
                    .ok()
            })
            .any(|inode: u64| inodes.contains(&inode))
    }

    /// The child, whatever a panicking holder of the lock left.
    fn child(&self) -> std::sync::MutexGuard<'_, Child> {
        self.child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits until `found` finds something in the log.
    fn poll<T>(&self, what: &str, found: impl Fn(&str) -> Option<T>) -> T {
        let deadline = Instant::now() + DEADLINE;
        loop {
            // The status first: a child that wrote the text and then exited still counts.
            let exited = self.try_wait();
            let log = self.log();
            if let Some(value) = found(&log) {
                return value;
            }
            if let Some(status) = exited {
                panic!("exited ({status}) without {what:?}:\n{log}");
            }
            assert!(
                Instant::now() < deadline,
                "no {what:?} within {DEADLINE:?} in:\n{log}"
            );
            std::thread::sleep(POLL);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let child = self
            .child
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The address after `key` on `line`: digits, dots, colons and brackets, as a log prints a
/// socket address.
pub fn addr_after(line: &str, key: &str) -> Option<SocketAddr> {
    let at = line.find(key)? + key.len();
    line[at..]
        .chars()
        .take_while(|c| c.is_ascii_hexdigit() || matches!(c, '.' | ':' | '[' | ']'))
        .collect::<String>()
        .parse()
        .ok()
}

/// The inodes of the sockets listening on TCP `port`, from `/proc/net/tcp` and `tcp6`.
fn listening_inodes(port: u16) -> Vec<u64> {
    const LISTEN: &str = "0A";
    let mut inodes = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for row in text.lines().skip(1) {
            // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid
            // timeout inode …
            let fields: Vec<&str> = row.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) =
                (fields.get(1), fields.get(3), fields.get(9))
            else {
                continue;
            };
            let local_port = local
                .rsplit_once(':')
                .and_then(|(_, hex)| u16::from_str_radix(hex, 16).ok());
            if *state == LISTEN && local_port == Some(port) {
                inodes.extend(inode.parse::<u64>().ok());
            }
        }
    }
    inodes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addr_after_reads_what_a_log_line_prints() {
        let line = "INFO proxy listening local_addr=127.0.0.1:4321 tls=false";
        assert_eq!(
            addr_after(line, "local_addr="),
            Some("127.0.0.1:4321".parse().expect("valid"))
        );
        assert_eq!(
            addr_after("listen=[::1]:80 x", "listen="),
            Some("[::1]:80".parse().expect("valid"))
        );
        assert_eq!(addr_after(line, "addr=x"), None);
    }

    #[test]
    fn a_child_s_log_its_listener_and_its_end() {
        let dir =
            std::env::temp_dir().join(format!("zipwire-testkit-child-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let child = Running::start(
            Command::new("sh")
                .arg("-c")
                .arg("trap 'exit 0' TERM; echo ready at=127.0.0.1:99; echo err >&2; while :; do sleep 0.05; done"),
            &dir.join("sh.log"),
        );
        assert_eq!(child.addr("ready", "at=").port(), 99);
        child.wait_for("err");
        assert!(
            !child.owns_listener(port),
            "the test's listener is not the child's"
        );
        let log = child.terminate();
        assert!(log.contains("ready"), "{log}");
        let failed = Running::start(&mut Command::new("false"), &dir.join("false.log"));
        assert!(!failed.exits().success());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
