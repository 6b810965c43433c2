#![no_main]
//! `porter::fuzzing::config` (see src/fuzzing.rs).

libfuzzer_sys::fuzz_target!(|data: &[u8]| porter::fuzzing::config(data));
