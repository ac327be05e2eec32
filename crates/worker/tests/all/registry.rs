//! The registry's specs: built once, shared between registries with the
//! same tools, rebuilt when the tools differ.

use pod_testkit::tools::{Echo, Slow};
use pod_worker::ToolRegistry;
use std::sync::Arc;

fn echo_registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(Echo::default());
    registry
}

#[test]
fn registries_with_the_same_tools_share_one_spec_array() {
    let (one, two) = (echo_registry(), echo_registry());
    assert!(Arc::ptr_eq(&one.specs(), &two.specs()));
    assert_eq!(one.specs()[0].name, "echo");

    let mut more = echo_registry();
    more.register(Slow::new(false));
    assert!(!Arc::ptr_eq(&one.specs(), &more.specs()));
    assert_eq!(
        more.specs()
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["echo", "slow"]
    );
    // The first registries are unchanged by the third.
    assert_eq!(one.specs().len(), 1);
}
