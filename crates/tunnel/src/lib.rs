//! zipwire's tunnel: an authenticated, encrypted TCP tunnel (like `ssh -L` with `-C`) that
//! compresses block by block only when it pays.
//!
//! # Brief overview
//!
//! - [`endpoint::Server`] and [`endpoint::Client`]: the two ends. Each TCP connection the
//!   client accepts travels over its own TLS 1.3 connection to the server, which forwards it
//!   to its one configured target.
//! - [`tls`]: rustls configurations; the client pins the server certificate's SHA-256
//!   ([`tls::Fingerprint`]), as ssh's known_hosts pins a host key. [`keygen`] makes the
//!   certificate, key and token.
//! - [`handshake`]: the client's token, compared in constant time, before any byte is
//!   forwarded; each end states what it accepts to receive. [`startups`]: the cap on
//!   unauthenticated connections and their one deadline. [`keepalive`]: TCP keepalive and
//!   pings that notice a silently dead path.
//! - [`frame`]: raw or compressed data frames (codec and level in each), end and abort.
//! - [`policy`], with [`zipwire_adapt::sniff`]: per block, raw or compressed and at which
//!   level, from magic numbers, a sampled entropy, past failures, and the link's pace: the
//!   kernel's delivery rate and unsent bytes ([`tcp_info`]), or else whether the writer waits
//!   for frames; [`pace_memory`] hands the pace one connection measured to the next.
//! - [`blocks`]: frames to bytes and back with zipwire's codec (stateless deflate),
//!   zlib-rs (windowed deflate) and zstd.
//! - [`memory`]: the cap on compressor state (`--max-memory`), each compressing
//!   connection's fair share of it, and the decompressors counted in.
//! - [`relay`]: the loops of one forwarded connection; [`stats`]: counters and the report;
//!   [`drain`]: a shutdown that finishes or aborts the live connections, never faking an end.
//!
//! # Security
//!
//! Compression runs inside the encryption, and every compression window (windowed deflate,
//! zstd) belongs to one direction of one forwarded connection: no two forwarded connections
//! ever share one, so a client cannot learn another connection's secrets from compressed
//! lengths the way CRIME did with TLS compression. Within one connection the usual caveat of
//! compression over encryption remains: if an attacker can inject chosen bytes into a stream
//! that also carries a secret and observe the ciphertext lengths, lengths leak; use
//! `--level raw` on both ends for such traffic (an end running raw also accepts raw frames
//! only, so one end suffices to keep what it receives uncompressed).
//!
//! # Example
//!
//! ```no_run
//! # async fn run() -> std::io::Result<()> {
//! use zipwire_tunnel::{endpoint::Server, policy::Choice, relay::Shared, tls};
//! let config = tls::server_config("cert.pem".as_ref(), "key.pem".as_ref())?;
//! let token = zipwire_tunnel::keygen::read_token("token".as_ref(), false)?;
//! let shared = Shared::new(Choice::Auto, 128 * 1024, None);
//! let server = Server::bind("0.0.0.0:7443".parse().unwrap(), "127.0.0.1:22".into(), config, token, shared).await?;
//! server.run().await
//! # }
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod blocks;
pub mod drain;
pub mod endpoint;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod handshake;
pub mod keepalive;
pub mod keygen;
pub mod memory;
pub mod pace_memory;
pub mod policy;
pub mod relay;
mod shared;
pub mod startups;
pub mod stats;
pub mod tcp_info;
pub mod tls;
