#![no_main]
//! `porter::fuzzing::range_header` (see src/fuzzing.rs).

libfuzzer_sys::fuzz_target!(|data: &[u8]| porter::fuzzing::range_header(data));
