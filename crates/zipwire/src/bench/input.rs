//! What the benchmark compresses: files named on the command line, the shared corpus, or the
//! built-in sample.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use crate::sample;

/// The corpus sets measured by default (small, text-heavy, typical of web traffic).
const DEFAULT_SETS: [&str; 2] = ["web", "canterbury"];

/// One input, compressed as one stream.
pub struct File {
    /// Where it came from, for error messages.
    pub name: String,
    /// Its contents.
    pub data: Vec<u8>,
}

/// All inputs and how they were chosen.
pub struct Input {
    /// The inputs, in a stable order.
    pub files: Vec<File>,
    /// A description of where they came from, for the report.
    pub origin: String,
}

impl Input {
    /// Total bytes over all files.
    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|file| file.data.len() as u64).sum()
    }
}

/// Reads `paths` (files, or directories' regular files), or the default corpus sets when
/// `paths` is empty, falling back to the built-in sample when the corpus is absent.
///
/// # Errors
///
/// A path that cannot be read, or no input bytes at all.
pub fn load(paths: &[PathBuf]) -> anyhow::Result<Input> {
    let input = if paths.is_empty() {
        default_input()?
    } else {
        let mut files = Vec::new();
        for path in paths {
            read_path(path, &mut files)?;
        }
        Input {
            files,
            origin: "files given".to_string(),
        }
    };
    if input.total_bytes() == 0 {
        bail!("no input bytes to compress");
    }
    Ok(input)
}

fn default_input() -> anyhow::Result<Input> {
    let corpus = env::var_os("ZIPWIRE_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("../shared/corpus"));
    let sets: Vec<PathBuf> = DEFAULT_SETS
        .iter()
        .map(|set| corpus.join(set))
        .filter(|dir| dir.is_dir())
        .collect();
    if sets.is_empty() {
        let files = sample::files()
            .into_iter()
            .map(|(name, data)| File {
                name: format!("<sample>/{name}"),
                data,
            })
            .collect();
        let origin = format!(
            "built-in sample data (no corpus at {}; set ZIPWIRE_CORPUS)",
            corpus.display()
        );
        return Ok(Input { files, origin });
    }
    let mut files = Vec::new();
    for dir in &sets {
        read_dir(dir, &mut files)?;
    }
    let names: Vec<String> = sets.iter().map(|dir| dir.display().to_string()).collect();
    Ok(Input {
        files,
        origin: names.join(", "),
    })
}

fn read_path(path: &Path, files: &mut Vec<File>) -> anyhow::Result<()> {
    let meta = fs::metadata(path).with_context(|| path.display().to_string())?;
    if meta.is_dir() {
        read_dir(path, files)
    } else {
        read_file(path, files)
    }
}

/// Reads the regular files directly inside `dir`, sorted by name; subdirectories are skipped.
fn read_dir(dir: &Path, files: &mut Vec<File>) -> anyhow::Result<()> {
    let mut paths = Vec::new();
    for entry in fs::read_dir(dir).with_context(|| dir.display().to_string())? {
        let entry = entry.with_context(|| dir.display().to_string())?;
        let path = entry.path();
        if fs::metadata(&path)
            .with_context(|| path.display().to_string())?
            .is_file()
        {
            paths.push(path);
        }
    }
    paths.sort();
    for path in paths {
        read_file(&path, files)?;
    }
    Ok(())
}

fn read_file(path: &Path, files: &mut Vec<File>) -> anyhow::Result<()> {
    let data = fs::read(path).with_context(|| path.display().to_string())?;
    files.push(File {
        name: path.display().to_string(),
        data,
    });
    Ok(())
}
