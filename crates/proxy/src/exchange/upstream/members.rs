//! The upstream servers in turn: round-robin over those whose down mark has passed.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http::uri::{Authority, Scheme};

use crate::settings::{Upstream, UpstreamScheme};
/// The servers and their down marks, without the client. Server indices come from
/// [`Members::pick`], so indexing with them stays in range.
#[derive(Debug)]
pub(super) struct Members {
    servers: Vec<Member>,
    next: AtomicUsize,
    epoch: Instant,
    down_time: Duration,
}

#[derive(Debug)]
struct Member {
    scheme: Scheme,
    authority: Authority,
    /// Nanoseconds after `Members::epoch` until which the server is skipped; 0 when up.
    down_until: AtomicU64,
}

impl Members {
    pub(super) fn new(servers: &[Upstream], down_time: Duration, epoch: Instant) -> Members {
        Members {
            servers: servers
                .iter()
                .map(|server| Member {
                    scheme: match server.scheme {
                        UpstreamScheme::Http => Scheme::HTTP,
                        UpstreamScheme::Https => Scheme::HTTPS,
                    },
                    authority: server.authority.clone(),
                    down_until: AtomicU64::new(0),
                })
                .collect(),
            next: AtomicUsize::new(0),
            epoch,
            down_time,
        }
    }

    /// Server `index`'s scheme and authority.
    pub(super) fn address(&self, index: usize) -> (&Scheme, Authority) {
        let server = &self.servers[index];
        (&server.scheme, server.authority.clone())
    }

    /// The next server in round-robin order that is up at `now` and not in `tried`. When every
    /// server is marked down, a first attempt (`tried` empty) still goes to the one whose mark
    /// ends soonest, as nginx forgets its failures once no server is left ("no live
    /// upstreams"): with one server, a single failed connect (an origin restarting) would
    /// otherwise answer 502 for all of `down_time` after the origin is back. A retry after a
    /// connect failure (`tried` holds the server that failed) goes only to a server that is up.
    ///
    /// The turn moves past the server picked, so a server that is down leaves its share to all the
    /// others, not to the one after it (were the turn to move by one, `[A, down, B]` would give B
    /// two requests in three).
    pub(super) fn pick(&self, now: Instant, tried: &[usize]) -> Option<usize> {
        let count = self.servers.len();
        if count == 0 {
            return None;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let now = self.nanos(now);
        let down_until = |index: usize| self.servers[index].down_until.load(Ordering::Relaxed);
        let order = (0..count).map(|offset| start.wrapping_add(offset) % count);
        let up = order
            .clone()
            .position(|index| !tried.contains(&index) && down_until(index) <= now);
        if let Some(skipped) = up {
            if skipped > 0 && tried.is_empty() {
                // Unless another pick moved the turn meanwhile (then it is as good).
                let _ = self.next.compare_exchange(
                    start.wrapping_add(1),
                    start.wrapping_add(1 + skipped),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
            return Some(start.wrapping_add(skipped) % count);
        }
        if !tried.is_empty() {
            return None;
        }
        order.min_by_key(|&index| down_until(index))
    }

    /// Skips server `index` until `down_time` after `now`.
    pub(super) fn mark_down(&self, index: usize, now: Instant) {
        let until = self.nanos(now + self.down_time);
        self.servers[index]
            .down_until
            .fetch_max(until, Ordering::Relaxed);
    }

    /// `at` as nanoseconds after the epoch (at least 1, so that 0 can mean "up").
    fn nanos(&self, at: Instant) -> u64 {
        let nanos = at.saturating_duration_since(self.epoch).as_nanos();
        u64::try_from(nanos).unwrap_or(u64::MAX).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(count: usize, epoch: Instant) -> Members {
        let servers: Vec<Upstream> = (0..count)
            .map(|i| Upstream::http(Authority::try_from(format!("10.0.0.{i}:80")).expect("valid")))
            .collect();
        Members::new(&servers, Duration::from_secs(10), epoch)
    }

    #[test]
    fn servers_take_turns() {
        let now = Instant::now();
        let members = members(3, now);
        let picks: Vec<_> = (0..6).filter_map(|_| members.pick(now, &[])).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn a_down_server_is_skipped_until_its_down_time_ends() {
        let now = Instant::now();
        let members = members(2, now);
        members.mark_down(0, now);
        let picks: Vec<_> = (0..4).filter_map(|_| members.pick(now, &[])).collect();
        assert_eq!(picks, [1, 1, 1, 1]);
        let later = now + Duration::from_secs(10);
        let picks: Vec<_> = (0..2).filter_map(|_| members.pick(later, &[])).collect();
        assert_eq!(picks, [0, 1]);
    }

    #[test]
    fn a_down_server_s_share_goes_to_all_the_others() {
        let now = Instant::now();
        let members = members(4, now);
        members.mark_down(1, now);
        let mut counts = [0; 4];
        for _ in 0..60 {
            counts[members.pick(now, &[]).expect("three are up")] += 1;
        }
        assert_eq!(counts, [20, 0, 20, 20]);
    }

    #[test]
    fn a_retry_never_picks_a_server_already_tried() {
        let now = Instant::now();
        let members = members(2, now);
        let first = members.pick(now, &[]).expect("one is up");
        let second = members.pick(now, &[first]).expect("the other is up");
        assert_ne!(first, second);
        assert_eq!(members.pick(now, &[first, second]), None);
    }

    #[test]
    fn all_down_tries_the_one_back_soonest_but_never_retries() {
        let now = Instant::now();
        let members = members(2, now);
        members.mark_down(1, now);
        members.mark_down(0, now + Duration::from_secs(2));
        for _ in 0..3 {
            assert_eq!(members.pick(now + Duration::from_secs(1), &[]), Some(1));
        }
        assert_eq!(members.pick(now + Duration::from_secs(1), &[1]), None);
        let one = self::members(1, now);
        one.mark_down(0, now);
        assert_eq!(one.pick(now, &[]), Some(0), "a lone server is always tried");
        let empty = Members::new(&[], Duration::from_secs(10), now);
        assert_eq!(empty.pick(now, &[]), None);
    }
}
