//! The memory gate: a cap on the total bytes of compression buffers held by open streams.
//!
//! A stream asks for its buffer memory before it starts compressing; when the cap would be
//! exceeded the answer is no and the response passes uncompressed, so a flood of slow clients
//! cannot grow the proxy's memory without bound. Accounting is one atomic counter shared by
//! every thread: no lock, no allocation per permit.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A cap on total buffer memory, shared by cloning (clones count against the same total).
#[derive(Clone)]
pub struct MemoryGate {
    shared: Arc<Shared>,
}

struct Shared {
    /// `u64::MAX` when unlimited.
    max: u64,
    in_use: AtomicU64,
}

impl MemoryGate {
    /// A gate that lets at most `max` bytes out at once; `None` never refuses but still
    /// counts what is in use.
    pub fn new(max: Option<u64>) -> MemoryGate {
        MemoryGate {
            shared: Arc::new(Shared {
                max: max.unwrap_or(u64::MAX),
                in_use: AtomicU64::new(0),
            }),
        }
    }

    /// Takes `bytes` from the gate, or returns `None` when that would exceed the cap. The
    /// bytes return to the gate when the permit is dropped.
    pub fn try_acquire(&self, bytes: u64) -> Option<Permit> {
        self.shared.take(bytes).then(|| Permit {
            shared: Arc::clone(&self.shared),
            bytes,
        })
    }

    /// Takes `bytes` whatever the cap: for a stream that cannot be refused (a gzip body
    /// decoded for a client that does not accept gzip has no other form to go out in), so
    /// that what it holds still counts, and the streams that can be refused are, sooner.
    pub fn account(&self, bytes: u64) -> Permit {
        self.shared.in_use.fetch_add(bytes, Ordering::AcqRel);
        Permit {
            shared: Arc::clone(&self.shared),
            bytes,
        }
    }

    /// Bytes currently held by permits.
    pub fn in_use(&self) -> u64 {
        self.shared.in_use.load(Ordering::Relaxed)
    }

    /// The cap, `None` when unlimited.
    pub fn max(&self) -> Option<u64> {
        (self.shared.max != u64::MAX).then_some(self.shared.max)
    }
}

impl fmt::Debug for MemoryGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryGate")
            .field("max", &self.max())
            .field("in_use", &self.in_use())
            .finish()
    }
}

