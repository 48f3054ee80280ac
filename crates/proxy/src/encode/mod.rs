//! The per-response encoding: the body wrappers that compress or decompress as bytes stream
//! ([`body`]), the content-codings behind one encoder interface ([`codings`]), and the CPU/rate budget that decides how much of that work the proxy may do
//! ([`budget`] runs the policy, [`throttle`] holds the switches it sets).

pub mod body;
pub(crate) mod budget;
pub mod codings;
pub(crate) mod throttle;
