//! `Accept-Encoding` negotiation (RFC 9110 §12.5.3) with quality values (§12.4.2).
//!
//! [`AcceptEncoding::parse`] reads every `Accept-Encoding` line of a request (a request may
//! carry several; they combine as one list, §5.3) and [`AcceptEncoding::negotiate`] picks the
//! coding to send from those the proxy offers.
//!
//! # Rules
//!
//! - No `Accept-Encoding` at all: [`Negotiated::Identity`]. RFC 9110 would allow any coding,
//!   but clients that send nothing (scripts, health checks) rarely decode anything, and nginx
//!   and HAProxy send identity too.
//! - An empty `Accept-Encoding`: identity (§12.5.3: the client wants no coding).
//! - Coding names are case-insensitive; `x-gzip` is gzip (§8.4.1.3).
//! - A coding's weight is its own `q`, else that of `*`, else it is not acceptable. The highest
//!   weight wins; ties go to the earlier coding in the offered list (server preference).
//! - Identity is acceptable unless `identity;q=0`, or `*;q=0` with no `identity` element. When
//!   `identity` (or `*` standing for it) has a weight strictly higher than the best offered
//!   coding, identity wins; on a tie the coding wins, compression being the point of the proxy.
//!   Identity that is only implicitly acceptable loses to any acceptable coding.
//! - A coding named twice (also `gzip` and `x-gzip`, also on two lines) gets the lower weight.
//! - [`Negotiated::NotAcceptable`]: identity refused and no offered coding acceptable. A proxy
//!   does not answer 406 for this; the caller passes the response on unchanged.
//!
//! # Malformed elements: lenient but safe
//!
//! An element whose coding name is not a token (`"gzip"`, `gzip deflate`, non-ASCII bytes) is
//! ignored. An element with a valid name but anything wrong after it (a `q` that is not a
//! `qvalue`: `q=1.5`, `q=0.1234`, `q=abc`, `q=` twice; an unknown parameter; a stray `;`)
//! counts as that coding with `q=0`, so the proxy never sends a coding the client may have
//! tried to refuse. Such an element never refuses identity, though: a malformed `identity` is
//! ignored and a malformed `*` only covers codings, so garbage can never turn a response into
//! "not acceptable". Whitespace around `;` and `=` and an upper-case `Q` are accepted.

use std::fmt;

use http::header::{HeaderMap, ACCEPT_ENCODING};

use crate::list;

/// A content coding the proxy can produce.
///
/// A new coding is added here and as a module of `zipwire-codings`; every match on it in the
/// workspace names each coding, so the compiler lists what a new one must handle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Coding {
    /// `gzip` (RFC 9110 §8.4.1.3); `x-gzip` is read as an alias.
    Gzip,
    /// `deflate` (RFC 9110 §8.4.1.2): the zlib format (RFC 1950), not raw deflate.
    Deflate,
    /// `zstd` (RFC 8878 §7.2), with a window of at most 8 MiB (RFC 9659).
    Zstd,
    /// `br`: brotli (RFC 7932 §11).
    Br,
}

impl Coding {
    /// The coding's name as sent in `Content-Encoding`, in lower case.
    pub fn as_str(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Deflate => "deflate",
            Coding::Zstd => "zstd",
            Coding::Br => "br",
        }
    }

    /// The coding a name stands for, case-insensitively; `x-gzip` is gzip.
    pub fn from_name(name: &[u8]) -> Option<Coding> {
        if name.eq_ignore_ascii_case(b"gzip") || name.eq_ignore_ascii_case(b"x-gzip") {
            Some(Coding::Gzip)
        } else if name.eq_ignore_ascii_case(b"deflate") {
            Some(Coding::Deflate)
        } else if name.eq_ignore_ascii_case(b"zstd") {
            Some(Coding::Zstd)
        } else if name.eq_ignore_ascii_case(b"br") {
            Some(Coding::Br)
        } else {
            None
        }
    }
}

impl fmt::Display for Coding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A quality value (RFC 9110 §12.4.2) in thousandths: 0 to 1000.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QValue(u16);

impl QValue {
    /// `q=0`: not acceptable.
    pub const ZERO: QValue = QValue(0);
    /// `q=1`: the default weight.
    pub const ONE: QValue = QValue(1000);

