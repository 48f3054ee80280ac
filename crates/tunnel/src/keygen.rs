//! `zipwire tunnel keygen`: a self-signed certificate, its key and a random token, written
//! with the permissions ssh-keygen uses (the secrets readable by their owner only).

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::tls::{Fingerprint, SERVER_NAME};

/// Bytes of randomness in a token (written as 64 hex digits).
const TOKEN_BYTES: usize = 32;

/// Writes `dir/cert.pem`, `dir/key.pem` and `dir/token` (creating `dir`), and returns the
/// certificate's fingerprint. Existing files are replaced only with `force`.
///
/// # Errors
///
/// When a file exists (without `force`), cannot be written, or randomness is unavailable.
pub fn keygen(dir: &Path, force: bool) -> io::Result<Fingerprint> {
    fs::create_dir_all(dir)?;
    let certified = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_owned()])
        .map_err(io::Error::other)?;
    let mut token = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut token).map_err(io::Error::other)?;
    let token: String = token.iter().map(|b| format!("{b:02x}")).collect();
    write_file(
        &dir.join("key.pem"),
        certified.signing_key.serialize_pem().as_bytes(),
        0o600,
        force,
    )?;
    write_file(
        &dir.join("token"),
        format!("{token}\n").as_bytes(),
        0o600,
        force,
    )?;
    write_file(
        &dir.join("cert.pem"),
        certified.cert.pem().as_bytes(),
        0o644,
        force,
    )?;
    Ok(Fingerprint::of(certified.cert.der()))
}

fn write_file(path: &Path, bytes: &[u8], mode: u32, force: bool) -> io::Result<()> {
    let mut options = OpenOptions::new();
    options.write(true).mode(mode);
    if force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut file = options
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    // An existing file keeps its mode through open(): set it explicitly.
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Reads a token file: its bytes without surrounding whitespace, 1 to 255 of them. Warns when
/// others than the owner may read it.
///
/// # Errors
///
/// When the file cannot be read or the token is empty or too long.
pub fn read_token(path: &Path) -> io::Result<Vec<u8>> {
    let text =
        fs::read(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let token = text.trim_ascii().to_vec();
    if token.is_empty() || token.len() > crate::handshake::MAX_TOKEN {
        return Err(io::Error::other(format!(
            "{}: the token must be 1 to 255 bytes",
            path.display()
        )));
    }
    if let Ok(meta) = fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(path = %path.display(), "token file is readable by others than its owner; chmod 600 it");
        }
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keygen_writes_private_files_and_refuses_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let fp = keygen(dir.path(), false).unwrap();
        for (name, mode) in [("key.pem", 0o600), ("token", 0o600), ("cert.pem", 0o644)] {
            let meta = fs::metadata(dir.path().join(name)).unwrap();
            assert_eq!(meta.permissions().mode() & 0o777, mode, "{name}");
        }
        assert_eq!(
            crate::tls::cert_fingerprint(&dir.path().join("cert.pem")).unwrap(),
            fp
        );
        assert_eq!(read_token(&dir.path().join("token")).unwrap().len(), 64);
        crate::tls::server_config(&dir.path().join("cert.pem"), &dir.path().join("key.pem"))
            .unwrap();
        let again = keygen(dir.path(), false).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        assert_ne!(keygen(dir.path(), true).unwrap(), fp);
    }
}
