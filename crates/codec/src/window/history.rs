//! The per-stream byte buffer: up to 32 KB of history the matcher may reach into, then input
//! taken but not compressed yet.
//!
//! One contiguous buffer of at most [`CAPACITY`] bytes, as zlib's `window` (which is twice the
//! window size): the parse needs history and new input side by side. New input is appended
//! until the buffer is full; then what was compressed slides down so that its last 32 KB stay.
//! A slide moves 32 KB once per 32 KB of input, and small calls (an SSH packet) cost only the
//! copy of their own bytes.

use crate::encode::lz77::WINDOW;

/// Bytes the buffer holds at most: the window plus as much new input again.
pub(crate) const CAPACITY: usize = 2 * WINDOW;

/// History and pending input of one stream.
#[derive(Clone, Debug, Default)]
pub(crate) struct History {
    /// `buf[floor..parsed]` is history (at most [`WINDOW`] of it is reachable),
    /// `buf[parsed..]` input taken but not compressed yet.
    buf: Vec<u8>,
    /// The oldest byte matches may reach: after a full flush, where it happened.
    floor: usize,
    /// Bytes of `buf` compressed already.
    parsed: usize,
    /// Stream offset of `buf[0]`.
    offset: u64,
}

impl History {
    /// Bytes that can be appended before the buffer must slide.
    pub(crate) fn room(&self) -> usize {
        CAPACITY - self.buf.len()
    }

    /// Bytes taken but not compressed yet.
    pub(crate) fn pending(&self) -> usize {
        self.buf.len() - self.parsed
    }

    /// Appends as much of `input` as fits and returns how much that was. The buffer grows
    /// geometrically up to [`CAPACITY`], never past it, so short streams stay small.
    pub(crate) fn append(&mut self, input: &[u8]) -> usize {
        let n = input.len().min(self.room());
        let need = self.buf.len() + n;
        if need > self.buf.capacity() {
            let target = need.max(2 * self.buf.capacity()).clamp(4096, CAPACITY);
            self.buf.reserve_exact(target - self.buf.len());
        }
        self.buf.extend_from_slice(&input[..n]);
        n
    }

    /// What the parse sees: `(data, start, offset)`, where `data[..start]` is history,
    /// `data[start..]` the pending input and `offset` the stream offset of `data[0]`.
    pub(crate) fn view(&self) -> (&[u8], usize, u64) {
        (
            &self.buf[self.floor..],
            self.parsed - self.floor,
            self.offset + self.floor as u64,
        )
    }

    /// Marks all pending input compressed.
    pub(crate) fn mark_parsed(&mut self) {
        self.parsed = self.buf.len();
    }

    /// Makes everything compressed so far unreachable (a full flush).
    pub(crate) fn forget(&mut self) {
        self.floor = self.parsed;
    }

    /// Drops compressed bytes that are out of reach, keeping the last [`WINDOW`] of history
    /// and any pending input, and returns how far the buffer moved.
    pub(crate) fn slide(&mut self) -> usize {
        let keep_from = self.floor.max(self.parsed.saturating_sub(WINDOW));
        if keep_from == 0 {
            return 0;
        }
        self.buf.drain(..keep_from);
        // `keep_from` is at or past the floor, which thus moves to the start.
        self.floor = 0;
        self.parsed -= keep_from;
        self.offset += keep_from as u64;
        keep_from
    }

    /// Forgets everything (a reset); the allocation stays.
    pub(crate) fn clear(&mut self) {
        self.buf.clear();
        (self.floor, self.parsed, self.offset) = (0, 0, 0);
    }

    /// Heap bytes held.
    pub(crate) fn heap_size(&self) -> usize {
        self.buf.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slides_keep_the_last_window_of_history_and_all_pending_input() {
        let data: Vec<u8> = (0..CAPACITY + 10_000).map(|i| (i % 251) as u8).collect();
        let mut h = History::default();
        assert_eq!(h.append(&data), CAPACITY);
        assert!(h.heap_size() <= CAPACITY);
        h.mark_parsed();
        assert_eq!(h.slide(), CAPACITY - WINDOW);
        let (view, start, offset) = h.view();
        assert_eq!((view.len(), start), (WINDOW, WINDOW));
        assert_eq!(view, &data[CAPACITY - WINDOW..CAPACITY]);
        assert_eq!(offset, (CAPACITY - WINDOW) as u64);
        // Pending input survives a slide; history before a full flush's floor does not.
        h.append(&data[CAPACITY..]);
        h.forget();
        assert_eq!(h.slide(), WINDOW);
        assert_eq!(h.view(), (&data[CAPACITY..], 0, CAPACITY as u64));
        h.mark_parsed();
        assert_eq!(h.slide(), 0, "history within the window stays");
        assert_eq!((h.view().1, h.pending()), (10_000, 0));
    }
}
