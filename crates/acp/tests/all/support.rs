//! An ACP server on in-memory pipes, with a scripted model and a temporary
//! POD_HOME, and the client that drives it.

use crate::client::AcpClient;
use pod::{Pod, PodConfig, PodHome};
use pod_acp::{serve, AcpError, FactoryError, PodFactory, Start, Started};
use pod_llm::{Script, ScriptedProvider};
use pod_mcp::McpServers;
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::{DuplexStream, ReadHalf, WriteHalf};
use tokio::task::JoinHandle;
use uuid::Uuid;

// Room for a whole turn's updates in the pipe, so the server never waits
// on a test that reads only after it wrote.
const PIPE_BYTES: usize = 1 << 20;

/// Pods on a scripted model in a temporary home.
pub struct ScriptedFactory {
    home: PodHome,
    script: Script,
}

impl ScriptedFactory {
    /// A Pod's config as a front end's launcher would make it, with what
    /// the server brings (a stand-in: `pod acp` starts sessions through
    /// pod-launch, tested in crates/cli/tests/all/acp.rs).
    fn config(&self, start: Start<'_>) -> PodConfig {
        let provider = ScriptedProvider::new(self.script.clone());
        let mut config = PodConfig::new(
            self.home.clone(),
            start.workspace,
            Arc::new(provider.clone()),
        );
        config.compact_provider = Some(Arc::new(provider.compactor()));
        config.approver = Some(start.approver);
        config.event_capacity = config.event_capacity.max(start.event_capacity);
        config
    }
}

#[pod::async_trait]
impl PodFactory for ScriptedFactory {
    async fn new_session(&self, start: Start<'_>) -> Result<Started, FactoryError> {
        let handle = Pod::spawn(self.config(start)).await?;
        Ok(Started {
            handle,
            mcp: McpServers::default(),
            warnings: Vec::new(),
        })
    }

    async fn resume_session(&self, id: Uuid, start: Start<'_>) -> Result<Started, FactoryError> {
        let handle = Pod::resume(id, self.config(start)).await?;
        Ok(Started {
            handle,
            mcp: McpServers::default(),
            warnings: Vec::new(),
        })
    }
}

/// A temporary POD_HOME and workspace shared by servers of one test.
pub struct TestHome {
    dir: tempfile::TempDir,
}

impl TestHome {
    /// A fresh home.
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// The POD_HOME.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// A workspace directory.
    pub fn workspace(&self) -> PathBuf {
        let dir = self.dir.path().join("workspace");
        std::fs::create_dir_all(&dir).unwrap();
        dir.canonicalize().unwrap()
    }

    /// The history of `session` as its log holds it (read after the server
    /// has shut down, so the log is complete).
    pub fn history(&self, session: &str) -> Vec<pod_llm::Item> {
        let id = session.parse().expect("a pod session id");
        let log = PodHome::new(self.home()).log_path(id);
        let records = pod::log::read_log(&log).expect("a readable log").records;
        pod::replay::replay(&records).history
    }

    /// Starts a server playing `script` (a `Script` as JSON).
    pub fn server(&self, script: Value) -> TestServer {
        let script: Script = serde_json::from_value(script).unwrap();
        let factory = ScriptedFactory {
            home: PodHome::new(self.home()),
            script,
        };
        let (client_side, server_side) = tokio::io::duplex(PIPE_BYTES);
        let (server_read, server_write) = tokio::io::split(server_side);
        let task = tokio::spawn(serve(factory, server_read, server_write));
        let (client_read, client_write) = tokio::io::split(client_side);
        TestServer {
            client: AcpClient::new(client_read, client_write),
            task,
        }
    }
}

/// A running in-process server and its client.
pub struct TestServer {
    /// The client side.
    pub client: AcpClient<ReadHalf<DuplexStream>, WriteHalf<DuplexStream>>,
    task: JoinHandle<Result<(), AcpError>>,
}

impl TestServer {
    /// Closes the server's input (EOF) and waits until it has shut down.
    pub async fn close(self) {
        let TestServer { client, task } = self;
        drop(client);
        task.await.unwrap().unwrap();
    }
}

/// A script of these steps.
pub fn script(steps: Value) -> Value {
    serde_json::json!({"steps": steps})
}
