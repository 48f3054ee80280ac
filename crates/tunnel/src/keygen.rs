//! `zipwire tunnel keygen`: a self-signed certificate, its key and a random token, written
//! with the permissions ssh-keygen uses (the secrets readable by their owner only).
//!
//! All three files are written to temporary files first (created new, so never through a
//! symlink an attacker planted) and put in place only once all three are complete: a failure
//! half-way leaves no orphaned key beside an old certificate (with `--force`, the old files
//! are put back). The directory is created 0700.

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::tls::{Fingerprint, SERVER_NAME};

/// Bytes of randomness in a token (written as 64 hex digits).
const TOKEN_BYTES: usize = 32;

/// The shortest token accepted without `--allow-weak-token`: 16 bytes, 128 bits if random.
pub const MIN_TOKEN: usize = 16;

/// Writes `dir/cert.pem` (0644), `dir/key.pem` (0600) and `dir/token` (0600), creating
/// `dir` (0700), and returns the certificate's fingerprint. Existing files are replaced only
/// with `force`.
///
/// # Errors
///
/// When a file exists (without `force`), cannot be written, or randomness is unavailable;
/// none of the three is then in place (unless it was before).
pub fn keygen(dir: &Path, force: bool) -> io::Result<Fingerprint> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let certified = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_owned()])
        .map_err(io::Error::other)?;
    let mut token = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut token).map_err(io::Error::other)?;
    let token: String = token.iter().map(|b| format!("{b:02x}")).collect();
    let files = [
        ("key.pem", certified.signing_key.serialize_pem(), 0o600),
        ("token", format!("{token}\n"), 0o600),
        ("cert.pem", certified.cert.pem(), 0o644),
    ];
    if !force {
        for (name, _, _) in &files {
            let path = dir.join(name);
            if fs::symlink_metadata(&path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{}: exists (--force replaces it)", path.display()),
                ));
            }
        }
    }
    let mut written: Vec<(PathBuf, PathBuf)> = Vec::new();
    let result = (|| {
        for (name, text, mode) in &files {
            let temp = write_temp(dir, name, text.as_bytes(), *mode)?;
            written.push((temp, dir.join(name)));
        }
        place(&written, force)
    })();
    for (temp, _) in &written {
        let _ = fs::remove_file(temp);
    }
    result?;
    Ok(Fingerprint::of(certified.cert.der()))
}

