//! The compressors under test, each behind the same one-shot call: one whole input in, one
//! gzip member out.
//!
//! Every engine keeps its working memory between calls (zipwire's [`Scratch`], a reset
//! `flate2::Compress`, a libdeflate `Compressor`) and its output buffer, so a call costs what a
//! server pays per response once warmed up, not an allocator's first touch.

use anyhow::{anyhow, Context};
use flate2::{Compress, Compression, FlushCompress, Status};
use libdeflater::{CompressionLvl, Compressor};
use zipwire_codec::{Encoder, Format, Level, Scratch};

/// Which implementation an [`Engine`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// zipwire's stateless encoder.
    Zipwire,
    /// zlib-rs through flate2.
    ZlibRs,
    /// libdeflate through libdeflater.
    Libdeflate,
    /// ISA-L's igzip through isal-rs, linked from the system's libisal (`--features isal`).
    #[cfg(feature = "isal")]
    Isal,
}

impl Family {
    /// The name used in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Family::Zipwire => "zipwire",
            Family::ZlibRs => "zlib-rs",
            Family::Libdeflate => "libdeflate",
            #[cfg(feature = "isal")]
            Family::Isal => "igzip",
        }
    }
}

/// One compressor at one level, with its reusable memory.
pub struct Engine {
    family: Family,
    level: u8,
    kind: Kind,
    out: Vec<u8>,
}

enum Kind {
    // Boxed: the scratch's tables are kilobytes, the other variants a pointer or two.
    Zipwire {
        level: Level,
        scratch: Box<Scratch>,
    },
    ZlibRs {
        deflate: Compress,
    },
    Libdeflate {
        compressor: Compressor,
    },
    #[cfg(feature = "isal")]
    Isal {
        level: isal::CompressionLevel,
    },
}

/// Whether ISA-L's igzip is built in (`--features isal`).
pub const ISAL: bool = cfg!(feature = "isal");

/// The engines to compare: zipwire at `zipwire_levels`, then zlib-rs and libdeflate at 1 and 6,
/// then igzip at 1 and 3 (its levels; built with `--features isal` only).
pub fn lineup(zipwire_levels: &[u8]) -> anyhow::Result<Vec<Engine>> {
    let mut levels = zipwire_levels.to_vec();
    levels.sort_unstable();
    levels.dedup();
    let mut engines = Vec::new();
    for level in levels {
        engines.push(Engine::zipwire(level)?);
    }
    for level in [1, 6] {
        engines.push(Engine::zlib_rs(level));
    }
    for level in [1, 6] {
        engines.push(Engine::libdeflate(level)?);
    }
    #[cfg(feature = "isal")]
    for level in [1, 3] {
        engines.push(Engine::isal(level)?);
    }
    Ok(engines)
}

impl Engine {
    fn zipwire(level: u8) -> anyhow::Result<Engine> {
        let level = Level::try_from(level).context("zipwire level")?;
        Ok(Engine {
            family: Family::Zipwire,
            level: level.get(),
            kind: Kind::Zipwire {
                level,
                scratch: Box::new(Scratch::new()),
            },
            out: Vec::new(),
        })
    }

    fn zlib_rs(level: u8) -> Engine {
        // 15 window bits as zlib's default; zlib-rs writes the gzip header and CRC-32 trailer.
        let deflate = Compress::new_gzip(Compression::new(u32::from(level)), 15);
        Engine {
            family: Family::ZlibRs,
            level,
            kind: Kind::ZlibRs { deflate },
            out: Vec::new(),
        }
    }

    fn libdeflate(level: u8) -> anyhow::Result<Engine> {
        let lvl = CompressionLvl::new(i32::from(level))
            .map_err(|_| anyhow!("libdeflate has no level {level}"))?;
        Ok(Engine {
            family: Family::Libdeflate,
            level,
            kind: Kind::Libdeflate {
                compressor: Compressor::new(lvl),
            },
            out: Vec::new(),
        })
    }

    #[cfg(feature = "isal")]
    fn isal(level: u8) -> anyhow::Result<Engine> {
        let isal_level = match level {
            0 => isal::CompressionLevel::Zero,
            1 => isal::CompressionLevel::One,
            3 => isal::CompressionLevel::Three,
            _ => return Err(anyhow!("igzip has no level {level}")),
        };
        Ok(Engine {
            family: Family::Isal,
            level,
            kind: Kind::Isal { level: isal_level },
            out: Vec::new(),
        })
    }

    /// The implementation.
    pub fn family(&self) -> Family {
        self.family
    }

    /// The compression level.
    pub fn level(&self) -> u8 {
        self.level
    }

    /// A short label such as `zlib-rs-6`.
    pub fn label(&self) -> String {
        format!("{}-{}", self.family.name(), self.level)
    }

    /// Compresses `input` as one gzip member; the output stays valid until the next call.
    pub fn compress(&mut self, input: &[u8]) -> anyhow::Result<&[u8]> {
        let out = &mut self.out;
        match &mut self.kind {
            Kind::Zipwire { level, scratch } => {
                out.clear();
                let mut encoder = Encoder::new(Format::Gzip, *level)?;
                encoder.finish(scratch, input, out)?;
                Ok(out)
            }
            Kind::ZlibRs { deflate } => {
                out.clear();
                deflate.reset();
                // Above zlib's compressBound, so one call normally does it all.
                out.reserve(input.len() + input.len() / 1000 + 64);
                let mut rest = input;
                loop {
                    let before = deflate.total_in();
                    let status = deflate.compress_vec(rest, out, FlushCompress::Finish)?;
                    let taken = usize::try_from(deflate.total_in() - before)
                        .expect("taken from a slice, so it fits in usize");
                    rest = &rest[taken..];
                    if status == Status::StreamEnd {
                        return Ok(out);
                    }
                    out.reserve(out.capacity().max(64));
                }
            }
            Kind::Libdeflate { compressor } => {
                let bound = compressor.gzip_compress_bound(input.len());
                // Grown once to the largest bound and never shrunk, so no call pays to zero it.
                if out.len() < bound {
                    out.resize(bound, 0);
                }
                let written = compressor.gzip_compress(input, out)?;
                Ok(&out[..written])
            }
            #[cfg(feature = "isal")]
            Kind::Isal { level } => {
                // Stored blocks plus the gzip frame bound igzip's output.
                let bound = input.len() + input.len() / 16 + 1024;
                if out.len() < bound {
                    out.resize(bound, 0);
                }
                let written = isal::compress_into(input, out, *level, isal::Codec::Gzip)
                    .map_err(|error| anyhow!("igzip: {error:?}"))?;
                Ok(&out[..written])
            }
        }
    }
}
