#![no_main]
//! `porter::fuzzing::uri_normalize` (see src/fuzzing.rs).

libfuzzer_sys::fuzz_target!(|data: &[u8]| porter::fuzzing::uri_normalize(data));
