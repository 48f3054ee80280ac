//! The `GZIP` environment variable, read as gzip 1.12 reads it: its words are options put before
//! the command line's (so the command line wins), only those that cannot change which files are
//! touched or where output goes are taken (`-1`…`-9`, `--fast`, `--best`, `-n`, `-N`, `-q`, `-v`,
//! `--rsyncable`), anything else stops the program with gzip's message and status 1, and a variable
//! that sets anything draws gzip's deprecation warning unless it makes the program quiet. Ignored,
//! it would let `GZIP=-9 gzip f` silently compress at the default level.
//!
//! Hand-written rather than clap: clap parses the words' syntax, but gzip's rules for this
//! variable (which options, which messages, the warning) are gzip's own.

use std::ffi::OsStr;

/// gzip's long options (gzip.c's `longopts`) and the short option each stands for; `None`
/// for those without one (`--synchronous`, `--rsyncable`, `---presume-input-tty`).
const LONG: [(&str, Option<char>); 26] = [
    ("ascii", Some('a')),
    ("to-stdout", Some('c')),
    ("stdout", Some('c')),
    ("decompress", Some('d')),
    ("uncompress", Some('d')),
    ("force", Some('f')),
    ("help", Some('h')),
    ("keep", Some('k')),
    ("list", Some('l')),
    ("license", Some('L')),
    ("no-name", Some('n')),
    ("name", Some('N')),
    ("-presume-input-tty", None),
    ("quiet", Some('q')),
    ("silent", Some('q')),
    ("synchronous", None),
    ("recursive", Some('r')),
    ("suffix", Some('S')),
    ("test", Some('t')),
    ("verbose", Some('v')),
    ("version", Some('V')),
    ("fast", Some('1')),
    ("best", Some('9')),
    ("lzw", Some('Z')),
    ("bits", Some('b')),
    ("rsyncable", None),
];

/// gzip's short options (its `shortopts`, less the argument markers).
const SHORT: &str = "abcdfhH?klLmMnNqrStvVZ123456789";

/// The short options the variable may hold.
const ALLOWED_SHORT: &str = "123456789nNqv";

/// What the variable adds to the command line.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct EnvOptions {
    /// Options to put before the command line's, in clap's spelling.
    pub(super) args: Vec<String>,
    /// gzip's warning is due: the variable set something and left the program not quiet.
    pub(super) warn: bool,
}

/// Reads the variable's `value`; `Err` holds the message gzip prints before its "Try
/// `gzip --help'" line and status 1. `program` names the program in messages.
pub(super) fn parse(program: &str, value: Option<&OsStr>) -> Result<EnvOptions, String> {
    let Some(value) = value else {
        return Ok(EnvOptions::default());
    };
    let text = value.to_string_lossy();
    let words: Vec<&str> = text
        .split([' ', '\t'])
        .filter(|word| !word.is_empty())
        .collect();
    let mut options = EnvOptions::default();
    let mut quiet = false;
    for word in words.iter().copied().filter(|word| is_option(word)) {
        if word == "--" {
            return Err(format!("{program}: --: {NOT_VALID}"));
        }
        if let Some(long) = word.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or(long);
            let (full, short) = resolve(program, name)?;
            match short {
                Some(letter @ ('n' | 'N' | 'q' | 'v' | '1' | '9')) => {
                    quiet = note_quiet(letter, quiet);
                    options.args.push(format!("-{letter}"));
                }
                None if full == "rsyncable" => options.args.push("--rsyncable".to_owned()),
                _ => return Err(format!("{program}: --{full}: {NOT_VALID}")),
            }
            continue;
        }
        for letter in word.chars().skip(1) {
            if !SHORT.contains(letter) {
                return Err(format!("{program}: invalid option -- '{letter}'"));
            }
            if !ALLOWED_SHORT.contains(letter) {
                return Err(format!("{program}: -{letter}: {NOT_VALID}"));
            }
            quiet = note_quiet(letter, quiet);
        }
        options.args.push(word.to_owned());
    }
    if let Some(word) = words.iter().find(|word| !is_option(word)) {
        return Err(format!(
            "{program}: {word}: non-option in GZIP environment variable"
        ));
    }
    options.warn = !words.is_empty() && !quiet;
    Ok(options)
}

