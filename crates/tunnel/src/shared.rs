//! What every connection of an endpoint shares (the user's choice, the counters, the CPU
//! budget, the pace memory, the drain and the keepalive), and what follows from the
//! handshake: what this end accepts, and the choice for what the peer accepts.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use zipwire_adapt::Budget;

use crate::drain::Drain;
use crate::frame::{self, Codec, Method};
use crate::handshake::{ACCEPT_ALL, ACCEPT_DEFLATE, ACCEPT_ZSTD};
use crate::keepalive::Keepalive;
use crate::memory::MemoryCap;
use crate::pace_memory::PaceMemory;
use crate::policy::{Choice, Pace};
use crate::stats::Stats;

/// What every connection of an endpoint shares.
pub struct Shared {
    /// What the user asked for.
    pub choice: Choice,
    /// Bytes per block, 16 to 256 KB.
    pub block_size: usize,
    /// The endpoint's counters.
    pub stats: Arc<Stats>,
    /// The `--max-cpu` budget, if any.
    pub budget: Option<Mutex<Budget>>,
    /// The live forwarded connections, and the signal that aborts them on shutdown.
    pub drain: Arc<Drain>,
    /// Pings in the tunnel connection, if asked for.
    pub keepalive: Option<Keepalive>,
    /// The `--max-memory` cap on compressor state ([`Shared::with_max_memory`]).
    pub memory: MemoryCap,
    compress_nanos: AtomicU64,
    compress_bytes: AtomicU64,
    /// The pace memory of each path: one per peer address on a server, whose clients each
    /// come their own way (with one for all, a client on a fast path would start from the
    /// pace of a slow one's last transfer, 5-10 times slower); a client's one path is `None`.
    paces: Mutex<HashMap<Option<IpAddr>, PaceMemory>>,
}

/// Paths whose pace a server remembers at once; past it, expired ones are forgotten, and if
/// none has expired, all (a pace is only a head start).
const MAX_PATHS: usize = 4096;

impl Shared {
    /// Shared state for an endpoint, with the default memory cap
    /// ([`crate::memory::DEFAULT_MAX_MEMORY`]).
    pub fn new(choice: Choice, block_size: usize, budget: Option<Budget>) -> Shared {
        let memory = MemoryCap::default();
        Shared {
            choice,
            block_size: block_size.clamp(16 * 1024, frame::MAX_BLOCK),
            stats: Arc::new(Stats::new(memory.clone())),
            budget: budget.map(Mutex::new),
            drain: Arc::new(Drain::default()),
            keepalive: None,
            memory,
            compress_nanos: AtomicU64::new(0),
            compress_bytes: AtomicU64::new(0),
            paces: Mutex::new(HashMap::new()),
        }
    }

    /// The same with a memory cap of `max` bytes (`None`: counted, never refused), for the
    /// counters too. Before the endpoint starts: a fresh set of counters replaces the old.
    pub fn with_max_memory(mut self, max: Option<u64>) -> Shared {
        self.memory = MemoryCap::new(max);
        self.stats = Arc::new(Stats::new(self.memory.clone()));
        self
    }

    /// What this end accepts to receive (see [`crate::handshake`]): nothing but raw frames
    /// when its own choice is raw, so that `--level raw` turns compression off both ways.
    pub fn accepts(&self) -> u8 {
        match self.choice {
            Choice::Fixed(Method::RAW) => 0,
            _ => ACCEPT_ALL,
        }
    }

    fn paces(&self) -> std::sync::MutexGuard<'_, HashMap<Option<IpAddr>, PaceMemory>> {
        self.paces.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pace the connections on `path` measured last, if recent.
    pub(crate) fn recall_pace(&self, path: Option<IpAddr>, now: Instant) -> Option<Pace> {
        self.paces()
            .get(&path)
            .and_then(|memory| memory.recall(now))
    }

    /// Records a pace a connection on `path` measured.
    pub(crate) fn remember_pace(&self, path: Option<IpAddr>, pace: Pace, now: Instant) {
        let mut paces = self.paces();
        if paces.len() >= MAX_PATHS && !paces.contains_key(&path) {
            paces.retain(|_, memory| memory.recall(now).is_some());
            if paces.len() >= MAX_PATHS {
                paces.clear();
            }
        }
        paces.entry(path).or_default().remember(pace, now);
    }

    /// Counts a compression against the CPU budget; returns whether the budget is spent.
    pub(crate) fn spend(&self, time: Duration, bytes: usize) -> bool {
        let nanos = self
            .compress_nanos
            .fetch_add(time.as_nanos() as u64, Ordering::Relaxed)
            + time.as_nanos() as u64;
        let total = self
            .compress_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed)
            + bytes as u64;
        self.throttled_after(Duration::from_nanos(nanos), total)
    }

    pub(crate) fn throttled(&self) -> bool {
        let nanos = self.compress_nanos.load(Ordering::Relaxed);
        let bytes = self.compress_bytes.load(Ordering::Relaxed);
        self.throttled_after(Duration::from_nanos(nanos), bytes)
    }

    fn throttled_after(&self, busy: Duration, bytes: u64) -> bool {
        let Some(budget) = &self.budget else {
            return false;
        };
        let mut budget = budget.lock().unwrap_or_else(PoisonError::into_inner);
        budget.observe(Instant::now(), busy, bytes).is_throttled()
    }
}

/// The choice for a peer that accepts `peer_accepts`: raw where it accepts no codec of the
/// choice.
pub(crate) fn choice_for(choice: &Choice, peer_accepts: u8) -> Choice {
    match choice {
        Choice::Fixed(m) if !accepted(m.codec, peer_accepts) => Choice::Fixed(Method::RAW),
        Choice::Auto if peer_accepts & (ACCEPT_DEFLATE | ACCEPT_ZSTD) == 0 => {
            Choice::Fixed(Method::RAW)
        }
        other => other.clone(),
    }
}

/// Whether a frame of `codec` is one this end said it `accepts` in the handshake.
pub(crate) fn accepted(codec: Codec, accepts: u8) -> bool {
    match codec {
        Codec::Raw => true,
        Codec::Deflate | Codec::DeflateWindow => accepts & ACCEPT_DEFLATE != 0,
        Codec::Zstd => accepts & ACCEPT_ZSTD != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_path_remembers_its_own_pace() {
        let shared = Shared::new(Choice::Auto, 128 * 1024, None);
        let now = Instant::now();
        let (slow, fast): (Option<IpAddr>, Option<IpAddr>) = (
            Some("192.0.2.1".parse().unwrap()),
            Some("192.0.2.2".parse().unwrap()),
        );
        shared.remember_pace(slow, Pace::Limited(1.25e6), now);
        assert_eq!(shared.recall_pace(slow, now), Some(Pace::Limited(1.25e6)));
        assert_eq!(shared.recall_pace(fast, now), None);
        assert_eq!(shared.recall_pace(None, now), None);
        // Past the cap, expired paths are forgotten first.
        let later = now + crate::pace_memory::REMEMBER_FOR + Duration::from_secs(1);
        for i in 0..MAX_PATHS as u32 {
            let path = Some(IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i)));
            shared.remember_pace(path, Pace::AtLeast(1e9), later);
        }
        assert!(shared.paces().len() <= MAX_PATHS);
        assert_eq!(shared.recall_pace(slow, later), None);
    }
}
