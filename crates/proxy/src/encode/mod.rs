//! The per-response encoding: the body wrappers that compress or decompress as bytes stream
//! ([`body`]) with the content-codings of `zipwire-codings`, and the CPU/rate budget that
//! decides how much of that work the proxy may do ([`budget`] runs the policy; the switches
//! it sets are `zipwire_adapt::Throttle`).

pub mod body;
pub(crate) mod budget;
