//! Where a file's output goes: standard output, nowhere, a file written safely or a
//! device named by `-o`, and gzip's reasons for skipping a file instead.

use super::*;

/// Where a file's output goes.
pub(super) enum Sink {
    /// Standard output.
    Stdout,
    /// Nowhere: `-t` and `-l`.
    Discard,
    /// A file written safely; `replace` removes the input afterwards.
    File { target: PathBuf, replace: bool },
    /// `-o` naming a device, FIFO or socket: written into, as a shell's redirection would,
    /// never replaced.
    Special { target: PathBuf, file: File },
}

impl Job<'_> {
    /// Refuses compressed data for a terminal without `-f`, and stops: it would only be
    /// garbage on the screen, for this file and every other.
    pub(super) fn may_write(&mut self, sink: &Sink) -> bool {
        let options = self.options;
        let refused = options.mode == Mode::Compress
            && !options.force
            && matches!(sink, Sink::Stdout)
            && io::stdout().is_terminal();
        if refused {
            self.fail(
                "stdout",
                "compressed data not written to a terminal (use -f to force)",
            );
            self.stopped = true;
        }
        !refused
    }

    /// Skips a file to decompress, test or list whose name has no compressed suffix. As gzip's
    /// `make_ofname`: said, with a warning's status, when verbose, or when neither recursive nor
    /// quiet; otherwise skipped in silence with no status, so that `gzip -dq *` and `gzip -dr` over
    /// mixed files succeed.
    fn unknown_suffix(&mut self, path: &Path) -> Option<Sink> {
        let options = self.options;
        if options.verbose || (!options.recursive && !options.quiet) {
            self.warn(format_args!(
                "{}: unknown suffix -- ignored",
                path.display()
            ));
        }
        None
    }

    /// Decides where `path`'s output goes, or reports why it is skipped.
    pub(super) fn sink_for(&mut self, path: &Path, input: &File, meta: &Metadata) -> Option<Sink> {
        let options = self.options;
        let unsuffixed = names::compressed_suffix(path, &options.suffix).is_none();
        match (options.mode, &options.output) {
            // gzip tries -t and -l on any file named, but under -r as -d: files without a
            // compressed suffix are skipped rather than read and failed.
            (Mode::Test | Mode::List, _) if options.recursive && unsuffixed => {
                return self.unknown_suffix(path)
            }
            (Mode::Test | Mode::List, _) => return Some(Sink::Discard),
            (_, Some(target)) => return self.output_target(target, Some(meta)),
            _ if options.to_stdout => return Some(Sink::Stdout),
            _ => {}
        }
        let target = if options.mode == Mode::Compress {
            if let Some(suffix) = names::compressed_suffix(path, &options.suffix) {
                if !options.force {
                    // As gzip: no warning status (`gzip -r` over a tree that holds .gz files
                    // succeeds), and said under -r only with -v.
                    if !options.quiet && (!options.recursive || options.verbose) {
                        say!(
                            "{}: {} already has {suffix} suffix -- unchanged",
                            options.program,
                            path.display()
                        );
                    }
                    return None;
                }
            }
            let target = names::compressed(path, &options.suffix);
            if names::too_long(&target) {
                let Some(short) = names::shortened(path, &options.suffix) else {
                    self.fail(&target, "File name too long");
                    return None;
                };
                self.shortened = true;
                short
            } else {
                target
            }
        } else {
            let Some(target) = names::decompressed(path, &options.suffix) else {
                return self.unknown_suffix(path);
            };
            // -N: the name stored in the header, in the input's directory, as gzip -dN.
            let stored = options.restore_time.then(|| stored_name(input)).flatten();
            match stored {
                Some(mut name) if name.len() > names::NAME_MAX => {
                    // As gzip: cut to what the file system takes, with a warning.
                    let mut bytes = name.into_vec();
                    bytes.truncate(names::NAME_MAX);
                    name = std::ffi::OsString::from_vec(bytes);
                    self.warn(format_args!("{}: warning, name truncated", path.display()));
                    path.with_file_name(name)
                }
                Some(name) => path.with_file_name(name),
                None => target,
            }
        };
        // A stored name equal to the input's own: the output would be moved over the input,
        // which is then removed, and both would be lost.
        if target == path {
            self.warn(format_args!(
                "{}: the output would replace the input -- unchanged",
                path.display()
            ));
            return None;
        }
        // gzip's rules for files whose mode says more than who may read them: set-id files
        // are never replaced by an output (whose mode would carry the bits, or lose them),
        // and a sticky file only with -f (the bit is then dropped).
        let mode = meta.mode();
        let refused = if mode & libc::S_ISUID != 0 {
            Some("is set-user-ID on execution - ignored")
        } else if mode & libc::S_ISGID != 0 {
            Some("is set-group-ID on execution - ignored")
        } else if mode & libc::S_ISVTX != 0 && !options.force {
            Some("has the sticky bit set - file ignored")
        } else {
            None
        };
        if let Some(why) = refused {
            self.warn(format_args!("{} {why}", path.display()));
            return None;
        }
        if meta.nlink() > 1 && !options.force {
            self.warn(format_args!(
                "{} has {} other link{} -- file ignored",
                path.display(),
                meta.nlink() - 1,
                if meta.nlink() > 2 { "s" } else { "" }
            ));
            return None;
        }
        self.free_target(&target, !options.keep)
    }

    /// `-o FILE`, for an input with `meta` (none for standard input). As a shell's
    /// redirection would: a device, FIFO or socket is written into (`-o /dev/null`, `-o
    /// /dev/stdout`) and never replaced, and a link to a file has that file replaced, not the
    /// link. The input itself is refused: it would be replaced by its own output.
    pub(super) fn output_target(&mut self, target: &Path, meta: Option<&Metadata>) -> Option<Sink> {
        let existing = fs::metadata(target).ok();
        if let (Some(out), Some(input)) = (&existing, meta) {
            if out.dev() == input.dev() && out.ino() == input.ino() {
                self.warn(format_args!(
                    "{}: the output would replace the input -- unchanged",
                    target.display()
                ));
                return None;
            }
        }
        match existing {
            Some(out) if !out.is_file() && !out.is_dir() => {
                return match fs::OpenOptions::new().write(true).open(target) {
                    Ok(file) => Some(Sink::Special {
                        target: target.to_owned(),
                        file,
                    }),
                    Err(err) => {
                        self.fail(target, io_message(&err));
                        None
                    }
                };
            }
            Some(out) if out.is_file() && self.options.force => {
                let is_link = fs::symlink_metadata(target).is_ok_and(|m| m.is_symlink());
                if let Some(real) = is_link.then(|| fs::canonicalize(target).ok()).flatten() {
                    return self.free_target(&real, false);
                }
            }
            _ => {}
        }
        self.free_target(target, false)
    }

    /// Refuses an existing output without `-f`.
    fn free_target(&mut self, target: &Path, replace: bool) -> Option<Sink> {
        if !self.options.force && fs::symlink_metadata(target).is_ok() {
            // gzip asks on a terminal; elsewhere it warns (exit 2), as here.
            self.warn(format_args!(
                "{} already exists;\tnot overwritten",
                target.display()
            ));
            return None;
        }
        Some(Sink::File {
            target: target.to_owned(),
            replace,
        })
    }
}

/// The file name stored in `input`'s gzip header, without any directory part (a header
/// cannot send the output elsewhere); `None` when there is none or the file is not gzip.
/// Read at offset 0 without moving the file's position, which the decoder then reads from.
fn stored_name(input: &File) -> Option<std::ffi::OsString> {
    use std::os::unix::ffi::OsStringExt;
    use std::os::unix::fs::FileExt;
    let mut head = vec![0; gzip::MAX_HEADER_LEN];
    let mut filled = 0;
    while filled < head.len() {
        match input.read_at(&mut head[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    head.truncate(filled);
    let (header, _) = gzip::parse_legacy_header(&head).ok()??;
    let name = header.name?;
    let base = name.rsplit(|&b| b == b'/').next()?.to_vec();
    match base.as_slice() {
        b"" | b"." | b".." => None,
        _ => Some(std::ffi::OsString::from_vec(base)),
    }
}