impl Shared {
    fn take(&self, bytes: u64) -> bool {
        self.in_use
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |in_use| {
                in_use.checked_add(bytes).filter(|&total| total <= self.max)
            })
            .is_ok()
    }

    fn give_back(&self, bytes: u64) {
        self.in_use.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Bytes taken from a [`MemoryGate`], given back on drop.
pub struct Permit {
    shared: Arc<Shared>,
    bytes: u64,
}

impl Permit {
    /// The bytes this permit holds.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Takes `extra` more bytes for this permit (a buffer that has to grow); returns whether
    /// the gate allowed it. On refusal the permit keeps what it had.
    pub fn try_grow(&mut self, extra: u64) -> bool {
        let granted = self.shared.take(extra);
        if granted {
            self.bytes += extra;
        }
        granted
    }

    /// Takes `extra` more bytes whatever the cap: memory already in use (an estimate that fell
    /// short), which has to count.
    pub fn grow_anyway(&mut self, extra: u64) {
        self.shared.in_use.fetch_add(extra, Ordering::AcqRel);
        self.bytes += extra;
    }

    /// Gives `bytes` back early (a buffer that shrank), at most what the permit holds.
    pub fn shrink(&mut self, bytes: u64) {
        let bytes = bytes.min(self.bytes);
        self.shared.give_back(bytes);
        self.bytes -= bytes;
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.shared.give_back(self.bytes);
    }
}

impl fmt::Debug for Permit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Permit")
            .field("bytes", &self.bytes)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounted_bytes_count_past_the_cap_and_crowd_out_refusable_ones() {
        let gate = MemoryGate::new(Some(100));
        let decoding = gate.account(150);
        assert_eq!(gate.in_use(), 150);
        assert!(gate.try_acquire(1).is_none());
        drop(decoding);
        assert_eq!(gate.in_use(), 0);
        assert!(gate.try_acquire(100).is_some());
    }

    #[test]
    fn acquires_up_to_the_cap_and_releases_on_drop() {
        let gate = MemoryGate::new(Some(100));
        let a = gate.try_acquire(60).expect("60 of 100 fits");
        assert_eq!(a.bytes(), 60);
        assert!(gate.try_acquire(41).is_none());
        let b = gate.try_acquire(40).expect("exactly the cap fits");
        assert_eq!(gate.in_use(), 100);
        assert!(gate.try_acquire(1).is_none());
        drop(a);
        assert_eq!(gate.in_use(), 40);
        assert!(gate.try_acquire(60).is_some());
        drop(b);
        assert_eq!(gate.in_use(), 0);
    }

    #[test]
    fn unlimited_never_refuses_but_counts() {
        let gate = MemoryGate::new(None);
        assert_eq!(gate.max(), None);
        let a = gate.try_acquire(u64::MAX / 2).expect("unlimited");
        let b = gate.try_acquire(1000).expect("unlimited");
        assert_eq!(gate.in_use(), u64::MAX / 2 + 1000);
        drop((a, b));
        assert_eq!(gate.in_use(), 0);
    }

    #[test]
    fn overflow_is_a_refusal() {
        let gate = MemoryGate::new(None);
        let _a = gate.try_acquire(u64::MAX - 10).expect("fits");
        assert!(gate.try_acquire(11).is_none());
        assert!(gate.try_acquire(10).is_some());
    }

    #[test]
    fn grow_and_shrink() {
        let gate = MemoryGate::new(Some(100));
        let mut permit = gate.try_acquire(50).expect("fits");
        assert!(permit.try_grow(50));
        assert!(!permit.try_grow(1));
        assert_eq!(permit.bytes(), 100);
        permit.shrink(30);
        assert_eq!((permit.bytes(), gate.in_use()), (70, 70));
        permit.shrink(1000);
        assert_eq!((permit.bytes(), gate.in_use()), (0, 0));
        assert!(permit.try_grow(100));
        // Past the cap when it must, and refusing the next grow until back under.
        permit.grow_anyway(20);
        assert_eq!((permit.bytes(), gate.in_use()), (120, 120));
        assert!(gate.try_acquire(1).is_none());
        drop(permit);
        assert_eq!(gate.in_use(), 0);
    }

    #[test]
    fn zero_cap_allows_only_empty_permits() {
        let gate = MemoryGate::new(Some(0));
        assert_eq!(gate.max(), Some(0));
        assert!(gate.try_acquire(0).is_some());
        assert!(gate.try_acquire(1).is_none());
    }

    #[test]
    fn clones_share_the_total_across_threads() {
        let gate = MemoryGate::new(Some(1000));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let gate = gate.clone();
                std::thread::spawn(move || {
                    let mut granted = 0;
                    for _ in 0..10_000 {
                        if let Some(permit) = gate.try_acquire(7) {
                            assert!(gate.in_use() <= 1000);
                            granted += permit.bytes();
                        }
                    }
                    granted
                })
            })
            .collect();
        for thread in threads {
            assert!(thread.join().expect("no panic") > 0);
        }
        assert_eq!(gate.in_use(), 0);
    }

    #[test]
    fn debug_shows_the_numbers() {
        let gate = MemoryGate::new(Some(10));
        let permit = gate.try_acquire(3).expect("fits");
        assert_eq!(
            format!("{gate:?}"),
            "MemoryGate { max: Some(10), in_use: 3 }"
        );
        assert_eq!(format!("{permit:?}"), "Permit { bytes: 3 }");
    }
}
