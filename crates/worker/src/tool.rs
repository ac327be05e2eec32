//! Tools: typed arguments in each tool, raw JSON only in the registry.

use crate::tool_state::{ToolState, ToolStates};
use pod_llm::ToolSpec;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::sync::{Arc, Weak};
use tokio_util::sync::CancellationToken;

/// What a tool call returns to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Text the model reads.
    pub content: String,
    /// Whether the call failed.
    pub is_error: bool,
    /// Structured data kept in the log for replay, never shown to the model.
    pub meta: Option<serde_json::Value>,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: false,
            meta: None,
        }
    }

    /// Attaches replay data to the result.
    pub fn with_meta(mut self, meta: serde_json::Value) -> Self {
        self.meta = Some(meta);
        self
    }

    /// A failed result; say what failed and what to do instead.
    pub fn error(content: impl Into<String>) -> Self {
        Self {
            content: content.into(),
            is_error: true,
            meta: None,
        }
    }
}

/// What a running tool may know about its call.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The call id.
    pub call_id: String,
    /// Cancelled when the turn is cancelled; long-running tools should stop.
    pub cancel: CancellationToken,
}

/// A tool with typed arguments.
#[async_trait::async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The arguments, deserialized from the model's JSON.
    type Args: DeserializeOwned + Send;

    /// The name the model calls it by.
    fn name(&self) -> &str;

    /// What it does and how to use it, for the model.
    fn description(&self) -> String;

    /// JSON Schema of the arguments object (`json!({..}).into()`). A tool
    /// whose schema never changes builds it once with [`schema!`]:
    /// every session builds its tools, and building schemas was most of
    /// that.
    fn parameters(&self) -> Arc<serde_json::Value>;

    /// Whether calls may run at the same time as other concurrency-safe calls
    /// of the same response.
    fn concurrency_safe(&self) -> bool {
        false
    }

    /// The session state this tool keeps, if any. The tool reads it while
    /// it runs but never writes it: the state changes when the call's result
    /// is committed, and replaying the log rebuilds it (see [`ToolState`]).
    fn state(&self) -> Option<Arc<dyn ToolState>> {
        None
    }

    /// Whether a call that a crash left without a result is run again when
    /// the session resumes, with the same call id and arguments, instead of
    /// being closed as interrupted. Only for tools whose second run
    /// continues the first (the `task` tool resumes its subagent's session
    /// from its log) rather than repeating its effects.
    fn resumable(&self) -> bool {
        false
    }

    /// Runs the call.
    async fn call(&self, args: Self::Args, ctx: ToolContext) -> ToolOutput;
}

/// A tool with its argument type erased; only the registry uses this.
#[async_trait::async_trait]
pub trait DynTool: Send + Sync {
    /// The model-facing spec.
    fn spec(&self) -> ToolSpec;
    /// See [`Tool::concurrency_safe`].
    fn concurrency_safe(&self) -> bool;
    /// See [`Tool::state`].
    fn state(&self) -> Option<Arc<dyn ToolState>>;
    /// See [`Tool::resumable`].
    fn resumable(&self) -> bool;
    /// Parses raw JSON arguments and runs the call; bad arguments become an
    /// error result.
    async fn call_json(&self, arguments: &str, ctx: ToolContext) -> ToolOutput;
}

#[async_trait::async_trait]
impl<T: Tool> DynTool for T {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_string(),
            description: self.description(),
            parameters: self.parameters(),
        }
    }

    fn concurrency_safe(&self) -> bool {
        Tool::concurrency_safe(self)
    }

    fn state(&self) -> Option<Arc<dyn ToolState>> {
        Tool::state(self)
    }

    fn resumable(&self) -> bool {
        Tool::resumable(self)
    }

    async fn call_json(&self, arguments: &str, ctx: ToolContext) -> ToolOutput {
        // Some servers send "" for a call without arguments.
        let arguments = if arguments.trim().is_empty() {
            "{}"
        } else {
            arguments
        };
        let value: serde_json::Value = match serde_json::from_str(arguments) {
            Ok(value) => value,
            Err(err) => {
                return ToolOutput::error(format!(
                    "The arguments of this `{}` call are not valid JSON ({err}). \
                     Call it again with one JSON object that matches its schema.",
                    self.name()
                ))
            }
        };
        match serde_json::from_value::<T::Args>(value) {
            Ok(args) => self.call(args, ctx).await,
            Err(err) => ToolOutput::error(format!(
                "Invalid arguments for `{}`: {err}. Expected arguments matching this schema: {}",
                self.name(),
                self.parameters()
            )),
        }
    }
}

/// Spec arrays in use in this process, so that registries with the same
/// tools (every Pod of a process has the builtin and workspace tools) share
/// one array instead of holding a copy each: a few kilobytes of schemas and
/// descriptions per tool, which was most of an idle Pod's memory. Only live
/// arrays are kept (weakly), a handful of distinct ones at most.
static SHARED_SPECS: parking_lot::Mutex<Vec<Weak<[ToolSpec]>>> =
    parking_lot::Mutex::new(Vec::new());

