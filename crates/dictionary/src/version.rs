//! Versioned asset paths, and the `match` pattern that covers a path's other versions: what
//! `mode = "auto"` marks a cacheable response with, so that the next version of the same
//! file is sent as a delta against the one the client holds.
//!
//! A version is found in the file name first, then in a directory:
//! - a release number, two or more runs of digits joined by dots, with an optional `v`
//!   (`jquery-3.7.1.min.js`, `app.v2.10.css`);
//! - a content hash: a run of 8 or more hexadecimal digits with at least one digit
//!   (webpack's `main.3f9a2c1e.js`), or of 8 or more letters and digits with at least one
//!   digit and one upper-case letter (Vite's `index-BkX3pQ2a.js`);
//! - a directory that is a release number (`/v1.2.3/app.css`), or ends in `@` and one
//!   (`/npm/vue@3.5.13/dist/vue.js`).
//!
//! The version becomes `*`; the rest stays literal (escaped), so `jquery-3.7.1.min.js` gives
//! `/lib/jquery-*.min.js`, which `jquery-3.7.0.min.js` matches and `jquery-ui.min.js` does
//! not. A name left with fewer than two literal characters besides its extension is not
//! marked: its pattern would cover unrelated files.

use crate::pattern::escape;

/// The pattern that covers the other versions of the file at `path` (a path, no query), if
/// the path carries a version.
pub fn pattern_for(path: &str) -> Option<String> {
    let (directory, file) = path.rsplit_once('/')?;
    if let Some((start, end)) = version_in_name(file) {
        let (stem, rest) = (&file[..start], &file[end..]);
        let literal = stem.trim_end_matches(SEPARATORS).len()
            + rest.split('.').next().unwrap_or_default().len();
        if literal < 2 && rest.matches('.').count() < 2 {
            return None;
        }
        return Some(format!(
            "{}/{}*{}",
            escape(directory),
            escape(stem),
            escape(rest)
        ));
    }
    let segments: Vec<&str> = directory.split('/').collect();
    for (index, segment) in segments.iter().enumerate().rev() {
        let Some(start) = version_in_directory(segment) else {
            continue;
        };
        let mut pattern = String::new();
        for (i, part) in segments.iter().enumerate() {
            if i > 0 {
                pattern.push('/');
            }
            if i == index {
                pattern.push_str(&escape(&part[..start]));
                pattern.push('*');
            } else {
                pattern.push_str(&escape(part));
            }
        }
        pattern.push('/');
        pattern.push_str(&escape(file));
        return Some(pattern);
    }
    None
}

/// What separates a version from the rest of a file name.
const SEPARATORS: &[char] = &['-', '.', '_', '@', '~'];

/// The byte range of the version in a file name, if it has one.
fn version_in_name(file: &str) -> Option<(usize, usize)> {
    // Tokens with their offsets, split at separators.
    let mut tokens = Vec::new();
    let mut start = 0;
    for (i, c) in file.char_indices() {
        if SEPARATORS.contains(&c) {
            tokens.push((start, i));
            start = i + c.len_utf8();
        }
    }
    tokens.push((start, file.len()));
    // The extension is never the version.
    let last = tokens.len().saturating_sub(1);
    let mut i = 0;
    while i < last {
        let (s, e) = tokens[i];
        let token = &file[s..e];
        let digits = token.strip_prefix(['v', 'V']).unwrap_or(token);
        if is_number(digits) {
            // A release: this token and the next numeric ones joined by dots.
            let mut j = i;
            while j + 1 < last
                && file[tokens[j].1..].starts_with('.')
                && is_number(&file[tokens[j + 1].0..tokens[j + 1].1])
            {
                j += 1;
            }
            if j > i {
                return Some((s, tokens[j].1));
            }
        } else if is_hash(token) {
            return Some((s, e));
        }
        i += 1;
    }
    None
}

/// Where the version starts in a directory name that is one.
fn version_in_directory(segment: &str) -> Option<usize> {
    let (start, version) = match segment.rfind('@') {
        Some(at) if at > 0 => (at + 1, &segment[at + 1..]),
        _ => (0, segment),
    };
    let (start, digits) = match version.strip_prefix(['v', 'V']) {
        Some(digits) => (start + 1, digits),
        None => (start, version),
    };
    let parts: Vec<&str> = digits.split('.').collect();
    (parts.len() >= 2 && parts.iter().all(|part| is_number(part))).then_some(start)
}

fn is_number(token: &str) -> bool {
    !token.is_empty() && token.len() <= 10 && token.bytes().all(|b| b.is_ascii_digit())
}

fn is_hash(token: &str) -> bool {
    if token.len() < 8 || token.len() > 64 {
        return false;
    }
    let has_digit = token.bytes().any(|b| b.is_ascii_digit());
    let hex = token.bytes().all(|b| b.is_ascii_hexdigit());
    let mixed = token.bytes().all(|b| b.is_ascii_alphanumeric())
        && token.bytes().any(|b| b.is_ascii_uppercase());
    has_digit && (hex || mixed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::matches;

    #[test]
    fn release_numbers_in_names() {
        let cases = [
            (
                "/lib/jquery-3.7.1.min.js",
                "/lib/jquery-*.min.js",
                "/lib/jquery-3.7.0.min.js",
            ),
            (
                "/bootstrap-5.3.8.bundle.min.js",
                "/bootstrap-*.bundle.min.js",
                "/bootstrap-5.3.7.bundle.min.js",
            ),
            ("/d3-7.9.0.min.js", "/d3-*.min.js", "/d3-7.8.5.min.js"),
            (
                "/vue-3.5.13.global.prod.js",
                "/vue-*.global.prod.js",
                "/vue-3.5.12.global.prod.js",
            ),
            ("/css/app.v2.10.css", "/css/app.*.css", "/css/app.v2.9.css"),
        ];
        for (path, pattern, older) in cases {
            assert_eq!(pattern_for(path).as_deref(), Some(pattern), "{path}");
            assert_eq!(matches(pattern, older), Some(true));
            assert_eq!(matches(pattern, path), Some(true));
        }
        assert_eq!(
            matches("/lib/jquery-*.min.js", "/lib/jquery-ui.min.css"),
            Some(false)
        );
    }

    #[test]
    fn content_hashes_in_names() {
        assert_eq!(
            pattern_for("/static/main.3f9a2c1e.js").as_deref(),
            Some("/static/main.*.js")
        );
        assert_eq!(
            pattern_for("/assets/index-BkX3pQ2a.js").as_deref(),
            Some("/assets/index-*.js")
        );
        assert_eq!(
            pattern_for("/static/js/app.3f9a2c1e4b5d.chunk.js").as_deref(),
            Some("/static/js/app.*.chunk.js")
        );
    }

    #[test]
    fn versions_in_directories() {
        assert_eq!(
            pattern_for("/v1.2.3/app.css").as_deref(),
            Some("/v*/app.css")
        );
        assert_eq!(
            pattern_for("/npm/vue@3.5.13/dist/vue.js").as_deref(),
            Some("/npm/vue@*/dist/vue.js")
        );
        assert_eq!(
            matches("/npm/vue@*/dist/vue.js", "/npm/vue@3.5.12/dist/vue.js"),
            Some(true)
        );
    }

    #[test]
    fn unversioned_paths_get_nothing() {
        for path in [
            "/index.html",
            "/img/photo-2024.jpg",
            "/js/bootstrap.min.js",
            "/about/team",
            "/deadbeef.js",
            "/3.7.1.js",
            "/",
            "",
        ] {
            assert_eq!(pattern_for(path), None, "{path}");
        }
    }
}
