#![no_main]
//! `sse`: see `pod_crashtest::fuzz` for the property checked.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    pod_crashtest::fuzz::run_target("sse", data);
});
