//! What every connection of an endpoint shares (the user's choice, the counters, the CPU
//! budget, the pace memory, the drain and the keepalive), and what follows from the
//! handshake: what this end accepts, and the choice for what the peer accepts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use zipwire_adapt::Budget;

use crate::drain::Drain;
use crate::frame::{self, Codec, Method};
use crate::handshake::{ACCEPT_ALL, ACCEPT_DEFLATE, ACCEPT_ZSTD};
use crate::keepalive::Keepalive;
use crate::pace_memory::PaceMemory;
use crate::policy::Choice;
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
    compress_nanos: AtomicU64,
    compress_bytes: AtomicU64,
    pace: Mutex<PaceMemory>,
}

impl Shared {
    /// Shared state for an endpoint.
    pub fn new(choice: Choice, block_size: usize, budget: Option<Budget>) -> Shared {
        Shared {
            choice,
            block_size: block_size.clamp(16 * 1024, frame::MAX_BLOCK),
            stats: Arc::new(Stats::default()),
            budget: budget.map(Mutex::new),
            drain: Arc::new(Drain::default()),
            keepalive: None,
            compress_nanos: AtomicU64::new(0),
            compress_bytes: AtomicU64::new(0),
            pace: Mutex::new(PaceMemory::default()),
        }
    }

    /// What this end accepts to receive (see [`crate::handshake`]): nothing but raw frames
    /// when its own choice is raw, so that `--level raw` turns compression off both ways.
    pub fn accepts(&self) -> u8 {
        match self.choice {
            Choice::Fixed(Method::RAW) => 0,
            _ => ACCEPT_ALL,
        }
    }

    pub(crate) fn pace_memory(&self) -> std::sync::MutexGuard<'_, PaceMemory> {
        self.pace.lock().unwrap_or_else(PoisonError::into_inner)
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
