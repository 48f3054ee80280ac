//! The rung ladder: the methods the automatic policy climbs, their typical speeds and
//! ratios, and the choice of rung for a link's rate.

use super::{Policy, CLIMB_GAIN, SPEED_HEADROOM};
use crate::frame::{Codec, Method};

impl Policy {
    /// Whether `rung` makes compressed bytes at least as fast as a link of `link_rate`
    /// bytes/s takes them (false when either is unknown).
    pub(super) fn keeps_up(&self, rung: usize, link_rate: f64) -> bool {
        match self.predict(rung) {
            Some((speed, ratio)) if link_rate > 0.0 => speed * SPEED_HEADROOM / ratio >= link_rate,
            _ => false,
        }
    }

    /// Predicted compressing speed (input bytes/s) and ratio of `rung`, from what the
    /// current rung measured and the typical differences between methods.
    pub(super) fn predict(&self, rung: usize) -> Option<(f64, f64)> {
        self.predict_from(self.rung, rung)
    }

    /// Moves to `rung`, or as near it as the memory ceiling allows; the current rung's
    /// measurements predict the new one's until it measures itself.
    pub(super) fn change_rung(&mut self, rung: usize) {
        let rung = rung.min(self.ceiling);
        if rung == self.rung {
            return;
        }
        tracing::debug!(
            from = %self.ladder[self.rung],
            to = %self.ladder[rung],
            link_bytes_per_s = self.link_rate as u64,
            recalled_bytes_per_s = self.recalled as u64,
            "compression level changed"
        );
        if let Some((speed, ratio)) = self.predict_from(self.rung, rung) {
            self.speed = Some(speed);
            self.ratio = ratio;
        }
        self.rung = rung;
    }

    /// [`Policy::predict`] for `to`, made while `from` was the current rung.
    pub(super) fn predict_from(&self, from: usize, to: usize) -> Option<(f64, f64)> {
        let speed = self.speed?;
        let (here, there) = (profile(self.ladder[from]), profile(self.ladder[to]));
        Some((
            speed * there.speed / here.speed,
            (self.ratio * there.ratio / here.ratio).max(1.0),
        ))
    }

    /// The rung that delivers the most payload over a link of `link_rate` bytes/s: each
    /// delivers the lesser of what it compresses and what the link carries at its ratio. It
    /// climbs at most two rungs at a time (speeds of far rungs are the least sure), and moves
    /// only for a gain of [`CLIMB_GAIN`].
    pub(super) fn best_rung(&self, link_rate: f64) -> usize {
        let delivered = |rung: usize| {
            self.predict(rung).map_or(0.0, |(speed, ratio)| {
                (speed * SPEED_HEADROOM).min(ratio * link_rate)
            })
        };
        let here = delivered(self.rung);
        let top = (self.rung + 2).min(self.ladder.len() - 1);
        let (best, most) = (0..=top).map(|rung| (rung, delivered(rung))).fold(
            (self.rung, here),
            |(b, m), (r, d)| if d > m { (r, d) } else { (b, m) },
        );
        if most > here * CLIMB_GAIN {
            best
        } else {
            self.rung
        }
    }
}

/// Typical speed and ratio of a method relative to the fastest rung of its ladder (measured
/// with zstd's and our benchmarks on text and on a tar of mixed files; only the ratios
/// between rungs matter, since the current rung's own measurements scale them).
#[derive(Clone, Copy, Debug)]
pub(super) struct Profile {
    pub(super) speed: f64,
    pub(super) ratio: f64,
}

pub(super) fn profile(method: Method) -> Profile {
    let (speed, ratio) = match (method.codec, method.level) {
        (Codec::Raw, _) => (10.0, 1.0),
        (Codec::Zstd, l) if l <= 1 => (1.0, 1.0),
        (Codec::Zstd, l) if l <= 3 => (0.65, 1.11),
        (Codec::Zstd, l) if l <= 6 => (0.19, 1.28),
        (Codec::Zstd, l) if l <= 9 => (0.15, 1.35),
        (Codec::Zstd, l) if l <= 12 => (0.068, 1.40),
        (Codec::Zstd, l) if l <= 15 => (0.014, 1.45),
        (Codec::Zstd, _) => (0.006, 1.55),
        (Codec::Deflate, l) if l <= 1 => (1.0, 1.0),
        (Codec::Deflate, l) if l <= 2 => (0.88, 1.04),
        (Codec::Deflate, _) => (0.18, 1.23),
        (Codec::DeflateWindow, l) if l <= 6 => (0.14, 1.2),
        (Codec::DeflateWindow, _) => (0.05, 1.22),
    };
    Profile { speed, ratio }
}

/// The compressing methods the automatic policy climbs, fastest first.
pub fn ladder(zstd: bool) -> Vec<Method> {
    let rungs: &[(Codec, u8)] = if zstd {
        &[
            (Codec::Zstd, 1),
            (Codec::Zstd, 3),
            (Codec::Zstd, 6),
            (Codec::Zstd, 9),
            (Codec::Zstd, 12),
            (Codec::Zstd, 15),
            (Codec::Zstd, 19),
        ]
    } else {
        &[
            (Codec::Deflate, 1),
            (Codec::Deflate, 3),
            (Codec::DeflateWindow, 6),
            (Codec::DeflateWindow, 9),
        ]
    };
    rungs
        .iter()
        .filter_map(|&(codec, level)| Method::new(codec, level))
        .collect()
}
