//! The windowed side of a zipwire stream (windowBits 15): `zipwire_codec::WindowedEncoder`
//! keeps up to 32 KB of history across calls, so a stream that flushes after every packet
//! (OpenSSH) still matches into earlier packets.

use core::ffi::c_int;

use libz_rs_sys::{
    z_stream, Z_FINISH, Z_FULL_FLUSH, Z_NO_FLUSH, Z_OK, Z_PARTIAL_FLUSH, Z_STREAM_END,
    Z_STREAM_ERROR, Z_SYNC_FLUSH,
};
use zipwire_adapt::sniff::{self, Verdict};
use zipwire_codec::BlockEnd;

use crate::engine::{rank, with_work, Engine, Status, MAX_CHUNK};

impl Engine {
    /// Compresses `data` with the windowed encoder, ending the call as `end` says (`None`:
    /// the final block).
    pub(crate) fn compress_windowed(
        &mut self,
        strm: &mut z_stream,
        data: &[u8],
        end: Option<BlockEnd>,
    ) -> Result<(), c_int> {
        // zipwire level 0 (a level changed by deflateParams mid-stream) stores every block.
        let store = !data.is_empty()
            && (self.stored || (self.adapt && sniff::inspect(data) != Verdict::Compressible));
        let Some(encoder) = self.windowed.as_mut() else {
            return Err(Z_STREAM_ERROR);
        };
        let mut out = with_work(|work| std::mem::take(&mut work.1));
        out.clear();
        let done = if store {
            // Stored, without a compression attempt: what the encoder keeps goes out up to
            // a byte boundary, the block follows as stored blocks (RFC 1951 section
            // 3.2.4), and the encoder forgets its history, which the decoder's window no
            // longer matches position for position.
            let flushed = encoder.encode(&[], BlockEnd::Sync, &mut out);
            for piece in data.chunks(65_535) {
                let len = piece.len() as u16;
                out.push(0);
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(&(!len).to_le_bytes());
                out.extend_from_slice(piece);
            }
            encoder.reset();
            match end {
                None => encoder.finish(&[], &mut out),
                Some(BlockEnd::Open) => flushed,
                Some(end) => encoder.encode(&[], end, &mut out),
            }
        } else {
            match end {
                None => encoder.finish(data, &mut out),
                Some(end) => encoder.encode(data, end, &mut out),
            }
        };
        let emitted = done
            .map_err(|_| Z_STREAM_ERROR)
            .and_then(|()| self.emit(strm, &out));
        with_work(|work| work.1 = out);
        emitted
    }

    /// The rest of `deflate()` for a windowed stream: input goes to the encoder in slices of
    /// at most 32 KB, so that no call's output is larger than a bounded pending buffer.
    pub(crate) fn deflate_windowed(
        &mut self,
        strm: &mut z_stream,
        flush: c_int,
    ) -> Result<c_int, c_int> {
        loop {
            if self.pending.len != 0 {
                self.drain(strm);
                if self.pending.len != 0 {
                    self.last_flush = -1;
                    return Ok(Z_OK);
                }
            }
            if strm.avail_in == 0 {
                break;
            }
            let n = (strm.avail_in as usize).min(MAX_CHUNK);
            // SAFETY: n <= avail_in.
            let data = unsafe { self.consume(strm, n) };
            self.flushed = 0;
            self.compress_windowed(strm, data, Some(BlockEnd::Open))?;
        }
        let end = match flush {
            Z_NO_FLUSH => return Ok(Z_OK),
            Z_FINISH => {
                self.compress_windowed(strm, &[], None)?;
                let trailer = self.trailer(strm);
                self.emit(strm, &trailer)?;
                self.status = Status::Finished;
                if self.pending.len != 0 {
                    self.last_flush = -1;
                    return Ok(Z_OK);
                }
                return Ok(Z_STREAM_END);
            }
            Z_PARTIAL_FLUSH => BlockEnd::Partial,
            Z_SYNC_FLUSH => BlockEnd::Sync,
            Z_FULL_FLUSH => BlockEnd::Full,
            _ => BlockEnd::Block,
        };
        if rank(flush) > self.flushed {
            self.compress_windowed(strm, &[], Some(end))?;
            self.flushed = rank(flush);
        }
        if self.pending.len != 0 {
            self.last_flush = -1;
        }
        Ok(Z_OK)
    }
}
