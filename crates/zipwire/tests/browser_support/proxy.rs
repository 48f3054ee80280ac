//! `zipwire proxy` under test: TLS and cleartext listeners in front of the test's origin, a
//! generated self-signed certificate, zstd, br and gzip offered, and the admin listener.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use zipwire_testkit::child::Running;

/// A running proxy, stopped when dropped.
pub struct Proxy {
    /// Declared before `_dir`: the process ends before its log's directory goes.
    child: Running,
    /// The cleartext listener (HTTP/1.1).
    pub listen: SocketAddr,
    /// The TLS listener (ALPN h2 and http/1.1).
    pub tls: SocketAddr,
    /// The admin listener (/stats).
    pub admin: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Proxy {
    /// Starts the proxy in front of `origin` and waits until its log says where each
    /// listener is bound.
    pub fn start(origin: SocketAddr) -> Result<Proxy, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let certified = rcgen::generate_simple_self_signed(vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
        ])
        .map_err(|e| format!("rcgen: {e}"))?;
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert, certified.cert.pem()).map_err(|e| e.to_string())?;
        std::fs::write(&key, certified.signing_key.serialize_pem()).map_err(|e| e.to_string())?;
        // A key readable by others gets a warning; this one is the owner's only.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| e.to_string())?;
        }
        // Port 0 for every listener, each bound address read back from the log: no port is
        // released and bound again, where a parallel test could take it.
        let any = "127.0.0.1:0";
        let child = Running::start(
            Command::new(env!("CARGO_BIN_EXE_zipwire"))
                .arg("proxy")
                .args(["--listen", any])
                .args(["--tls-listen", any])
                .arg("--tls-cert")
                .arg(&cert)
                .arg("--tls-key")
                .arg(&key)
                .args(["--upstream", &format!("http://{origin}")])
                .args(["--admin", any])
                .args(["--encodings", "zstd,br,gzip"])
                .args(["--threads", "2"]),
            &dir.path().join("proxy.log"),
        );
        Ok(Proxy {
            listen: child.addr("tls=false", "local_addr="),
            tls: child.addr("tls=true", "local_addr="),
            admin: child.addr("admin listening", "addr="),
            child,
            _dir: dir,
        })
    }

    /// What the proxy has logged so far.
    pub fn log(&self) -> String {
        self.child.log()
    }

    /// The admin listener's `/stats` document.
    pub fn stats(&self) -> serde_json::Value {
        let mut stream = TcpStream::connect(self.admin).expect("connect to the admin listener");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        let request = format!(
            "GET /stats HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.admin
        );
        stream
            .write_all(request.as_bytes())
            .expect("send the stats request");
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .expect("read the stats response");
        let (head, body) = response
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("no end of head in the stats response: {response}"));
        assert!(head.starts_with("HTTP/1.1 200"), "/stats answered: {head}");
        serde_json::from_str(body).unwrap_or_else(|e| panic!("/stats is not JSON ({e}): {body}"))
    }
}
