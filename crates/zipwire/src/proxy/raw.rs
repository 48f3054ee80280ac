//! The first configuration stage: the TOML file and the flags as given, every key optional,
//! nothing checked beyond TOML types. [`RawConfig::overlay`] lets the flags win over the
//! file; `TryFrom<RawConfig> for ProxyConfig` (in `typed`) then checks every value and
//! applies the defaults.
//!
//! Numbers are read as `i64` (TOML's integer) and sizes and durations as [`Quantity`], so a
//! negative number or a duration without a unit is rejected with the key's name instead of a
//! serde type error.

use std::path::PathBuf;

use serde::Deserialize;

/// The whole file. Unknown keys are errors (a typo must not silently fall back to a default).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    /// `listen`: the cleartext client-facing address, or a list of them.
    pub listen: Option<Listen>,
    /// `upstreams`: origin URLs.
    pub upstreams: Option<Vec<String>>,
    /// `threads`: runtime worker threads.
    pub threads: Option<i64>,
    /// `down_time`: how long a failed upstream is skipped.
    pub down_time: Option<Quantity>,
    /// `admin`: the admin listener's address.
    pub admin: Option<String>,
    /// `access_log`: one log line per request.
    pub access_log: Option<bool>,
    /// `upstream_ca_file`: PEM certificates `https://` upstreams are verified against.
    pub upstream_ca_file: Option<String>,
    /// `[compression]`.
    #[serde(default)]
    pub compression: RawCompression,
    /// `[budget]`.
    #[serde(default)]
    pub budget: RawBudget,
    /// `[forwarding]`.
    #[serde(default)]
    pub forwarding: RawForwarding,
    /// `[timeouts]`.
    #[serde(default)]
    pub timeouts: RawTimeouts,
    /// `[limits]`.
    #[serde(default)]
    pub limits: RawLimits,
    /// `[http2]`.
    #[serde(default)]
    pub http2: RawHttp2,
    /// `[tls]`.
    #[serde(default)]
    pub tls: RawTls,
    /// `[cache]`: absent means no cache; present, `mode` defaults to `revalidate`.
    pub cache: Option<RawCache>,
    /// `[dictionaries]`.
    #[serde(default)]
    pub dictionaries: RawDictionaries,
    /// `[headers]`.
    #[serde(default)]
    pub headers: RawHeaders,
}

/// `[headers]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHeaders {
    /// `[headers.request]`.
    #[serde(default)]
    pub request: RawHeaderRules,
    /// `[headers.response]`.
    #[serde(default)]
    pub response: RawHeaderRules,
}

/// `[headers.request]` or `[headers.response]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHeaderRules {
    /// `set`: field name → the value it gets.
    pub set: Option<std::collections::BTreeMap<String, String>>,
    /// `add`: field name → a line appended.
    pub add: Option<std::collections::BTreeMap<String, String>>,
    /// `remove`: field names.
    pub remove: Option<Vec<String>>,
}

impl RawHeaderRules {
    /// `self`'s keys where given, `base`'s otherwise.
    fn over(self, base: RawHeaderRules) -> RawHeaderRules {
        RawHeaderRules {
            set: self.set.or(base.set),
            add: self.add.or(base.add),
            remove: self.remove.or(base.remove),
        }
    }
}

/// `[dictionaries]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDictionaries {
    /// `mode`: "auto", "origin" or "off".
    pub mode: Option<String>,
    /// `max_memory`: bytes of dictionaries held.
    pub max_memory: Option<Quantity>,
    /// `max_count`: dictionaries held.
    pub max_count: Option<i64>,
    /// `max_size`: the largest dictionary.
    pub max_size: Option<Quantity>,
    /// `codings`: "dcz", "dcb", in order of preference.
    pub codings: Option<Vec<String>>,
    /// `site`: build site dictionaries for HTML and JSON (`auto` only).
    pub site: Option<bool>,
    /// `[[dictionaries.paths]]`: marking rules per path prefix.
    #[serde(default)]
    pub paths: Vec<RawDictionaryPath>,
}

