//! The typed compression rules (the part of the proxy configuration that [`decide`] reads).
//!
//! Names echo nginx: `min_length` is `gzip_min_length`, `types` is `gzip_types`.
//!
//! [`decide`]: crate::decide

use std::error::Error;
use std::fmt;
use std::str::FromStr;

use crate::media::MediaType;
use crate::negotiate::Coding;

/// The media types compressed by default: text formats, JSON/XML families (every
/// `application/*+json` and `*+xml` type too: JSON:API, HAL, problem details, GeoJSON, SOAP),
/// SVG, WebAssembly and server-sent events. Already-compressed formats (images, video,
/// archives, fonts) are left out on purpose.
pub const DEFAULT_TYPES: &[&str] = &[
    "text/html",
    "text/plain",
    "text/css",
    "text/xml",
    "text/javascript",
    "application/javascript",
    "application/x-javascript",
    "application/json",
    "application/xml",
    "application/rss+xml",
    "application/atom+xml",
    "application/xhtml+xml",
    "image/svg+xml",
    "application/wasm",
    "application/manifest+json",
    "application/ld+json",
    "application/*+json",
    "application/*+xml",
    "text/event-stream",
];

/// The codings offered by default, most preferred first: zstd level 1 compresses the
/// haproxy.org page about as fast as gzip level 2 (337-341 against 335-358 MB/s on one core)
/// and 6% denser (2.82 against 2.67), brotli level 3 denser still (3.00) at a sixth of the
/// speed, for the clients without zstd; gzip and deflate for the rest.
pub const DEFAULT_CODINGS: &[Coding] = &[Coding::Zstd, Coding::Br, Coding::Gzip, Coding::Deflate];

/// What the compression decision depends on besides the request and the response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    /// Responses whose `Content-Length` is below this are not compressed (nginx
    /// `gzip_min_length`); responses of unknown length always qualify. Default 256: below that
    /// the gzip framing (18 bytes) and the lost `Content-Length` cost more than they save.
    pub min_length: u64,
    /// The media types to compress; see [`TypePattern`]. Default [`DEFAULT_TYPES`].
    pub types: Vec<TypePattern>,
    /// The codings the proxy produces, most preferred first: the client's q-values decide,
    /// this order breaks ties (Caddy's `prefer`), and a coding left out is never produced.
    /// Default zstd, br, gzip, deflate (see `docs/config.md` for the measurements).
    pub offered: Vec<Coding>,
    /// Whether the body layer flushes the encoder after every upstream write, which
    /// `text/event-stream` needs so each event reaches the client when it is sent. Without it
    /// event streams pass uncompressed even when their type is listed. Default `false`: the
    /// server that provides the flushing sets it.
    pub event_stream_flush: bool,
    /// Whether an upstream's `dcb` or `dcz` body is decoded for the client rather than
    /// passed: set by a server that never forwards `Available-Dictionary` or the dictionary
    /// codings, so that such a body was sent unasked and no client can be assumed to hold its
    /// dictionary. Default `false` (passed, as any coding the upstream chose).
    pub decode_dictionary_codings: bool,
}

impl Rules {
    /// Whether `media` matches one of the configured types.
    pub fn is_compressible(&self, media: &MediaType) -> bool {
        self.types.iter().any(|pattern| pattern.matches(media))
    }
}

impl Default for Rules {
    fn default() -> Rules {
        let types = DEFAULT_TYPES
            .iter()
            .map(|text| TypePattern::parse(text))
            .collect::<Result<_, _>>()
            .expect("every DEFAULT_TYPES entry is a valid pattern (see the default_types test)");
        Rules {
            min_length: 256,
            types,
            offered: DEFAULT_CODINGS.to_vec(),
            event_stream_flush: false,
            decode_dictionary_codings: false,
        }
    }
}

/// One entry of [`Rules::types`]: `type/subtype`, `type/*`, `type/*+suffix` (any subtype
/// with that structured-syntax suffix, RFC 6838 §4.2.8: `application/*+json`), or `*/*` (also
/// written `*`, as in nginx), compared case-insensitively. Parameters are not allowed:
/// matching ignores them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypePattern {
    /// Lower case; `None` matches any type.
    type_: Option<String>,
    /// Lower case; `None` matches any subtype.
    subtype: Option<Subtype>,
}

/// What a pattern's subtype matches.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Subtype {
    /// This subtype.
    Exactly(String),
    /// Any subtype ending in `+` and this suffix.
    Suffix(String),
}

