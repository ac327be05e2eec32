//! Creating sessions: what `POST /api/sessions` (and its batch, and a
//! webhook trigger) takes, checked against the server's ceiling, started
//! here or queued for the fleet.

use super::*;

/// What `POST /api/sessions/batch` takes: `{"sessions": [...]}`, each
/// what `POST /api/sessions` takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBatch {
    /// The sessions, in the order they are queued.
    pub sessions: Vec<CreateSession>,
}

/// What `POST /api/sessions` takes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateSession {
    /// The task: the session's first prompt.
    pub task: String,
    /// The workspace (an existing directory); the server's working
    /// directory when absent.
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    /// A profile of the server's config file; the server's model when
    /// absent.
    #[serde(default)]
    pub profile: Option<String>,
    /// Continue until every todo is done.
    #[serde(default)]
    pub until_done: bool,
    /// Allow every tool that would ask.
    #[serde(default)]
    pub yes: bool,
    /// Tools to allow.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Tools to deny.
    #[serde(default)]
    pub deny: Vec<String>,
    /// The sandbox mode of `bash` (`read-only`, `workspace-write`,
    /// `strict`, `off`).
    #[serde(default)]
    pub sandbox: Option<String>,
    /// Whether `bash` may use the network under the sandbox.
    #[serde(default)]
    pub network: Option<bool>,
    /// The run's budget, over the config file's (`pod run`'s budget flags).
    #[serde(default)]
    pub budget: Option<CreateBudget>,
    /// Checks that decide whether the run is done, by the names the
    /// server's config gives them (`[goal.checks]`): never commands. Over
    /// the config's `[goal] verify`.
    #[serde(default)]
    pub verify: Vec<String>,
    /// Failed verification rounds before the run stops unverified.
    #[serde(default)]
    pub max_verify: Option<u32>,
    /// A profile of the server's config whose model grades the work.
    #[serde(default)]
    pub grader: Option<String>,
    /// What the grader judges against.
    #[serde(default)]
    pub rubric: Option<String>,
    /// An agent the server knows (an agent definition in its config
    /// directory's `agents/`, or its workspaces' when its config opts in):
    /// the session starts as that agent. A client names one; it never
    /// supplies a definition.
    #[serde(default)]
    pub agent: Option<String>,
    /// The Managed Agents API's agent (its name and system prompt): the
    /// session runs as it. Never read from a request's JSON.
    #[serde(skip)]
    pub(crate) as_agent: Option<pod_launch::RecordedAgent>,
    /// That agent's MCP servers: started with the session and recorded
    /// with it. Never read from a request's JSON.
    #[serde(skip)]
    pub(crate) mcp_servers: Vec<pod_mcp::ServerConfig>,
    /// Tools that ask even when the server allows them (that agent's
    /// `always_ask` MCP toolsets). Never read from a request's JSON.
    #[serde(skip)]
    pub(crate) ask: Vec<String>,
}

/// The `budget` of `POST /api/sessions`: `pod run`'s budget flags.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBudget {
    /// Model requests per turn (`--max-requests`).
    #[serde(default)]
    pub max_requests: Option<u32>,
    /// Continuations with `until_done` (`--max-turns`).
    #[serde(default)]
    pub max_turns: Option<u32>,
    /// Model requests in the run (`--max-run-requests`).
    #[serde(default)]
    pub max_run_requests: Option<u64>,
    /// Tokens in the run (`--max-run-tokens`).
    #[serde(default)]
    pub max_run_tokens: Option<u64>,
    /// Money the session and its subagents may spend over its life
    /// (`--max-cost`; recorded, so it holds across resumes and workers).
    #[serde(default)]
    pub max_cost: Option<pod_llm::Cost>,
    /// Money one run and its subagents may spend (`--max-run-cost`).
    #[serde(default)]
    pub max_run_cost: Option<pod_llm::Cost>,
    /// Seconds from the session's creation after which it sends no request
    /// (`--max-wall`; recorded).
    #[serde(default)]
    pub max_wall_secs: Option<u64>,
}

