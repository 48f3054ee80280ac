//! A candidate dictionary's body copied as it streams to its client, stored once the
//! upstream body ends as framed: as the cache's fill, a body that fails, is abandoned or
//! grows past the store's `max_size` leaves nothing behind. The copy's bytes are taken from
//! the memory gate as they come; a copy the gate refuses gives up (the response itself goes
//! on), so a burst of large candidates cannot hold more than the budget allows.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use zipwire_adapt::Permit;

use super::{Candidate, Dictionaries};

/// The copy of one candidate's body.
pub(crate) struct DictionaryFill {
    dictionaries: Arc<Dictionaries>,
    candidate: Candidate,
    body: BytesMut,
    /// The copy's bytes in the memory gate.
    permit: Permit,
    /// Too long, refused by the gate, or already stored.
    done: bool,
}

impl DictionaryFill {
    /// A copy of `candidate`'s body for `dictionaries`.
    pub(crate) fn new(dictionaries: Arc<Dictionaries>, candidate: Candidate) -> DictionaryFill {
        DictionaryFill {
            permit: dictionaries.permit(),
            dictionaries,
            candidate,
            body: BytesMut::new(),
            done: false,
        }
    }

    /// Copies a frame of the body.
    pub(crate) fn data(&mut self, data: &Bytes) {
        if self.done {
            return;
        }
        let max = self.dictionaries.store().limits().max_size;
        if (self.body.len() + data.len()) as u64 > max || !self.permit.try_grow(data.len() as u64) {
            self.done = true;
            self.body = BytesMut::new();
            let held = self.permit.bytes();
            self.permit.shrink(held);
            return;
        }
        self.body.extend_from_slice(data);
    }

    /// The body ended as framed: store it.
    pub(crate) fn end(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let body = std::mem::take(&mut self.body).freeze();
        // The store counts the bytes from here on.
        let held = self.permit.bytes();
        self.permit.shrink(held);
        self.dictionaries.store_body(&self.candidate, body);
    }
}
