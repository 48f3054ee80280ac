//! The building blocks of `zipwire demo`: a built-in origin, a load generator that checks
//! every response, and the scenario runner that puts the proxy between them.
//!
//! # Brief overview
//!
//! - [`Site`] is a small generated site (HTML home page, CSS, a JavaScript bundle, a JSON API
//!   response, an SVG, a PNG and a 404 page), the same bytes on every run; [`serve_site`]
//!   serves it over HTTP/1.1 the way an origin behind an offloading proxy does: strong
//!   `ETag`, `Last-Modified`, `Content-Length`, no compression of its own.
//! - [`run_load`] drives an address with keep-alive connections sending
//!   `Accept-Encoding: gzip` for a bounded time and request count, decodes every compressed
//!   body and compares it with the origin's, and returns a [`LoadReport`].
//! - [`content`] makes the pages from a seed; the benchmark's built-in sample is made of them
//!   too.
//! - [`run_demo`] runs the site, then for each [`Scenario`] (compression off, levels 1, 2, 3
//!   and 6) a [`Server`](zipwire_proxy::Server) in front of it under that load, and returns a
//!   [`DemoReport`] whose `Display` is the table `zipwire demo` prints; then
//!   [`run_returning`], a returning visitor's page view with and without an RFC 9842
//!   dictionary ([`ReturningReport`]), the site's versioned script as the dictionary.
//!
//! The pieces take a listener and a shutdown future rather than starting anything on their
//! own, so tests and the binary decide ports and lifetimes.

#![forbid(unsafe_code)]

pub mod content;
mod load;
mod png;
mod report;
mod returning;
mod run;
mod site;

pub use load::{
    peak_rss_bytes, rss_bytes, run_load, LoadError, LoadOptions, LoadReport, MAX_CONNECTIONS,
    MAX_DURATION, MAX_REQUESTS,
};
pub use report::{DemoReport, Scenario, ScenarioReport};
pub use returning::{run_returning, ReturningError, ReturningReport};
pub use run::{run_demo, DemoError, DemoOptions};
pub use site::{serve_site, Resource, Served, Site, MISSING_PATH, VERSION_PATHS};