impl CreateBudget {
    /// The flags it stands for; zero is refused where the flag refuses it.
    pub(super) fn flags(&self) -> Result<BudgetFlags, ApiError> {
        let positive = |name: &str, zero: bool| match zero {
            true => Err(ApiError::bad_request(format!(
                "budget.{name} must be at least 1"
            ))),
            false => Ok(()),
        };
        positive("max_requests", self.max_requests == Some(0))?;
        positive("max_run_requests", self.max_run_requests == Some(0))?;
        positive("max_run_tokens", self.max_run_tokens == Some(0))?;
        positive("max_wall_secs", self.max_wall_secs == Some(0))?;
        for (name, cost) in [
            ("max_cost", self.max_cost),
            ("max_run_cost", self.max_run_cost),
        ] {
            if cost == Some(pod_llm::Cost::default()) {
                return Err(ApiError::bad_request(format!(
                    "budget.{name} must be more than 0"
                )));
            }
        }
        Ok(BudgetFlags {
            max_requests: self.max_requests,
            max_turns: self.max_turns,
            max_run_requests: self.max_run_requests,
            max_run_tokens: self.max_run_tokens,
            max_cost: self.max_cost,
            max_run_cost: self.max_run_cost,
            max_wall_secs: self.max_wall_secs,
        })
    }
}

impl Runner {
    /// Creates a session and starts its first turn.
    pub async fn create(&self, request: CreateSession) -> Result<Uuid, ApiError> {
        self.create_with(request, None, None).await
    }

    pub(super) async fn create_with(
        &self,
        request: CreateSession,
        id: Option<Uuid>,
        origin: Option<pod::log::Origin>,
    ) -> Result<Uuid, ApiError> {
        let plan = self.plan_for(&request, request.until_done)?;
        let allowed = &self.allowed;
        let _start = self.starting.lock().await;
        let id_cell: Arc<Mutex<Option<Uuid>>> = Arc::default();
        let options = pod_launch::Options {
            durability: Durability::Turn,
            approver: Some(self.approver_for_new(&id_cell)),
            private_paths: allowed.private.clone(),
            session_id: id,
            origin,
            ..Default::default()
        };
        let prepared = plan
            .prepare(options)
            .await
            .map_err(|e| ApiError::bad_request(chain(&e)))?;
        for warning in &prepared.warnings {
            tracing::warn!(%warning, "MCP server");
        }
        let session = prepared
            .start()
            .await
            .map_err(|e| ApiError::internal(chain(&e)))?;
        let id = session.handle.session_id();
        *id_cell.lock() = Some(id);
        let meter = session.meter();
        self.go_live(
            id,
            session.handle,
            Some(session.mcp),
            Some(request.task),
            meter,
        );
        Ok(id)
    }

    /// Starts the session `request` describes with the id `id` (a webhook
    /// delivery's), its header recording `origin`: queued for the fleet
    /// when the server has one, else run here as [`create`](Self::create)
    /// runs it.
    pub async fn start_as(
        &self,
        request: CreateSession,
        id: Uuid,
        origin: Option<pod::log::Origin>,
    ) -> Result<Uuid, ApiError> {
        let Some(queue) = &self.queue else {
            return self.create_with(request, Some(id), origin).await;
        };
        let mut session = self.queued(request, id)?;
        session.0.origin = origin;
        queue
            .submit(std::slice::from_ref(&session))
            .await
            .map_err(|e| ApiError::internal(chain(&e)))?;
        Ok(id)
    }

    /// Whether the server would start `request`: its settings within the
    /// ceiling (a trigger's, when the server starts).
    pub fn check(&self, request: &CreateSession) -> Result<(), ApiError> {
        self.plan_for(request, request.until_done).map(drop)
    }

    /// The header and first record of `request` queued as session `id`.
    pub(super) fn queued(
        &self,
        request: CreateSession,
        id: Uuid,
    ) -> Result<(pod::log::SessionHeader, Vec<pod::log::LogRecord>), ApiError> {
        let plan = self.plan_for(&request, true)?;
        let model = plan
            .model_name()
            .map_err(|e| ApiError::bad_request(chain(&e)))?;
        let launch = plan
            .record()
            .map_err(|e| ApiError::bad_request(chain(&e)))?;
        let mut header = pod::log::SessionHeader::new(id, model, plan.workspace.clone());
        header.launch = launch.to_json();
        // The session's limits before its task: the worker that claims it
        // holds them (a fleet's, or this server's).
        let records = plan.first_records(request.task, "http");
        Ok((header, records))
    }

    /// The fleet's schedules (`pod schedule`), or the file store's when
    /// the server was given them ([`Runner::with_schedule_files`]).
    pub async fn schedules(&self) -> Result<Vec<serde_json::Value>, ApiError> {
        if let (None, Some(files)) = (&self.queue, &self.schedule_list) {
            return files.list().map_err(ApiError::internal);
        }
        let Some(queue) = &self.queue else {
            return Err(ApiError::conflict(
                "schedules live in a fleet's PostgreSQL store: start the server with \
                 --store postgres://…",
            ));
        };
        queue
            .schedules()
            .await
            .map_err(|e| ApiError::internal(chain(&e)))
    }

