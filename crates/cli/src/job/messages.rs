//! What a job tells the user: gzip's messages, its `-v` lines, and the exit status they
//! set.

use super::*;

impl Job<'_> {
    /// Ends the `-v` line gzip would have begun, before a message.
    pub(super) fn end_line(&mut self) {
        if let Line::Pending(name) = &self.line {
            if name.is_empty() {
                say!("");
            } else {
                say!("{name}:\t");
            }
            self.line = Line::Ended;
        }
    }

    /// A message gzip prints whatever `-q` says and without changing the exit status.
    pub(super) fn note(&mut self, message: impl std::fmt::Display) {
        self.end_line();
        say!("{}: {message}", self.options.program);
    }

    pub(super) fn fail(&mut self, what: impl AsRef<Path>, problem: impl std::fmt::Display) {
        self.end_line();
        say!(
            "{}: {}: {problem}",
            self.options.program,
            what.as_ref().display()
        );
        self.status = self.status.max(Status::Failure);
    }

    pub(super) fn warn(&mut self, message: impl std::fmt::Display) {
        self.end_line();
        if !self.options.quiet {
            say!("{}: {message}", self.options.program);
        }
        self.status = self.status.max(Status::Warning);
    }

    pub(super) fn report_failure(&mut self, path: &Path, sink: &Sink, err: &StreamError) {
        match (err, sink) {
            (StreamError::Write(io_err), Sink::Stdout)
                if io_err.kind() == io::ErrorKind::BrokenPipe =>
            {
                self.stopped = true;
                self.status = self.status.max(Status::BrokenPipe);
            }
            (StreamError::Write(_), Sink::Stdout) => self.fail("stdout", err),
            (StreamError::Write(_), Sink::File { target, .. } | Sink::Special { target, .. }) => {
                self.fail(target, err)
            }
            (StreamError::Damaged(Damage::Refused(text)), _) => {
                say!("{}: {} {text}", self.options.program, path.display());
                self.status = self.status.max(Status::Failure);
            }
            (StreamError::Damaged(Damage::CrcAndLength), _) => {
                self.fail(path, err);
                self.fail(path, Damage::Length);
            }
            _ => self.fail(path, err),
        }
    }

    /// `-v` lines and `-l` rows, in gzip's layout (gzip.c's `treat_file` and `treat_stdin`).
    pub(super) fn report_done(&mut self, report: &Report<'_>) {
        let options = self.options;
        let Report {
            path,
            is_stdin,
            done,
            target,
            file_mtime,
        } = *report;
        let (plain, packed) = if options.mode == Mode::Compress {
            (done.totals.bytes_in, done.totals.bytes_out)
        } else {
            (done.totals.bytes_out, done.totals.bytes_in)
        };
        let saved = format_percent(percent_saved(plain, packed, done.framing));
        match options.mode {
            Mode::List => {
                // gzip names standard input's row "stdout", where its data would go.
                let name = if is_stdin {
                    PathBuf::from("stdout")
                } else {
                    names::decompressed(path, &options.suffix).unwrap_or_else(|| path.to_owned())
                };
                // As for the output's time: the header's only with -N.
                let mtime = match done.mtime {
                    header if header != 0 && options.restore_time => i64::from(header),
                    _ => file_mtime,
                };
                self.listing.row(
                    &Row {
                        decoded: done,
                        mtime,
                    },
                    &name,
                );
            }
            // gzip ends standard input's test early after a warning, with no " OK".
            Mode::Test if options.verbose && is_stdin && self.line == Line::Ended => {}
            Mode::Test if options.verbose && (is_stdin || self.line == Line::Ended) => {
                say!(" OK");
            }
            Mode::Test if options.verbose => say!("{}:\t OK", path.display()),
            // gzip prints only the ratio for standard input, and nothing when decompressing it.
            Mode::Compress if options.verbose && is_stdin => say!("{saved}"),
            Mode::Decompress if is_stdin => {}
            Mode::Compress | Mode::Decompress if options.verbose => {
                let (verb, target) = match target {
                    Some((target, true)) => ("replaced with", target.display().to_string()),
                    Some((target, false)) => ("created", target.display().to_string()),
                    // gzip's wording for -c, odd as it is: scripts parse it.
                    None => ("replaced with", "stdout".to_owned()),
                };
                if self.line == Line::Ended {
                    say!("{saved} -- {verb} {target}");
                } else {
                    say!("{}:\t{saved} -- {verb} {target}", path.display());
                }
            }
            _ => {}
        }
    }
}