    /// Parses a `qvalue`: `0`, `0.` and up to three decimals, or `1` with up to three zeros.
    /// Anything else (`1.5`, `0.1234`, `.5`, `-0`, whitespace inside) is `None`.
    pub fn parse(bytes: &[u8]) -> Option<QValue> {
        let (first, rest) = bytes.split_first()?;
        let decimals = match rest {
            [] => &[][..],
            [b'.', decimals @ ..] if decimals.len() <= 3 => decimals,
            _ => return None,
        };
        if !decimals.iter().all(u8::is_ascii_digit) {
            return None;
        }
        match first {
            b'1' if decimals.iter().all(|&d| d == b'0') => Some(QValue::ONE),
            b'0' => {
                let thousandths = decimals
                    .iter()
                    .chain(std::iter::repeat(&b'0'))
                    .take(3)
                    .fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
                Some(QValue(thousandths))
            }
            _ => None,
        }
    }

    /// The value in thousandths (`q=0.5` is 500).
    pub fn thousandths(self) -> u16 {
        self.0
    }

    /// `true` for `q=0`.
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

/// The outcome of negotiation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Negotiated {
    /// Send the representation in this coding.
    Coding(Coding),
    /// Send it without a coding.
    Identity,
    /// The client refused identity and accepts none of the offered codings.
    NotAcceptable,
}

/// Every `Accept-Encoding` line of a request, parsed and combined.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AcceptEncoding {
    /// Whether the request had any `Accept-Encoding` line (an empty one counts).
    present: bool,
    /// Known codings named explicitly, each with its lowest weight.
    named: Vec<(Coding, QValue)>,
    /// The lowest weight of any well-formed `identity` element.
    identity: Option<QValue>,
    /// The lowest weight of any `*` element, malformed ones counting as 0: for codings.
    star: Option<QValue>,
    /// The lowest weight of any well-formed `*` element: for identity.
    star_for_identity: Option<QValue>,
}

impl AcceptEncoding {
    /// Reads every `Accept-Encoding` line in `headers`.
    pub fn from_headers(headers: &HeaderMap) -> AcceptEncoding {
        let lines = headers.get_all(ACCEPT_ENCODING);
        let mut accept = AcceptEncoding {
            present: lines.iter().next().is_some(),
            ..AcceptEncoding::default()
        };
        for element in list::elements(lines) {
            accept.add(element);
        }
        accept
    }

    /// Parses raw `Accept-Encoding` lines as if each were one header line of a request; no
    /// lines at all means the header is absent.
    pub fn parse<'a, I>(lines: I) -> AcceptEncoding
    where
        I: IntoIterator<Item = &'a [u8]>,
    {
        let mut accept = AcceptEncoding::default();
        for line in lines {
            accept.present = true;
            for element in list::split(line) {
                accept.add(element);
            }
        }
        accept
    }

    /// Whether the request had an `Accept-Encoding` header (possibly empty).
    pub fn is_present(&self) -> bool {
        self.present
    }

    /// The weight the client gives `coding`: its own, else that of `*`, else zero. Zero also
    /// when no `Accept-Encoding` was sent (see the module documentation).
    pub fn quality(&self, coding: Coding) -> QValue {
        self.named
            .iter()
            .find(|(named, _)| *named == coding)
            .map(|&(_, q)| q)
            .or(self.star)
            .unwrap_or(QValue::ZERO)
    }

    /// Whether the client accepts `coding` (a weight above zero).
    pub fn accepts(&self, coding: Coding) -> bool {
        !self.quality(coding).is_zero()
    }

    /// Whether the client explicitly refused identity: `identity;q=0`, or `*;q=0` with no
    /// well-formed `identity` element.
    pub fn refuses_identity(&self) -> bool {
        self.identity
            .or(self.star_for_identity)
            .is_some_and(QValue::is_zero)
    }

    /// Chooses among `offered` (in server preference order), following the rules in the
    /// module documentation.
    pub fn negotiate(&self, offered: &[Coding]) -> Negotiated {
        if !self.present {
            return Negotiated::Identity;
        }
        let mut best: Option<(Coding, QValue)> = None;
        for &coding in offered {
            let q = self.quality(coding);
            if !q.is_zero() && best.is_none_or(|(_, best_q)| q > best_q) {
                best = Some((coding, q));
            }
        }
        let identity = self.identity.or(self.star_for_identity);
        match best {
            Some((_, q)) if identity.is_some_and(|identity| identity > q) => Negotiated::Identity,
            Some((coding, _)) => Negotiated::Coding(coding),
            None if self.refuses_identity() => Negotiated::NotAcceptable,
            None => Negotiated::Identity,
        }
    }

