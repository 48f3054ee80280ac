//! zipwire's live dashboard: one HTML page per program (the proxy's, the tunnel's), a vendored
//! chart library, and the server-sent events (HTML Living Standard §9.2) that push the
//! program's numbers to the page about once a second.
//!
//! # Brief overview
//!
//! - [`Dashboard`] answers the admin listener's dashboard requests: the page (`/dashboard`, or
//!   `/` when the browser asks for HTML), its assets under a versioned path
//!   (`/assets/<hash>/...`, cached for a year since the hash changes with the bytes) and the
//!   event stream (`/events`). Whoever owns the admin listener keeps `/stats` and `/metrics`
//!   and hands the rest to [`Dashboard::respond`].
//! - [`Source`] is what the program gives: one JSON document of its numbers now.
//! - [`Body`] is the response body: a whole buffer, or an [`events`] stream.
//! - [`serve`] is a minimal admin listener for a program that has none (the tunnel).
//!
//! # What it costs
//!
//! Nothing while nobody watches: no task, timer or sample exists until a browser opens
//! `/events`. Each viewer is one response body that owns one [`tokio::time::Interval`]; the
//! body samples the [`Source`] when hyper polls it after a tick, so a slow viewer delays its own
//! samples rather than queueing them, and nothing grows per viewer. At most
//! [`MAX_VIEWERS`] streams are open at once; more get `503`. [`Dashboard::samples`] counts
//! the samples taken, which the tests read to check that no viewer means no work.
//!
//! The page and its assets are built and gzip-compressed by zipwire's own encoder once, on first
//! request, and served from memory afterwards.
//!
//! # Example
//!
//! ```
//! use zipwire_dashboard::{Dashboard, Kind};
//!
//! let dashboard = Dashboard::new(Kind::Proxy, || "{\"requests\":1}".to_owned());
//! let request = http::Request::get("/dashboard").body(()).unwrap();
//! let response = dashboard.respond(&request).unwrap();
//! assert_eq!(response.status(), 200);
//! assert_eq!(dashboard.samples(), 0);
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod assets;
mod body;
pub mod events;
mod process;
mod routes;
mod send_timeout;
mod serve;

pub use body::Body;
pub use events::MAX_VIEWERS;
pub use process::process_rss_bytes;
pub use routes::{Dashboard, Kind, Source};
pub use send_timeout::{SEND_BUFFER, SEND_TIMEOUT};
pub use serve::{serve, serve_with, HEAD_TIMEOUT, MAX_CONNECTIONS};
