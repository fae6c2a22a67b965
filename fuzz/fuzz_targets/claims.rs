//! libFuzzer entry for `benchlab_fuzz::claims` (see fuzz/src/lib.rs).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| benchlab_fuzz::claims(data));
