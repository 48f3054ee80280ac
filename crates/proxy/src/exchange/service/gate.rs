//! The compressing side of a streamed response: what [`admit`](zipwire_rules::admit)'s
//! [`Gate`] asks before a body is compressed (the budget, then the memory gate), and the
//! dictionary coding granted in place of the decision's where a client holds one.

use tracing::debug;
use zipwire_adapt::Permit;
use zipwire_codings::BodyEncoder;
use zipwire_rules::negotiate::{Coding, Negotiated};
use zipwire_rules::{Gate, Grant, Payload, RequestFacts, ResponseFacts};

use super::Proxy;
use crate::dictionary::Use;

impl Proxy {
    /// The memory a compressing stream of `coding` holds, taken from the gate: up to
    /// `coalesce` bytes of input and about as much output, plus the encoder's own state
    /// ([`Codings::memory`]). When the gate refuses a windowed coding, the stateless gzip
    /// encoder (no state of its own) is tried, if the client accepts gzip and it is offered:
    /// then the second value names it. `None` when even that is refused: the response passes,
    /// counted as a budget bypass.
    fn memory_for(
        &self,
        request: &RequestFacts,
        response: &ResponseFacts,
        coding: Coding,
    ) -> Option<(Option<Permit>, Option<Coding>)> {
        let buffers = 2 * self.flush.coalesce as u64;
        let state = self.codings.memory(coding, response.content_length) as u64;
        if let Some(permit) = self.memory.try_acquire(buffers + state) {
            return Some((Some(permit), None));
        }
        let gzip_offered = self.rules.offered.contains(&Coding::Gzip);
        // As negotiation would between gzip and identity alone: a client that ranks identity
        // above gzip gets the body as it is, not gzip.
        let gzip_chosen = matches!(
            request.accept_encoding.negotiate(&[Coding::Gzip]),
            Negotiated::Coding(_)
        );
        if state == 0 || !gzip_offered || !gzip_chosen {
            return None;
        }
        let permit = self.memory.try_acquire(buffers)?;
        debug!(%coding, "memory gate: falling back to stateless gzip");
        Some((Some(permit), Some(Coding::Gzip)))
    }
}

/// The compressing side of a streamed response: the budget's switch and rate allowance (by
/// the input the response is expected to bring: its length, else one call's worth), then the
/// memory gate, which may grant the stateless gzip fallback instead. What it grants (the
/// permit, the encoder) is the response body's to hold.
pub(super) struct StreamGate<'a> {
    pub(super) proxy: &'a Proxy,
    pub(super) request: &'a RequestFacts,
    pub(super) response: &'a ResponseFacts,
    pub(super) permit: Option<Permit>,
    pub(super) encoder: Option<BodyEncoder>,
    /// The dictionary coding this response may be sent in instead.
    pub(super) dictionary: Option<Use>,
    /// The dictionary coding granted.
    pub(super) used: Option<Use>,
}

impl StreamGate<'_> {
    /// Grants the dictionary coding in place of the decision's, if the memory gate admits its
    /// encoder (a larger window than the ordinary coding's, and the dictionary's tables).
    fn grant_dictionary(&mut self, payload: Payload) -> bool {
        let Some(used) = self.dictionary.take() else {
            return false;
        };
        let Some(dictionaries) = self.proxy.dictionaries.as_ref() else {
            return false;
        };
        if payload == Payload::Absent {
            self.used = Some(used);
            return true;
        }
        let length = self.response.content_length;
        let buffers = 2 * self.proxy.flush.coalesce as u64;
        let state = dictionaries.memory(&used, length) as u64;
        let Some(permit) = self.proxy.memory.try_acquire(buffers + state) else {
            return false;
        };
        self.permit = Some(permit);
        self.encoder = Some(dictionaries.encoder(&used, length));
        self.used = Some(used);
        true
    }
}

impl Gate for StreamGate<'_> {
    fn grant(&mut self, coding: Coding, payload: Payload) -> Grant {
        let proxy = self.proxy;
        if proxy.throttle.is_bypassing_new() {
            return Grant::Refused;
        }
        if payload == Payload::Absent {
            self.grant_dictionary(payload);
            return Grant::Granted;
        }
        let length = self.response.content_length;
        let expected = length.unwrap_or(proxy.flush.coalesce as u64);
        if !proxy.throttle.admit(expected) {
            return Grant::Refused;
        }
        if self.grant_dictionary(payload) {
            return Grant::Granted;
        }
        let Some((permit, fallback)) = proxy.memory_for(self.request, self.response, coding) else {
            return Grant::Refused;
        };
        self.permit = permit;
        match fallback {
            Some(fallback) => {
                self.encoder = Some(proxy.codings.fallback());
                Grant::Fallback(fallback)
            }
            None => {
                self.encoder = Some(proxy.codings.encoder(coding, length));
                Grant::Granted
            }
        }
    }

    fn can_gunzip(&self) -> bool {
        self.proxy.gunzip.is_some()
    }
}