    /// Queues `requests` for the fleet's workers, all or none, and returns
    /// their ids in order: every one is checked as `create` checks it (the
    /// ceiling included), then all go to the queue in one transaction. The
    /// fleet runs each until its plan is done. Needs a queue
    /// ([`Runner::with_queue`]: a PostgreSQL store).
    pub async fn create_batch(&self, requests: Vec<CreateSession>) -> Result<Vec<Uuid>, ApiError> {
        let Some(queue) = &self.queue else {
            return Err(ApiError::conflict(
                "a batch is queued for a fleet: start the server with a PostgreSQL store \
                 (--store postgres://…), or create sessions one at a time",
            ));
        };
        if requests.is_empty() {
            return Err(ApiError::bad_request("`sessions` is empty"));
        }
        let mut sessions = Vec::with_capacity(requests.len());
        for (i, request) in requests.into_iter().enumerate() {
            let at = |e: ApiError| e.prefixed(&format!("sessions[{i}]: "));
            sessions.push(self.queued(request, Uuid::new_v4()).map_err(at)?);
        }
        queue
            .submit(&sessions)
            .await
            .map_err(|e| ApiError::internal(chain(&e)))?;
        Ok(sessions.iter().map(|(h, _)| h.session_id).collect())
    }

    /// The session `request` describes, checked against the server's
    /// ceiling: its settings laid over the server's.
    pub(super) fn plan_for(
        &self,
        request: &CreateSession,
        until_done: bool,
    ) -> Result<pod_launch::Plan, ApiError> {
        if request.task.trim().is_empty() {
            return Err(ApiError::bad_request("`task` is empty"));
        }
        let workspace = match &request.workspace {
            Some(dir) => dir.clone(),
            None => std::env::current_dir()
                .map_err(|e| ApiError::internal(format!("no working directory: {e}")))?,
        };
        let workspace = workspace.canonicalize().map_err(|e| {
            ApiError::bad_request(format!("workspace {}: {e}", workspace.display()))
        })?;
        if !workspace.is_dir() {
            return Err(ApiError::bad_request(format!(
                "workspace {} is not a directory",
                workspace.display()
            )));
        }
        let allowed = &self.allowed;
        allowed
            .ceiling
            .check_workspace(&workspace)
            .map_err(ApiError::forbidden)?;
        let mut model = allowed.model.clone();
        if request.profile.is_some() {
            model = ModelFlags {
                profile: request.profile.clone(),
                ..Default::default()
            };
        }
        // The request's fields are laid over the server's; the ceiling
        // below refuses whatever that widens.
        let approval = pod::ApprovalFlags {
            yes: allowed.approval.yes || request.yes,
            allow: [allowed.approval.allow.clone(), request.allow.clone()].concat(),
            deny: [allowed.approval.deny.clone(), request.deny.clone()].concat(),
            ask: request.ask.clone(),
        };
        let sandbox = SandboxFlags {
            mode: match &request.sandbox {
                Some(mode) => Some(
                    mode.parse()
                        .map_err(|e| ApiError::bad_request(format!("sandbox: {e}")))?,
                ),
                None => allowed.sandbox.mode,
            },
            network: request.network.or(allowed.sandbox.network),
        };
        let budget = match &request.budget {
            Some(budget) => budget.flags()?,
            None => BudgetFlags::default(),
        };
        let flags = pod_launch::Flags {
            model,
            budget,
            approval,
            sandbox,
            until_done,
            // Checks by the names the server's config gives them: an API
            // client never names a command to run.
            goal: pod_launch::goal::GoalFlags {
                verify: Vec::new(),
                checks: request.verify.clone(),
                max_rounds: request.max_verify,
                grader: request.grader.clone(),
                rubric: request.rubric.clone(),
            },
            agent: request.agent.clone(),
            // An API client never names commands to run: the server's
            // config file's hooks apply. Nor instruction files: the
            // server's config and the workspace's AGENTS.md apply.
            ..Default::default()
        };
        let mut plan = self
            .launcher
            .plan(&flags, workspace)
            .map_err(|e| ApiError::bad_request(chain(&e)))?;
        if let Some(agent) = &request.as_agent {
            plan.prompt.agent = Some(agent.clone());
        }
        for server in &request.mcp_servers {
            if let pod_mcp::config::Transport::Http { url, .. } = &server.transport {
                allowed
                    .ceiling
                    .check_mcp_url(url)
                    .map_err(ApiError::forbidden)?;
            }
        }
        plan.add_servers(request.mcp_servers.clone());
        allowed
            .ceiling
            .check(&plan.settings)
            .map_err(ApiError::forbidden)?;
        Ok(plan)
    }
}
