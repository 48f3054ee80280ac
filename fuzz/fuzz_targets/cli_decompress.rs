//! What `gzip -d` reads, as the CLI decodes it (`zipwire_cli::fuzzing::decompress`).

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| zipwire_cli::fuzzing::decompress(data));