/// One `[[dictionaries.paths]]` table.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDictionaryPath {
    /// `prefix`: the path prefix the rule covers.
    pub prefix: String,
    /// `match`: the URL pattern written in `Use-As-Dictionary`.
    #[serde(rename = "match")]
    pub pattern: Option<String>,
    /// `match_dest`: the Fetch destinations written with it.
    pub match_dest: Option<Vec<String>>,
    /// `mark = false`: mark nothing under the prefix.
    pub mark: Option<bool>,
}

/// `[cache]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCache {
    /// `mode`: "off", "revalidate" or "fresh".
    pub mode: Option<String>,
    /// `max_object`: bytes.
    pub max_object: Option<Quantity>,
    /// `max_memory`: bytes.
    pub max_memory: Option<Quantity>,
    /// `store_set_cookie`: store responses with `Set-Cookie`.
    pub store_set_cookie: Option<bool>,
    /// `recompress`: recompress stored variants at the best levels.
    pub recompress: Option<bool>,
    /// `lock_timeout`: how long a miss waits for another filling the same key.
    pub lock_timeout: Option<Quantity>,
}

/// `listen`: one address or a list.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Listen {
    /// `listen = "ADDR"`.
    One(String),
    /// `listen = ["ADDR", ...]`.
    Many(Vec<String>),
}

impl Listen {
    /// The addresses as written.
    pub fn as_slice(&self) -> &[String] {
        match self {
            Listen::One(one) => std::slice::from_ref(one),
            Listen::Many(many) => many,
        }
    }
}

/// `[tls]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTls {
    /// `listen`: TLS listener addresses.
    pub listen: Option<Vec<String>>,
    /// `cert`: the default certificate chain (PEM).
    pub cert: Option<PathBuf>,
    /// `key`: its private key (PEM).
    pub key: Option<PathBuf>,
    /// `[[tls.certificates]]`: certificates chosen by SNI (a list of tables, so unset is
    /// empty).
    #[serde(default)]
    pub certificates: Vec<RawCertificate>,
    /// `handshake_timeout`.
    pub handshake_timeout: Option<Quantity>,
    /// `hsts`: the `Strict-Transport-Security` value.
    pub hsts: Option<String>,
}

/// One `[[tls.certificates]]` entry.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCertificate {
    /// `cert`: the certificate chain (PEM).
    pub cert: PathBuf,
    /// `key`: its private key (PEM).
    pub key: PathBuf,
}

/// `[compression]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCompression {
    /// `level`: 1-9.
    pub level: Option<i64>,
    /// `min_length`: bytes.
    pub min_length: Option<Quantity>,
    /// `types`: media type patterns.
    pub types: Option<Vec<String>>,
    /// `encodings`: `zstd`, `br`, `gzip`, `deflate`, most preferred first.
    pub encodings: Option<Vec<String>>,
    /// `zstd_level`: 1-19.
    pub zstd_level: Option<i64>,
    /// `br_level`: 0-11.
    pub br_level: Option<i64>,
    /// `coalesce`: bytes gathered per encoder call.
    pub coalesce: Option<Quantity>,
    /// `flush_delay`: longest wait for more input.
    pub flush_delay: Option<Quantity>,
    /// `offload`: strip `Accept-Encoding` upstream.
    pub offload: Option<bool>,
    /// `gunzip`: decode gzip for clients without it.
    pub gunzip: Option<bool>,
    /// `gunzip_max_output`: bytes one gunzipped response may reach.
    pub gunzip_max_output: Option<Quantity>,
}

/// `[budget]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBudget {
    /// `max_cpu`: percent of one core.
    pub max_cpu: Option<f64>,
    /// `max_rate`: input bytes per second.
    pub max_rate: Option<Quantity>,
    /// `max_memory`: bytes of compression buffers.
    pub max_memory: Option<Quantity>,
    /// `gather_memory`: bytes of input gathered for encoder calls.
    pub gather_memory: Option<Quantity>,
    /// `hysteresis`: fraction of a limit.
    pub hysteresis: Option<f64>,
    /// `window`: measuring span.
    pub window: Option<Quantity>,
}

/// `[forwarding]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawForwarding {
    /// `x_forwarded_for`: append the client address.
    pub x_forwarded_for: Option<bool>,
    /// `x_forwarded_proto`: set the client's scheme.
    pub x_forwarded_proto: Option<bool>,
    /// `x_forwarded_host`: set the host the client asked for.
    pub x_forwarded_host: Option<bool>,
    /// `via`: pseudonym for `Via`; empty for none.
    pub via: Option<String>,
}

