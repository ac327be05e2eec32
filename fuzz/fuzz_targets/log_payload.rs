#![no_main]
//! `log_payload`: see `pod_crashtest::fuzz` for the property checked.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    pod_crashtest::fuzz::run_target("log_payload", data);
});
