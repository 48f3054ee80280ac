//! The endpoint's memory cap (`--max-memory`): compressor and decompressor state of all its
//! forwarded connections together, and each compressing connection's fair share of it.
//!
//! zstd's levels differ by two orders of magnitude in memory (1.4 MB at level 1, 94 MB at
//! 19; see [`crate::blocks`]), and the automatic policy climbs to the high ones on slow
//! links, where one connection at level 19 is the best use of the CPU. Many at once are
//! not: without a cap, two dozen slow uploads held 1.8 GB. So every direction that
//! compresses holds a [`Hold`] on the endpoint's [`MemoryCap`], and a method whose state
//! would take it past either limit is not used:
//!
//! - all holds together stay within the cap (a [`zipwire_adapt::MemoryGate`], as the proxy's
//!   `budget.max_memory`);
//! - one direction takes at most the cap divided by the directions compressing at the time,
//!   but never less than [`MIN_SHARE`], so that the first connections do not take the memory
//!   later ones would compress with at a lower level.
//!
//! The automatic policy then steps down a rung (see [`crate::policy::Policy::memory_short`]);
//! below its first rung, and at a fixed level, the block goes through the stateless deflate
//! encoder (a few hundred kilobytes of scratch), and raw only when not even that fits.
//! Decompressors are counted too, though never refused: their size is the peer's choice of
//! level, and a frame has to be decoded whatever it costs; what they hold leaves less for the
//! compressors. They are given back as soon as the peer ends its direction.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use zipwire_adapt::{MemoryGate, Permit};

/// The default cap: two connections at zstd's level 19, or two dozen at level 6.
pub const DEFAULT_MAX_MEMORY: u64 = 256 << 20;

/// A direction's share is never cut below this: zstd's level 3 (3.7 MB), the ladder's first
/// step up, fits in it.
pub const MIN_SHARE: u64 = 4 << 20;

/// The endpoint's cap, shared by cloning.
#[derive(Clone)]
pub struct MemoryCap {
    gate: MemoryGate,
    /// Directions holding compressor memory.
    compressing: Arc<AtomicUsize>,
}

impl MemoryCap {
    /// A cap of `max` bytes; `None` counts without refusing.
    pub fn new(max: Option<u64>) -> MemoryCap {
        MemoryCap {
            gate: MemoryGate::new(max),
            compressing: Arc::default(),
        }
    }

    /// Bytes held now.
    pub fn in_use(&self) -> u64 {
        self.gate.in_use()
    }

    /// The cap, `None` when unlimited.
    pub fn max(&self) -> Option<u64> {
        self.gate.max()
    }

    /// Directions holding compressor memory now.
    pub fn compressing(&self) -> usize {
        self.compressing.load(Ordering::Relaxed)
    }

    /// A hold for one direction's compressors or decompressors, holding nothing yet. A
    /// decompressor's hold only [settles](Hold::settle): counted, never refused, and not a
    /// compressing direction.
    pub fn hold(&self) -> Hold {
        Hold {
            permit: self.gate.account(0),
            cap: self.clone(),
            compressing: false,
        }
    }
}

impl Default for MemoryCap {
    fn default() -> MemoryCap {
        MemoryCap::new(Some(DEFAULT_MAX_MEMORY))
    }
}

impl fmt::Debug for MemoryCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryCap")
            .field("max", &self.max())
            .field("in_use", &self.in_use())
            .field("compressing", &self.compressing())
            .finish()
    }
}

/// What one direction holds of the cap; given back when dropped.
pub struct Hold {
    permit: Permit,
    cap: MemoryCap,
    compressing: bool,
}

impl Hold {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.permit.bytes()
    }

    /// Whether this direction may hold `need` bytes of compressor state: within its share,
    /// and the cap has room for what it holds beyond its current bytes (which it then takes).
    pub fn admit(&mut self, need: u64) -> bool {
        if let Some(max) = self.cap.max() {
            let directions = self.cap.compressing() + usize::from(!self.compressing);
            if need > share(max, directions) {
                return false;
            }
        }
        let held = self.permit.bytes();
        if need > held && !self.permit.try_grow(need - held) {
            return false;
        }
        self.count_as_compressing();
        true
    }

    /// Sets what this direction holds to `bytes`, as measured after the work: gives back
    /// what it holds beyond, and counts what it holds past its estimate (refused or not: the
    /// memory is in use).
    pub fn settle(&mut self, bytes: u64) {
        let held = self.permit.bytes();
        if bytes < held {
            self.permit.shrink(held - bytes);
        } else if bytes > held && !self.permit.try_grow(bytes - held) {
            // Over the cap by the estimate's error: count it all the same; the next
            // admission sees less room.
            self.permit.grow_anyway(bytes - held);
        }
    }

    /// Whether this compressing direction holds more than its share of the cap as it is
    /// now: the cap divided by the directions compressing, itself among them (never below
    /// [`MIN_SHARE`]). A share shrinks as directions start compressing, so a direction that
    /// took a large share when it was alone can find itself beyond a later one. Always false
    /// without a cap, and for a decompressor's hold.
    pub fn beyond_share(&self) -> bool {
        match self.cap.max() {
            Some(max) if self.compressing => self.bytes() > share(max, self.cap.compressing()),
            _ => false,
        }
    }

    fn count_as_compressing(&mut self) {
        if !self.compressing {
            self.compressing = true;
            self.cap.compressing.fetch_add(1, Ordering::AcqRel);
        }
    }
}

