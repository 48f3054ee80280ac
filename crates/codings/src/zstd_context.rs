//! A zstd compression context on libzstd's own API (`zstd_safe`), with the memory it holds
//! measured: the `zstd` crate's stream wrappers do not say how much memory their context
//! holds, and both the proxy's memory gate and the tunnel's memory cap have to know. The
//! proxy's `zstd` coding and the tunnel's zstd blocks both compress through it.

use zstd::zstd_safe::zstd_sys::ZSTD_EndDirective;
use zstd::zstd_safe::{self, CCtx, CParameter, InBuffer, OutBuffer, ResetDirective};

/// The largest block of a frame (RFC 8878 §3.1.1.2.3, `Block_Maximum_Size`).
const MAX_BLOCK: usize = 128 * 1024;

/// How far one [`ZstdContext::compress`] call goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Take all the input; output may be held back for better matches.
    Continue,
    /// Take all the input and write everything out, so that the receiver can decode all of
    /// it (`ZSTD_e_flush`).
    Flush,
    /// Take all the input and end the frame (`ZSTD_e_end`; in a frame's first call, one
    /// pass with the content size in the frame header).
    Frame,
}

/// A zstd compression context.
pub struct ZstdContext(CCtx<'static>);

impl std::fmt::Debug for ZstdContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZstdContext")
            .field("memory", &self.memory())
            .finish()
    }
}

impl ZstdContext {
    /// A context at `level`, with a window of `2^window_log` bytes when given (else the
    /// level's own), without frame checksums.
    ///
    /// # Errors
    ///
    /// libzstd's word when it cannot allocate the context or refuses a parameter.
    pub fn new(level: i32, window_log: Option<u32>) -> Result<ZstdContext, &'static str> {
        let mut context = ZstdContext(CCtx::try_create().ok_or("out of memory")?);
        context.configure(level, window_log)?;
        Ok(context)
    }

    /// Starts a new frame with these parameters, keeping the context's allocations (a
    /// context reused for many bodies, one per thread).
    ///
    /// # Errors
    ///
    /// As [`ZstdContext::new`].
    pub fn configure(&mut self, level: i32, window_log: Option<u32>) -> Result<(), &'static str> {
        let context = &mut self.0;
        context
            .reset(ResetDirective::SessionAndParameters)
            .map_err(zstd_safe::get_error_name)?;
        context
            .set_parameter(CParameter::CompressionLevel(level))
            .map_err(zstd_safe::get_error_name)?;
        if let Some(window_log) = window_log {
            context
                .set_parameter(CParameter::WindowLog(window_log))
                .map_err(zstd_safe::get_error_name)?;
        }
        context
            .set_parameter(CParameter::ChecksumFlag(false))
            .map_err(zstd_safe::get_error_name)?;
        Ok(())
    }

    /// Loads `dictionary` for the frames that follow, until the next [`ZstdContext::configure`].
    /// libzstd reads it as raw content unless it starts with the dictionary magic
    /// (`0xEC30A437`), which the caller rules out.
    ///
    /// # Errors
    ///
    /// libzstd's word when it cannot allocate the dictionary's tables.
    pub fn load_dictionary(&mut self, dictionary: &[u8]) -> Result<(), &'static str> {
        self.0
            .load_dictionary(dictionary)
            .map(drop)
            .map_err(zstd_safe::get_error_name)
    }

    /// Compresses `input`, appending to `out`, until `end` is done: all input taken, and for
    /// [`End::Flush`] and [`End::Frame`] nothing left to write.
    ///
    /// # Errors
    ///
    /// libzstd's word when it fails (out of memory).
    pub fn compress(
        &mut self,
        input: &[u8],
        end: End,
        out: &mut Vec<u8>,
    ) -> Result<(), &'static str> {
        let directive = match end {
            End::Continue => ZSTD_EndDirective::ZSTD_e_continue,
            End::Flush => ZSTD_EndDirective::ZSTD_e_flush,
            End::Frame => ZSTD_EndDirective::ZSTD_e_end,
        };
        let mut input = InBuffer::around(input);
        loop {
            let left = input.src.len() - input.pos;
            out.reserve(zstd_safe::compress_bound(left.min(4 * MAX_BLOCK)) + 64);
            let position = out.len();
            let mut output = OutBuffer::around_pos(out, position);
            let remaining = self
                .0
                .compress_stream2(&mut output, &mut input, directive)
                .map_err(zstd_safe::get_error_name)?;
            let done = match end {
                End::Continue => input.pos == input.src.len(),
                End::Flush | End::Frame => remaining == 0,
            };
            if done {
                return Ok(());
            }
        }
    }

    /// Bytes the context holds now, as libzstd reports them (`ZSTD_sizeof_CCtx`): its
    /// window and match-finder tables once a first block has gone through.
    pub fn memory(&self) -> usize {
        self.0.sizeof()
    }
}
