//! The subset of URLPattern (WHATWG URL Pattern, pathname component) that RFC 9842's `match`
//! uses here: literal characters, `*` for any run of characters, and `\` escapes. It checks
//! what an origin sends and what the proxy writes; the browser does the matching that counts.
//!
//! Hand-written because no maintained Rust crate implements URLPattern's string syntax
//! outside Deno's runtime (`urlpattern`, which pulls in `regex` and a URL parser for a
//! check the proxy runs on one field per response).

/// Characters URLPattern gives a meaning to in a pathname, escaped in literal text.
const SPECIAL: &[char] = &['*', ':', '(', ')', '{', '}', '?', '+', '\\'];

/// Whether `pattern` is a `match` value a client accepts: not empty, and without regular
/// expression groups (an unescaped `(`), which RFC 9842 §2.1.1 rules out.
pub fn is_valid(pattern: &str) -> bool {
    if pattern.is_empty() {
        return false;
    }
    let mut escaped = false;
    for c in pattern.chars() {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '(') => return false,
            _ => {}
        }
    }
    !escaped
}

/// `text` with URLPattern's special characters escaped, to stand for itself in a pattern.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if SPECIAL.contains(&c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// One piece of a parsed pattern.
#[derive(Debug, PartialEq)]
enum Piece {
    Literal(char),
    Any,
}

/// Whether `path` matches `pattern`; `None` when the pattern uses syntax beyond literals,
/// `*` and escapes (named groups, braces, modifiers).
pub fn matches(pattern: &str, path: &str) -> Option<bool> {
    let mut pieces = Vec::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => pieces.push(Piece::Literal(chars.next()?)),
            '*' => pieces.push(Piece::Any),
            c if SPECIAL.contains(&c) => return None,
            c => pieces.push(Piece::Literal(c)),
        }
    }
    let text: Vec<char> = path.chars().collect();
    Some(glob(&pieces, &text))
}

/// Wildcard matching with backtracking to the last `*` only: linear in practice, at worst
/// pieces × text.
fn glob(pieces: &[Piece], text: &[char]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pieces.get(p) {
            Some(Piece::Any) => {
                star = Some((p, t));
                p += 1;
            }
            Some(Piece::Literal(c)) if *c == text[t] => {
                p += 1;
                t += 1;
            }
            _ => match star {
                Some((star_p, star_t)) => {
                    p = star_p + 1;
                    t = star_t + 1;
                    star = Some((star_p, star_t + 1));
                }
                None => return false,
            },
        }
    }
    pieces[p..].iter().all(|piece| *piece == Piece::Any)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stars_and_literals() {
        assert_eq!(
            matches("/lib/jquery-*.min.js", "/lib/jquery-3.7.1.min.js"),
            Some(true)
        );
        assert_eq!(
            matches("/lib/jquery-*.min.js", "/lib/jquery.min.js"),
            Some(false)
        );
        assert_eq!(matches("/a/*", "/a/"), Some(true));
        assert_eq!(matches("/a/*/b*c", "/a/x/y/bzzc"), Some(true));
        assert_eq!(matches("/a/*/b*c", "/a/x/y/bzzd"), Some(false));
        assert_eq!(matches("/x\\*", "/x*"), Some(true));
        assert_eq!(matches("/x\\*", "/xy"), Some(false));
        assert_eq!(matches("/:name.js", "/a.js"), None);
    }

    #[test]
    fn escaped_text_matches_itself_only() {
        for text in ["/a(b)/c?d", "/p+q/{x}", "/back\\slash", "/plain.js"] {
            let pattern = escape(text);
            assert!(is_valid(&pattern), "{pattern}");
            assert_eq!(matches(&pattern, text), Some(true), "{pattern}");
            assert_eq!(matches(&pattern, &format!("{text}x")), Some(false));
        }
    }

    #[test]
    fn regexp_groups_are_invalid() {
        assert!(!is_valid("/app/(\\d+)/main.js"));
        assert!(is_valid("/app/\\(1\\)/main.js"));
        assert!(!is_valid(""));
        assert!(!is_valid("/trailing\\"));
    }
}
