//! A body copied as it streams to its client, for the dictionaries once the upstream body
//! ends as framed: a candidate dictionary's whole body, or a site dictionary's sample (its
//! first [`site::SAMPLE_MAX`] bytes). As the cache's fill, a body that fails or is abandoned
//! leaves nothing behind, nor does a candidate that grows past the store's `max_size`. The
//! copy's bytes are taken from the memory gate as they come; a copy the gate refuses gives up
//! (the response itself goes on), so a burst of large bodies cannot hold more than the budget
//! allows.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use zipwire_adapt::Permit;

use super::{site, Candidate, Dictionaries};

/// Where a copied body goes.
pub(crate) enum Sink {
    /// The store, as a dictionary.
    Dictionary(Candidate),
    /// A site's samples.
    Sample(site::Sample),
}

/// The copy of one body.
pub(crate) struct DictionaryFill {
    dictionaries: Arc<Dictionaries>,
    sink: Sink,
    body: BytesMut,
    /// The copy's bytes in the memory gate.
    permit: Permit,
    /// Refused, already handed over, or (a candidate) too long.
    done: bool,
    /// A sample that has all it keeps.
    full: bool,
}

impl DictionaryFill {
    /// A copy of a body for `sink`.
    pub(crate) fn new(dictionaries: Arc<Dictionaries>, sink: Sink) -> DictionaryFill {
        DictionaryFill {
            permit: dictionaries.permit(),
            dictionaries,
            sink,
            body: BytesMut::new(),
            done: false,
            full: false,
        }
    }

    /// Copies a frame of the body.
    pub(crate) fn data(&mut self, data: &Bytes) {
        if self.done || self.full {
            return;
        }
        let mut data = &data[..];
        match self.sink {
            Sink::Dictionary(_) => {
                let max = self.dictionaries.store().limits().max_size;
                if (self.body.len() + data.len()) as u64 > max {
                    return self.give_up();
                }
            }
            Sink::Sample(_) => {
                let room = site::SAMPLE_MAX - self.body.len();
                if data.len() >= room {
                    data = &data[..room];
                    self.full = true;
                }
            }
        }
        if !self.permit.try_grow(data.len() as u64) {
            return self.give_up();
        }
        self.body.extend_from_slice(data);
    }

    /// Drops the copy.
    fn give_up(&mut self) {
        self.done = true;
        self.body = BytesMut::new();
        let held = self.permit.bytes();
        self.permit.shrink(held);
    }

    /// The body ended as framed: hand it over.
    pub(crate) fn end(&mut self) {
        if self.done {
            return;
        }
        self.done = true;
        let body = std::mem::take(&mut self.body).freeze();
        // The store or the samples count the bytes from here on.
        let held = self.permit.bytes();
        self.permit.shrink(held);
        match &self.sink {
            Sink::Dictionary(candidate) => self.dictionaries.store_body(candidate, body),
            Sink::Sample(sample) => self.dictionaries.add_sample(sample.clone(), body),
        }
    }
}
