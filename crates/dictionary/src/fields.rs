//! RFC 9842's header fields, read and written with the `sfv` crate (RFC 9651 Structured
//! Fields): `Use-As-Dictionary` (a Dictionary), `Available-Dictionary` (a Byte Sequence),
//! `Dictionary-ID` (a String), and the explicit `dcb` and `dcz` members of
//! `Accept-Encoding`.
//!
//! Anything malformed reads as absent: a client or origin that sent a field this module
//! cannot read gets what it would get without the field, an ordinary coding, never an error.

use http::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT_ENCODING};
use sfv::{BareItem, DictSerializer, FieldType, KeyRef, ListEntry, Parser, StringRef};
use zipwire_rules::list;
use zipwire_rules::QValue;

use crate::Hash;

/// `Use-As-Dictionary` (RFC 9842 §2.1), on a response whose body may serve as a dictionary.
pub const USE_AS_DICTIONARY: HeaderName = HeaderName::from_static("use-as-dictionary");
/// `Available-Dictionary` (§2.2): the SHA-256 of the dictionary a client holds.
pub const AVAILABLE_DICTIONARY: HeaderName = HeaderName::from_static("available-dictionary");
/// `Dictionary-ID` (§2.3): the `id` the dictionary was stored with, echoed by the client.
pub const DICTIONARY_ID: HeaderName = HeaderName::from_static("dictionary-id");

/// The longest `id` a client keeps (§2.1.3: 1024 characters).
pub const MAX_ID: usize = 1024;

/// A parsed `Use-As-Dictionary` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UseAsDictionary {
    /// `match`: the URL pattern of the requests the dictionary may serve (required).
    pub pattern: String,
    /// `match-dest`: the Fetch destinations it serves; empty means every one.
    pub destinations: Vec<String>,
    /// `id`: a string the client echoes in `Dictionary-ID`.
    pub id: Option<String>,
}

impl UseAsDictionary {
    /// A value with only `match`.
    pub fn matching(pattern: impl Into<String>) -> UseAsDictionary {
        UseAsDictionary {
            pattern: pattern.into(),
            destinations: Vec::new(),
            id: None,
        }
    }

    /// Reads every `Use-As-Dictionary` line of `headers` as one Dictionary (RFC 9651 §4.2:
    /// lines combine with commas). `None` when absent or unusable: not a Dictionary, no
    /// `match` string, a `match` holding regular-expression groups (§2.1.1), a
    /// `match-dest` that is not an inner list of strings, an `id` that is not a string of at
    /// most [`MAX_ID`] characters, or a `type` other than the token `raw` (§2.1.4: a client
    /// ignores a dictionary of a type it does not know, so the proxy does too).
    pub fn from_headers(headers: &HeaderMap) -> Option<UseAsDictionary> {
        let joined = joined(headers, &USE_AS_DICTIONARY)?;
        let members: sfv::Dictionary = Parser::new(&joined).parse().ok()?;
        let pattern = match members.get("match")? {
            ListEntry::Item(item) => item.bare_item.as_string()?.as_str().to_owned(),
            ListEntry::InnerList(_) => return None,
        };
        if !crate::pattern::is_valid(&pattern) {
            return None;
        }
        let destinations = match members.get("match-dest") {
            None => Vec::new(),
            Some(ListEntry::InnerList(list)) => list
                .items
                .iter()
                .map(|item| item.bare_item.as_string().map(|s| s.as_str().to_owned()))
                .collect::<Option<Vec<_>>>()?,
            Some(ListEntry::Item(_)) => return None,
        };
        let id = match members.get("id") {
            None => None,
            Some(ListEntry::Item(item)) => {
                let id = item.bare_item.as_string()?.as_str();
                if id.len() > MAX_ID {
                    return None;
                }
                Some(id.to_owned())
            }
            Some(ListEntry::InnerList(_)) => return None,
        };
        let raw = match members.get("type") {
            None => true,
            Some(ListEntry::Item(item)) => item.bare_item.as_token()?.as_str() == "raw",
            Some(ListEntry::InnerList(_)) => false,
        };
        if !raw {
            return None;
        }
        Some(UseAsDictionary {
            pattern,
            destinations,
            id,
        })
    }

    /// The field value, serialized as RFC 9651 says; `None` if a string holds characters a
    /// Structured Field String cannot (outside printable ASCII).
    pub fn to_header_value(&self) -> Option<HeaderValue> {
        let mut out = DictSerializer::new();
        let pattern = StringRef::from_str(&self.pattern).ok()?;
        let _ = out.bare_item(key("match"), pattern);
        if !self.destinations.is_empty() {
            let mut list = out.inner_list(key("match-dest"));
            for destination in &self.destinations {
                let _ = list.bare_item(StringRef::from_str(destination).ok()?);
            }
            let _ = list.finish();
        }
        if let Some(id) = &self.id {
            let _ = out.bare_item(key("id"), StringRef::from_str(id).ok()?);
        }
        HeaderValue::from_str(&out.finish()?).ok()
    }
}