    /// Adds one trimmed, non-empty list element.
    fn add(&mut self, element: &[u8]) {
        let mut parts = element.splitn(2, |&b| b == b';');
        let name = list::trim_ows(parts.next().unwrap_or_default());
        if !list::is_token(name) {
            return;
        }
        let weight = match parts.next() {
            None => Some(QValue::ONE),
            Some(params) => weight(params),
        };
        if name == b"*" {
            lower(&mut self.star, weight.unwrap_or(QValue::ZERO));
            if let Some(q) = weight {
                lower(&mut self.star_for_identity, q);
            }
        } else if name.eq_ignore_ascii_case(b"identity") {
            if let Some(q) = weight {
                lower(&mut self.identity, q);
            }
        } else if let Some(coding) = Coding::from_name(name) {
            let q = weight.unwrap_or(QValue::ZERO);
            match self.named.iter_mut().find(|(named, _)| *named == coding) {
                Some((_, named_q)) => *named_q = (*named_q).min(q),
                None => self.named.push((coding, q)),
            }
        }
    }
}

/// The weight in an element's parameters (everything after its first `;`): exactly one
/// `q=qvalue`, with optional whitespace around `;` and `=`. `None` when malformed.
fn weight(params: &[u8]) -> Option<QValue> {
    let mut q = None;
    for param in params.split(|&b| b == b';') {
        let (name, value) = param.split_at(param.iter().position(|&b| b == b'=')?);
        let value = value.get(1..).unwrap_or_default();
        if !list::trim_ows(name).eq_ignore_ascii_case(b"q") || q.is_some() {
            return None;
        }
        q = Some(QValue::parse(list::trim_ows(value))?);
    }
    q
}

/// Keeps the lower of the weights seen so far and `q`.
fn lower(slot: &mut Option<QValue>, q: QValue) {
    *slot = Some(slot.map_or(q, |seen| seen.min(q)));
}

#[cfg(test)]
mod tests {
    use super::*;

    const GZIP_DEFLATE: &[Coding] = &[Coding::Gzip, Coding::Deflate];

    fn negotiate(lines: &[&str], offered: &[Coding]) -> Negotiated {
        AcceptEncoding::parse(lines.iter().map(|l| l.as_bytes())).negotiate(offered)
    }

