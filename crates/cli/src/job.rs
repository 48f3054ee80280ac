//! The per-operand driver: gzip's checks, where output goes, messages and exit status.

use std::fs::{self, File, Metadata};
use std::io::{self, BufWriter, IsTerminal, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use zipwire_codec::format::gzip;

use crate::error::{io_message, StreamError};
use crate::inflate::{self, Trailing};
use crate::list::Listing;
use crate::member::{self, MemberOptions, Totals};
use crate::names;
use crate::progress::Progress;
use crate::staged::Staged;
use crate::{Mode, Options, Status};

/// Buffer in front of standard output.
const STDOUT_BUFFER: usize = 256 * 1024;

/// Runs `options.mode` on each operand (`-` or none: standard input) and returns the worst
/// status. Problems are reported on stderr as `program: FILE: problem`, one line each.
pub fn run(options: &Options, operands: &[PathBuf]) -> Status {
    crate::interrupt::install();
    let mut job = Job {
        options,
        status: Status::Success,
        listing: Listing::new(options.verbose),
        stdout: BufWriter::with_capacity(STDOUT_BUFFER, io::stdout()),
        stopped: false,
    };
    if options.output.is_some() && operands.len() > 1 {
        job.fail("--output", "takes a single input file");
        return job.status;
    }
    if operands.is_empty() {
        job.stdin();
    }
    for operand in operands {
        if job.stopped {
            break;
        }
        if operand.as_os_str() == "-" {
            job.stdin();
        } else {
            job.path(operand);
        }
    }
    if options.mode == Mode::List {
        job.listing.finish();
    }
    job.status
}

struct Job<'a> {
    options: &'a Options,
    status: Status,
    listing: Listing,
    stdout: BufWriter<io::Stdout>,
    /// Standard output went away (`zcat big.gz | head`): stop quietly.
    stopped: bool,
}

/// Where a file's output goes.
enum Sink {
    /// Standard output.
    Stdout,
    /// Nowhere: `-t` and `-l`.
    Discard,
    /// A file written safely; `replace` removes the input afterwards.
    File { target: PathBuf, replace: bool },
}