/// The live array equal to `specs`, or `specs` made the shared one.
fn shared_specs(specs: Arc<[ToolSpec]>) -> Arc<[ToolSpec]> {
    // Held to compare against the few live arrays and register a new one.
    let mut shared = SHARED_SPECS.lock();
    shared.retain(|weak| weak.strong_count() > 0);
    if let Some(same) = shared
        .iter()
        .filter_map(Weak::upgrade)
        .find(|live| same_specs(live, &specs))
    {
        return same;
    }
    shared.push(Arc::downgrade(&specs));
    specs
}

/// The placeholder schema of [`empty_spec`].
static NULL_SCHEMA: std::sync::LazyLock<Arc<serde_json::Value>> =
    std::sync::LazyLock::new(|| Arc::new(serde_json::Value::Null));

/// [`schema!`]'s work: the schema in `cell` (the call site's static),
/// built by `build` the first time. Every session's registry then holds
/// one value instead of building and comparing its own (10,000–20,000
/// instructions a schema, callgrind).
pub fn shared_schema(
    cell: &'static std::sync::OnceLock<Arc<serde_json::Value>>,
    build: impl FnOnce() -> serde_json::Value,
) -> Arc<serde_json::Value> {
    Arc::clone(cell.get_or_init(|| Arc::new(build())))
}

/// The parameters of a tool whose schema never changes, in `json!`'s
/// syntax: built the first time it is asked for and shared after, from a
/// static of the call site's own.
///
/// ```
/// let one = pod_worker::schema!({"type": "object", "properties": {}});
/// assert_eq!(one["type"], "object");
/// ```
#[macro_export]
macro_rules! schema {
    ($($json:tt)+) => {{
        static SCHEMA: ::std::sync::OnceLock<
            ::std::sync::Arc<$crate::__private::serde_json::Value>,
        > = ::std::sync::OnceLock::new();
        $crate::__private::shared_schema(&SCHEMA, || $crate::__private::serde_json::json!($($json)+))
    }};
}

/// What a spec moved out of an array leaves behind (allocates nothing).
fn empty_spec() -> ToolSpec {
    ToolSpec {
        name: String::new(),
        description: String::new(),
        parameters: Arc::clone(&NULL_SCHEMA),
    }
}

/// Equal specs, schemas compared as the bytes they are sent as.
fn same_specs(a: &[ToolSpec], b: &[ToolSpec]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| {
            a.name == b.name
                && a.description == b.description
                && (Arc::ptr_eq(&a.parameters, &b.parameters)
                    || same_json(&a.parameters, &b.parameters))
        })
}

/// Whether `a` and `b` are written as the same JSON: `Value` equality
/// ignores the order of an object's keys, and a registry must send its
/// own order. Compared in place (encoding both was most of a session's
/// start).
fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|((ka, va), (kb, vb))| ka == kb && same_json(va, vb))
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(a, b)| same_json(a, b))
        }
        // A number is written as it is held (`1` and `1.0` differ, as
        // their bytes do).
        _ => a == b,
    }
}

/// Tools whose set changes while a session runs (an MCP server's, after it
/// announced `tools/list_changed`). The worker looks before each model
/// request and rebuilds its view when the generation moved.
pub trait ToolSource: Send + Sync {
    /// Changes whenever the set changed.
    fn generation(&self) -> u64;
    /// The current tools.
    fn tools(&self) -> Vec<Arc<dyn DynTool>>;
}

/// A source's tools that an allow-list keeps ([`ToolRegistry::only`]).
struct OnlySource {
    inner: Arc<dyn ToolSource>,
    keep: Arc<dyn Fn(&str) -> bool + Send + Sync>,
}

impl ToolSource for OnlySource {
    fn generation(&self) -> u64 {
        self.inner.generation()
    }

    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.inner
            .tools()
            .into_iter()
            .filter(|tool| (self.keep)(&tool.spec().name))
            .collect()
    }
}

