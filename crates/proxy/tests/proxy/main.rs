//! Loopback integration tests: an in-process origin, the proxy in front of it, a client.
//!
//! Every body that goes through the proxy is decoded and compared byte for byte with what the
//! origin sent.
//!
//! The binary counts its allocations ([`zipwire_testkit::alloc`]): a test that measures
//! memory runs itself alone in a child process ([`zipwire_testkit::alloc::alone`]), where
//! the count is its own.

#[global_allocator]
static COUNTING: zipwire_testkit::alloc::Counting = zipwire_testkit::alloc::Counting;

mod body_limit;
mod cache;
mod cache_fill;
mod codings;
mod compression;
mod counted_errors;
mod dictionaries;
mod framing;
mod header_rules;
mod http2;
mod http2_raw;
mod logging;
mod operations;
mod origin_limits;
mod raw;
mod recoding;
mod robustness;
mod site_dictionaries;
mod streaming;
mod support;
mod timeouts;
mod tls;
mod tls_abuse;
mod tls_support;
mod tls_upstream;
mod upgrade;
mod upstreams;
