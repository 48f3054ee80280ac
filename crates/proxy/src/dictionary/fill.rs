//! A candidate dictionary's body copied as it streams to its client, stored once the
//! upstream body ends as framed: as the cache's fill, a body that fails, is abandoned or
//! grows past the store's `max_size` leaves nothing behind.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::{Candidate, Dictionaries};

/// The copy of one candidate's body.
pub(crate) struct DictionaryFill {
    dictionaries: Arc<Dictionaries>,
    candidate: Candidate,
    body: BytesMut,
    /// Too long, or already stored.
    done: bool,
}

impl DictionaryFill {
    /// A copy of `candidate`'s body for `dictionaries`.
    pub(crate) fn new(dictionaries: Arc<Dictionaries>, candidate: Candidate) -> DictionaryFill {
        DictionaryFill {
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
        if (self.body.len() + data.len()) as u64 > max {
            self.done = true;
            self.body = BytesMut::new();
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
        self.dictionaries.store_body(&self.candidate, body);
    }
}
