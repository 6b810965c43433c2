#![no_main]
//! `porter::fuzzing::chunked` (see src/fuzzing.rs).

libfuzzer_sys::fuzz_target!(|data: &[u8]| porter::fuzzing::chunked(data));