/// `[timeouts]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTimeouts {
    /// `header_read`.
    pub header_read: Option<Quantity>,
    /// `client_body`.
    pub client_body: Option<Quantity>,
    /// `upstream_connect`.
    pub upstream_connect: Option<Quantity>,
    /// `upstream_response`.
    pub upstream_response: Option<Quantity>,
    /// `idle`.
    pub idle: Option<Quantity>,
    /// `shutdown_grace`.
    pub shutdown_grace: Option<Quantity>,
    /// `upgrade_idle`.
    pub upgrade_idle: Option<Quantity>,
    /// `send`.
    pub send: Option<Quantity>,
}

/// `[limits]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// `max_header_bytes`.
    pub max_header_bytes: Option<Quantity>,
    /// `max_connections`.
    pub max_connections: Option<i64>,
    /// `max_body`: the largest request body, 0 for no limit.
    pub max_body: Option<Quantity>,
}

/// `[http2]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHttp2 {
    /// `enabled`: serve HTTP/2 at all.
    pub enabled: Option<bool>,
    /// `max_concurrent_streams`: per connection.
    pub max_concurrent_streams: Option<i64>,
    /// `initial_stream_window`: bytes.
    pub initial_stream_window: Option<Quantity>,
    /// `initial_connection_window`: bytes.
    pub initial_connection_window: Option<Quantity>,
    /// `ping_interval`: `"0s"` for none.
    pub ping_interval: Option<Quantity>,
    /// `ping_timeout`.
    pub ping_timeout: Option<Quantity>,
}

/// A size or a duration as written: a bare number or a string with a unit (`"64k"`,
/// `"250ms"`). Which units make sense depends on the key.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Quantity {
    /// A TOML integer.
    Int(i64),
    /// A TOML float (never valid: sizes and durations are whole numbers).
    Float(f64),
    /// A TOML string.
    Text(String),
}

impl RawConfig {
    /// Reads a TOML document.
    pub fn from_toml(text: &str) -> Result<RawConfig, toml::de::Error> {
        toml::from_str(text)
    }

