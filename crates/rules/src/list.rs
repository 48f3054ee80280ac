//! Field-value lists (RFC 9110 §5.6.1) and tokens (§5.6.2), on raw bytes.
//!
//! Header values are handled as bytes, never as `&str`: `http::HeaderValue` allows obs-text
//! (0x80-0xFF), and a value that is not UTF-8 must still be parsed (and, where it is not valid
//! syntax, refused) rather than make a whole header unreadable.

use http::header::{GetAll, HeaderValue};

/// The non-empty elements of every line of a list-valued header, in order, with the optional
/// whitespace around each trimmed.
///
/// Commas inside a quoted string (§5.6.4) do not split: `private="a, b"` is one element. An
/// unterminated quoted string runs to the end of its line. Empty elements (`a,,b`) are skipped,
/// as §5.6.1 requires of recipients.
pub fn elements<'a>(lines: GetAll<'a, HeaderValue>) -> impl Iterator<Item = &'a [u8]> {
    lines.into_iter().flat_map(|line| split(line.as_bytes()))
}

/// The non-empty, trimmed elements of one line of a list-valued header.
pub fn split(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    Split { rest: line }
        .map(trim_ows)
        .filter(|element| !element.is_empty())
}

/// `true` when `bytes` is a `token` (§5.6.2): one or more `tchar`.
pub fn is_token(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().all(|&b| is_tchar(b))
}

/// `bytes` without leading and trailing optional whitespace (SP and HTAB, §5.6.3).
pub fn trim_ows(bytes: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = bytes.iter().position(|b| !is_ows(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_ows(b))
        .map_or(start, |i| i + 1);
    &bytes[start..end]
}

/// `tchar` from RFC 9110 §5.6.2.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'!' | b'#'
                | b'$'
                | b'%'
                | b'&'
                | b'\''
                | b'*'
                | b'+'
                | b'-'
                | b'.'
                | b'^'
                | b'_'
                | b'`'
                | b'|'
                | b'~'
        )
}

/// Splits one line at the commas outside quoted strings; elements come out untrimmed.
struct Split<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Split<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.rest.is_empty() {
            return None;
        }
        let mut quoted = false;
        let mut escaped = false;
        for (i, &b) in self.rest.iter().enumerate() {
            if escaped {
                escaped = false;
            } else if quoted && b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                quoted = !quoted;
            } else if !quoted && b == b',' {
                let (element, rest) = (&self.rest[..i], &self.rest[i + 1..]);
                self.rest = rest;
                return Some(element);
            }
        }
        let element = self.rest;
        self.rest = &[];
        Some(element)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(line: &str) -> Vec<&str> {
        split(line.as_bytes())
            .map(|e| std::str::from_utf8(e).expect("test input is UTF-8"))
            .collect()
    }

    #[test]
    fn splits_and_trims() {
        assert_eq!(parts(" gzip ,\tdeflate;q=0.5 "), ["gzip", "deflate;q=0.5"]);
    }

    #[test]
    fn skips_empty_elements() {
        assert_eq!(parts(",, a ,, b,"), ["a", "b"]);
        assert!(parts("").is_empty());
        assert!(parts(" , ").is_empty());
    }

    #[test]
    fn commas_inside_quotes_do_not_split() {
        assert_eq!(
            parts(r#"private="a, no-transform", max-age=1"#),
            [r#"private="a, no-transform""#, "max-age=1"]
        );
        assert_eq!(parts(r#"x="a\", b", c"#), [r#"x="a\", b""#, "c"]);
    }

    #[test]
    fn unterminated_quote_runs_to_the_end() {
        assert_eq!(parts(r#"a, b="c, d"#), ["a", r#"b="c, d"#]);
    }

    #[test]
    fn tokens() {
        assert!(is_token(b"x-gzip"));
        assert!(is_token(b"*"));
        assert!(!is_token(b""));
        assert!(!is_token(b"gzip deflate"));
        assert!(!is_token(b"\"gzip\""));
        assert!(!is_token("gzíp".as_bytes()));
    }
}
