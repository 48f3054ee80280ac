//! The per-operand driver: gzip's checks, where output goes, messages and exit status.

use std::fs::{self, File, Metadata};
use std::io::{self, BufWriter, IsTerminal, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use zipwire_codec::format::gzip;

use crate::blocking::Blocking;
use crate::error::{io_message, Damage, StreamError};
use crate::inflate::{self, Decoded, Method, Trailing};
use crate::list::{Listing, Row};
use crate::member::{self, MemberOptions, Totals};
use crate::names;
use crate::progress::Progress;
use crate::ratio::{format_percent, percent_saved};
use crate::staged::Staged;
use crate::{Mode, Options, Status};

mod messages;
mod sink;

use sink::Sink;

/// Buffer in front of standard output.
const STDOUT_BUFFER: usize = 256 * 1024;

/// Runs `options.mode` on each operand (`-` or none: standard input) and returns the worst
/// status. Problems are reported on stderr as `program: FILE: problem`, one line each.
pub fn run(options: &Options, operands: &[PathBuf]) -> Status {
    crate::interrupt::install();
    let mut job = Job {
        options,
        status: Status::Success,
        listing: Listing::new(options.verbose, options.quiet),
        stdout: BufWriter::with_capacity(STDOUT_BUFFER, io::stdout()),
        stopped: false,
        line: Line::None,
        shortened: false,
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
    /// The `-v` line of the file being tested or decompressed.
    line: Line,
    /// The file being compressed goes to a name gzip's way of shortening made, as its own
    /// with the suffix was too long (see [`names::shortened`]).
    shortened: bool,
}

/// gzip begins a file's `-v` line with its name before decoding it (`treat_file`), so a
/// message on the way ends that line first and the result follows on a line of its own;
/// zipwire prints the line whole at the end unless a message came first.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Line {
    /// No `-v` line.
    None,
    /// Not printed yet: the file's name (empty for standard input, whose line gzip leaves
    /// empty).
    Pending(String),
    /// A message ended the begun line: the rest goes on its own.
    Ended,
}

impl Job<'_> {
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
            (Some(target), _) => match self.output_target(target, None) {
                Some(sink) => sink,
                None => return,
            },
            (None, _) => Sink::Stdout,
        };
        if !self.may_write(&sink) {
            return;
        }
        let mut header = gzip::Header::minimal(self.options.level.get());
        // A regular file on standard input gives its time, as gzip stores it (no name).
        if self.options.save_name && compressing {
            let stdin = io::stdin().as_fd().try_clone_to_owned().map(File::from);
            if let Ok(meta) = stdin.and_then(|file| file.metadata()) {
                if meta.is_file() {
                    header.mtime = u32::try_from(meta.mtime()).unwrap_or(0);
                }
            }
        }
        self.process(
            Input {
                path: Path::new("stdin"),
                reader: Blocking(io::stdin()),
                meta: None,
                is_stdin: true,
            },
            sink,
            header,
        );
    }

    fn path(&mut self, path: &Path) {
        self.shortened = false;
        let (found, meta) = match self.locate(path) {
            Ok(found) => found,
            Err((name, err)) => return self.fail(name, io_message(&err)),
        };
        let path = found.as_path();
        if meta.is_dir() {
            if self.options.recursive && self.options.output.is_some() {
                // Every file of the tree would go to the one output, each replacing the last.
                return self.fail("--output", "takes a single input file, not a directory");
            }
            if self.options.recursive {
                return self.directory(path);
            }
            return self.warn(format_args!("{} is a directory -- ignored", path.display()));
        }
        // As gzip's `to_stdout`: -c, -o, and -t and -l, whose output is no file beside the
        // input. Only those read links without -f, and special files (a FIFO, a device,
        // `<(...)`) at all: a special file is never replaced, not even with -f.
        let to_stream = self.options.to_stdout
            || self.options.output.is_some()
            || matches!(self.options.mode, Mode::Test | Mode::List);
        let follow = self.options.force || to_stream;
        // gzip opens with O_NOFOLLOW and reports what the kernel says, as an error.
        let link_refused =
            |job: &mut Self| job.fail(path, io_message(&io::Error::from_raw_os_error(libc::ELOOP)));
        if meta.file_type().is_symlink() && !follow {
            return link_refused(self);
        }
        // Opened once, and everything known of the file is asked of what was opened: a name
        // checked and then opened could be swapped for a link to another user's file in
        // between (gzip's O_NOFOLLOW and fstat). A FIFO swapped in must not block the open.
        let mut flags = libc::O_NOCTTY;
        if !follow {
            flags |= libc::O_NOFOLLOW;
        }
        if !to_stream {
            flags |= libc::O_NONBLOCK;
        }
        let opened = fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags)
            .open(path)
            .and_then(|file| file.metadata().map(|meta| (file, meta)));
        let (input, meta) = match opened {
            Ok(opened) => opened,
            Err(err) => return self.fail(path, io_message(&err)),
        };
        if !meta.is_file() && !to_stream {
            return self.warn(format_args!(
                "{} is not a directory or a regular file - ignored",
                path.display()
            ));
        }
        let Some(sink) = self.sink_for(path, &input, &meta) else {
            return;
        };
        if !self.may_write(&sink) {
            return;
        }
        let mut header = self.header_for(path, &meta);
        if self.shortened {
            // As gzip: the name that did not fit is kept in the header, `-n` or not.
            header.name = path.file_name().map(|name| name.as_bytes().to_vec());
        }
        self.process(
            Input {
                path,
                reader: Blocking(input),
                // A special file's size and mode say nothing about its data or its output.
                meta: meta.is_file().then_some(&meta),
                is_stdin: false,
            },
            sink,
            header,
        );
    }

    /// The file an operand names, and its metadata. Decompressing (`-d`, `-t`, `-l`), a name
    /// with no compressed suffix that does not exist is tried with the suffixes gzip tries
    /// (`gunzip f` reads `f.gz`): the user's, then `.gz`, `.z`, `-z` and `.Z`. The error then
    /// names the first of them, as gzip's does.
    fn locate(&self, path: &Path) -> Result<(PathBuf, Metadata), (PathBuf, io::Error)> {
        let err = match fs::symlink_metadata(path) {
            Ok(meta) => return Ok((path.to_owned(), meta)),
            Err(err) => err,
        };
        let suffix = &self.options.suffix;
        let tries_suffixes = self.options.mode != Mode::Compress
            && err.kind() == io::ErrorKind::NotFound
            && names::compressed_suffix(path, suffix).is_none();
        if !tries_suffixes {
            return Err((path.to_owned(), err));
        }
        let mut suffixes = vec![suffix.as_os_str()];
        for known in [".gz", ".z", "-z", ".Z"] {
            if suffixes.iter().all(|s| *s != known) {
                suffixes.push(std::ffi::OsStr::new(known));
            }
        }
        for suffix in &suffixes {
            let candidate = names::compressed(path, suffix);
            if let Ok(meta) = fs::symlink_metadata(&candidate) {
                return Ok((candidate, meta));
            }
        }
        Err((names::compressed(path, suffixes[0]), err))
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
            // Decompressing a tree only touches compressed files, as gzip -dr does; the
            // others are skipped by `sink_for`, said to be under -v.
            self.path(&path);
        }
    }

    /// The gzip header for a file: its name and time unless `-n`.
    fn header_for(&mut self, path: &Path, meta: &Metadata) -> gzip::Header {
        let mut header = gzip::Header::minimal(self.options.level.get());
        if self.options.save_name && self.options.mode == Mode::Compress {
            header.name = path.file_name().map(|name| name.as_bytes().to_vec());
            // The field holds 1970 to 2106 (RFC 1952 §2.3.1, 0 meaning "no time"): other
            // times are stored as 0 with gzip's warning.
            header.mtime = match u32::try_from(meta.mtime()) {
                Ok(mtime) => mtime,
                Err(_) => {
                    self.warn(format_args!(
                        "{}: warning: file timestamp out of range for gzip format",
                        path.display()
                    ));
                    0
                }
            };
        }
        header
    }

    /// Runs one input into its sink and reports.
    fn process<R: Read + Send>(&mut self, input: Input<'_, R>, sink: Sink, header: gzip::Header) {
        let Input {
            path,
            reader: input,
            meta,
            is_stdin,
        } = input;
        let options = self.options;
        let compressing = options.mode == Mode::Compress;
        let label = path.display().to_string();
        self.line = match options.mode {
            Mode::Test | Mode::Decompress if options.verbose && !options.quiet => {
                Line::Pending(if is_stdin {
                    String::new()
                } else {
                    label.clone()
                })
            }
            _ => Line::None,
        };
        let progress = Progress::new(
            &label,
            meta.map(Metadata::len),
            compressing,
            options.progress,
        );
        let mut update = |totals: Totals| progress.update(totals);
        // The bytes gzip leaves out of a compressed file's ratio: header and trailer.
        let framing = header.to_bytes().len() as u64 + 8;
        // gzip copies unknown data through only where it goes to a stream (gzip.c's
        // `force && to_stdout && !list`; standard input and -t count as such there).
        let to_stream = options.to_stdout || options.output.is_some() || is_stdin;
        let decode = inflate::Options {
            pass_through: options.force
                && options.mode != Mode::List
                && (to_stream || options.mode == Mode::Test),
        };
        let run = |output: &mut (dyn Write + Send), update: &mut (dyn FnMut(Totals) + Send)| {
            if compressing {
                let member = MemberOptions {
                    level: options.level,
                    threads: options.threads,
                    header,
                    block_size: member::BLOCK,
                };
                member::compress(input, output, &member, update).map(|totals| Decoded {
                    totals,
                    trailing: Trailing::Nothing,
                    method: Method::Deflate,
                    framing,
                    mtime: 0,
                    crc: 0,
                    unknown_flags: 0,
                })
            } else {
                inflate::decompress(input, output, decode, update)
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
            Sink::Special { file, .. } => {
                let mut out = io::BufWriter::with_capacity(STDOUT_BUFFER, file);
                let result = run(&mut out, &mut update);
                result.and_then(|done| out.flush().map(|()| done).map_err(StreamError::Write))
            }
            Sink::File { target, .. } => match Staged::create(target, meta.is_some()) {
                Ok(mut staged) => run(&mut staged, &mut update).and_then(|done| {
                    if done.trailing == Trailing::MoreEntries {
                        // gzip keeps a multi-entry zip whole rather than lose the others.
                        return Err(StreamError::Damaged(Damage::Refused(
                            "has more than one entry -- unchanged".to_owned(),
                        )));
                    }
                    staged
                        .commit(
                            target,
                            meta,
                            options.force,
                            header_time(options, done.mtime),
                        )
                        .map(|not_given| {
                            // gzip's copy_stat: the file stays, with a warning each.
                            for err in not_given {
                                self.warn(format_args!(
                                    "{}: {}",
                                    target.display(),
                                    io_message(&err)
                                ));
                            }
                            done
                        })
                        .map_err(StreamError::Write)
                }),
                Err(err) => Err(StreamError::Write(err)),
            },
        };
        progress.finish();
        let done = match result {
            Ok(done) => done,
            Err(err) => {
                self.report_failure(path, &sink, &err);
                self.line = Line::None;
                if compressing && matches!(sink, Sink::Stdout | Sink::Special { .. }) {
                    // Part of a member is in the stream already, and no member after it can be read
                    // past it: stop, as gzip does on any read or write error. Going on,
                    // `-c a /proc/self/mem b` would write b's member after the broken one, and
                    // `gzip -dc` of the whole would fail at it.
                    self.stopped = true;
                }
                return;
            }
        };
        // A regular file that grew or shrank while it was read: what was read is in the
        // output, and gzip says so (zip.c), as whatever was appended later is not.
        if let Some(meta) = meta.filter(|_| compressing) {
            if done.totals.bytes_in != meta.len() {
                self.note(format_args!(
                    "{}: file size changed while zipping",
                    path.display()
                ));
            }
        }
        if done.unknown_flags != 0 {
            self.warn(format_args!(
                "{}: warning, unknown flags 0x{:x}",
                path.display(),
                done.unknown_flags
            ));
        }
        match done.trailing {
            Trailing::Garbage => self.warn(format_args!(
                "{}: decompression OK, trailing garbage ignored",
                path.display()
            )),
            // gzip says so only when asked to be verbose, and warns then.
            Trailing::Zeros if self.options.verbose => self.warn(format_args!(
                "{}: decompression OK, trailing zero bytes ignored",
                path.display()
            )),
            Trailing::MoreEntries => self.warn(format_args!(
                "{} has more than one entry--rest ignored",
                path.display()
            )),
            _ => {}
        }
        if let (true, Sink::File { target, .. }) = (std::mem::take(&mut self.shortened), &sink) {
            // gzip's words, `-q` or not; `-v` names the output on its own line.
            if !self.options.verbose {
                self.note(format_args!(
                    "{} compressed to {}",
                    path.display(),
                    target.display()
                ));
            }
        }
        if let Sink::File { replace: true, .. } = &sink {
            if let Err(err) = fs::remove_file(path) {
                // The output is whole and kept: as gzip, a warning (exit 2, silent under -q), not a
                // failure.
                self.warn(format_args!("{}: {}", path.display(), io_message(&err)));
            }
        }
        let file_mtime = meta.map_or_else(now, MetadataExt::mtime);
        let report = Report {
            path,
            is_stdin,
            done,
            file_mtime,
            target: match &sink {
                Sink::File { target, replace } => Some((target.as_path(), *replace)),
                _ => None,
            },
        };
        self.report_done(&report);
        self.line = Line::None;
    }
}

/// `-d -N`: the time stored in the gzip header, for the output, when there is one. It is set
/// on the output before it is moved into place, so a read-only input (whose mode the output
/// takes) needs no reopening for writing.
fn header_time(options: &Options, mtime: u32) -> Option<std::time::SystemTime> {
    (options.mode == Mode::Decompress && options.restore_time && mtime != 0)
        .then(|| std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::from(mtime)))
}

/// Seconds since 1970, for standard input's listing date.
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// One input and what is known of it.
struct Input<'a, R> {
    path: &'a Path,
    reader: R,
    meta: Option<&'a Metadata>,
    is_stdin: bool,
}

/// What a finished file's report needs.
struct Report<'a> {
    path: &'a Path,
    is_stdin: bool,
    done: Decoded,
    /// The output file, and whether it replaced the input.
    target: Option<(&'a Path, bool)>,
    /// The input's modification time (now for standard input, as a pipe's is).
    file_mtime: i64,
}
