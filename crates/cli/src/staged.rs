//! Safe output files: written under a temporary name in the target's directory, flushed to
//! disk, then renamed into place, so a failure at any point leaves no partial output and a
//! reader never sees a half-written file under the real name.

use std::ffi::OsString;
use std::fs::{self, File, FileTimes, Metadata, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::SystemTime;

use crate::interrupt;

/// Buffer between the compressor and the file.
const BUFFER: usize = 256 * 1024;

/// An output file being written under a temporary name; dropped without
/// [`Staged::commit`], it is removed.
#[derive(Debug)]
pub struct Staged {
    file: BufWriter<File>,
    temp: PathBuf,
    committed: bool,
}

impl Staged {
    /// Creates a temporary file next to `target`: mode 0600 until committed when the output
    /// will take a `private` input's mode (whose data others may not read), else the mode a
    /// shell's redirection gives (0666 less the umask), which it keeps.
    ///
    /// # Errors
    ///
    /// Any error creating the file: a missing or read-only directory, a full disk.
    pub fn create(target: &Path, private: bool) -> io::Result<Staged> {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let name = target.file_name().unwrap_or_default().as_bytes();
        // Short enough for NAME_MAX (bytes, whatever the name's encoding) whatever the
        // target's length.
        let mut temp_name = vec![b'.'];
        temp_name.extend_from_slice(&name[..name.len().min(100)]);
        temp_name.extend_from_slice(
            format!(
                ".{}-{}.zipwire-tmp",
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            )
            .as_bytes(),
        );
        let temp = target.with_file_name(OsString::from_vec(temp_name));
        // Registered first: a signal between creating and registering would leave it behind.
        interrupt::register(&temp);
        let file = match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(if private { 0o600 } else { 0o666 })
            .open(&temp)
        {
            Ok(file) => file,
            Err(err) => {
                interrupt::unregister(&temp);
                return Err(err);
            }
        };
        Ok(Staged {
            file: BufWriter::with_capacity(BUFFER, file),
            temp,
            committed: false,
        })
    }

    /// Flushes the data to disk, gives the file `like`'s permissions, owner (when allowed) and
    /// times (its modification time `modified` instead, when given), and moves it to `target`:
    /// replacing an existing file only if `overwrite`. Returns what could not be given (times, then
    /// permissions, gzip's order): the file is in place all the same, as gzip's is with a warning,
    /// since a file system that refuses `chmod` (FUSE mounts such as `bindfs --chmod-deny`, vfat)
    /// holds the data whole, and failing the file over it would mean nothing could be compressed
    /// onto those file systems.
    ///
    /// # Errors
    ///
    /// A failed write, sync or rename (the temporary file is then removed), or
    /// [`io::ErrorKind::AlreadyExists`] when `target` exists and `overwrite` is off.
    pub fn commit(
        mut self,
        target: &Path,
        like: Option<&Metadata>,
        overwrite: bool,
        modified: Option<SystemTime>,
    ) -> io::Result<Vec<io::Error>> {
        self.file.flush()?;
        let file = self.file.get_ref();
        let mut not_given = Vec::new();
        let mut mode = None;
        if let Some(meta) = like {
            // As gzip's copy_stat: the group, the mode, then the owner, each on its own. Only
            // root may give a file away; a user who may not keep the input's owner still keeps
            // its group where they belong to it (one call for both would lose the group too,
            // and the group's members their access). The mode is the permission bits alone: set-id
            // and sticky files are not replaced (see the job), and no output gains those bits.
            let _ = std::os::unix::fs::fchown(file, None, Some(meta.gid()));
            mode = file
                .set_permissions(fs::Permissions::from_mode(meta.mode() & 0o777))
                .err();
            let _ = std::os::unix::fs::fchown(file, Some(meta.uid()), None);
            let mut times = FileTimes::new().set_modified(meta.modified()?);
            if let Ok(accessed) = meta.accessed() {
                times = times.set_accessed(accessed);
            }
            not_given.extend(file.set_times(times).err());
        }
        if let Some(modified) = modified {
            if let Err(err) = file.set_modified(modified) {
                if not_given.is_empty() {
                    not_given.push(err);
                }
            }
        }
        not_given.extend(mode);
        file.sync_all()?;
        if overwrite {
            fs::rename(&self.temp, target)?;
        } else {
            place_new(&self.temp, target)?;
        }
        self.committed = true;
        interrupt::unregister(&self.temp);
        // The rename itself must reach the disk before the caller deletes the input.
        let dir = match target.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        match File::open(dir) {
            Ok(dir) => dir.sync_all()?,
            // A directory this user may write into but not read (mode 0333) cannot be opened
            // to sync it: the file system that holds it and the output is synced instead. (An
            // error here failed a file whose output was already in place.)
            Err(err) if err.kind() == io::ErrorKind::PermissionDenied => {
                rustix::fs::syncfs(self.file.get_ref()).map_err(io::Error::from)?;
            }
            Err(err) => return Err(err),
        }
        Ok(not_given)
    }
}

impl Write for Staged {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.file.write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.temp);
            interrupt::unregister(&self.temp);
        }
    }
}

