#![no_main]
//! `responses_stream`: see `pod_crashtest::fuzz` for the property checked.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    pod_crashtest::fuzz::run_target("responses_stream", data);
});
