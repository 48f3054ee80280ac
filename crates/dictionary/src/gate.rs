//! RFC 9842 §9.3's check before a response is sent in a dictionary coding: the dictionary and
//! the response must both be readable by the page that asked, or a cross-origin page could
//! learn a dictionary's contents from the sizes of what it loads.
//!
//! The check reads `Sec-Fetch-Site`, `Sec-Fetch-Mode` and, for CORS requests, `Origin` and the
//! response's `Access-Control-Allow-Origin`; a response it allows names those fields in
//! `Vary` ([`Allowed::vary`]), so that a shared cache never gives a delta to a request the
//! check would refuse.

use http::header::{HeaderMap, ACCESS_CONTROL_ALLOW_ORIGIN, ORIGIN};

/// Why a dictionary coding may be used, and the request fields that decided it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allowed {
    /// No `Sec-Fetch-Site`, or `same-origin`.
    SameOrigin,
    /// `Sec-Fetch-Mode` absent, `navigate` or `same-origin`.
    Mode,
    /// A CORS request whose origin the response allows (`*` or that origin).
    Cors {
        /// The response allows every origin: `Origin` does not decide.
        any_origin: bool,
    },
}

impl Allowed {
    /// The request fields the outcome depended on, for `Vary`.
    pub fn vary(self) -> &'static [&'static str] {
        match self {
            Allowed::SameOrigin | Allowed::Mode | Allowed::Cors { any_origin: true } => {
                &["Sec-Fetch-Site", "Sec-Fetch-Mode"]
            }
            Allowed::Cors { any_origin: false } => &["Sec-Fetch-Site", "Sec-Fetch-Mode", "Origin"],
        }
    }
}

/// The one value of a request field, trimmed; `None` when absent, `Some("")` when repeated
/// or unreadable (which then matches nothing).
fn single<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut lines = headers.get_all(name).iter();
    let first = lines.next()?;
    if lines.next().is_some() {
        return Some("");
    }
    Some(first.to_str().map(str::trim).unwrap_or_default())
}

/// RFC 9842 §9.3: whether a response to `request` with `response`'s fields may be sent in a
/// dictionary coding. `None` means no: send an ordinary coding.
pub fn check(request: &HeaderMap, response: &HeaderMap) -> Option<Allowed> {
    let site = single(request, "sec-fetch-site");
    if site.is_none_or(|site| site.eq_ignore_ascii_case("same-origin")) {
        return Some(Allowed::SameOrigin);
    }
    let mode = single(request, "sec-fetch-mode");
    match mode {
        None => return Some(Allowed::Mode),
        Some(mode)
            if mode.eq_ignore_ascii_case("navigate")
                || mode.eq_ignore_ascii_case("same-origin") =>
        {
            return Some(Allowed::Mode)
        }
        Some(mode) if mode.eq_ignore_ascii_case("cors") => {}
        Some(_) => return None,
    }
    let allow = single(response, ACCESS_CONTROL_ALLOW_ORIGIN.as_str())?;
    let origin = single(request, ORIGIN.as_str())?;
    if allow == "*" {
        return Some(Allowed::Cors { any_origin: true });
    }
    (!origin.is_empty() && allow == origin).then_some(Allowed::Cors { any_origin: false })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(fields: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in fields {
            map.append(*name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn the_rfc_steps_in_order() {
        let none = HeaderMap::new();
        assert_eq!(check(&none, &none), Some(Allowed::SameOrigin));
        let same = headers(&[
            ("sec-fetch-site", "same-origin"),
            ("sec-fetch-mode", "no-cors"),
        ]);
        assert_eq!(check(&same, &none), Some(Allowed::SameOrigin));
        let cross_nav = headers(&[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "navigate"),
        ]);
        assert_eq!(check(&cross_nav, &none), Some(Allowed::Mode));
        let cross_no_mode = headers(&[("sec-fetch-site", "same-site")]);
        assert_eq!(check(&cross_no_mode, &none), Some(Allowed::Mode));
        // Chromium's cross-site `<script src>` without `crossorigin`.
        let no_cors = headers(&[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "no-cors"),
        ]);
        assert_eq!(check(&no_cors, &none), None);
    }

    #[test]
    fn cors_needs_the_response_to_allow_the_origin() {
        let cors = headers(&[
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "cors"),
            ("origin", "https://a.example"),
        ]);
        assert_eq!(check(&cors, &HeaderMap::new()), None);
        let star = headers(&[("access-control-allow-origin", "*")]);
        assert_eq!(
            check(&cors, &star),
            Some(Allowed::Cors { any_origin: true })
        );
        let exact = headers(&[("access-control-allow-origin", "https://a.example")]);
        assert_eq!(
            check(&cors, &exact),
            Some(Allowed::Cors { any_origin: false })
        );
        let other = headers(&[("access-control-allow-origin", "https://b.example")]);
        assert_eq!(check(&cors, &other), None);
        let no_origin = headers(&[("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "cors")]);
        assert_eq!(check(&no_origin, &exact), None);
        assert_eq!(
            Allowed::Cors { any_origin: false }.vary().last(),
            Some(&"Origin")
        );
    }

    #[test]
    fn repeated_fields_match_nothing() {
        let twice = headers(&[
            ("sec-fetch-site", "same-origin"),
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "no-cors"),
        ]);
        assert_eq!(check(&twice, &HeaderMap::new()), None);
    }
}
