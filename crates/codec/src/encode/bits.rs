//! LSB-first bit writer over a `u64` accumulator, flushed eight bytes at a time.

/// Appends bits to a `Vec<u8>` the way deflate packs them (least significant bit first).
///
/// The accumulator holds fewer than 8 bits after every [`BitWriter::flush`]; callers put at most
/// 56 bits between flushes (63 held at most). Space is reserved up front with [`BitWriter::reserve`], so the hot
/// path writes into an already-sized buffer.
pub(crate) struct BitWriter<'a> {
    out: &'a mut Vec<u8>,
    pos: usize,
    acc: u64,
    nbits: u32,
}

impl<'a> BitWriter<'a> {
    /// Starts writing at the end of `out`, byte-aligned.
    pub(crate) fn new(out: &'a mut Vec<u8>) -> BitWriter<'a> {
        let pos = out.len();
        BitWriter {
            out,
            pos,
            acc: 0,
            nbits: 0,
        }
    }

    /// Starts writing at the end of `out` with `nbits` (< 8) bits already pending in `acc`: the
    /// tail of a previous call that did not end on a byte boundary (see [`BitWriter::suspend`]).
    pub(crate) fn with_pending(out: &'a mut Vec<u8>, acc: u64, nbits: u32) -> BitWriter<'a> {
        debug_assert!(nbits < 8 && acc >> nbits == 0);
        let mut w = BitWriter::new(out);
        (w.acc, w.nbits) = (acc, nbits & 7);
        w
    }

    /// Makes room for `bytes` more bytes of output (plus the 8-byte flush overhang).
    pub(crate) fn reserve(&mut self, bytes: usize) {
        let need = self.pos + bytes + 16;
        if self.out.len() < need {
            self.out.resize(need, 0);
        }
    }

    /// Adds the low `n` bits of `bits` (which has no bits set above them), as
    /// [`SliceWriter::put`]. For the cold paths (block headers, stored blocks); hot loops write
    /// through [`BitWriter::with_reserved`].
    pub(crate) fn put(&mut self, bits: u64, n: u32) {
        self.with_reserved(0, |s| s.put(bits, n));
    }

    /// Moves whole bytes from the accumulator to the buffer, growing it as needed.
    pub(crate) fn flush(&mut self) {
        self.with_reserved(0, |s| s.flush());
    }

    /// Pads with zero bits to the next byte boundary.
    pub(crate) fn align(&mut self) {
        self.nbits = (self.nbits + 7) & !7;
        self.flush();
    }

    /// Copies raw bytes; the writer must be byte-aligned.
    pub(crate) fn bytes(&mut self, data: &[u8]) {
        debug_assert_eq!(self.nbits, 0);
        self.reserve(data.len());
        self.out[self.pos..self.pos + data.len()].copy_from_slice(data);
        self.pos += data.len();
    }

    /// Reserves `bytes` and runs `f` with a [`SliceWriter`] over the reserved space, then takes
    /// its state back. The hot loops write through it: its position and accumulator are locals
    /// the compiler keeps in registers, where this writer's fields, behind `&mut`, go through
    /// memory on every bit put (a measured ~10% of the token writer's time).
    pub(crate) fn with_reserved<R>(
        &mut self,
        bytes: usize,
        f: impl FnOnce(&mut SliceWriter<'_>) -> R,
    ) -> R {
        self.reserve(bytes);
        let mut s = SliceWriter {
            buf: &mut self.out[..],
            pos: self.pos,
            acc: self.acc,
            nbits: self.nbits,
            overflow: false,
        };
        let r = f(&mut s);
        let (pos, acc, nbits, overflow) = (s.pos, s.acc, s.nbits, s.overflow);
        // An internal invariant, not an input condition: callers reserve the exact priced size.
        assert!(!overflow, "bit writer: more output than was reserved");
        self.pos = pos;
        self.acc = acc;
        self.nbits = nbits;
        r
    }

    /// Ends writing without padding: whole bytes go out, the buffer is trimmed, and the 0-7
    /// bits left over are returned as `(acc, nbits)` for [`BitWriter::with_pending`].
    pub(crate) fn suspend(mut self) -> (u64, u32) {
        self.flush();
        self.out.truncate(self.pos);
        (self.acc, self.nbits)
    }

    /// Ends writing: pads to a byte boundary and trims the buffer to what was written.
    pub(crate) fn finish(mut self) {
        self.align();
        self.out.truncate(self.pos);
    }
}

/// The [`BitWriter`]'s state as locals over a fixed slice (see [`BitWriter::with_reserved`]).
pub(crate) struct SliceWriter<'b> {
    buf: &'b mut [u8],
    pos: usize,
    acc: u64,
    nbits: u32,
    overflow: bool,
}

impl SliceWriter<'_> {
    /// A copy of this writer over the same slice, for a loop to keep in registers (a
    /// `&mut SliceWriter` parameter keeps its fields in memory); hand it back with
    /// [`SliceWriter::absorb`].
    #[inline(always)]
    pub(crate) fn local(&mut self) -> SliceWriter<'_> {
        SliceWriter {
            buf: &mut *self.buf,
            pos: self.pos,
            acc: self.acc,
            nbits: self.nbits,
            overflow: self.overflow,
        }
    }