const NOT_VALID: &str = "option not valid in GZIP environment variable";

/// A word getopt takes as an option: `-` and something.
fn is_option(word: &str) -> bool {
    word.len() > 1 && word.starts_with('-')
}

/// `-q` makes the program quiet and `-v` not, the last one winning.
fn note_quiet(letter: char, quiet: bool) -> bool {
    match letter {
        'q' => true,
        'v' => false,
        _ => quiet,
    }
}

/// The long option `name` names, exactly or by a prefix that only it (or only options
/// meaning the same) begins with, as getopt_long resolves it.
fn resolve(program: &str, name: &str) -> Result<(&'static str, Option<char>), String> {
    if let Some(&(full, short)) = LONG.iter().find(|(full, _)| *full == name) {
        return Ok((full, short));
    }
    let matches: Vec<_> = LONG
        .iter()
        .filter(|(full, _)| !name.is_empty() && full.starts_with(name))
        .collect();
    match matches.as_slice() {
        [] => Err(format!("{program}: unrecognized option '--{name}'")),
        [(full, short), rest @ ..]
            if rest
                .iter()
                .all(|(_, other)| other.is_some() && other == short) =>
        {
            Ok((full, *short))
        }
        _ => Err(format!("{program}: option '--{name}' is ambiguous")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(value: &str) -> Result<EnvOptions, String> {
        parse("gzip", Some(OsStr::new(value)))
    }

    fn args(value: &str) -> Vec<String> {
        read(value).expect("accepted").args
    }

    #[test]
    fn levels_names_and_verbosity_are_taken_and_warned_of_unless_quiet() {
        assert_eq!(parse("gzip", None), Ok(EnvOptions::default()));
        assert_eq!(read(" \t "), Ok(EnvOptions::default()));
        assert_eq!(args("-1"), ["-1"]);
        assert_eq!(args(" -9\t-n  "), ["-9", "-n"]);
        assert_eq!(
            args("--fast --best --no-name --name"),
            ["-1", "-9", "-n", "-N"]
        );
        assert_eq!(args("--rsync --verb --sil"), ["--rsyncable", "-v", "-q"]);
        assert_eq!(args("-1qv"), ["-1qv"]);
        assert!(read("-1").expect("accepted").warn);
        assert!(read("-v").expect("accepted").warn);
        assert!(!read("-q").expect("accepted").warn, "GZIP=-q does not warn");
        assert!(!read("-1 --quiet").expect("accepted").warn);
        assert!(read("-q -v").expect("accepted").warn);
        assert!(!read("-vq").expect("accepted").warn);
    }

    #[test]
    fn anything_else_is_refused_with_gzips_message() {
        let refused = [
            (
                "-c",
                "gzip: -c: option not valid in GZIP environment variable",
            ),
            (
                "-1k",
                "gzip: -k: option not valid in GZIP environment variable",
            ),
            (
                "-S x",
                "gzip: -S: option not valid in GZIP environment variable",
            ),
            (
                "--stdout",
                "gzip: --stdout: option not valid in GZIP environment variable",
            ),
            (
                "--to",
                "gzip: --to-stdout: option not valid in GZIP environment variable",
            ),
            (
                "--suffix=.x",
                "gzip: --suffix: option not valid in GZIP environment variable",
            ),
            (
                "--",
                "gzip: --: option not valid in GZIP environment variable",
            ),
            ("-x", "gzip: invalid option -- 'x'"),
            ("--bogus", "gzip: unrecognized option '--bogus'"),
            ("--n", "gzip: option '--n' is ambiguous"),
            ("--s", "gzip: option '--s' is ambiguous"),
            ("foo", "gzip: foo: non-option in GZIP environment variable"),
            (
                "-5 foo",
                "gzip: foo: non-option in GZIP environment variable",
            ),
            (
                "foo -k",
                "gzip: -k: option not valid in GZIP environment variable",
            ),
            ("-", "gzip: -: non-option in GZIP environment variable"),
        ];
        for (value, message) in refused {
            assert_eq!(read(value), Err(message.to_owned()), "{value}");
        }
    }
}
