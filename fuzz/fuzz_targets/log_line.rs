#![no_main]
//! `log_line`: see `pod_crashtest::fuzz` for the property checked.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    pod_crashtest::fuzz::run_target("log_line", data);
});
