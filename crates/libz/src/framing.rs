//! The containers around raw deflate: RFC 1950's zlib header and Adler-32 trailer, RFC
//! 1952's gzip header (with `deflateSetHeader`'s fields) and CRC-32/length trailer.

use libz_rs_sys::{z_stream, Z_HUFFMAN_ONLY};

use crate::engine::{Engine, Wrap};

/// zlib's `OS_CODE` for Unix, the gzip header's OS byte.
const OS_UNIX: u8 = 3;

impl Engine {
    pub(crate) fn wrap_len(&self) -> u64 {
        match self.wrap {
            Wrap::Raw => 0,
            Wrap::Zlib => 6,
            Wrap::Gzip => 18 + self.gz_header_extras() as u64,
        }
    }

    /// Header bytes beyond the minimal 10 that `deflateSetHeader` asks for.
    fn gz_header_extras(&self) -> usize {
        if self.gzhead.is_null() {
            return 0;
        }
        // SAFETY: the caller of deflateSetHeader keeps the header alive until the header is
        // written (zlib's contract); its strings are NUL-terminated.
        let head = unsafe { &*self.gzhead };
        let mut extra = 0;
        if !head.extra.is_null() {
            extra += 2 + head.extra_len as usize;
        }
        for s in [head.name, head.comment] {
            if !s.is_null() {
                // SAFETY: as above: a NUL-terminated string.
                extra += unsafe { libc::strlen(s.cast()) } + 1;
            }
        }
        if head.hcrc != 0 {
            extra += 2;
        }
        extra
    }

    /// The header: RFC 1950 section 2.2 or RFC 1952 section 2.3.
    pub(crate) fn header(&self) -> Vec<u8> {
        match self.wrap {
            Wrap::Raw => Vec::new(),
            Wrap::Zlib => {
                let flags = if self.strategy >= Z_HUFFMAN_ONLY || self.level < 2 {
                    0
                } else if self.level < 6 {
                    1
                } else if self.level == 6 {
                    2
                } else {
                    3
                };
                let mut h = (8 + ((self.wbits - 8) << 4)) << 8 | flags << 6;
                h += 31 - h % 31;
                vec![(h >> 8) as u8, h as u8]
            }
            Wrap::Gzip => self.gzip_header(),
        }
    }

    fn gzip_header(&self) -> Vec<u8> {
        let xfl = if self.level == 9 {
            2
        } else if self.strategy >= Z_HUFFMAN_ONLY || self.level < 2 {
            4
        } else {
            0
        };
        if self.gzhead.is_null() {
            return vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, xfl, OS_UNIX];
        }
        // SAFETY: see gz_header_extras.
        let head = unsafe { &*self.gzhead };
        let c_str = |s: *const u8| {
            // SAFETY: see gz_header_extras: NUL-terminated, alive.
            unsafe { std::ffi::CStr::from_ptr(s.cast()) }.to_bytes_with_nul()
        };
        let flags = u8::from(head.text != 0)
            | if head.hcrc != 0 { 2 } else { 0 }
            | if head.extra.is_null() { 0 } else { 4 }
            | if head.name.is_null() { 0 } else { 8 }
            | if head.comment.is_null() { 0 } else { 16 };
        let mut out = vec![0x1f, 0x8b, 8, flags];
        out.extend_from_slice(&(head.time as u32).to_le_bytes());
        out.extend_from_slice(&[xfl, head.os as u8]);
        if !head.extra.is_null() {
            let len = head.extra_len as usize & 0xffff;
            out.extend_from_slice(&(len as u16).to_le_bytes());
            // SAFETY: extra points to extra_len bytes (zlib's contract).
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(head.extra, len) });
        }
        if !head.name.is_null() {
            out.extend_from_slice(c_str(head.name));
        }
        if !head.comment.is_null() {
            out.extend_from_slice(c_str(head.comment));
        }
        if head.hcrc != 0 {
            let crc = crc32(0, &out);
            out.extend_from_slice(&(crc as u16).to_le_bytes());
        }
        out
    }

    /// The trailer: RFC 1950's Adler-32 or RFC 1952's CRC-32 and length.
    pub(crate) fn trailer(&self, strm: &z_stream) -> Vec<u8> {
        match self.wrap {
            Wrap::Raw => Vec::new(),
            Wrap::Zlib => (strm.adler as u32).to_be_bytes().to_vec(),
            Wrap::Gzip => {
                let mut t = (strm.adler as u32).to_le_bytes().to_vec();
                t.extend_from_slice(&(strm.total_in as u32).to_le_bytes());
                t
            }
        }
    }
}

pub(crate) fn crc32(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: data is a valid slice of data.len() bytes.
    unsafe { libz_rs_sys::crc32_z(crc.into(), data.as_ptr(), data.len()) as u32 }
}

pub(crate) fn adler32(adler: u32, data: &[u8]) -> u32 {
    // SAFETY: data is a valid slice of data.len() bytes.
    unsafe { libz_rs_sys::adler32_z(adler.into(), data.as_ptr(), data.len()) as u32 }
}
