//! `zipwire compress` / `zipwire decompress`, and the binary run as `gzip`, `gunzip` or
//! `zcat`: gzip's flags parsed here (and, for the gzip names, the `GZIP` variable: [`mod@env`]),
//! the work done by `zipwire-cli`. Long options may be shortened to any prefix that names
//! one option, as getopt_long lets gzip's be (`--decomp --stdo`).

mod env;

use std::ffi::{OsStr, OsString};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{value_parser, Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches, Parser};
use zipwire_cli::{Mode, Options};
use zipwire_codec::Level;

/// gzip's flags, shared by both subcommands and the gzip personalities.
#[derive(Debug, Args)]
pub struct FileArgs {
    /// Files to work on, replaced by FILE.gz (or back); none or `-` means stdin to stdout.
    #[arg(value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Write to standard output and keep the input files.
    #[arg(short = 'c', long = "stdout", visible_alias = "to-stdout")]
    pub stdout: bool,

    /// Decompress.
    #[arg(short = 'd', long, visible_alias = "uncompress")]
    pub decompress: bool,

    /// Keep (do not delete) the input files.
    #[arg(short = 'k', long)]
    pub keep: bool,

    /// Overwrite existing outputs; compress links and suffixed files; write to a terminal.
    #[arg(short = 'f', long)]
    pub force: bool,

    /// Test the compressed files' integrity.
    #[arg(short = 't', long)]
    pub test: bool,

    /// List compressed and uncompressed sizes.
    #[arg(short = 'l', long)]
    pub list: bool,

    /// Suffix of compressed files (not empty, at most 30 bytes, no '/').
    #[arg(short = 'S', long, value_name = "SUF", default_value = ".gz")]
    pub suffix: OsString,

    /// Work on directories' files, recursively.
    #[arg(short = 'r', long)]
    pub recursive: bool,

    /// Suppress warnings and the progress bar.
    #[command(flatten)]
    pub quiet: QuietFlag,

    /// Flush each output file to its storage device before the input is removed (always done).
    #[arg(long)]
    pub synchronous: bool,

    /// Accepted for gzip's scripts; no effect (the output is not made rsync-friendly).
    #[arg(long)]
    pub rsyncable: bool,

    /// Accepted for gzip's scripts; no effect on Unix, as in gzip (says so unless -q).
    #[arg(short = 'a', long)]
    pub ascii: bool,

    /// Display the license and exit.
    #[arg(short = 'L', long)]
    pub license: bool,

    /// Write the output to FILE (one input; the input is kept).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// Compression threads [default: the number of cores]
    #[arg(short = 'p', long = "processes", value_name = "N",
          value_parser = value_parser!(u16).range(1..=1024))]
    pub processes: Option<u16>,

    /// Do not save the file's name and time in the header (nor restore the time: the default
    /// when decompressing).
    #[arg(short = 'n', long = "no-name", overrides_with = "name")]
    pub no_name: bool,

    /// Save the file's name and time (the default); when decompressing, restore them.
    #[arg(short = 'N', long = "name", overrides_with = "no_name")]
    pub name: bool,

    /// -1 (fastest) to -9 (best); --fast is -1, --best -9 [default: -6]
    #[command(flatten)]
    pub level: LevelFlags,
}

/// The binary run as `gzip`, `gunzip` or `zcat`.
#[derive(Debug, Parser)]
#[command(
    version,
    about = "zipwire, run as gzip: compress or decompress files",
    infer_long_args = true
)]
pub struct GzipCli {
    /// gzip's flags.
    #[command(flatten)]
    pub args: FileArgs,

    /// Report each file's name and ratio.
    #[arg(short = 'v', long, action = ArgAction::Count)]
    pub verbose: u8,
}

/// The name the binary was started under, if it is one of gzip's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Personality {
    /// `gzip`: compress by default.
    Gzip,
    /// `gunzip`: decompress.
    Gunzip,
    /// `zcat`: decompress to standard output.
    Zcat,
}

impl Personality {
    /// The personality for `argv[0]`, if any.
    pub fn from_argv0(argv0: &OsStr) -> Option<Personality> {
        match Path::new(argv0).file_name()?.to_str()? {
            "gzip" => Some(Personality::Gzip),
            "gunzip" => Some(Personality::Gunzip),
            "zcat" => Some(Personality::Zcat),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Personality::Gzip => "gzip",
            Personality::Gunzip => "gunzip",
            Personality::Zcat => "zcat",
        }
    }
}

