//! The typed proxy configuration: what the server needs, with every default applied.
//!
//! This is the second stage of configuration (ripgrep's HiArgs, rustls' "parse, don't
//! validate"): the binary reads TOML and flags into a raw form, validates it, and hands the
//! server a `ProxyConfig`. The library never reads files or environment variables. Names echo
//! nginx and HAProxy; `docs/config.md` maps each option to its nginx/HAProxy equivalent.

use std::net::SocketAddr;
use std::time::Duration;

use zipwire_codec::Level;

use crate::config::Rules;
use crate::encode::body::FlushPolicy;
use crate::encode::codings::{BrotliLevel, ZstdLevel};

/// Everything the proxy server needs to run.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// Address the proxy accepts client connections on.
    pub listen: SocketAddr,
    /// Origin servers, tried round-robin.
    pub upstreams: Vec<Upstream>,
    /// Runtime worker threads (default: the number of cores).
    pub threads: usize,
    /// What gets compressed and how.
    pub compression: Compression,
    /// CPU, rate and memory limits on compression (HAProxy `maxcompcpuusage`, `maxcomprate`).
    pub budget: BudgetLimits,
    /// Headers added to requests sent upstream.
    pub forwarding: Forwarding,
    /// Timeouts on both sides.
    pub timeouts: Timeouts,
    /// Limits on what clients may send and hold.
    pub limits: ClientLimits,
    /// How long an upstream whose connect failed is skipped before it is tried again.
    pub down_time: Duration,
    /// Address of the admin listener (`/stats`, `/metrics`); off when `None`.
    pub admin: Option<SocketAddr>,
    /// One `access` log line (tracing, level info) per request. Default on.
    pub access_log: bool,
}

impl ProxyConfig {
    /// A configuration with every default, listening on `listen` in front of `upstreams`.
    pub fn new(listen: SocketAddr, upstreams: Vec<Upstream>) -> ProxyConfig {
        ProxyConfig {
            listen,
            upstreams,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            compression: Compression::default(),
            budget: BudgetLimits::default(),
            forwarding: Forwarding::default(),
            timeouts: Timeouts::default(),
            limits: ClientLimits::default(),
            down_time: Duration::from_secs(10),
            admin: None,
            access_log: true,
        }
    }
}

/// One origin server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// `host:port` to connect to (plain HTTP/1.1).
    pub authority: http::uri::Authority,
}

/// Compression settings.
#[derive(Clone, Debug)]
pub struct Compression {
    /// Encoder level: 1-3 use the stateless encoder (a few bytes per stream); 4-9 keep a 32 KB
    /// window per stream. Default 2.
    pub level: Level,
    /// zstd level, 1-19 (Caddy's `encode zstd` takes none; nginx's zstd module
    /// `zstd_comp_level`). Default 1: see `docs/config.md`.
    pub zstd_level: ZstdLevel,
    /// brotli quality, 0-11 (ngx_brotli `brotli_comp_level`). Default 4: see
    /// `docs/config.md`.
    pub br_level: BrotliLevel,
    /// Which responses are compressed.
    pub rules: Rules,
    /// How upstream data is grouped into encoder calls.
    pub flush: FlushPolicy,
    /// Remove `Accept-Encoding` from requests sent upstream, so origins send identity and
    /// spend no CPU on compression (HAProxy `compression offload`). Default on.
    pub offload: bool,
    /// Decode gzip responses for clients that do not accept gzip (nginx `gunzip on`).
    /// Default on.
    pub gunzip: bool,
    /// Most bytes one gunzipped response may decode to (decompression bombs). Default 1 GiB.
    pub gunzip_max_output: u64,
}

impl Default for Compression {
    fn default() -> Compression {
        Compression {
            level: Level::FAST,
            zstd_level: ZstdLevel::DEFAULT,
            br_level: BrotliLevel::DEFAULT,
            rules: Rules::default(),
            flush: FlushPolicy::default(),
            offload: true,
            gunzip: true,
            gunzip_max_output: 1 << 30,
        }
    }
}

/// Limits on the resources compression may use. Over a limit, new responses pass uncompressed
/// and running ones step down to stored blocks, until usage falls back below the limit by the
/// hysteresis margin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BudgetLimits {
    /// Percent of one core spent compressing, measured (HAProxy `maxcompcpuusage`). `None`: no
    /// limit.
    pub max_cpu: Option<f64>,
    /// Input bytes per second compressed (HAProxy `maxcomprate`, which counts kB/s). `None`:
    /// no limit.
    pub max_rate: Option<u64>,
    /// Total bytes of compression buffers held by open streams. `None`: no limit.
    pub max_memory: Option<u64>,
    /// How far below a limit usage must fall before compression resumes, as a fraction of the
    /// limit. Default 0.1.
    pub hysteresis: f64,
    /// The window over which CPU and rate are measured. Default one second.
    pub window: Duration,
}

impl Default for BudgetLimits {
    fn default() -> BudgetLimits {
        BudgetLimits {
            max_cpu: None,
            max_rate: None,
            max_memory: None,
            hysteresis: 0.1,
            window: Duration::from_secs(1),
        }
    }
}

/// Headers the proxy adds to requests it forwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forwarding {
    /// Append the client address to `X-Forwarded-For`. Default on.
    pub x_forwarded_for: bool,
    /// Add a `Via` entry with this pseudonym (RFC 9110 §7.6.3); `None` adds none. Default
    /// `Some("zipwire")`.
    pub via: Option<String>,
}

impl Default for Forwarding {
    fn default() -> Forwarding {
        Forwarding {
            x_forwarded_for: true,
            via: Some("zipwire".to_owned()),
        }
    }
}

/// Timeouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Time a client has to send a complete request head (slowloris). Default 10 s.
    pub header_read: Duration,
    /// The longest gap between two reads of a request body (nginx `client_body_timeout`):
    /// past it the upload is abandoned, the upstream connection closed, and the client gets
    /// 408 if nothing was sent yet. Default 60 s.
    pub client_body: Duration,
    /// Time to establish an upstream connection. Default 3 s.
    pub upstream_connect: Duration,
    /// Time the upstream has to start its response (the proxy answers 504 after it), and the
    /// longest it may go silent mid-body (the body is cut). Default 60 s.
    pub upstream_response: Duration,
    /// Idle time after which a keep-alive connection (client or upstream) is closed. Default
    /// 60 s.
    pub idle: Duration,
    /// On SIGTERM, time given to in-flight requests before connections are closed. Default
    /// 10 s.
    pub shutdown_grace: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            header_read: Duration::from_secs(10),
            client_body: Duration::from_secs(60),
            upstream_connect: Duration::from_secs(3),
            upstream_response: Duration::from_secs(60),
            idle: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Limits on clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLimits {
    /// Largest request head (request line and headers) accepted; larger gets 431 or 400.
    /// Default 64 KiB.
    pub max_header_bytes: usize,
    /// Most client connections open at once; further ones wait in the accept queue. Default
    /// 10,000.
    pub max_connections: usize,
}

impl Default for ClientLimits {
    fn default() -> ClientLimits {
        ClientLimits {
            max_header_bytes: 64 * 1024,
            max_connections: 10_000,
        }
    }
}