/// One direction's share of a cap of `max` bytes among `directions` compressing ones.
fn share(max: u64, directions: usize) -> u64 {
    (max / directions.max(1) as u64).max(MIN_SHARE)
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.compressing {
            self.cap.compressing.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl fmt::Debug for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hold")
            .field("bytes", &self.bytes())
            .field("compressing", &self.compressing)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    #[test]
    fn holds_stay_within_the_cap_and_give_back_on_drop() {
        let cap = MemoryCap::new(Some(100 * MB));
        let mut a = cap.hold();
        assert!(a.admit(94 * MB));
        assert_eq!(cap.in_use(), 94 * MB);
        let mut b = cap.hold();
        // b's share is 50 MB, and the cap has 6 MB left.
        assert!(!b.admit(47 * MB));
        assert!(!b.admit(15 * MB));
        assert!(b.admit(5 * MB));
        assert_eq!((cap.in_use(), cap.compressing()), (99 * MB, 2));
        // a, past its share of two, keeps what it has but is refused more, and steps down.
        assert!(!a.admit(94 * MB));
        assert!(a.admit(47 * MB));
        a.settle(46 * MB);
        assert_eq!(cap.in_use(), 51 * MB);
        drop(a);
        assert_eq!((cap.in_use(), cap.compressing()), (5 * MB, 1));
        drop(b);
        assert_eq!((cap.in_use(), cap.compressing()), (0, 0));
    }

    #[test]
    fn a_direction_is_beyond_its_share_once_others_compress() {
        let cap = MemoryCap::new(Some(100 * MB));
        let mut a = cap.hold();
        assert!(!a.beyond_share(), "holding nothing");
        assert!(a.admit(72 * MB));
        assert!(!a.beyond_share(), "alone, its share is the cap");
        let mut b = cap.hold();
        b.settle(20 * MB);
        assert!(!a.beyond_share(), "a decompressor takes no share");
        assert!(!b.beyond_share(), "nor is it ever beyond one");
        let mut c = cap.hold();
        assert!(c.admit(MB));
        assert!(a.beyond_share(), "72 MB against a share of 50");
        assert!(!c.beyond_share());
        a.settle(40 * MB);
        assert!(!a.beyond_share());
        drop(c);
        a.settle(90 * MB);
        assert!(!a.beyond_share(), "alone again");
        assert!(!MemoryCap::new(None).hold().beyond_share());
    }

    #[test]
    fn a_share_is_never_below_the_minimum() {
        // 30 directions would get 3.3 MB each; they get MIN_SHARE, as long as the cap has
        // room (for 25 of them).
        let cap = MemoryCap::new(Some(100 * MB));
        let mut holds: Vec<Hold> = (0..30).map(|_| cap.hold()).collect();
        let admitted = holds
            .iter_mut()
            .map(|h| h.admit(MIN_SHARE))
            .filter(|&ok| ok)
            .count();
        assert_eq!((admitted, cap.in_use()), (25, 100 * MB));
        for hold in holds.iter_mut().take(25) {
            assert!(hold.admit(MIN_SHARE));
            hold.settle(MIN_SHARE / 2);
            assert!(!hold.admit(MIN_SHARE + 1), "past the share");
        }
    }

    #[test]
    fn decompressors_count_without_being_refused_and_crowd_out_compressors() {
        let cap = MemoryCap::new(Some(10 * MB));
        let mut d = cap.hold();
        d.settle(9 * MB);
        d.settle(17 * MB);
        assert_eq!(cap.in_use(), 17 * MB);
        let mut c = cap.hold();
        assert!(!c.admit(MB));
        d.settle(MB);
        assert!(c.admit(4 * MB));
        assert_eq!(
            cap.compressing(),
            1,
            "a decompressor is not a compressing direction"
        );
    }

    #[test]
    fn an_estimate_short_of_what_was_used_is_counted_all_the_same() {
        let cap = MemoryCap::new(Some(30 * MB));
        let mut c = cap.hold();
        assert!(c.admit(9 * MB));
        c.settle(22 * MB);
        assert_eq!(cap.in_use(), 22 * MB);
        let mut d = cap.hold();
        assert!(!d.admit(9 * MB), "only 8 MB are left");
        assert!(d.admit(8 * MB));
        assert_eq!(cap.in_use(), 30 * MB);
    }

    #[test]
    fn without_a_cap_everything_is_admitted_and_counted() {
        let cap = MemoryCap::new(None);
        let mut c = cap.hold();
        assert!(c.admit(1 << 40));
        assert_eq!(cap.in_use(), 1 << 40);
    }
}
