//! The per-response encoding: the body wrappers that compress or decompress as bytes stream
//! ([`body`]) with the content-codings of `zipwire-codings`. How much of that work the proxy
//! may do is the budget's ([`crate::budget`] runs the policy; the switches it sets are
//! `zipwire_adapt::Throttle`).

pub mod body;
