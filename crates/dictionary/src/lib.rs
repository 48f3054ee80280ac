//! Compression dictionaries (RFC 9842): a client that holds an earlier response as a
//! dictionary gets the next one as a delta against it, in `dcz` (zstd) or `dcb` (brotli).
//!
//! # Brief overview
//!
//! - [`fields`] reads and writes the header fields with the `sfv` crate: `Use-As-Dictionary`
//!   ([`UseAsDictionary`]), `Available-Dictionary` ([`fields::available_dictionary`]),
//!   `Dictionary-ID`, and the explicit `dcb`/`dcz` in `Accept-Encoding` ([`Accepted`]).
//! - [`gate`] is RFC 9842's cross-origin check, run before a dictionary coding is sent.
//! - [`Store`] holds dictionaries by the SHA-256 of their bytes ([`struct@Hash`]), per origin, for
//!   the [`lifetime()`] a client keeps them, within a memory and count cap.
//! - [`version`] finds the version in an asset's path and writes the `match` pattern that
//!   covers its other versions ([`pattern`] is the URLPattern subset it uses): what the
//!   proxy's `auto` mode marks responses with, so that no origin has to change.
//! - [`DictCoding`] names the two codings and their 36- and 40-byte stream headers; the
//!   encoders are `zipwire-codings`' zstd and brotli streams given a dictionary.
//!
//! The proxy puts these together: it stores the bodies of responses marked as dictionaries
//! (by the origin, or by itself in `auto` mode), and answers a request that names a stored
//! hash, lists the coding and passes the check with a delta.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod fields;
pub mod gate;
pub mod lifetime;
pub mod pattern;
pub mod store;
pub mod version;

pub use fields::{Accepted, UseAsDictionary};
pub use lifetime::lifetime;
pub use store::{Dictionary, Limits, Store, StoreCounters};

use std::fmt;

use sha2::{Digest, Sha256};

/// The SHA-256 of a dictionary's bytes, which names it in `Available-Dictionary` and in the
/// header of every `dcb` and `dcz` stream.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hash(pub [u8; 32]);

impl Hash {
    /// The hash of `bytes`.
    pub fn of(bytes: &[u8]) -> Hash {
        Hash(Sha256::digest(bytes).into())
    }

    /// The first bytes in hexadecimal, for logs.
    pub fn short(&self) -> String {
        self.0[..6].iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for Hash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.0 {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// A dictionary content coding (RFC 9842 §4, §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DictCoding {
    /// `dcz`: a zstd frame with the dictionary as raw content.
    Dcz,
    /// `dcb`: a brotli stream with the dictionary as a raw LZ77 prefix.
    Dcb,
}

impl DictCoding {
    /// Both, in the order the proxy prefers them when a client lists both: `dcz` first, as
    /// it encodes several times faster than brotli at the quality a dictionary needs (5+).
    pub const ALL: [DictCoding; 2] = [DictCoding::Dcz, DictCoding::Dcb];

    /// The name in `Content-Encoding`.
    pub fn as_str(self) -> &'static str {
        match self {
            DictCoding::Dcz => "dcz",
            DictCoding::Dcb => "dcb",
        }
    }

    /// The stream header: the magic (`dcz`: a zstd skippable frame of 32 bytes; `dcb`:
    /// `FF 44 43 42`) and the dictionary's hash.
    pub fn header(self, hash: &Hash) -> Vec<u8> {
        let magic: &[u8] = match self {
            DictCoding::Dcz => &DCZ_MAGIC,
            DictCoding::Dcb => &DCB_MAGIC,
        };
        let mut header = Vec::with_capacity(magic.len() + 32);
        header.extend_from_slice(magic);
        header.extend_from_slice(&hash.0);
        header
    }

    /// The length of [`DictCoding::header`].
    pub fn header_len(self) -> usize {
        match self {
            DictCoding::Dcz => DCZ_MAGIC.len() + 32,
            DictCoding::Dcb => DCB_MAGIC.len() + 32,
        }
    }

    /// The coding a client chooses among those it lists: `dcz` first.
    pub fn chosen(accepted: Accepted) -> Option<DictCoding> {
        DictCoding::ALL.into_iter().find(|coding| match coding {
            DictCoding::Dcz => accepted.dcz,
            DictCoding::Dcb => accepted.dcb,
        })
    }
}

impl fmt::Display for DictCoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `dcz`'s magic: a zstd skippable frame (0x184D2A5E) of 32 bytes, little-endian.
pub const DCZ_MAGIC: [u8; 8] = [0x5E, 0x2A, 0x4D, 0x18, 0x20, 0x00, 0x00, 0x00];
/// `dcb`'s magic.
pub const DCB_MAGIC: [u8; 4] = [0xFF, 0x44, 0x43, 0x42];

/// How the proxy uses dictionaries (`[dictionaries] mode`, `--dictionaries`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// None: no dictionary is stored or used, no header added.
    Off,
    /// Only what the origin marks with `Use-As-Dictionary` becomes a dictionary.
    Origin,
    /// As `origin`, and the proxy marks cacheable versioned assets itself ([`version`]).
    #[default]
    Auto,
}

impl Mode {
    /// The mode named `name` (`off`, `origin`, `auto`).
    pub fn from_name(name: &str) -> Option<Mode> {
        match name {
            "off" => Some(Mode::Off),
            "origin" => Some(Mode::Origin),
            "auto" => Some(Mode::Auto),
            _ => None,
        }
    }

    /// The mode's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Off => "off",
            Mode::Origin => "origin",
            Mode::Auto => "auto",
        }
    }
}