    #[test]
    fn table() {
        use Coding::{Deflate, Gzip};
        use Negotiated::{Coding as C, Identity, NotAcceptable};
        let rows: &[(&[&str], Negotiated)] = &[
            // Absent and empty.
            (&[], Identity),
            (&[""], Identity),
            (&[" , "], Identity),
            // Plain names, case, alias.
            (&["gzip"], C(Gzip)),
            (&["GZip"], C(Gzip)),
            (&["x-gzip"], C(Gzip)),
            (&["X-GZIP;q=0.5"], C(Gzip)),
            (&["deflate"], C(Deflate)),
            (&["gzip, deflate, br"], C(Gzip)),
            (&["deflate, gzip"], C(Gzip)),
            (&["br"], Identity),
            (&["br, zstd"], Identity),
            // Weights.
            (&["gzip;q=0.5, deflate"], C(Deflate)),
            (&["gzip;q=0.5, deflate;q=0.5"], C(Gzip)),
            (&["gzip;q=0, deflate"], C(Deflate)),
            (&["gzip;q=0"], Identity),
            (&["gzip;q=0.001"], C(Gzip)),
            (&["gzip;q=1.000"], C(Gzip)),
            (&["gzip ; Q = 0.7 , deflate;q=0.699"], C(Gzip)),
            (&["gzip;q=0.000, deflate;q=0."], Identity),
            // `*`.
            (&["*"], C(Gzip)),
            (&["*;q=0.5"], C(Gzip)),
            (&["*, gzip;q=0"], C(Deflate)),
            (&["*;q=0.2, deflate;q=0.3"], C(Deflate)),
            (&["*;q=0"], NotAcceptable),
            (&["*;q=0, identity"], Identity),
            (&["*;q=0, gzip"], C(Gzip)),
            (&["*;q=0.8, gzip;q=0.5"], C(Deflate)),
            (&["*;q=0.8, gzip;q=0.5, deflate;q=0.5"], Identity),
            // Identity.
            (&["identity"], Identity),
            (&["identity;q=0"], NotAcceptable),
            (&["identity;q=0, gzip"], C(Gzip)),
            (&["identity;q=0, br"], NotAcceptable),
            (&["identity;q=0, gzip;q=0"], NotAcceptable),
            (&["IDENTITY;q=0, *;q=0.1"], C(Gzip)),
            (&["identity, gzip"], C(Gzip)),
            (&["identity;q=1, gzip;q=0.5"], Identity),
            (&["gzip;q=0.5, identity;q=0.5"], C(Gzip)),
            // Several lines combine; a coding named twice gets the lower weight.
            (&["br", "gzip"], C(Gzip)),
            (&["gzip;q=0.2", "deflate;q=0.4"], C(Deflate)),
            (&["gzip", "gzip;q=0"], Identity),
            (&["gzip", "x-gzip;q=0"], Identity),
            (&["identity;q=0", "deflate"], C(Deflate)),
            (&["", "gzip"], C(Gzip)),
            // Malformed weights: q=0 for that coding.
            (&["gzip;q=1.5"], Identity),
            (&["gzip;q=2"], Identity),
            (&["gzip;q=0.1234"], Identity),
            (&["gzip;q=.5"], Identity),
            (&["gzip;q=abc"], Identity),
            (&["gzip;q="], Identity),
            (&["gzip;q=1;q=1"], Identity),
            (&["gzip;level=9"], Identity),
            (&["gzip;"], Identity),
            (&["gzip;q=abc, deflate"], C(Deflate)),
            (&["gzip;q=abc, *"], C(Deflate)),
            (&["gzip;q=0.5x, gzip"], Identity),
            // Malformed names: ignored.
            (&["\"gzip\""], Identity),
            (&["gzip deflate"], Identity),
            (&[";q=1, deflate"], C(Deflate)),
            // Malformed elements never refuse identity.
            (&["identity;q=x"], Identity),
            (&["*;q=x"], Identity),
            (&["*;q=x, identity;q=0"], NotAcceptable),
        ];
        for (lines, expected) in rows {
            assert_eq!(negotiate(lines, GZIP_DEFLATE), *expected, "{lines:?}");
        }
    }

    /// The proxy's default order: zstd, br, gzip, deflate. The client's weights decide; the
    /// order breaks ties only.
    #[test]
    fn table_with_zstd_and_brotli() {
        use Coding::{Br, Deflate, Gzip, Zstd};
        use Negotiated::{Coding as C, Identity, NotAcceptable};
        const DEFAULT: &[Coding] = &[Zstd, Br, Gzip, Deflate];
        let rows: &[(&[&str], Negotiated)] = &[
            // Chromium over HTTPS and over HTTP, Firefox, Safari without zstd.
            (&["gzip, deflate, br, zstd"], C(Zstd)),
            (&["gzip, deflate"], C(Gzip)),
            (&["gzip, deflate, br"], C(Br)),
            (&["br"], C(Br)),
            (&["ZSTD"], C(Zstd)),
            // Weights decide before the order.
            (&["zstd;q=0.5, br;q=0.8, gzip;q=0.9"], C(Gzip)),
            (&["zstd;q=0.8, br;q=0.8, gzip;q=0.9"], C(Gzip)),
            (&["zstd;q=0.9, br;q=0.9, gzip;q=0.9"], C(Zstd)),
            (&["gzip, br;q=1, zstd;q=0.999"], C(Br)),
            // Refusals.
            (&["zstd;q=0, br, gzip"], C(Br)),
            (&["zstd;q=0, br;q=0, gzip"], C(Gzip)),
            (&["zstd;q=0, br;q=0, gzip;q=0"], Identity),
            (
                &["zstd;q=0, br;q=0, gzip;q=0, deflate;q=0, identity;q=0"],
                NotAcceptable,
            ),
            // `*` stands for what is not named.
            (&["*"], C(Zstd)),
            (&["*;q=0.5, zstd;q=0"], C(Br)),
            (&["*;q=0.5, br;q=0.6"], C(Br)),
            (&["*;q=0, zstd"], C(Zstd)),
            // Identity.
            (&["identity"], Identity),
            (&["identity;q=1, zstd;q=0.5"], Identity),
            (&["identity;q=0.5, zstd;q=0.5"], C(Zstd)),
            (&["identity;q=0, zstd;q=0"], NotAcceptable),
            // Malformed weights refuse the coding, never identity.
            (&["zstd;q=2, br"], C(Br)),
            (&["zstd;level=3"], Identity),
        ];
        for (lines, expected) in rows {
            assert_eq!(negotiate(lines, DEFAULT), *expected, "{lines:?}");
        }
        // The server's order breaks ties, and what it leaves out is never chosen.
        assert_eq!(negotiate(&["zstd, br, gzip"], &[Br, Zstd, Gzip]), C(Br));
        assert_eq!(negotiate(&["zstd"], &[Br, Gzip]), Identity);
        assert_eq!(
            negotiate(&["zstd, identity;q=0"], &[Br, Gzip]),
            NotAcceptable
        );
    }