/// Moves `temp` to `target` unless `target` exists: never clobber without -f. A rename with
/// `RENAME_NOREPLACE` first; on file systems without it, a hard link (which fails if the target
/// appeared meanwhile) and the temporary name's removal, and without links a check, then a rename.
/// The rename comes first because on FUSE mounts the link's count stays cached at 2 for a second
/// after the unlink, and a `gunzip` of the new file in that second would refuse it
/// (`has 1 other link`).
fn place_new(temp: &Path, target: &Path) -> io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    match renameat_with(CWD, temp, CWD, target, RenameFlags::NOREPLACE) {
        Ok(()) => return Ok(()),
        Err(rustix::io::Errno::EXIST) => return Err(io::ErrorKind::AlreadyExists.into()),
        // Not supported here (EINVAL), or by the kernel (ENOSYS): the older way.
        Err(_) => {}
    }
    match fs::hard_link(temp, target) {
        Ok(()) => fs::remove_file(temp),
        Err(err) if err.kind() == io::ErrorKind::AlreadyExists => Err(err),
        // File systems without hard links: check, then rename.
        Err(_) if fs::symlink_metadata(target).is_ok() => Err(io::ErrorKind::AlreadyExists.into()),
        Err(_) => fs::rename(temp, target),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn temp_files(dir: &Path) -> Vec<PathBuf> {
        fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".zipwire-tmp"))
            .collect()
    }

    #[test]
    fn commit_moves_into_place_and_drop_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.gz");
        let mut staged = Staged::create(&target, true).unwrap();
        staged.write_all(b"data").unwrap();
        assert!(!target.exists());
        assert_eq!(temp_files(dir.path()).len(), 1);
        staged.commit(&target, None, false, None).unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"data");
        assert!(temp_files(dir.path()).is_empty());

        let mut again = Staged::create(&target, true).unwrap();
        again.write_all(b"other").unwrap();
        let err = again.commit(&target, None, false, None).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(&target).unwrap(), b"data");
        assert!(temp_files(dir.path()).is_empty());

        let abandoned = Staged::create(&target, true).unwrap();
        drop(abandoned);
        assert!(temp_files(dir.path()).is_empty());
    }

    #[test]
    fn a_given_time_is_set_before_the_file_is_moved_into_place() {
        // `gunzip -N` of a read-only file: the output takes the input's mode (0444 here) and
        // the header's time, which must not need the output reopened for writing.
        let dir = tempfile::tempdir().unwrap();
        let like_path = dir.path().join("in.gz");
        fs::write(&like_path, b"x").unwrap();
        fs::set_permissions(&like_path, fs::Permissions::from_mode(0o444)).unwrap();
        let like = fs::metadata(&like_path).unwrap();
        let target = dir.path().join("in");
        let time = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        let mut staged = Staged::create(&target, true).unwrap();
        staged.write_all(b"data").unwrap();
        let not_given = staged
            .commit(&target, Some(&like), false, Some(time))
            .unwrap();
        assert!(not_given.is_empty(), "{not_given:?}");
        let meta = fs::metadata(&target).unwrap();
        assert_eq!(meta.modified().unwrap(), time);
        assert_eq!(meta.permissions().mode() & 0o777, 0o444);
    }
}
