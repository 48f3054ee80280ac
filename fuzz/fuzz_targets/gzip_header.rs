//! The gzip header parser on arbitrary bytes (`zipwire_codec::fuzzing::gzip_header`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zipwire_codec::fuzzing::gzip_header(data));