impl TypePattern {
    /// Parses a pattern.
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidType`] when it is not `token/token`, `token/*`, `*/*` or `*`.
    pub fn parse(text: &str) -> Result<TypePattern, ConfigError> {
        let invalid = || ConfigError::InvalidType {
            pattern: text.to_owned(),
        };
        let trimmed = text.trim();
        if trimmed == "*" || trimmed == "*/*" {
            return Ok(TypePattern {
                type_: None,
                subtype: None,
            });
        }
        let (type_, subtype) = trimmed.split_once('/').ok_or_else(invalid)?;
        if type_ == "*" || !crate::list::is_token(type_.as_bytes()) {
            return Err(invalid());
        }
        let is_token = |text: &str| crate::list::is_token(text.as_bytes());
        let subtype = match subtype.strip_prefix("*+") {
            _ if subtype == "*" => None,
            Some(suffix) if is_token(suffix) && !suffix.contains('*') => {
                Some(Subtype::Suffix(suffix.to_ascii_lowercase()))
            }
            None if is_token(subtype) && !subtype.contains('*') => {
                Some(Subtype::Exactly(subtype.to_ascii_lowercase()))
            }
            _ => return Err(invalid()),
        };
        Ok(TypePattern {
            type_: Some(type_.to_ascii_lowercase()),
            subtype,
        })
    }

    /// Whether `media` matches this pattern.
    pub fn matches(&self, media: &MediaType) -> bool {
        self.type_.as_deref().is_none_or(|t| t == media.type_())
            && self.subtype.as_ref().is_none_or(|s| match s {
                Subtype::Exactly(subtype) => subtype == media.subtype(),
                Subtype::Suffix(suffix) => media
                    .subtype()
                    .strip_suffix(suffix.as_str())
                    .is_some_and(|rest| rest.len() > 1 && rest.ends_with('+')),
            })
    }
}

impl FromStr for TypePattern {
    type Err = ConfigError;

    fn from_str(text: &str) -> Result<TypePattern, ConfigError> {
        TypePattern::parse(text)
    }
}

impl fmt::Display for TypePattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let type_ = self.type_.as_deref().unwrap_or("*");
        match &self.subtype {
            None => write!(f, "{type_}/*"),
            Some(Subtype::Exactly(subtype)) => write!(f, "{type_}/{subtype}"),
            Some(Subtype::Suffix(suffix)) => write!(f, "{type_}/*+{suffix}"),
        }
    }
}

/// A rejected rules setting.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A `types` entry that is not a media type pattern.
    InvalidType {
        /// The entry as given.
        pattern: String,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::InvalidType { pattern } => write!(
                f,
                "types: {pattern:?} is not a media type pattern (type/subtype, type/*, type/*+suffix or */*)"
            ),
        }
    }
}

impl Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn media(text: &str) -> MediaType {
        MediaType::parse(text.as_bytes()).expect("valid test media type")
    }

    #[test]
    fn default_types() {
        let rules = Rules::default();
        assert_eq!(rules.types.len(), DEFAULT_TYPES.len());
        assert_eq!(rules.min_length, 256);
        assert_eq!(
            rules.offered,
            [Coding::Zstd, Coding::Br, Coding::Gzip, Coding::Deflate]
        );
        assert!(!rules.event_stream_flush);
        for text in DEFAULT_TYPES {
            assert!(rules.is_compressible(&media(text)), "{text}");
        }
        for text in [
            "image/png",
            "application/octet-stream",
            "video/mp4",
            "font/woff2",
            "application/epub+zip",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ] {
            assert!(!rules.is_compressible(&media(text)), "{text}");
        }
    }

    #[test]
    fn patterns() {
        let rows: &[(&str, &str, bool)] = &[
            ("text/html", "text/html", true),
            ("TEXT/Html", "text/html", true),
            ("text/html", "text/plain", false),
            ("text/*", "text/csv", true),
            ("text/*", "application/json", false),
            ("*/*", "application/octet-stream", true),
            ("*", "image/png", true),
            ("application/*+json", "application/vnd.api+json", true),
            ("application/*+json", "application/problem+json", true),
            ("Application/*+JSON", "application/geo+json", true),
            ("application/*+json", "application/json", false),
            ("application/*+json", "application/+json", false),
            ("application/*+json", "application/xjson", false),
            ("application/*+json", "text/x+json", false),
            ("application/*+xml", "application/soap+xml", true),
            ("application/*+xml", "application/epub+zip", false),
        ];
        for (pattern, media_type, expected) in rows {
            let parsed: TypePattern = pattern.parse().expect("valid test pattern");
            assert_eq!(
                parsed.matches(&media(media_type)),
                *expected,
                "{pattern} ~ {media_type}"
            );
        }
    }

    #[test]
    fn invalid_patterns() {
        for text in [
            "",
            "text",
            "text/",
            "*/html",
            "text/*+",
            "text/*+*",
            "text/a*",
            "text/html; charset=utf-8",
            "te xt/html",
        ] {
            assert_eq!(
                TypePattern::parse(text),
                Err(ConfigError::InvalidType {
                    pattern: text.to_owned()
                }),
                "{text:?}"
            );
        }
        let message = ConfigError::InvalidType {
            pattern: "text".to_owned(),
        }
        .to_string();
        assert_eq!(
            message,
            "types: \"text\" is not a media type pattern (type/subtype, type/*, type/*+suffix or */*)"
        );
    }

    #[test]
    fn display_round_trips() {
        for text in ["text/html", "text/*", "*/*", "application/*+json"] {
            assert_eq!(TypePattern::parse(text).expect("valid").to_string(), text);
        }
    }
}