/// Runs as `gzip`, `gunzip` or `zcat`, parsing the process's arguments after the options
/// in `GZIP`.
pub fn run_as(personality: Personality) -> ExitCode {
    let program = personality.name();
    let from_env = match env::parse(program, std::env::var_os("GZIP").as_deref()) {
        Ok(options) => options,
        Err(message) => {
            let _ = writeln!(
                std::io::stderr(),
                "{message}\nTry `{program} --help' for more information."
            );
            return ExitCode::from(1);
        }
    };
    if from_env.warn {
        let _ = writeln!(
            std::io::stderr(),
            "{program}: warning: GZIP environment variable is deprecated; use an alias or script"
        );
    }
    let cli = GzipCli::parse_from(
        std::iter::once(OsString::from(program))
            .chain(from_env.args.into_iter().map(OsString::from))
            .chain(std::env::args_os().skip(1)),
    );
    let mut args = cli.args;
    match personality {
        Personality::Gzip => {}
        Personality::Gunzip => args.decompress = true,
        Personality::Zcat => {
            args.decompress = true;
            args.stdout = true;
        }
    }
    run(&args, cli.verbose > 0, personality.name())
}

/// Runs `zipwire compress` (or `decompress`, with `args.decompress` set).
pub fn run(args: &FileArgs, verbose: bool, program: &str) -> ExitCode {
    if args.license {
        println!(
            "{program} (zipwire {})\n{LICENSE}",
            env!("CARGO_PKG_VERSION")
        );
        return ExitCode::SUCCESS;
    }
    if !valid_suffix(&args.suffix) {
        // gzip's message and status (1) for a suffix it refuses, empty included.
        // Written as the CLI writes its messages: a closed stderr is no panic.
        let _ = writeln!(
            std::io::stderr(),
            "{program}: invalid suffix '{}'",
            args.suffix.to_string_lossy()
        );
        return ExitCode::from(1);
    }
    if args.ascii && !args.quiet.quiet() {
        let _ = writeln!(
            std::io::stderr(),
            "{program}: option --ascii ignored on this system"
        );
    }
    let mode = if args.list {
        Mode::List
    } else if args.test {
        Mode::Test
    } else if args.decompress {
        Mode::Decompress
    } else {
        Mode::Compress
    };
    let threads = args.processes.map(usize::from).unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let options = Options {
        mode,
        level: Level::try_from(args.level.level.unwrap_or(6)).expect("flags give 1-9"),
        to_stdout: args.stdout,
        keep: args.keep || args.stdout || args.output.is_some(),
        force: args.force,
        suffix: args.suffix.clone(),
        recursive: args.recursive,
        quiet: args.quiet.quiet(),
        verbose: args.quiet.verbose(verbose),
        output: args.output.clone(),
        threads,
        save_name: !args.no_name,
        restore_time: args.name,
        progress: !args.quiet.quiet(),
        program: program.to_owned(),
    };
    ExitCode::from(zipwire_cli::run(&options, &args.files).exit_code())
}

/// gzip's `MAX_SUFFIX`.
const MAX_SUFFIX: usize = 30;

/// What `-L` prints.
const LICENSE: &str = "Licensed under the MIT license or the Apache License 2.0, at your option.\n\
    This is free software: you are free to change and redistribute it.\n\
    There is NO WARRANTY, to the extent permitted by law.";

/// A suffix gzip accepts: not empty, at most 30 bytes. A '/' is refused too (gzip takes it and
/// then fails on every file).
fn valid_suffix(suffix: &OsStr) -> bool {
    let bytes = suffix.as_encoded_bytes();
    !bytes.is_empty() && bytes.len() <= MAX_SUFFIX && !bytes.contains(&b'/')
}

/// `-q`, and where it stands against `-v` (defined by the command around, with its own use beside
/// gzip's): the last of the two given wins, as in gzip (`gzip -tvq` is silent and `-tqv` verbose;
/// were both flags to hold, `-tvq` would print OK lines and take a warning's exit status).
#[derive(Clone, Copy, Debug, Default)]
pub struct QuietFlag {
    /// Where `-q` was last given on the command line.
    quiet_at: Option<usize>,
    /// Where `-v` was last given.
    verbose_at: Option<usize>,
}

