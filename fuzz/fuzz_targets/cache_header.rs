#![no_main]
//! `porter::fuzzing::cache_header` (see src/fuzzing.rs).

libfuzzer_sys::fuzz_target!(|data: &[u8]| porter::fuzzing::cache_header(data));