/// A key known to be valid (lower-case letters and `-`).
fn key(name: &'static str) -> &'static KeyRef {
    match KeyRef::from_str(name) {
        Ok(key) => key,
        // The names above are all valid keys.
        Err(_) => unreachable!("invalid structured field key {name}"),
    }
}

/// Every line of `name`, joined with `", "` (RFC 9110 §5.3); `None` when there is none or a
/// line is not visible ASCII.
fn joined(headers: &HeaderMap, name: &HeaderName) -> Option<String> {
    let mut out = String::new();
    for line in headers.get_all(name) {
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(line.to_str().ok()?);
    }
    (!out.is_empty()).then_some(out)
}

/// The hash in the request's `Available-Dictionary` (§2.2): one Byte Sequence of exactly 32
/// bytes, parameters ignored. `None` when absent or malformed (several lines, another type,
/// another length).
pub fn available_dictionary(headers: &HeaderMap) -> Option<Hash> {
    let mut lines = headers.get_all(AVAILABLE_DICTIONARY).iter();
    let (Some(line), None) = (lines.next(), lines.next()) else {
        return None;
    };
    let item: sfv::Item = Parser::new(line.as_bytes()).parse().ok()?;
    match item.bare_item {
        BareItem::ByteSequence(bytes) => Some(Hash(bytes.try_into().ok()?)),
        _ => None,
    }
}

/// The request's `Dictionary-ID` (§2.3): one String of at most [`MAX_ID`] characters.
pub fn dictionary_id(headers: &HeaderMap) -> Option<String> {
    let mut lines = headers.get_all(DICTIONARY_ID).iter();
    let (Some(line), None) = (lines.next(), lines.next()) else {
        return None;
    };
    let item: sfv::Item = Parser::new(line.as_bytes()).parse().ok()?;
    let id = item.bare_item.as_string()?.as_str();
    (id.len() <= MAX_ID).then(|| id.to_owned())
}

/// The hash as `Available-Dictionary` carries it: `:base64:`.
pub fn serialize_hash(hash: &Hash) -> String {
    sfv::Item::new(BareItem::ByteSequence(hash.0.to_vec())).serialize()
}

/// Which dictionary codings a request's `Accept-Encoding` names, explicitly and with a
/// weight above zero: `*` does not count (RFC 9842 §6: a client lists them only when it
/// holds a matching dictionary).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accepted {
    /// `dcz` is listed.
    pub dcz: bool,
    /// `dcb` is listed.
    pub dcb: bool,
}

impl Accepted {
    /// Reads every `Accept-Encoding` line. An element whose parameters are malformed counts
    /// as refused, as `zipwire_rules::negotiate` reads them.
    pub fn from_headers(headers: &HeaderMap) -> Accepted {
        let mut accepted = Accepted::default();
        let mut dcz_refused = false;
        let mut dcb_refused = false;
        for element in list::elements(headers.get_all(ACCEPT_ENCODING)) {
            let mut parts = element.split(|&b| b == b';');
            let name = list::trim_ows(parts.next().unwrap_or_default());
            let (listed, refused) = if name.eq_ignore_ascii_case(b"dcz") {
                (&mut accepted.dcz, &mut dcz_refused)
            } else if name.eq_ignore_ascii_case(b"dcb") {
                (&mut accepted.dcb, &mut dcb_refused)
            } else {
                continue;
            };
            let weight = weight(parts);
            if weight.is_none_or(QValue::is_zero) {
                *refused = true;
            } else {
                *listed = true;
            }
        }
        Accepted {
            dcz: accepted.dcz && !dcz_refused,
            dcb: accepted.dcb && !dcb_refused,
        }
    }

    /// Whether either is listed.
    pub fn any(self) -> bool {
        self.dcz || self.dcb
    }
}

/// Removes what names a dictionary from a request before it goes upstream: the proxy makes
/// the deltas, so the origin is never asked for one it might answer with a `dcb` or `dcz`
/// body for this client alone (`Available-Dictionary`, `Dictionary-ID`, and `dcb` and `dcz`
/// in `Accept-Encoding`; an `Accept-Encoding` left empty is removed).
pub fn strip_for_upstream(headers: &mut HeaderMap) {
    headers.remove(AVAILABLE_DICTIONARY);
    headers.remove(DICTIONARY_ID);
    let mut kept: Vec<&[u8]> = Vec::new();
    let mut dropped = false;
    for element in list::elements(headers.get_all(ACCEPT_ENCODING)) {
        let name = list::trim_ows(element.split(|&b| b == b';').next().unwrap_or_default());
        if name.eq_ignore_ascii_case(b"dcz") || name.eq_ignore_ascii_case(b"dcb") {
            dropped = true;
        } else {
            kept.push(element);
        }
    }
    if !dropped {
        return;
    }
    let joined = kept.join(&b", "[..]);
    match HeaderValue::from_bytes(&joined) {
        Ok(value) if !joined.is_empty() => {
            headers.insert(ACCEPT_ENCODING, value);
        }
        _ => {
            headers.remove(ACCEPT_ENCODING);
        }
    }
}

/// The weight of an element's parameters: 1 without `q`, `None` when malformed.
fn weight<'a>(parameters: impl Iterator<Item = &'a [u8]>) -> Option<QValue> {
    let mut weight = QValue::ONE;
    let mut seen = false;
    for parameter in parameters {
        let parameter = list::trim_ows(parameter);
        let (name, value) = match parameter.iter().position(|&b| b == b'=') {
            Some(at) => (
                list::trim_ows(&parameter[..at]),
                list::trim_ows(&parameter[at + 1..]),
            ),
            None => return None,
        };
        if !name.eq_ignore_ascii_case(b"q") || seen {
            return None;
        }
        seen = true;
        weight = QValue::parse(value)?;
    }
    Some(weight)
}

#[cfg(test)]
mod tests;
