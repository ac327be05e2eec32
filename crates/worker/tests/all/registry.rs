//! The registry's specs: built once, shared between registries with the
//! same tools, rebuilt when the tools differ.

use pod_testkit::tools::{Echo, Slow};
use pod_worker::ToolRegistry;
use std::sync::Arc;

fn echo_registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(Echo::default());
    registry.share_specs();
    registry
}

#[test]
fn registries_with_the_same_tools_share_one_spec_array() {
    let (one, two) = (echo_registry(), echo_registry());
    assert!(Arc::ptr_eq(&one.specs(), &two.specs()));
    assert_eq!(one.specs()[0].name, "echo");

    let mut more = echo_registry();
    more.register(Slow::new(false));
    // Registering unshares; sharing again finds no equal array.
    more.share_specs();
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

/// A tool whose schema lists its properties in the order it is given.
struct Ordered(&'static [&'static str]);

#[async_trait::async_trait]
impl pod_worker::Tool for Ordered {
    type Args = serde_json::Value;
    fn name(&self) -> &str {
        "ordered"
    }
    fn description(&self) -> String {
        "Takes fields.".into()
    }
    fn parameters(&self) -> Arc<serde_json::Value> {
        let mut properties = serde_json::Map::new();
        for key in self.0 {
            properties.insert((*key).into(), serde_json::json!({"type": "string"}));
        }
        Arc::new(serde_json::json!({"type": "object", "properties": properties}))
    }
    async fn call(
        &self,
        _args: serde_json::Value,
        _ctx: pod_worker::ToolContext,
    ) -> pod_worker::ToolOutput {
        pod_worker::ToolOutput::ok("")
    }
}

#[test]
fn schemas_that_differ_only_in_key_order_are_not_shared() {
    let mut ab = ToolRegistry::new();
    ab.register(Ordered(&["a", "b"]));
    ab.share_specs();
    let mut ba = ToolRegistry::new();
    ba.register(Ordered(&["b", "a"]));
    ba.share_specs();
    assert!(!Arc::ptr_eq(&ab.specs(), &ba.specs()));
    let sent = |r: &ToolRegistry| r.specs()[0].parameters["properties"].to_string();
    assert_eq!(
        sent(&ab),
        r#"{"a":{"type":"string"},"b":{"type":"string"}}"#
    );
    assert_eq!(
        sent(&ba),
        r#"{"b":{"type":"string"},"a":{"type":"string"}}"#
    );
}

#[test]
fn a_schema_is_built_once_and_handed_out_as_the_same_value() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static BUILT: AtomicUsize = AtomicUsize::new(0);
    // One call site, asked twice (as every session asks its tools).
    let get = || {
        pod_worker::schema!({
            "type": "object",
            "properties": {"x": {"type": "string"}},
            "built": BUILT.fetch_add(1, Ordering::SeqCst)
        })
    };
    let (one, two) = (get(), get());
    assert_eq!(BUILT.load(Ordering::SeqCst), 1);
    assert!(Arc::ptr_eq(&one, &two));
    assert_eq!(one["properties"]["x"]["type"], "string");
}
