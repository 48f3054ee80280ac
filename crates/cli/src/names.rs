//! Output names: which suffixes mark a compressed file and what its plain name is, as gzip
//! decides them.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

/// Suffixes gzip recognises on decompression, with what replaces each.
const KNOWN: [(&str, &str); 7] = [
    (".gz", ""),
    ("-gz", ""),
    (".z", ""),
    ("-z", ""),
    ("_z", ""),
    (".tgz", ".tar"),
    (".taz", ".tar"),
];

/// The compressed file's name: `path` with `suffix` appended.
pub fn compressed(path: &Path, suffix: &OsStr) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

/// The suffix `path`'s file name already ends with, if it marks a compressed file: the user's
/// `suffix` or one gzip knows. A name that is only the suffix does not count.
pub fn compressed_suffix(path: &Path, suffix: &OsStr) -> Option<String> {
    let name = path.file_name()?.as_bytes();
    let user = suffix.as_bytes();
    if !user.is_empty() && name.len() > user.len() && name.ends_with(user) {
        return Some(suffix.to_string_lossy().into_owned());
    }
    KNOWN
        .iter()
        .find(|(known, _)| ends_with_known(name, known))
        .map(|(known, _)| (*known).to_owned())
}

/// The decompressed file's name, or `None` when the name has no suffix to strip.
pub fn decompressed(path: &Path, suffix: &OsStr) -> Option<PathBuf> {
    let name = path.file_name()?.as_bytes();
    let user = suffix.as_bytes();
    let (cut, add) = if !user.is_empty() && name.len() > user.len() && name.ends_with(user) {
        (user.len(), &b""[..])
    } else {
        let (known, add) = KNOWN
            .iter()
            .find(|(known, _)| ends_with_known(name, known))?;
        (known.len(), add.as_bytes())
    };
    let mut plain = name[..name.len() - cut].to_vec();
    plain.extend_from_slice(add);
    Some(path.with_file_name(OsString::from_vec(plain)))
}

/// Whether `name` ends with a suffix gzip knows, in any case (gzip lowercases the name
/// first: `f.Z` and `f.GZ` decompress to `f`), and is longer than it.
fn ends_with_known(name: &[u8], known: &str) -> bool {
    name.len() > known.len()
        && name[name.len() - known.len()..].eq_ignore_ascii_case(known.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_gzip() {
        let gz = OsStr::new(".gz");
        assert_eq!(
            compressed(Path::new("a/b.txt"), gz),
            Path::new("a/b.txt.gz")
        );
        for (from, to) in [
            ("a/b.txt.gz", Some("a/b.txt")),
            ("x.tgz", Some("x.tar")),
            ("x-gz", Some("x")),
            ("x_z", Some("x")),
            ("x.Z", Some("x")),
            ("x.TGZ", Some("x.tar")),
            (".gz", None),
            ("plain", None),
        ] {
            assert_eq!(
                decompressed(Path::new(from), gz).as_deref(),
                to.map(Path::new)
            );
        }
        let custom = OsStr::new(".zw");
        assert_eq!(
            decompressed(Path::new("f.zw"), custom).as_deref(),
            Some(Path::new("f"))
        );
        assert_eq!(
            decompressed(Path::new("f.gz"), custom).as_deref(),
            Some(Path::new("f"))
        );
        assert!(compressed_suffix(Path::new("f.gz"), gz).is_some());
        assert!(compressed_suffix(Path::new("f.tgz"), gz).is_some());
        assert!(compressed_suffix(Path::new("f.txt"), gz).is_none());
        assert!(compressed_suffix(Path::new(".gz"), gz).is_none());
    }
}
