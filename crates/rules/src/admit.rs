//! The whole compression decision a server makes for one response: [`decide`]'s rules, then
//! what the compressing side can afford ([`Gate`]: the CPU and rate budget, the memory gate,
//! a variant already stored) and whether it can decode gzip for a client that cannot.
//!
//! Both response paths call [`admit`]: the streamed one (a response on its way from the
//! origin) and the cached one (a response made from a stored entry). They differ in their
//! gates, and in one row of the table (see [`Path`]).

use crate::decide::{decide, Bypass, Decision, Payload, Vary};
use crate::facts::{Budget, RequestFacts, ResponseFacts};
use crate::negotiate::Coding;
use crate::rules::Rules;

/// What the compressing side answers when the rules say to compress.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Grant {
    /// Compress in the coding the rules chose.
    Granted,
    /// Compress, but in this coding instead (the memory gate's stateless gzip).
    Fallback(Coding),
    /// The budget is spent: the rules decide again with [`Budget::Exhausted`].
    Refused,
}

/// The side of a server a response is made on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Path {
    /// Streamed from the origin as it arrives.
    Streamed,
    /// Made from a stored cache entry.
    Stored,
}

/// The compressing side of a server, asked by [`admit`].
pub trait Gate {
    /// Asked once, when the rules would compress in `coding`; [`Payload::Absent`] for a
    /// response without a body (HEAD). The gate keeps what it granted (a permit, an encoder,
    /// a stored variant) for its caller.
    fn grant(&mut self, coding: Coding, payload: Payload) -> Grant;

    /// Whether upstream gzip can be decoded for a client that does not accept it.
    fn can_gunzip(&self) -> bool;
}

/// The decision for one response: [`decide`] with `gate`'s answers applied.
///
/// - Compress: the gate may grant it, switch it to a fallback coding, or refuse it (the
///   rules then decide again with the budget spent, which passes the response with
///   [`Bypass::Budget`]).
/// - Decompress, when the gate cannot gunzip: the response passes as it came
///   ([`Bypass::AlreadyEncoded`]). On the streamed path `Vary: Accept-Encoding` is added, as
///   for a client that takes gzip (the same bytes, and a downstream cache keeps the first
///   response's `Vary`); on the stored path the entry's own `Vary` already says it.
pub fn admit(
    request: &RequestFacts,
    response: &ResponseFacts,
    rules: &Rules,
    gate: &mut dyn Gate,
    path: Path,
) -> Decision {
    let mut decision = decide(request, response, rules);
    if let Decision::Compress { coding, payload } = decision {
        match gate.grant(coding, payload) {
            Grant::Granted => {}
            Grant::Fallback(coding) => decision = Decision::Compress { coding, payload },
            Grant::Refused => {
                let mut spent = response.clone();
                spent.budget = Budget::Exhausted;
                decision = decide(request, &spent, rules);
            }
        }
    }
    if matches!(decision, Decision::Decompress { .. }) && !gate.can_gunzip() {
        decision = Decision::Pass {
            reason: Bypass::AlreadyEncoded,
            vary: match path {
                Path::Streamed => Vary::Add,
                Path::Stored => Vary::Unchanged,
            },
        };
    }
    decision
}
