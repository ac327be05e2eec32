#![no_main]
//! `anthropic_stream`: see `pod_crashtest::fuzz` for the property checked.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    pod_crashtest::fuzz::run_target("anthropic_stream", data);
});