    /// This configuration with every key that `top` sets replaced by `top`'s value (the flags
    /// over the file). Lists are replaced, not appended to.
    pub fn overlay(self, top: RawConfig) -> RawConfig {
        RawConfig {
            listen: top.listen.or(self.listen),
            upstreams: top.upstreams.or(self.upstreams),
            threads: top.threads.or(self.threads),
            down_time: top.down_time.or(self.down_time),
            admin: top.admin.or(self.admin),
            access_log: top.access_log.or(self.access_log),
            upstream_ca_file: top.upstream_ca_file.or(self.upstream_ca_file),
            compression: RawCompression {
                level: top.compression.level.or(self.compression.level),
                min_length: top.compression.min_length.or(self.compression.min_length),
                types: top.compression.types.or(self.compression.types),
                encodings: top.compression.encodings.or(self.compression.encodings),
                zstd_level: top.compression.zstd_level.or(self.compression.zstd_level),
                br_level: top.compression.br_level.or(self.compression.br_level),
                coalesce: top.compression.coalesce.or(self.compression.coalesce),
                flush_delay: top.compression.flush_delay.or(self.compression.flush_delay),
                offload: top.compression.offload.or(self.compression.offload),
                gunzip: top.compression.gunzip.or(self.compression.gunzip),
                gunzip_max_output: top
                    .compression
                    .gunzip_max_output
                    .or(self.compression.gunzip_max_output),
            },
            budget: RawBudget {
                max_cpu: top.budget.max_cpu.or(self.budget.max_cpu),
                max_rate: top.budget.max_rate.or(self.budget.max_rate),
                max_memory: top.budget.max_memory.or(self.budget.max_memory),
                gather_memory: top.budget.gather_memory.or(self.budget.gather_memory),
                hysteresis: top.budget.hysteresis.or(self.budget.hysteresis),
                window: top.budget.window.or(self.budget.window),
            },
            forwarding: RawForwarding {
                x_forwarded_for: top
                    .forwarding
                    .x_forwarded_for
                    .or(self.forwarding.x_forwarded_for),
                x_forwarded_proto: top
                    .forwarding
                    .x_forwarded_proto
                    .or(self.forwarding.x_forwarded_proto),
                x_forwarded_host: top
                    .forwarding
                    .x_forwarded_host
                    .or(self.forwarding.x_forwarded_host),
                via: top.forwarding.via.or(self.forwarding.via),
            },
            timeouts: RawTimeouts {
                header_read: top.timeouts.header_read.or(self.timeouts.header_read),
                client_body: top.timeouts.client_body.or(self.timeouts.client_body),
                upstream_connect: top
                    .timeouts
                    .upstream_connect
                    .or(self.timeouts.upstream_connect),
                upstream_response: top
                    .timeouts
                    .upstream_response
                    .or(self.timeouts.upstream_response),
                idle: top.timeouts.idle.or(self.timeouts.idle),
                shutdown_grace: top.timeouts.shutdown_grace.or(self.timeouts.shutdown_grace),
                upgrade_idle: top.timeouts.upgrade_idle.or(self.timeouts.upgrade_idle),
                send: top.timeouts.send.or(self.timeouts.send),
            },
            cache: match (top.cache, self.cache) {
                (Some(top), Some(base)) => Some(RawCache {
                    mode: top.mode.or(base.mode),
                    max_object: top.max_object.or(base.max_object),
                    max_memory: top.max_memory.or(base.max_memory),
                    store_set_cookie: top.store_set_cookie.or(base.store_set_cookie),
                    recompress: top.recompress.or(base.recompress),
                    lock_timeout: top.lock_timeout.or(base.lock_timeout),
                }),
                (top, base) => top.or(base),
            },
            dictionaries: RawDictionaries {
                mode: top.dictionaries.mode.or(self.dictionaries.mode),
                max_memory: top.dictionaries.max_memory.or(self.dictionaries.max_memory),
                max_count: top.dictionaries.max_count.or(self.dictionaries.max_count),
                max_size: top.dictionaries.max_size.or(self.dictionaries.max_size),
                codings: top.dictionaries.codings.or(self.dictionaries.codings),
                site: top.dictionaries.site.or(self.dictionaries.site),
                paths: match top.dictionaries.paths.is_empty() {
                    true => self.dictionaries.paths,
                    false => top.dictionaries.paths,
                },
            },
            headers: RawHeaders {
                request: top.headers.request.over(self.headers.request),
                response: top.headers.response.over(self.headers.response),
            },
            limits: RawLimits {
                max_header_bytes: top.limits.max_header_bytes.or(self.limits.max_header_bytes),
                max_connections: top.limits.max_connections.or(self.limits.max_connections),
                max_body: top.limits.max_body.or(self.limits.max_body),
            },
            tls: RawTls {
                listen: top.tls.listen.or(self.tls.listen),
                cert: top.tls.cert.or(self.tls.cert),
                key: top.tls.key.or(self.tls.key),
                certificates: if top.tls.certificates.is_empty() {
                    self.tls.certificates
                } else {
                    top.tls.certificates
                },
                handshake_timeout: top.tls.handshake_timeout.or(self.tls.handshake_timeout),
                hsts: top.tls.hsts.or(self.tls.hsts),
            },
            http2: RawHttp2 {
                enabled: top.http2.enabled.or(self.http2.enabled),
                max_concurrent_streams: top
                    .http2
                    .max_concurrent_streams
                    .or(self.http2.max_concurrent_streams),
                initial_stream_window: top
                    .http2
                    .initial_stream_window
                    .or(self.http2.initial_stream_window),
                initial_connection_window: top
                    .http2
                    .initial_connection_window
                    .or(self.http2.initial_connection_window),
                ping_interval: top.http2.ping_interval.or(self.http2.ping_interval),
                ping_timeout: top.http2.ping_timeout.or(self.http2.ping_timeout),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_all_unset() {
        assert_eq!(RawConfig::from_toml(""), Ok(RawConfig::default()));
    }

    #[test]
    fn reads_every_section() {
        let raw = RawConfig::from_toml(
            r#"
            listen = "0.0.0.0:80"
            upstreams = ["http://a:1", "http://b:2"]
            [compression]
            level = 2
            min_length = "1k"
            coalesce = 4096
            flush_delay = "5ms"
            [budget]
            max_cpu = 80
            hysteresis = 0.2
            [forwarding]
            via = ""
            [timeouts]
            idle = "2m"
            [limits]
            max_connections = 5
            "#,
        )
        .expect("valid");
        assert_eq!(raw.listen, Some(Listen::One("0.0.0.0:80".to_owned())));
        assert_eq!(raw.upstreams.as_ref().map(Vec::len), Some(2));
        assert_eq!(raw.compression.level, Some(2));
        assert_eq!(
            raw.compression.min_length,
            Some(Quantity::Text("1k".to_owned()))
        );
        assert_eq!(raw.compression.coalesce, Some(Quantity::Int(4096)));
        // An integer percentage reads as a float.
        assert_eq!(raw.budget.max_cpu, Some(80.0));
        assert_eq!(raw.budget.hysteresis, Some(0.2));
        assert_eq!(raw.forwarding.via.as_deref(), Some(""));
        assert_eq!(raw.timeouts.idle, Some(Quantity::Text("2m".to_owned())));
        assert_eq!(raw.limits.max_connections, Some(5));
    }

    #[test]
    fn reads_listener_lists_and_tls() {
        let raw = RawConfig::from_toml(
            r#"
            listen = ["0.0.0.0:80", "[::]:80"]
            [tls]
            listen = ["0.0.0.0:443"]
            cert = "site.pem"
            key = "site.key"
            handshake_timeout = "5s"
            hsts = "max-age=31536000"
            [[tls.certificates]]
            cert = "other.pem"
            key = "other.key"
            "#,
        )
        .expect("valid");
        let listen = raw.listen.expect("listen set");
        assert_eq!(listen.as_slice(), ["0.0.0.0:80", "[::]:80"]);
        assert_eq!(raw.tls.listen, Some(vec!["0.0.0.0:443".to_owned()]));
        assert_eq!(raw.tls.cert, Some(PathBuf::from("site.pem")));
        assert_eq!(
            raw.tls.certificates,
            [RawCertificate {
                cert: PathBuf::from("other.pem"),
                key: PathBuf::from("other.key"),
            }]
        );
        assert_eq!(
            raw.tls.handshake_timeout,
            Some(Quantity::Text("5s".to_owned()))
        );
        let err = RawConfig::from_toml("[[tls.certificates]]\ncert = \"a.pem\"")
            .expect_err("no key")
            .to_string();
        assert!(err.contains("missing field `key`"), "{err}");
    }

    #[test]
    fn unknown_keys_are_errors() {
        for text in [
            "levle = 1",
            "[compression]\nlevle = 1",
            "[bugdet]\nmax_cpu = 1",
            "[tls]\ncertificate = \"a.pem\"",
        ] {
            let err = RawConfig::from_toml(text).expect_err(text).to_string();
            assert!(err.contains("unknown field"), "{text}: {err}");
        }
    }

    #[test]
    fn wrong_types_name_the_place() {
        let err = RawConfig::from_toml("[compression]\nlevel = \"fast\"")
            .expect_err("a string level")
            .to_string();
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn overlay_prefers_the_top() {
        let file = RawConfig::from_toml(
            "listen = \"127.0.0.1:1\"\nupstreams = [\"http://a:1\", \"http://b:1\"]\n\
             [compression]\nlevel = 3\noffload = false",
        )
        .expect("valid");
        let flags = RawConfig {
            upstreams: Some(vec!["http://c:1".to_owned()]),
            compression: RawCompression {
                level: Some(5),
                ..RawCompression::default()
            },
            ..RawConfig::default()
        };
        let merged = file.overlay(flags);
        assert_eq!(merged.listen, Some(Listen::One("127.0.0.1:1".to_owned())));
        assert_eq!(merged.upstreams, Some(vec!["http://c:1".to_owned()]));
        assert_eq!(merged.compression.level, Some(5));
        assert_eq!(merged.compression.offload, Some(false));
    }

    #[test]
    fn overlay_of_nothing_changes_nothing() {
        let file = RawConfig::from_toml(include_str!("../../../../zipwire.toml.example"))
            .expect("the example parses");
        assert_eq!(file.clone().overlay(RawConfig::default()), file);
        assert_eq!(RawConfig::default().overlay(file.clone()), file);
    }
}