    /// Takes back the state of a [`SliceWriter::local`] copy.
    #[inline(always)]
    pub(crate) fn absorb(&mut self, (pos, acc, nbits, overflow): (usize, u64, u32, bool)) {
        (self.pos, self.acc, self.nbits, self.overflow) = (pos, acc, nbits, overflow);
    }

    /// The state [`SliceWriter::absorb`] takes.
    #[inline(always)]
    pub(crate) fn state(&self) -> (usize, u64, u32, bool) {
        (self.pos, self.acc, self.nbits, self.overflow)
    }

    /// Adds the low `n` bits of `bits`, as [`BitWriter::put`].
    #[inline(always)]
    pub(crate) fn put(&mut self, bits: u64, n: u32) {
        debug_assert!(self.nbits + n <= 63 && bits >> n == 0);
        self.acc |= bits << self.nbits;
        self.nbits += n;
    }

    /// Moves whole bytes from the accumulator to the slice, as [`BitWriter::flush`]. At most
    /// 63 bits are held, so whole bytes are at most 7 and the shift stays below 64.
    #[inline(always)]
    pub(crate) fn flush(&mut self) {
        let bytes = (self.nbits >> 3) as usize;
        // `pos` never exceeds the slice's length, so `pos + 8` cannot wrap.
        if self.buf.len() - self.pos < 8 {
            return self.overflowed();
        }
        self.buf[self.pos..][..8].copy_from_slice(&self.acc.to_le_bytes());
        self.pos += bytes;
        self.acc >>= (bytes * 8) & 63;
        self.nbits &= 7;
    }

    /// Drops what would not fit; [`BitWriter::with_reserved`] reports it.
    #[cold]
    fn overflowed(&mut self) {
        self.overflow = true;
        self.acc = 0;
        self.nbits = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_lsb_first_and_trims() {
        let mut out = vec![0xaa];
        let mut w = BitWriter::new(&mut out);
        w.reserve(4);
        w.put(0b1, 1);
        w.put(0b10, 2);
        w.flush();
        w.put(0x1ff, 9);
        w.flush();
        w.finish();
        // bits: 1, 0 1, then nine ones: 0b1111_1101 0b0000_1111
        assert_eq!(out, vec![0xaa, 0b1111_1101, 0b0000_1111]);
    }

    #[test]
    fn slice_writer_matches_bit_writer() {
        let (mut a, mut b) = (vec![7], vec![7]);
        let mut w = BitWriter::new(&mut a);
        w.reserve(64);
        for i in 0..40u64 {
            w.put(i & 0x1fff, 13);
            w.flush();
        }
        w.finish();
        let mut w = BitWriter::new(&mut b);
        w.with_reserved(64, |s| {
            for i in 0..40u64 {
                s.put(i & 0x1fff, 13);
                s.flush();
            }
        });
        w.finish();
        assert_eq!(a, b);
    }

    #[test]
    #[should_panic(expected = "more output than was reserved")]
    fn slice_writer_refuses_to_overrun() {
        let mut out = Vec::new();
        let mut w = BitWriter::new(&mut out);
        w.with_reserved(0, |s| {
            for _ in 0..100 {
                s.put(0xff, 8);
                s.flush();
            }
        });
    }

    #[test]
    fn suspended_bits_resume_where_they_stopped() {
        let (mut whole, mut split) = (Vec::new(), Vec::new());
        let mut w = BitWriter::new(&mut whole);
        w.put(0b101, 3);
        w.put(0x3ff, 10);
        w.put(0b0110, 4);
        w.finish();
        let mut w = BitWriter::new(&mut split);
        w.put(0b101, 3);
        let (acc, nbits) = w.suspend();
        assert_eq!((split.len(), nbits), (0, 3));
        let mut w = BitWriter::with_pending(&mut split, acc, nbits);
        w.put(0x3ff, 10);
        let (acc, nbits) = w.suspend();
        assert_eq!((split.len(), nbits), (1, 5));
        let mut w = BitWriter::with_pending(&mut split, acc, nbits);
        w.put(0b0110, 4);
        w.finish();
        assert_eq!(whole, split);
    }

    #[test]
    fn raw_bytes_after_alignment() {
        let mut out = Vec::new();
        let mut w = BitWriter::new(&mut out);
        w.put(0b101, 3);
        w.align();
        w.bytes(&[1, 2, 3]);
        w.finish();
        assert_eq!(out, vec![0b101, 1, 2, 3]);
    }
}
