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

/// Longest file name, in bytes, that Linux's file systems take (`NAME_MAX`).
pub const NAME_MAX: usize = 255;

/// Whether `path`'s file name is longer than [`NAME_MAX`].
pub fn too_long(path: &Path) -> bool {
    path.file_name()
        .is_some_and(|name| name.as_bytes().len() > NAME_MAX)
}

/// A compressed name for `path` that fits [`NAME_MAX`], made as gzip's `shorten_name` makes
/// it where its first name is too long: `.tar` becomes `.tgz`; else one byte at a time comes
/// off the end of the last dot-separated part longer than three bytes (then two, then one),
/// and failing that the name is cut at its last dot; `suffix` goes back on each time. `None`
/// when no such name is left (a suffix too long by itself, a name with nothing to cut).
pub fn shortened(path: &Path, suffix: &OsStr) -> Option<PathBuf> {
    let suffix = suffix.as_bytes();
    let mut name = path.file_name()?.as_bytes().to_vec();
    if name.len() > 4 && name.ends_with(b".tar") {
        name.truncate(name.len() - 4);
        name.extend_from_slice(b".tgz");
        if name.len() <= NAME_MAX {
            return Some(path.with_file_name(OsString::from_vec(name)));
        }
        // gzip tries again from the `.tgz` name, whose suffix it knows and cuts.
        name.truncate(name.len() - 4);
    }
    while name.len() + suffix.len() > NAME_MAX {
        let cut = (1..=3).rev().find_map(|min_part| {
            // The end of the last part longer than `min_part`.
            let mut end = None;
            let mut at = 0;
            for part in name.split(|&b| b == b'.') {
                at += part.len();
                if part.len() > min_part {
                    end = Some(at - 1);
                }
                at += 1;
            }
            end
        });
        match cut {
            Some(at) => {
                name.remove(at);
            }
            None => {
                let dot = name.iter().rposition(|&b| b == b'.')?;
                // A dot at the end goes with the byte before it.
                let at = if dot + 1 == name.len() {
                    dot.checked_sub(1)?
                } else {
                    dot
                };
                name.truncate(at);
            }
        }
    }
    name.extend_from_slice(suffix);
    Some(path.with_file_name(OsString::from_vec(name)))
}

/// The suffix `path`'s file name already ends with, as the name spells it, if it marks a
/// compressed file: the user's `suffix` or one gzip knows, in any case (gzip compares
/// lowercased names). A name that is only the suffix does not count.
pub fn compressed_suffix(path: &Path, suffix: &OsStr) -> Option<String> {
    let name = path.file_name()?.as_bytes();
    let user = suffix.as_bytes();
    let cut = if !user.is_empty() && ends_with_known(name, user) {
        user.len()
    } else {
        KNOWN
            .iter()
            .find(|(known, _)| ends_with_known(name, known.as_bytes()))?
            .0
            .len()
    };
    Some(String::from_utf8_lossy(&name[name.len() - cut..]).into_owned())
}

/// The decompressed file's name, or `None` when the name has no suffix to strip.
pub fn decompressed(path: &Path, suffix: &OsStr) -> Option<PathBuf> {
    let name = path.file_name()?.as_bytes();
    let user = suffix.as_bytes();
    let (cut, add) = if !user.is_empty() && ends_with_known(name, user) {
        (user.len(), &b""[..])
    } else {
        let (known, add) = KNOWN
            .iter()
            .find(|(known, _)| ends_with_known(name, known.as_bytes()))?;
        (known.len(), add.as_bytes())
    };
    let mut plain = name[..name.len() - cut].to_vec();
    plain.extend_from_slice(add);
    Some(path.with_file_name(OsString::from_vec(plain)))
}

/// Whether `name` ends with `suffix` in any case (gzip lowercases the name and the suffix
/// first: `f.Z` and `f.GZ` decompress to `f`, and `-S .zz` finds `f.ZZ`), and is longer than
/// it.
fn ends_with_known(name: &[u8], suffix: &[u8]) -> bool {
    name.len() > suffix.len() && name[name.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_shortened_as_gzip_shortens_them() {
        let gz = OsStr::new(".gz");
        let name = |parts: &[(char, usize)], dots: bool| -> String {
            let words: Vec<String> = parts
                .iter()
                .map(|&(c, n)| std::iter::repeat_n(c, n).collect())
                .collect();
            words.join(if dots { "." } else { "" })
        };
        let short = |from: String| {
            shortened(Path::new(&format!("d/{from}")), gz)
                .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        };
        // Figures from gzip 1.12 on the same names.
        assert_eq!(
            short(name(&[('a', 254)], false)),
            Some(name(&[('a', 252)], false) + ".gz")
        );
        assert_eq!(
            short(name(&[('b', 250)], false) + ".tar"),
            Some(name(&[('b', 250)], false) + ".tgz")
        );
        // The last long part loses bytes, short extensions stay.
        assert_eq!(
            short(name(&[('c', 200), ('d', 50), ('e', 2)], true)),
            Some(name(&[('c', 200), ('d', 48), ('e', 2)], true) + ".gz")
        );
        // Parts of one byte: cut at the last dot, twice here.
        let dots = "x".to_owned() + &".y".repeat(127);
        assert_eq!(
            short(dots),
            Some("x".to_owned() + &".y".repeat(125) + ".gz")
        );
        // `.tar` first, however long the name.
        assert_eq!(
            short(name(&[('a', 248)], false) + ".b.tar"),
            Some(name(&[('a', 248)], false) + ".b.tgz")
        );
        // A suffix that cannot fit at all.
        let huge = OsString::from(".".to_owned() + &"z".repeat(300));
        assert_eq!(shortened(Path::new("f"), &huge), None);
        assert!(too_long(Path::new(&name(&[('a', 256)], false))));
        assert!(!too_long(Path::new(&format!(
            "d/{}",
            name(&[('a', 255)], false)
        ))));
    }

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
        // In any case, and told as the name spells it.
        assert_eq!(
            compressed_suffix(Path::new("F.GZ"), gz).as_deref(),
            Some(".GZ")
        );
        let zz = OsStr::new(".zz");
        assert_eq!(
            compressed_suffix(Path::new("a.ZZ"), zz).as_deref(),
            Some(".ZZ")
        );
        assert_eq!(
            decompressed(Path::new("a.ZZ"), zz).as_deref(),
            Some(Path::new("a"))
        );
    }
}
