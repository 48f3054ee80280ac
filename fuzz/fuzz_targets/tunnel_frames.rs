//! The tunnel's frame parser and block decoders on arbitrary bytes
//! (`zipwire_tunnel::fuzzing::frames`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zipwire_tunnel::fuzzing::frames(data));
