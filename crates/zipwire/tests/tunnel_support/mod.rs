//! What the tunnel's binary tests share: `zipwire` processes with their logs, free ports and
//! an echo target. Each test binary uses some of it.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_zipwire");

/// A process killed on drop, its stderr captured to a file.
pub struct Running {
    pub child: Child,
    pub log: std::path::PathBuf,
}

impl Running {
    pub fn start(args: &[&str], log: &Path) -> Running {
        let file = std::fs::File::create(log).unwrap();
        let child = Command::new(BIN)
            .args(args)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .unwrap();
        Running {
            child,
            log: log.to_owned(),
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log contains `text`.
    pub fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let log = self.log();
            if log.contains(text) {
                return log;
            }
            assert!(Instant::now() < deadline, "no {text:?} in:\n{log}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends SIGTERM and waits for a successful exit; returns the log.
    pub fn terminate(mut self) -> String {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(Instant::now() < deadline, "still running:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "{status}:\n{}", self.log());
        self.log()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address after `listen=` in a "tunnel server ready" or "tunnel client ready" line: a
/// tunnel started with `--listen 127.0.0.1:0` says there where it is bound.
#[allow(dead_code)]
pub fn listen_addr(ready: &str) -> String {
    let at = ready.find("listen=").expect("a listen= field") + "listen=".len();
    ready[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
        .collect()
}

pub fn free_port() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// An echo target on a thread; returns its address.
pub fn echo_target() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 || stream.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = stream.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}
