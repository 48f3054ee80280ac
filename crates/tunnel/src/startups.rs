//! Unauthenticated connections, capped as ssh's `MaxStartups` and `LoginGraceTime` cap them:
//! at most [`Limits::max_startups`] connections may be in the TLS handshake or the hello at
//! once, and each gets one deadline, [`Limits::login_grace`], for both.
//!
//! When the cap is reached, a new connection evicts an unauthenticated one rather than being
//! refused: the oldest of the source (an address) that holds the most places, counting the
//! newcomer. A flood of half-open connections from one host then only evicts its own, however
//! fast it comes, and a legitimate client elsewhere keeps its place for as long as its
//! handshake takes (evicting the oldest of all, 1,400 empty connections a second would keep
//! out every client 40 ms away). A flood from many hosts at once evicts the oldest of all.
//! The same eviction frees a descriptor when accepting fails for want of one.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

/// Default for [`Limits::max_startups`] (ssh's `MaxStartups` starts dropping at 10; a tunnel
/// server sees more clients at once).
pub const DEFAULT_MAX_STARTUPS: usize = 64;

/// Default for [`Limits::login_grace`].
pub const DEFAULT_LOGIN_GRACE: Duration = Duration::from_secs(10);

/// The server's limits on unauthenticated connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections in the TLS handshake or the hello at once.
    pub max_startups: usize,
    /// Time from accept to a complete hello: TLS and the hello together.
    pub login_grace: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_startups: DEFAULT_MAX_STARTUPS,
            login_grace: DEFAULT_LOGIN_GRACE,
        }
    }
}

/// The unauthenticated connections of a server, oldest first.
#[derive(Debug)]
pub(crate) struct Startups {
    max: usize,
    inner: Mutex<Queue>,
}

#[derive(Debug, Default)]
struct Queue {
    next: u64,
    waiting: VecDeque<Waiting>,
}

/// One connection in the queue.
#[derive(Debug)]
struct Waiting {
    id: u64,
    source: Source,
    evict: oneshot::Sender<()>,
}

/// Where a connection comes from, for a fair eviction: an IPv4 address, or an IPv6 address's
/// /64 (one host's share: a host may use any address of its /64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Source {
    V4(u32),
    V6(u64),
}

impl From<IpAddr> for Source {
    fn from(ip: IpAddr) -> Source {
        match ip.to_canonical() {
            IpAddr::V4(v4) => Source::V4(u32::from(v4)),
            IpAddr::V6(v6) => Source::V6((u128::from(v6) >> 64) as u64),
        }
    }
}

impl Queue {
    /// Evicts the oldest connection of the source with the most places (`newcomer`, about to
    /// take one, counted too); whether one was still waiting to hear it.
    fn evict(&mut self, newcomer: Option<Source>) -> bool {
        let mut held: HashMap<Source, usize> = HashMap::new();
        for waiting in newcomer
            .iter()
            .chain(self.waiting.iter().map(|w| &w.source))
        {
            *held.entry(*waiting).or_default() += 1;
        }
        let Some(most) = held.values().copied().max() else {
            return false;
        };
        let at = self
            .waiting
            .iter()
            .position(|w| held.get(&w.source) == Some(&most))
            .unwrap_or(0);
        self.waiting
            .remove(at)
            .is_some_and(|victim| victim.evict.send(()).is_ok())
    }
}

/// One unauthenticated connection; it leaves the queue when dropped. `evicted` resolves
/// when a newer connection pushed it out.
#[derive(Debug)]
pub(crate) struct Startup {
    id: u64,
    owner: Arc<Startups>,
    pub(crate) evicted: oneshot::Receiver<()>,
}

impl Startups {
    pub(crate) fn new(max: usize) -> Startups {
        Startups {
            max: max.max(1),
            inner: Mutex::new(Queue::default()),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Admits a connection from `source`, evicting one when the cap is reached (the module
    /// says which); returns it and whether one was evicted.
    pub(crate) fn admit(self: &Arc<Self>, source: Source) -> (Startup, bool) {
        let (tx, evicted) = oneshot::channel();
        let mut queue = self.queue();
        let mut pushed_out = false;
        while queue.waiting.len() >= self.max {
            pushed_out |= queue.evict(Some(source));
        }
        let id = queue.next;
        queue.next += 1;
        queue.waiting.push_back(Waiting {
            id,
            source,
            evict: tx,
        });
        let startup = Startup {
            id,
            owner: self.clone(),
            evicted,
        };
        (startup, pushed_out)
    }

    /// Evicts an unauthenticated connection, if any (to free its descriptor): the oldest of
    /// the source with the most.
    pub(crate) fn evict_one(&self) -> bool {
        self.queue().evict(None)
    }
}

impl Drop for Startup {
    fn drop(&mut self) {
        let mut queue = self.owner.queue();
        if let Some(at) = queue.waiting.iter().position(|w| w.id == self.id) {
            queue.waiting.remove(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(ip: &str) -> Source {
        Source::from(ip.parse::<IpAddr>().unwrap())
    }

    #[test]
    fn the_oldest_is_evicted_and_leaving_frees_a_place() {
        let startups = Arc::new(Startups::new(2));
        let here = from("192.0.2.1");
        let (mut first, out) = startups.admit(here);
        assert!(!out);
        let (second, out) = startups.admit(here);
        assert!(!out);
        let (_third, out) = startups.admit(here);
        assert!(out);
        assert!(first.evicted.try_recv().is_ok());
        drop(second);
        let (mut fourth, out) = startups.admit(here);
        assert!(!out);
        assert!(fourth.evicted.try_recv().is_err());
    }

    #[test]
    fn a_flood_from_one_host_evicts_only_its_own() {
        let startups = Arc::new(Startups::new(8));
        let (mut client, _) = startups.admit(from("198.51.100.7"));
        let mut flood = Vec::new();
        for _ in 0..1000 {
            flood.push(startups.admit(from("203.0.113.66")).0);
        }
        assert!(client.evicted.try_recv().is_err(), "the client was evicted");
        let evicted = flood
            .iter_mut()
            .map(|s| s.evicted.try_recv().is_ok())
            .filter(|&out| out)
            .count();
        assert_eq!(evicted, 1000 - 7);
        // An IPv6 host is one source across its /64, and mapped IPv4 is IPv4.
        assert_eq!(from("2001:db8::1"), from("2001:db8::ffff:1"));
        assert_ne!(from("2001:db8::1"), from("2001:db8:0:1::1"));
        assert_eq!(from("::ffff:198.51.100.7"), from("198.51.100.7"));
        // Freeing a descriptor also takes from the heaviest source.
        assert!(startups.evict_one());
        assert!(client.evicted.try_recv().is_err());
    }

    #[test]
    fn with_every_source_even_the_oldest_goes() {
        let startups = Arc::new(Startups::new(2));
        let (mut first, _) = startups.admit(from("192.0.2.1"));
        let (mut second, _) = startups.admit(from("192.0.2.2"));
        let (_third, out) = startups.admit(from("192.0.2.3"));
        assert!(out);
        assert!(first.evicted.try_recv().is_ok());
        assert!(second.evicted.try_recv().is_err());
    }
}
