//! The per-response encoding: the body wrappers that compress or decompress as bytes stream
//! ([`body`]), and the CPU/rate budget that decides how much of that work the proxy may do
//! ([`budget`] runs the policy, [`throttle`] holds the switches it sets).

pub mod body;
pub(crate) mod budget;
pub(crate) mod throttle;
