//! Stream framing: the wrappers RFC 1952 (gzip) and RFC 1950 (zlib) put around a raw RFC 1951
//! deflate stream, and the running checksum each one carries.

mod framer;
pub mod gzip;
pub mod zlib;

pub(crate) use framer::Framer;

/// Which container wraps the deflate stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// RFC 1952: 10-byte header, CRC-32 and length trailer.
    Gzip,
    /// RFC 1950: 2-byte header, Adler-32 trailer.
    Zlib,
    /// RFC 1951: bare deflate blocks, no header, no checksum.
    Raw,
}

impl Format {
    /// All formats, for tests and tables.
    pub const ALL: [Format; 3] = [Format::Gzip, Format::Zlib, Format::Raw];

    /// The checksum value a fresh stream of this format starts from.
    pub(crate) fn initial_checksum(self) -> u32 {
        match self {
            Format::Gzip | Format::Raw => 0,
            Format::Zlib => 1,
        }
    }

    /// Folds `data` into the running checksum `sum` of this format (nothing for raw).
    pub(crate) fn update_checksum(self, sum: u32, data: &[u8]) -> u32 {
        match self {
            Format::Gzip => {
                let mut hasher = crc32fast::Hasher::new_with_initial(sum);
                hasher.update(data);
                hasher.finalize()
            }
            Format::Zlib => {
                let mut adler = adler2::Adler32::from_checksum(sum);
                adler.write_slice(data);
                adler.checksum()
            }
            Format::Raw => sum,
        }
    }

    /// Name as used on the command line and in tables.
    pub fn name(self) -> &'static str {
        match self {
            Format::Gzip => "gzip",
            Format::Zlib => "zlib",
            Format::Raw => "raw",
        }
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
