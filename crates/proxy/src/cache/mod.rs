//! The cache phase: a request the cache may answer is answered here, from a stored entry,
//! before it would go upstream; a miss streams through the other phases and feeds the
//! cache's fill on the way. The cache itself (keys, storage, RFC 9111 policy, variants,
//! fill coalescing, the recompression worker) is the `zipwire-cache` crate.
//!
//! - [`serve`]: the response made from an entry, with the coding this client gets (the same
//!   [`zipwire_rules::admit`] decision as a streamed response).
//! - [`range`]: a byte range served from a stored identity 200.
//! - [`purge`]: the admin listener's `DELETE /cache`.

pub(crate) mod purge;
pub(crate) mod range;
pub(crate) mod serve;