impl Job<'_> {
    fn fail(&mut self, what: impl AsRef<Path>, problem: impl std::fmt::Display) {
        eprintln!(
            "{}: {}: {problem}",
            self.options.program,
            what.as_ref().display()
        );
        self.status = self.status.max(Status::Failure);
    }

    fn warn(&mut self, message: impl std::fmt::Display) {
        if !self.options.quiet {
            eprintln!("{}: {message}", self.options.program);
        }
        self.status = self.status.max(Status::Warning);
    }

    /// Standard input to standard output (or `-o`).
    fn stdin(&mut self) {
        let compressing = self.options.mode == Mode::Compress;
        if !compressing && !self.options.force && io::stdin().is_terminal() {
            self.fail(
                "stdin",
                "compressed data not read from a terminal (use -f to force)",
            );
            return;
        }
        let sink = match (&self.options.output, self.options.mode) {
            (_, Mode::Test | Mode::List) => Sink::Discard,
            (Some(target), _) => Sink::File {
                target: target.clone(),
                replace: false,
            },
            (None, _) => Sink::Stdout,
        };
        if !self.may_write(&sink) {
            return;
        }
        let header = gzip::Header::minimal(self.options.level.get());
        self.process(Path::new("stdin"), io::stdin().lock(), None, sink, header);
    }

    fn path(&mut self, path: &Path) {
        let meta = match fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(err) => return self.fail(path, io_message(&err)),
        };
        if meta.is_dir() {
            if self.options.recursive {
                return self.directory(path);
            }
            return self.warn(format_args!("{} is a directory -- ignored", path.display()));
        }
        let to_stream = self.options.to_stdout || self.options.output.is_some();
        let follow = self.options.force || to_stream;
        if meta.file_type().is_symlink() && !follow {
            return self.warn(format_args!(
                "{} is a symbolic link -- ignored (use -f or -c)",
                path.display()
            ));
        }
        let meta = match fs::metadata(path) {
            Ok(meta) => meta,
            Err(err) => return self.fail(path, io_message(&err)),
        };
        if !meta.is_file() && !self.options.force {
            return self.warn(format_args!(
                "{} is not a directory or a regular file -- ignored",
                path.display()
            ));
        }
        let Some(sink) = self.sink_for(path, &meta) else {
            return;
        };
        if !self.may_write(&sink) {
            return;
        }
        let input = match File::open(path) {
            Ok(file) => file,
            Err(err) => return self.fail(path, io_message(&err)),
        };
        let header = self.header_for(path, &meta);
        self.process(path, input, Some(&meta), sink, header);
    }

    fn directory(&mut self, dir: &Path) {
        let entries = match fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(err) => return self.fail(dir, io_message(&err)),
        };
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for path in paths {
            if self.stopped {
                return;
            }
            // Decompressing a tree only touches compressed files, as gzip -dr does.
            let is_compressed = names::compressed_suffix(&path, &self.options.suffix).is_some();
            if self.options.mode != Mode::Compress && !is_compressed && !path.is_dir() {
                continue;
            }
            self.path(&path);
        }
    }

    /// Refuses compressed data for a terminal without `-f`, and stops: it would only be
    /// garbage on the screen, for this file and every other.
    fn may_write(&mut self, sink: &Sink) -> bool {
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

    /// Decides where `path`'s output goes, or reports why it is skipped.
    fn sink_for(&mut self, path: &Path, meta: &Metadata) -> Option<Sink> {
        let options = self.options;
        match (options.mode, &options.output) {
            (Mode::Test | Mode::List, _) => return Some(Sink::Discard),
            (_, Some(target)) => return self.free_target(target, false),
            _ if options.to_stdout => return Some(Sink::Stdout),
            _ => {}
        }
        let target = if options.mode == Mode::Compress {
            if let Some(suffix) = names::compressed_suffix(path, &options.suffix) {
                if !options.force {
                    self.warn(format_args!(
                        "{} already has {suffix} suffix -- unchanged",
                        path.display()
                    ));
                    return None;
                }
            }
            names::compressed(path, &options.suffix)
        } else {
            let Some(target) = names::decompressed(path, &options.suffix) else {
                self.warn(format_args!(
                    "{}: unknown suffix -- ignored",
                    path.display()
                ));
                return None;
            };
            target
        };
        if meta.nlink() > 1 && !options.force {
            self.warn(format_args!(
                "{} has {} other link{} -- unchanged",
                path.display(),
                meta.nlink() - 1,
                if meta.nlink() > 2 { "s" } else { "" }
            ));
            return None;
        }
        self.free_target(&target, !options.keep)
    }

    /// Refuses an existing output without `-f`.
    fn free_target(&mut self, target: &Path, replace: bool) -> Option<Sink> {
        if !self.options.force && fs::symlink_metadata(target).is_ok() {
            self.fail(target, "already exists; not overwritten (use -f to force)");
            return None;
        }
        Some(Sink::File {
            target: target.to_owned(),
            replace,
        })
    }

    /// The gzip header for a file: its name and time unless `-n`.
    fn header_for(&self, path: &Path, meta: &Metadata) -> gzip::Header {
        let mut header = gzip::Header::minimal(self.options.level.get());
        if self.options.save_name {
            header.name = path.file_name().map(|name| name.as_bytes().to_vec());
            // Times outside the field's 32 bits are stored as 0, "no time", as gzip does.
            header.mtime = u32::try_from(meta.mtime()).unwrap_or(0);
        }
        header
    }

    /// Runs one input into its sink and reports.
    fn process(
        &mut self,
        path: &Path,
        input: impl Read,
        meta: Option<&Metadata>,
        sink: Sink,
        header: gzip::Header,
    ) {
        let options = self.options;
        let compressing = options.mode == Mode::Compress;
        let label = path.display().to_string();
        let progress = Progress::new(
            &label,
            meta.map(Metadata::len),
            compressing,
            options.progress,
        );
        let mut update = |totals: Totals| progress.update(totals);
        let header_len = header.to_bytes().len() as u64;
        let run = |output: &mut dyn Write, update: &mut dyn FnMut(Totals)| {
            if compressing {
                let member = MemberOptions {
                    level: options.level,
                    threads: options.threads,
                    header,
                    block_size: member::BLOCK,
                };
                member::compress(input, output, &member, update).map(|t| (t, Trailing::Nothing))
            } else {
                inflate::decompress(input, output, update)
            }
        };
        let result = match &sink {
            Sink::Discard => run(&mut io::sink(), &mut update),
            Sink::Stdout => {
                let result = run(&mut self.stdout, &mut update);
                result.and_then(|done| {
                    self.stdout
                        .flush()
                        .map(|()| done)
                        .map_err(StreamError::Write)
                })
            }
            Sink::File { target, .. } => match Staged::create(target) {
                Ok(mut staged) => run(&mut staged, &mut update).and_then(|done| {
                    let trailing_ok = done.1;
                    staged
                        .commit(target, meta, options.force)
                        .map(|()| (done.0, trailing_ok))
                        .map_err(StreamError::Write)
                }),
                Err(err) => Err(StreamError::Write(err)),
            },
        };
        progress.finish();
        let (totals, trailing) = match result {
            Ok(done) => done,
            Err(err) => return self.report_failure(path, &sink, &err),
        };
        if trailing == Trailing::Garbage {
            self.warn(format_args!(
                "{}: decompression OK, trailing garbage ignored",
                path.display()
            ));
        }
        if let Sink::File {
            target,
            replace: true,
        } = &sink
        {
            if let Err(err) = fs::remove_file(path) {
                self.fail(path, io_message(&err));
            }
            self.report_done(path, totals, header_len, Some(target));
        } else {
            self.report_done(path, totals, header_len, None);
        }
    }

    fn report_failure(&mut self, path: &Path, sink: &Sink, err: &StreamError) {
        match (err, sink) {
            (StreamError::Write(io_err), Sink::Stdout)
                if io_err.kind() == io::ErrorKind::BrokenPipe =>
            {
                self.stopped = true;
                self.status = self.status.max(Status::Failure);
            }
            (StreamError::Write(_), Sink::Stdout) => self.fail("stdout", err),
            (StreamError::Write(_), Sink::File { target, .. }) => self.fail(target, err),
            _ => self.fail(path, err),
        }
    }

    /// `-v` lines and `-l` rows, in gzip's layout.
    fn report_done(
        &mut self,
        path: &Path,
        totals: Totals,
        header_len: u64,
        target: Option<&PathBuf>,
    ) {
        let options = self.options;
        match options.mode {
            Mode::List => {
                let name =
                    names::decompressed(path, &options.suffix).unwrap_or_else(|| path.to_owned());
                self.listing.row(totals.bytes_in, totals.bytes_out, &name);
            }
            Mode::Test if options.verbose => eprintln!("{}:\t OK", path.display()),
            Mode::Compress | Mode::Decompress if options.verbose => {
                let (plain, packed) = if options.mode == Mode::Compress {
                    // gzip's figure leaves out the header and the 8-byte trailer.
                    (
                        totals.bytes_in,
                        totals.bytes_out.saturating_sub(header_len + 8),
                    )
                } else {
                    (totals.bytes_out, totals.bytes_in)
                };
                let saved = percent_saved(plain, packed);
                match target {
                    Some(target) if options.keep => eprintln!(
                        "{}:\t{saved:5.1}% -- created {}",
                        path.display(),
                        target.display()
                    ),
                    Some(target) => eprintln!(
                        "{}:\t{saved:5.1}% -- replaced with {}",
                        path.display(),
                        target.display()
                    ),
                    None => eprintln!("{}:\t{saved:5.1}%", path.display()),
                }
            }
            _ => {}
        }
    }
}

/// Space saved, as gzip prints it: 100 × (1 − packed / plain), 0 for empty input.
pub(crate) fn percent_saved(plain: u64, packed: u64) -> f64 {
    if plain == 0 {
        0.0
    } else {
        100.0 * (1.0 - packed as f64 / plain as f64)
    }
}