/// Writes `bytes` to a new temporary file beside `dir/name`, never through a symlink.
fn write_temp(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> io::Result<PathBuf> {
    let mut salt = [0u8; 8];
    getrandom::fill(&mut salt).map_err(io::Error::other)?;
    let salt: String = salt.iter().map(|b| format!("{b:02x}")).collect();
    let path = dir.join(format!(".{name}.{salt}.tmp"));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    // The umask may have taken bits off the mode: set it exactly.
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(path)
}

/// Moves every temporary file to its place: rename (which replaces a symlink rather than
/// following it) with `force`, a hard link that fails on anything existing without it. On a
/// failure the files already placed are taken back, and with `force` the old ones put back:
/// they are kept aside as hard links until every new file is in place, so that a failed
/// `--force` never leaves a new key beside the old certificate.
fn place(files: &[(PathBuf, PathBuf)], force: bool) -> io::Result<()> {
    let mut kept: Vec<(PathBuf, PathBuf)> = Vec::new();
    if force {
        for (_, dest) in files {
            if fs::symlink_metadata(dest).is_err() {
                continue;
            }
            let aside = dest.with_file_name(format!(
                ".{}.old",
                dest.file_name().unwrap_or_default().to_string_lossy()
            ));
            let _ = fs::remove_file(&aside);
            if let Err(e) = fs::hard_link(dest, &aside) {
                for (aside, _) in &kept {
                    let _ = fs::remove_file(aside);
                }
                return Err(io::Error::new(e.kind(), format!("{}: {e}", dest.display())));
            }
            kept.push((aside, dest.clone()));
        }
    }
    for (done, (temp, dest)) in files.iter().enumerate() {
        let moved = if force {
            fs::rename(temp, dest)
        } else {
            fs::hard_link(temp, dest)
        };
        if let Err(e) = moved {
            for (_, placed) in &files[..done] {
                if !kept.iter().any(|(_, old)| old == placed) {
                    let _ = fs::remove_file(placed);
                }
            }
            for (aside, old) in &kept {
                let _ = fs::rename(aside, old);
            }
            return Err(io::Error::new(e.kind(), format!("{}: {e}", dest.display())));
        }
    }
    for (aside, _) in &kept {
        let _ = fs::remove_file(aside);
    }
    Ok(())
}

/// Reads a token file: its bytes without surrounding whitespace, [`MIN_TOKEN`] to 255 of
/// them (1 to 255 with `allow_weak`). Warns when others than the owner may read it.
///
/// # Errors
///
/// When the file cannot be read or the token is empty, too short or too long.
pub fn read_token(path: &Path, allow_weak: bool) -> io::Result<Vec<u8>> {
    let text =
        fs::read(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    let token = text.trim_ascii().to_vec();
    if token.is_empty() || token.len() > crate::handshake::MAX_TOKEN {
        return Err(io::Error::other(format!(
            "{}: the token must be 1 to 255 bytes",
            path.display()
        )));
    }
    if token.len() < MIN_TOKEN && !allow_weak {
        return Err(io::Error::other(format!(
            "{}: the token has {} bytes, fewer than {MIN_TOKEN}: guessable; use keygen's \
             (--allow-weak-token accepts it anyway)",
            path.display(),
            token.len()
        )));
    }
    warn_if_exposed(path, "token file");
    Ok(token)
}

/// Warns when a secret file is readable (or writable) by its group or others, as ssh does
/// for private keys.
pub fn warn_if_exposed(path: &Path, what: &str) {
    if let Ok(meta) = fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            tracing::warn!(path = %path.display(), "{what} is readable by others than its owner; chmod 600 it");
        }
    }
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
        assert_eq!(
            read_token(&dir.path().join("token"), false).unwrap().len(),
            64
        );
        crate::tls::server_config(&dir.path().join("cert.pem"), &dir.path().join("key.pem"))
            .unwrap();
        let again = keygen(dir.path(), false).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        assert_ne!(keygen(dir.path(), true).unwrap(), fp);
    }

    #[test]
    fn keygen_makes_a_private_directory_and_leaves_no_orphan_on_failure() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("keys");
        keygen(&dir, false).unwrap();
        let mode = fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);

        // A token already there: keygen fails, and writes no key beside it.
        let other = base.path().join("other");
        fs::create_dir(&other).unwrap();
        fs::write(other.join("token"), "0123456789abcdef0123\n").unwrap();
        assert!(keygen(&other, false).is_err());
        let left: Vec<_> = fs::read_dir(&other)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, ["token"], "orphans after a failed keygen");

        // With --force, a failure puts the old files back: no new key beside the old
        // certificate (a directory where the token goes cannot be replaced).
        let (old_key, old_cert) = (
            fs::read(dir.join("key.pem")).unwrap(),
            fs::read(dir.join("cert.pem")).unwrap(),
        );
        fs::remove_file(dir.join("token")).unwrap();
        fs::create_dir_all(dir.join("token/x")).unwrap();
        assert!(keygen(&dir, true).is_err());
        assert_eq!(fs::read(dir.join("key.pem")).unwrap(), old_key);
        assert_eq!(fs::read(dir.join("cert.pem")).unwrap(), old_cert);
        let mut left: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["cert.pem", "key.pem", "token"],
            "after a failed --force"
        );
    }

    #[test]
    fn keygen_never_writes_through_a_symlink() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("keys");
        fs::create_dir(&dir).unwrap();
        let victim = base.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join("key.pem")).unwrap();
        keygen(&dir, true).unwrap();
        assert_eq!(fs::read_to_string(&victim).unwrap(), "precious");
        let key = fs::symlink_metadata(dir.join("key.pem")).unwrap();
        assert!(key.file_type().is_file());
        assert_eq!(key.permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn short_tokens_are_refused_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        fs::write(&path, "hunter2\n").unwrap();
        let e = read_token(&path, false).unwrap_err();
        assert!(e.to_string().contains("fewer than 16"), "{e}");
        assert_eq!(read_token(&path, true).unwrap(), b"hunter2");
        fs::write(&path, "0123456789abcdef").unwrap();
        assert_eq!(read_token(&path, false).unwrap().len(), 16);
    }
}