    #[test]
    fn offered_order_breaks_ties() {
        assert_eq!(
            negotiate(&["gzip, deflate"], &[Coding::Deflate, Coding::Gzip]),
            Negotiated::Coding(Coding::Deflate)
        );
        assert_eq!(
            negotiate(&["gzip;q=0.5, deflate"], &[Coding::Gzip]),
            Negotiated::Coding(Coding::Gzip)
        );
    }

    #[test]
    fn nothing_offered() {
        assert_eq!(negotiate(&["gzip"], &[]), Negotiated::Identity);
        assert_eq!(
            negotiate(&["gzip, identity;q=0"], &[]),
            Negotiated::NotAcceptable
        );
    }

    #[test]
    fn non_utf8_bytes_are_malformed() {
        let accept = AcceptEncoding::parse([&b"gzip;q=\xff, deflate, \xe9"[..]]);
        assert_eq!(accept.quality(Coding::Gzip), QValue::ZERO);
        assert_eq!(
            accept.negotiate(GZIP_DEFLATE),
            Negotiated::Coding(Coding::Deflate)
        );
    }

    #[test]
    fn reads_every_header_line() {
        let mut headers = HeaderMap::new();
        headers.append(ACCEPT_ENCODING, "br".parse().expect("static value"));
        headers.append(ACCEPT_ENCODING, "deflate".parse().expect("static value"));
        let accept = AcceptEncoding::from_headers(&headers);
        assert!(accept.is_present());
        assert_eq!(
            accept.negotiate(GZIP_DEFLATE),
            Negotiated::Coding(Coding::Deflate)
        );
        assert!(!AcceptEncoding::from_headers(&HeaderMap::new()).is_present());
    }

    #[test]
    fn qvalues() {
        let rows: &[(&str, Option<u16>)] = &[
            ("0", Some(0)),
            ("0.", Some(0)),
            ("0.5", Some(500)),
            ("0.05", Some(50)),
            ("0.123", Some(123)),
            ("1", Some(1000)),
            ("1.", Some(1000)),
            ("1.000", Some(1000)),
            ("1.001", None),
            ("0.1234", None),
            ("1.0000", None),
            ("2", None),
            ("", None),
            (".5", None),
            ("-0", None),
            ("0.5 ", None),
            ("0,5", None),
            ("00", None),
        ];
        for (text, expected) in rows {
            assert_eq!(
                QValue::parse(text.as_bytes()).map(QValue::thousandths),
                *expected,
                "{text:?}"
            );
        }
    }

    #[test]
    fn coding_names() {
        assert_eq!(Coding::from_name(b"X-Gzip"), Some(Coding::Gzip));
        assert_eq!(Coding::from_name(b"DEFLATE"), Some(Coding::Deflate));
        assert_eq!(Coding::from_name(b"BR"), Some(Coding::Br));
        assert_eq!(Coding::from_name(b"Zstd"), Some(Coding::Zstd));
        assert_eq!(Coding::from_name(b"brotli"), None);
        assert_eq!(Coding::from_name(b"x-zstd"), None);
        assert_eq!(Coding::Zstd.as_str(), "zstd");
        assert_eq!(Coding::Br.to_string(), "br");
        assert_eq!(Coding::Gzip.to_string(), "gzip");
        assert_eq!(Coding::Deflate.as_str(), "deflate");
    }
}
