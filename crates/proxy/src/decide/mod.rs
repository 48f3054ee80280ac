//! The per-response decision, as pure functions of headers, tested without sockets:
//! [`negotiate`] reads `Accept-Encoding`, [`facts`] what a request and a response say about
//! themselves, [`rules`] decides (compress, decompress, or pass and why), and [`headers`]
//! rewrites the response's headers to match. [`media`] and [`list`] parse the field values
//! they share.

pub(crate) mod facts;
pub mod headers;
pub(crate) mod list;
pub(crate) mod media;
pub mod negotiate;
pub(crate) mod rules;