impl QuietFlag {
    /// Whether `-q` holds: given, and not followed by `-v`.
    pub fn quiet(&self) -> bool {
        match (self.quiet_at, self.verbose_at) {
            (Some(q), Some(v)) => q > v,
            (quiet, _) => quiet.is_some(),
        }
    }

    /// Whether `-v` (given: `verbose`) holds: not followed by `-q`.
    pub fn verbose(&self, verbose: bool) -> bool {
        verbose && !self.quiet()
    }
}

/// The last index at which `id` was typed, if the command has such an argument.
fn last_given(matches: &ArgMatches, id: &str) -> Option<usize> {
    if !matches.ids().any(|known| known == id)
        || matches.value_source(id) != Some(ValueSource::CommandLine)
    {
        return None;
    }
    matches.indices_of(id).and_then(Iterator::max)
}

impl FromArgMatches for QuietFlag {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(QuietFlag {
            quiet_at: last_given(matches, "quiet"),
            verbose_at: last_given(matches, "verbose"),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for QuietFlag {
    fn augment_args(cmd: Command) -> Command {
        cmd.arg(
            Arg::new("quiet")
                .short('q')
                .long("quiet")
                .visible_alias("silent")
                .action(ArgAction::Count)
                .help("Suppress warnings and the progress bar"),
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// `-1` … `-9`, `--fast`, `--best`: the last one given wins, as in gzip.
#[derive(Clone, Copy, Debug, Default)]
pub struct LevelFlags {
    /// The level chosen, if any flag was given.
    pub level: Option<u8>,
}

const LEVEL_IDS: [&str; 9] = [
    "level1", "level2", "level3", "level4", "level5", "level6", "level7", "level8", "level9",
];

impl FromArgMatches for LevelFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let ids = LEVEL_IDS
            .iter()
            .zip(1u8..)
            .chain([(&"fast", 1), (&"best", 9)]);
        let mut last: Option<(usize, u8)> = None;
        for (id, level) in ids {
            // Count flags always have a (default) value: only count those typed in.
            if matches.value_source(id) != Some(ValueSource::CommandLine) {
                continue;
            }
            let given = matches.indices_of(id).and_then(Iterator::max);
            if let Some(index) = given {
                if last.is_none_or(|(at, _)| index > at) {
                    last = Some((index, level));
                }
            }
        }
        Ok(LevelFlags {
            level: last.map(|(_, level)| level),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for LevelFlags {
    fn augment_args(mut cmd: Command) -> Command {
        for (id, digit) in LEVEL_IDS.iter().zip('1'..='9') {
            let arg = Arg::new(*id)
                .short(digit)
                .action(ArgAction::Count)
                .help(format!("Compression level {digit}"))
                .hide(!matches!(digit, '1' | '9'));
            cmd = cmd.arg(arg);
        }
        cmd.arg(
            Arg::new("fast")
                .long("fast")
                .action(ArgAction::Count)
                .help("Same as -1"),
        )
        .arg(
            Arg::new("best")
                .long("best")
                .action(ArgAction::Count)
                .help("Same as -9"),
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> FileArgs {
        GzipCli::try_parse_from(std::iter::once("gzip").chain(args.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn the_last_level_flag_wins_and_flags_cluster() {
        assert_eq!(parse(&[]).level.level, None);
        assert_eq!(parse(&["-1", "-9"]).level.level, Some(9));
        assert_eq!(parse(&["--best", "-3"]).level.level, Some(3));
        assert_eq!(parse(&["-9", "--fast"]).level.level, Some(1));
        let args = parse(&["-dc5k", "f.gz"]);
        assert!(args.decompress && args.stdout && args.keep);
        assert_eq!(args.level.level, Some(5));
        assert_eq!(args.files, [PathBuf::from("f.gz")]);
        assert!(!valid_suffix(OsStr::new("")));
        assert!(!valid_suffix(OsStr::new("a/b")));
        assert!(!valid_suffix(OsStr::new(&"x".repeat(31))));
        assert!(valid_suffix(OsStr::new(".zw")));
        let args = parse(&["--synchronous", "--rsyncable", "-N", "-L", "-n"]);
        assert!(args.synchronous && args.rsyncable && args.license && args.no_name && !args.name);
    }

    #[test]
    fn personalities_come_from_the_program_name() {
        assert_eq!(
            Personality::from_argv0(OsStr::new("/usr/local/bin/zcat")),
            Some(Personality::Zcat)
        );
        assert_eq!(Personality::from_argv0(OsStr::new("zipwire")), None);
    }
}
