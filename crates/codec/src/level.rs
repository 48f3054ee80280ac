//! Compression levels.

use crate::error::EncodeError;

/// A validated compression level, 1 (fastest) to 9 (smallest).
///
/// Levels 1-3 use the stateless encoder ([`crate::Encoder`]); levels 4-9 keep a 32 KB window
/// across calls ([`crate::StatefulEncoder`], zlib-rs underneath). Among the stateless ones,
/// level 1 is greedy over a 16 KB table of 7-byte strings (fastest), level 2 greedy over a
/// 32 KB table of 6-byte strings (3-6% smaller output, level 1 being about 13% faster), level 3 lazy over
/// hash chains (about zlib level 6's ratio, at a fifth of level 1's speed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Level(u8);

impl Level {
    /// The fastest level.
    pub const FASTEST: Level = Level(1);
    /// The fast level with the larger table: what a gateway that must keep its ratio uses.
    pub const FAST: Level = Level(2);
    /// The highest stateless level.
    pub const MAX_STATELESS: Level = Level(3);
    /// zlib's default level.
    pub const DEFAULT: Level = Level(6);
    /// The smallest output.
    pub const BEST: Level = Level(9);

    /// The level as a number.
    pub fn get(self) -> u8 {
        self.0
    }

    /// Whether this level is served by the stateless encoder.
    pub fn is_stateless(self) -> bool {
        self.0 <= Self::MAX_STATELESS.0
    }
}

impl TryFrom<u8> for Level {
    type Error = EncodeError;

    fn try_from(level: u8) -> Result<Level, EncodeError> {
        if (1..=9).contains(&level) {
            Ok(Level(level))
        } else {
            Err(EncodeError::InvalidLevel { level })
        }
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}