/// The tools a worker may call, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    // Insertion order is kept so the model sees tools in a stable order.
    order: Vec<String>,
    tools: HashMap<String, Arc<dyn DynTool>>,
    // The specs in that order, built once: every request shares them, and a
    // byte-stable tools prefix is what provider prompt caches key on.
    specs: Arc<[ToolSpec]>,
    // Registered tools (the view without the sources'), and each source
    // with the generation the view was built from.
    fixed: Vec<(String, Arc<dyn DynTool>)>,
    // Whether `specs` is the process's shared array for these tools (see
    // [`ToolRegistry::share_specs`]); registering a tool unshares it.
    shared: bool,
    sources: Vec<(Arc<dyn ToolSource>, u64)>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool, replacing any tool of the same name.
    pub fn register(&mut self, tool: impl Tool) -> &mut Self {
        self.register_dyn(Arc::new(tool))
    }

    /// Adds an already erased tool.
    pub fn register_dyn(&mut self, tool: Arc<dyn DynTool>) -> &mut Self {
        let spec = tool.spec();
        match self.fixed.iter_mut().find(|(name, _)| *name == spec.name) {
            Some(slot) => slot.1 = Arc::clone(&tool),
            None => self.fixed.push((spec.name.clone(), Arc::clone(&tool))),
        }
        self.insert(spec, tool)
    }

    /// Adds a source of tools that may change (after the tools registered
    /// before and with it; a registered tool keeps its name).
    pub fn register_source(&mut self, source: Arc<dyn ToolSource>) -> &mut Self {
        let generation = source.generation();
        self.add_from(source.as_ref());
        self.sources.push((source, generation));
        self
    }

    /// Rebuilds the view when a source's tools changed; returns whether
    /// they did. Free when there are no sources.
    pub fn refresh(&mut self) -> bool {
        self.share_specs();
        let changed = self
            .sources
            .iter()
            .any(|(source, seen)| source.generation() != *seen);
        if !changed {
            return false;
        }
        self.order.clear();
        self.tools.clear();
        self.specs = Arc::from(Vec::new());
        for (_, tool) in self.fixed.clone() {
            self.insert(tool.spec(), tool);
        }
        let sources: Vec<_> = self
            .sources
            .iter_mut()
            .map(|(source, seen)| {
                *seen = source.generation();
                Arc::clone(source)
            })
            .collect();
        for source in sources {
            self.add_from(source.as_ref());
        }
        self.share_specs();
        true
    }

    /// Adds a source's tools whose names are not taken.
    fn add_from(&mut self, source: &dyn ToolSource) {
        for tool in source.tools() {
            let spec = tool.spec();
            if !self.tools.contains_key(&spec.name) {
                self.insert(spec, tool);
            }
        }
    }

    fn insert(&mut self, spec: ToolSpec, tool: Arc<dyn DynTool>) -> &mut Self {
        let name = spec.name.clone();
        // While registering, the array is this registry's alone: its specs
        // move into the new one instead of being copied (a copy per tool
        // registered made building a session's tools quadratic).
        let mut specs: Vec<ToolSpec> = match Arc::get_mut(&mut self.specs) {
            Some(own) => own
                .iter_mut()
                .map(|spec| std::mem::replace(spec, empty_spec()))
                .collect(),
            None => self.specs.to_vec(),
        };
        if self.tools.insert(name.clone(), tool).is_none() {
            self.order.push(name);
            specs.push(spec);
        } else if let Some(slot) = specs.iter_mut().find(|s| s.name == name) {
            *slot = spec;
        }
        self.specs = specs.into();
        self.shared = false;
        self
    }

    /// Done registering: the spec array becomes the one every registry with
    /// the same tools in this process shares (every Pod has the builtin and
    /// workspace tools; their schemas and descriptions are a few kilobytes
    /// each). Called by whoever builds a session's tools, and before a
    /// request by the worker if nobody did.
    pub fn share_specs(&mut self) {
        if !self.shared {
            self.specs = shared_specs(Arc::clone(&self.specs));
            self.shared = true;
        }
    }

    /// A copy without the tools that keep session state
    /// ([`Tool::state`]); sources are kept.
    pub fn without_stateful(&self) -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        for (_, tool) in self.fixed.iter().filter(|(_, tool)| tool.state().is_none()) {
            registry.register_dyn(Arc::clone(tool));
        }
        for (source, _) in &self.sources {
            registry.register_source(Arc::clone(source));
        }
        registry
    }

    /// A copy with only the tools `keep` accepts by name (an agent's
    /// allow-list), its sources' tools filtered the same way.
    pub fn only(&self, keep: Arc<dyn Fn(&str) -> bool + Send + Sync>) -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        for (name, tool) in &self.fixed {
            if keep(name) {
                registry.register_dyn(Arc::clone(tool));
            }
        }
        for (source, _) in &self.sources {
            registry.register_source(Arc::new(OnlySource {
                inner: Arc::clone(source),
                keep: Arc::clone(&keep),
            }));
        }
        registry
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn DynTool>> {
        self.tools.get(name)
    }

    /// Specs of every tool, in registration order (shared, built when the
    /// tools were registered).
    pub fn specs(&self) -> Arc<[ToolSpec]> {
        Arc::clone(&self.specs)
    }

    /// Names of every tool, in registration order.
    pub fn names(&self) -> &[String] {
        &self.order
    }
}

impl ToolStates {
    /// The states the registry's tools declare.
    pub fn of(tools: &ToolRegistry) -> Self {
        let mut states = Self::new();
        for name in tools.names() {
            if let Some(state) = tools.get(name).and_then(|tool| tool.state()) {
                states.insert(name, state);
            }
        }
        states
    }
}
