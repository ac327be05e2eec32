//! Shared helpers come from the workspace test kit.

pub use pod_testkit::pod::{todo_args, todo_step, wait_for_event, ScriptedApprover, TestPod};
pub use pod_testkit::{calls_of, result_of};
