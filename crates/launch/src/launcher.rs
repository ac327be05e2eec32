//! The launcher: one way to start or resume a session, for every front end.
//!
//! A front end says what it was asked ([`Flags`], a workspace, a session
//! id). [`Launcher::plan`] and [`Launcher::plan_resume`] resolve that over
//! the config file and the session's record once ([`Plan`]); between plan
//! and start a front end may check what the session would get (the HTTP
//! API's ceiling) or record it without running it (`pod submit`).
//! [`Plan::prepare`] builds the model, starts the MCP servers, writes the
//! [`PodConfig`] once and records the launch once ([`Prepared`]);
//! [`Prepared::start`] starts the Pod ([`Session`]).

use crate::error::LaunchError;
use crate::flags::Flags;
use crate::model::Model;
use crate::record::Launch;
use crate::settings::Resolved;
use crate::{hooks, mcp, sessions, subagents};
use pod::{Approver, Durability, Pod, PodConfig, PodError, PodHandle, PodHome, Store};
use pod_mcp::{McpServers, RecordedServer};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use uuid::Uuid;

/// Where sessions live: pod's home (every session's scratch directory, and
/// the file store's logs) and the store of session logs.
#[derive(Clone)]
pub struct Place {
    /// `POD_HOME` or its default.
    pub home: PodHome,
    /// The store the logs are in.
    pub store: Store,
}

/// Starts and resumes sessions in one [`Place`].
#[derive(Clone)]
pub struct Launcher {
    place: Place,
    // The notifications of every session it starts, still being delivered.
    outbox: pod_notify::Outbox,
    // The notifier of resources' changes, made at the first one.
    resources: Arc<OnceLock<Option<pod_notify::Notifier>>>,
}

/// A session resolved, not yet started.
pub struct Plan {
    place: Place,
    outbox: pod_notify::Outbox,
    /// What it will run with.
    pub settings: Resolved,
    /// Its workspace.
    pub workspace: PathBuf,
    mcp_config: Vec<PathBuf>,
    /// MCP servers the front end adds to this session and records with it
    /// (a Managed Agents API agent's), over the configured ones by name.
    added_servers: Vec<pod_mcp::ServerConfig>,
    hooks: Vec<crate::record::RecordedHooks>,
    checkpoints: bool,
    worktree: Option<crate::record::RecordedWorktree>,
    /// What its system prompt is made of (read now, or recorded).
    pub prompt: crate::prompt::RecordedPrompt,
    /// Lines for the user about the prompt: instruction files left out,
    /// fields ignored.
    prompt_warnings: Vec<String>,
    resume: Option<Resuming>,
    replay: Option<Replaying>,
}

/// What a replay decides instead of the settings: its model (the
/// recording's answers) and its MCP servers (the recorded ones it starts).
pub(crate) struct Replaying {
    /// The recording's answers, as the model.
    pub script: pod_llm::Script,
    /// The MCP servers to start.
    pub servers: Vec<pod_mcp::ServerConfig>,
    /// The grader's recorded verdicts, in order: a replay calls no model.
    pub verdicts: Vec<String>,
}

/// What a resume carries over from the log.
struct Resuming {
    id: Uuid,
    assistant_items: usize,
    servers: Vec<RecordedServer>,
    title: Option<String>,
}

/// How the Pod runs beyond its settings: what only the front end knows.
#[derive(Default)]
pub struct Options {
    /// When the log is fsynced.
    pub durability: Durability,
    /// Who answers `ask` (none: `ask` tools are refused, saying how to
    /// allow them).
    pub approver: Option<Arc<dyn Approver>>,
    /// Paths besides pod's home and config directory that the session's
    /// commands and tools may not reach (a server's token file).
    pub private_paths: Vec<PathBuf>,
    /// How long a resume waits for a session another Pod of this process
    /// is still closing (it holds the log a moment after its shutdown).
    pub busy_wait: Duration,
    /// The new session's id, when the front end derives it (a webhook
    /// delivery's); a fresh one when `None`.
    pub session_id: Option<Uuid>,
    /// MCP servers the front end brings (an editor's `mcpServers`),
    /// started with the configured ones and not recorded with the session
    /// (the front end brings them again when it reopens it). One whose name
    /// a configured server has is left out, with a warning.
    pub servers: Vec<pod_mcp::ServerConfig>,
    /// A worker wakes the session when it parks on a follow-up (a fleet
    /// worker runs it); else `schedule_followup` calls are refused.
    pub wakes_followups: bool,
    /// What started a new session when no person did (a webhook
    /// trigger), for its header.
    pub origin: Option<pod::log::Origin>,
}

/// A session ready to start: its config, written once, and its MCP servers
/// (started; their tools are in the config's registry).
pub struct Prepared {
    /// The Pod's config. A front end may still wire itself in (an event
    /// capacity, its approver) before [`Prepared::start`].
    pub config: PodConfig,
    /// The MCP servers; shut them down when the session ends.
    pub mcp: McpServers,
    /// Lines for the user: servers that did not start.
    pub warnings: Vec<String>,
    /// Until-done mode.
    pub until_done: bool,
    resume: Option<Uuid>,
    new_id: Option<Uuid>,
    busy_wait: Duration,
    outbox: pod_notify::Outbox,
    prices: Option<pod_llm::Prices>,
    key: Option<String>,
    profile: Option<String>,
}

/// A started session.
pub struct Session {
    /// The Pod.
    pub handle: PodHandle,
    /// Its MCP servers; shut them down when the session ends.
    pub mcp: McpServers,
    /// Lines for the user (servers that did not start).
    pub warnings: Vec<String>,
    /// Until-done mode.
    pub until_done: bool,
    /// The model's name.
    pub model: String,
    /// Its notifications still being delivered (shared with every session
    /// of the launcher): wait for them before the process exits.
    pub notifications: pod_notify::Outbox,
    /// The profile's prices, when it has them (what front ends show cost
    /// with).
    pub prices: Option<pod_llm::Prices>,
    /// Where the model's key comes from (`OPENAI_API_KEY`, or the
    /// variable a profile names), for a person whose key was refused.
    pub key: Option<String>,
    /// The profile the session runs on, if any.
    pub profile: Option<String>,
}

/// What a session's usage is counted under: its model and profile (a
/// metric's labels) and the prices its cost is figured at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Meter {
    /// The model's name.
    pub model: String,
    /// The profile's name, `default` without one.
    pub profile: String,
    /// The profile's prices, when it has them.
    pub prices: Option<pod_llm::Prices>,
}

impl Session {
    /// What this session's usage is counted under.
    pub fn meter(&self) -> Meter {
        Meter {
            model: self.model.clone(),
            profile: self.profile.clone().unwrap_or_else(|| "default".into()),
            prices: self.prices,
        }
    }
}

impl Launcher {
    /// A launcher for sessions in `place`.
    pub fn new(place: Place) -> Self {
        Self {
            place,
            outbox: pod_notify::Outbox::default(),
            resources: Arc::default(),
        }
    }

    /// Where its sessions live.
    pub fn place(&self) -> &Place {
        &self.place
    }

    /// The notifications of its sessions still being delivered: a front
    /// end about to exit waits for them a bounded time
    /// ([`pod_notify::Outbox::flush`]).
    pub fn outbox(&self) -> &pod_notify::Outbox {
        &self.outbox
    }

    /// The notifier of the config file's `[notify]` table (no profile's:
    /// a fleet's own events, such as a schedule's fires, belong to no
    /// session's profile), delivering through this launcher's outbox;
    /// `None` when it sends nothing.
    pub fn fleet_notifier(&self) -> Result<Option<pod_notify::Notifier>, LaunchError> {
        let file = crate::model::config_file(&crate::ModelFlags::default())?;
        let config = crate::notify::resolve(&file, None)?;
        crate::notify::notifier(&config, &self.outbox)
    }

    /// Tells the config file's `[notify]` that session `id` was created
    /// as a resource before it runs (the Managed Agents API's
    /// `session.created`); sent where `events` lists `created` or the
    /// format is `managed-agents`.
    pub fn notify_created(&self, id: Uuid, workspace: &std::path::Path, title: Option<String>) {
        if let Some(notifier) = self.resource_notifier() {
            let mut event =
                pod_notify::Event::new(pod_notify::Kind::Created, id, workspace.to_path_buf());
            event.title = title;
            notifier.send(event);
        }
    }

    /// Tells the config file's `[notify]` of `change` (`agent.created`,
    /// `session.archived`, …) to the Managed Agents API resource `id`; sent
    /// where `events` lists `resource` or the format is `managed-agents`.
    /// One notifier serves every change and [`Launcher::notify_created`],
    /// made at the first from the config file as it was then, so a receiver
    /// gets them in the order they were made. Call it within a tokio
    /// runtime.
    pub fn notify_resource(&self, change: &str, id: &str) {
        if let Some(notifier) = self.resource_notifier() {
            notifier.send_resource(pod_notify::ResourceEvent::new(change, id));
        }
    }

    /// The notifier of resources' creations and changes: one for the
    /// launcher's life, so they go out in the order they were made.
    fn resource_notifier(&self) -> Option<&pod_notify::Notifier> {
        self.resources
            .get_or_init(|| {
                self.fleet_notifier().unwrap_or_else(|err| {
                    tracing::warn!(error = %pod_llm::error_chain(&err), "resources' creations and changes are not notified");
                    None
                })
            })
            .as_ref()
    }

    /// A new session in `workspace` (an existing directory), as `flags` ask.
    pub fn plan(&self, flags: &Flags, workspace: PathBuf) -> Result<Plan, LaunchError> {
        let file = crate::model::config_file(&flags.model)?;
        let (prompt, mut prompt_warnings) = crate::prompt::collect(flags, &file, None, &workspace)?;
        let flags = &agent_model(flags, &prompt, &file, &mut prompt_warnings);
        let settings = Resolved::resolve_in(file, flags, None)?;
        let hooks = hooks::collect(
            flags,
            &settings.file,
            &settings.choice.raw,
            None,
            &workspace,
        )?;
        let checkpoints = checkpoints(flags, &settings.file);
        Ok(Plan {
            place: self.place.clone(),
            outbox: self.outbox.clone(),
            settings,
            workspace,
            mcp_config: flags.mcp_config.clone(),
            added_servers: Vec::new(),
            hooks,
            checkpoints,
            worktree: None,
            prompt,
            prompt_warnings,
            resume: None,
            replay: None,
        })
    }

    /// Session `id` again, as it was started, with `flags` laid over its
    /// record, in `workspace` or the one it recorded.
    pub async fn plan_resume(
        &self,
        id: Uuid,
        flags: &Flags,
        workspace: Option<PathBuf>,
    ) -> Result<Plan, LaunchError> {
        let loaded = sessions::load(self.place.store.as_ref(), id).await?;
        self.plan_resume_of(&loaded, flags, workspace)
    }

    /// [`Launcher::plan_resume`] of a session already loaded (the fleet
    /// checks what it loaded before it plans, and reads the log once).
    pub fn plan_resume_of(
        &self,
        loaded: &sessions::Loaded,
        flags: &Flags,
        workspace: Option<PathBuf>,
    ) -> Result<Plan, LaunchError> {
        let id = loaded.summary.id;
        let workspace = workspace.unwrap_or_else(|| loaded.header.workspace.clone());
        if !workspace.is_dir() {
            return Err(LaunchError::settings(
                format!("the session's workspace {} is gone", workspace.display()),
                format!("pass another with `pod resume {id} --workspace DIR`, or `pod rm {id}`"),
            ));
        }
        let recorded = loaded.launch.as_ref();
        let mut settings = Resolved::resolve(flags, recorded)?;
        if let Some(limits) = pod::SessionBudget::recorded(&loaded.records) {
            settings = settings.with_recorded_limits(limits, flags)?;
        }
        let (prompt, prompt_warnings) = crate::prompt::collect(
            flags,
            &settings.file,
            recorded.map(|launch| launch.prompt.clone().unwrap_or_default()),
            &workspace,
        )?;
        let hooks = hooks::collect(
            flags,
            &settings.file,
            &settings.choice.raw,
            recorded,
            &workspace,
        )?;
        let checkpoints =
            checkpoints(flags, &settings.file) && recorded.is_none_or(|launch| launch.checkpoints);
        Ok(Plan {
            place: self.place.clone(),
            outbox: self.outbox.clone(),
            settings,
            workspace,
            mcp_config: flags.mcp_config.clone(),
            added_servers: Vec::new(),
            hooks,
            checkpoints,
            worktree: None,
            prompt,
            prompt_warnings,
            resume: Some(Resuming {
                id,
                assistant_items: loaded.assistant_items(),
                servers: recorded.map(|l| l.mcp_servers.clone()).unwrap_or_default(),
                title: loaded.summary.title.clone(),
            }),
            replay: None,
        })
    }
}

impl Launcher {
    /// Records `over` over session `id`'s limits (`pod budget`, the API's
    /// `PATCH`), `via` naming the front end; see [`pod::limits::raise`].
    /// A session from before limits were recorded starts from the config
    /// file's. A money limit needs the session's model's prices.
    pub async fn raise_limits(
        &self,
        id: Uuid,
        over: pod::SessionBudget,
        via: &str,
        wait: Duration,
    ) -> Result<pod::limits::Raised, LaunchError> {
        self.change_limits(id, pod::limits::Change::Over(over), via, wait)
            .await
    }

    /// [`Launcher::raise_limits`] with any change, such as lifting the
    /// session's own money limit (back to the config file's, if any); see
    /// [`pod::limits::change`].
    pub async fn change_limits(
        &self,
        id: Uuid,
        change: pod::limits::Change,
        via: &str,
        wait: Duration,
    ) -> Result<pod::limits::Raised, LaunchError> {
        let loaded = sessions::load(self.place.store.as_ref(), id).await?;
        let settings = Resolved::resolve(&Flags::default(), loaded.launch.as_ref());
        if matches!(change, pod::limits::Change::Over(over) if over.cost.is_some()) {
            let priced = settings
                .as_ref()
                .is_ok_and(|settings| settings.choice.raw.prices.is_some());
            if !priced {
                return Err(LaunchError::settings(
                    format!("session {id}'s model has no prices, so a money limit cannot count"),
                    "add prices to its profile (prices = { input = 3.0, output = 15.0 }, per \
                     million tokens)",
                ));
            }
        }
        let unrecorded = settings
            .map(|settings| settings.session_budget)
            .unwrap_or_default();
        pod::limits::change(&self.place.store, id, unrecorded, change, via, wait)
            .await
            .map_err(|err| LaunchError::pod(format!("cannot change session {id}'s limits"), err))
    }
}

impl Plan {
    /// A new session that replays `replaying`'s script as its model, with
    /// `settings`, `hooks` and its MCP servers as they are (a replay decides
    /// them, see `replay`).
    pub(crate) fn replaying(
        place: Place,
        settings: Resolved,
        workspace: PathBuf,
        hooks: Vec<crate::record::RecordedHooks>,
        checkpoints: bool,
        prompt: crate::prompt::RecordedPrompt,
        replaying: Replaying,
    ) -> Self {
        Self {
            place,
            outbox: pod_notify::Outbox::default(),
            settings,
            workspace,
            mcp_config: Vec::new(),
            added_servers: Vec::new(),
            hooks,
            checkpoints,
            worktree: None,
            prompt,
            prompt_warnings: Vec::new(),
            resume: None,
            replay: Some(replaying),
        }
    }

    /// The first records of a session of this plan queued for a fleet
    /// with `task` (`pod submit`, a batch): its limits, when it has any
    /// (so the worker that runs it, and every later one, holds them), and
    /// the task.
    pub fn first_records(&self, task: String, via: &str) -> Vec<pod::log::LogRecord> {
        let limits = self.settings.session_budget;
        let mut records = Vec::with_capacity(2);
        if limits.is_set() {
            records.push(pod::log::LogRecord::Limits(pod::log::LimitsRecord::now(
                limits, via,
            )));
        }
        records.push(pod::log::LogRecord::Item(pod::Item::user(task)));
        records
    }

    /// The session this plan resumes, if it resumes one.
    pub fn resuming(&self) -> Option<Uuid> {
        self.resume.as_ref().map(|r| r.id)
    }

    /// Makes the new session work in a git worktree of its workspace's
    /// repository (in pod's home, on a new branch `pod/…` from `HEAD`)
    /// and moves its workspace there.
    pub async fn use_worktree(&mut self) -> Result<crate::record::RecordedWorktree, LaunchError> {
        if self.resume.is_some() {
            return Err(LaunchError::settings(
                "a resumed session keeps its workspace",
                "--worktree is for new sessions",
            ));
        }
        let name = uuid::Uuid::new_v4().simple().to_string();
        let path = self.place.home.path().join("worktrees").join(&name);
        let branch = format!("pod/{}", &name[..8]);
        let made =
            pod::checkpoints::make_worktree(&self.place.home, &self.workspace, &path, &branch)
                .await
                .map_err(|err| {
                    LaunchError::settings(
                        format!("cannot make a worktree: {err}"),
                        "--worktree needs a workspace inside a git repository with a commit",
                    )
                })?;
        let recorded = crate::record::RecordedWorktree {
            repo: made.repo,
            path: made.path,
            branch: made.branch,
            workspace: made.workspace,
        };
        self.workspace = recorded.workspace.clone();
        self.worktree = Some(recorded.clone());
        Ok(recorded)
    }

    /// The model a queued session of this plan is recorded with, its
    /// settings checked. Without the API key (a machine that queues work
    /// for workers holding the keys) the configured model's name stands,
    /// or `unknown`.
    pub fn model_name(&self) -> Result<String, LaunchError> {
        match Model::from_choice(&self.settings.choice) {
            Ok(model) => Ok(model.provider.model_name()),
            Err(LaunchError::Config {
                source: pod_providers::ConfigError::MissingKey(_),
                ..
            }) => Ok(self
                .settings
                .choice
                .raw
                .model
                .clone()
                .unwrap_or_else(|| "unknown".into())),
            Err(err) => Err(err),
        }
    }

    /// What a new session would record, with the MCP servers its settings
    /// name (not started): what `pod submit` queues for a worker.
    pub fn record(&self) -> Result<Launch, LaunchError> {
        let mut launch = self.settings.launch();
        launch.hooks = self.hooks.clone();
        launch.checkpoints = self.checkpoints;
        launch.worktree = self.worktree.clone();
        launch.prompt = self.prompt.recorded();
        launch.mcp_servers = self
            .servers()?
            .iter()
            .map(pod_mcp::ServerConfig::recorded)
            .collect();
        Ok(launch)
    }

    /// Adds MCP servers to the session, recorded with it (so a resume
    /// starts them again, on any worker); one with a configured server's
    /// name replaces it.
    pub fn add_servers(&mut self, servers: Vec<pod_mcp::ServerConfig>) {
        self.added_servers.extend(servers);
    }

    fn servers(&self) -> Result<Vec<pod_mcp::ServerConfig>, LaunchError> {
        if let Some(replay) = &self.replay {
            return Ok(replay.servers.clone());
        }
        let recorded = self.resume.as_ref().map_or(&[][..], |r| &r.servers[..]);
        let mut servers = mcp::configs(
            &self.settings.file,
            self.settings.choice.raw.mcp_servers.as_ref(),
            &self.mcp_config,
            recorded,
        )?;
        for added in &self.added_servers {
            servers.retain(|s| s.name != added.name);
            servers.push(added.clone());
        }
        Ok(servers)
    }

    /// Builds the model, starts the MCP servers and writes the Pod's config.
    pub async fn prepare(self, options: Options) -> Result<Prepared, LaunchError> {
        let settings = &self.settings;
        let notifier = crate::notify::notifier(&settings.notify, &self.outbox)?;
        let model = match &self.replay {
            Some(replay) => Model::from_script(replay.script.clone()),
            None => Model::from_choice(&settings.choice)?,
        };
        let subagents = subagents::with_model(settings.subagents.clone(), &settings.choice)?;
        if let Some(resume) = &self.resume {
            // A scripted model goes on with the step after the last answered.
            model.resume_at(resume.assistant_items);
        }
        let mut servers = self.servers()?;
        let mut front_end = std::collections::HashSet::new();
        let mut refused = Vec::new();
        for server in options.servers {
            if let Err(err) = pod_mcp::config::check_name(&server.name) {
                refused.push(format!("{err}; the session goes on without it"));
            } else if servers.iter().any(|s| s.name == server.name) {
                refused.push(format!(
                    "MCP server {} has the name of a configured server, which is used instead",
                    server.name
                ));
            } else {
                front_end.insert(server.name.clone());
                servers.push(server);
            }
        }
        let mut config = PodConfig::new(
            self.place.home.clone(),
            self.workspace.clone(),
            model.provider,
        );
        config.store = Some(self.place.store.clone());
        config.durability = options.durability;
        config.origin = options.origin;
        config.compact_provider = model.compactor;
        config.until_done = settings.until_done;
        config.followups = settings.followups.then_some(pod::FollowupConfig {
            wakes: options.wakes_followups,
        });
        config.budget = settings.budget.clone();
        config.session_budget = settings.session_budget;
        config.loop_guard = settings.loop_guard.clone();
        // A replay's model is the recording: it spends nothing, and must
        // not take room in the profile's windows.
        config.shared_limits = match &self.replay {
            Some(_) => None,
            None => settings.shared_limits.clone(),
        };
        // Subagents share the meters and are counted at the profile's
        // prices (a cheaper subagent model is over-counted, never under).
        let money = settings.max_run_cost.is_some() || settings.session_budget.cost.is_some();
        config.cost_budget = settings.choice.raw.prices.filter(|_| money).map(|prices| {
            pod::CostBudget::new(settings.max_run_cost, settings.session_budget.cost, prices)
        });
        config.approval = settings.approval.clone();
        config.sandbox = settings.sandbox;
        config.verify = match &self.replay {
            // The grader answers with its recorded verdicts.
            Some(replay) => crate::goal::replayed(settings.goal.as_ref(), &replay.verdicts),
            None => crate::goal::verify_config(settings.goal.as_ref(), &settings.file)?,
        };
        config.subagents = subagents;
        config.approver = options.approver;
        // Every front end's sessions notify, whoever spawns the Pod (ACP
        // spawns its own).
        if let Some(notifier) = notifier {
            let title = self.resume.as_ref().and_then(|r| r.title.clone());
            config.on_start.push(crate::notify::hook(notifier, title));
        }
        // The config directory (profiles, approval and MCP settings) is
        // pod's, like its home: out of reach of the agent's commands.
        config.private_paths.extend(
            settings
                .file
                .path
                .parent()
                .filter(|dir| !dir.as_os_str().is_empty())
                .map(std::path::Path::to_path_buf),
        );
        config.private_paths.extend(options.private_paths);
        let (started, failures) =
            mcp::attach(servers, &mut config, settings.approval_flags.yes).await;
        if self.replay.is_some() && !failures.is_empty() {
            // Its calls would fail as unknown tools: a divergence that
            // would be the replay's setup, not the runtime's behaviour.
            started.shutdown().await;
            return Err(LaunchError::settings(
                failures.join("; "),
                "give it as it runs here (another command, its env values) under its \
                 recorded name with --mcp-config FILE",
            ));
        }
        let mut warnings: Vec<String> = self.prompt_warnings.clone();
        warnings.extend(refused);
        warnings.extend(
            failures
                .into_iter()
                .map(|failure| format!("{failure}; the session goes on without its tools")),
        );
        let mut launch = settings.launch();
        if launch.provider.kind == Some(pod_providers::ProviderKind::Scripted) {
            // A scripted model's context window is its script file's, which
            // a replay of the session may no longer have.
            launch.provider.context_window = launch
                .provider
                .context_window
                .or(config.provider.context_window());
        }
        launch.mcp_servers = mcp::recorded(&started);
        launch.mcp_servers.retain(|s| !front_end.contains(&s.name));
        launch.hooks = self.hooks.clone();
        launch.checkpoints = self.checkpoints;
        launch.worktree = self.worktree.clone();
        launch.prompt = self.prompt.recorded();
        self.prompt.apply(&mut config);
        // A replay's children answer from the recording: no model of theirs.
        if self.replay.is_none() {
            crate::prompt::agent_models(&self.prompt, &settings.file, &mut config, &mut warnings);
        }
        config.launch = launch.to_json();
        config.hooks = hooks::load(&self.hooks)?.map(Arc::new);
        config.checkpoints = self.checkpoints;
        Ok(Prepared {
            config,
            mcp: started,
            warnings,
            until_done: settings.until_done,
            resume: self.resume.map(|r| r.id),
            new_id: options.session_id,
            busy_wait: options.busy_wait,
            outbox: self.outbox.clone(),
            prices: settings.choice.raw.prices,
            key: settings
                .choice
                .raw
                .key_variable()
                .map(|var| match &settings.choice.profile {
                    Some(profile) => format!("{var} (profile `{profile}`)"),
                    None => var,
                }),
            profile: settings.choice.profile.clone(),
        })
    }
}

/// `flags` with the profile an agent's `model` names, when the flags
/// choose no model themselves and the config file has that profile; else
/// the model is left as the flags and file choose it, with a warning.
fn agent_model(
    flags: &Flags,
    prompt: &crate::prompt::RecordedPrompt,
    file: &pod_providers::ConfigFile,
    warnings: &mut Vec<String>,
) -> Flags {
    let mut flags = flags.clone();
    let Some((agent, model)) = prompt
        .agent
        .as_ref()
        .and_then(|agent| Some((agent, agent.model.as_ref()?)))
    else {
        return flags;
    };
    let chosen = &flags.model;
    if chosen.profile.is_some() || chosen.provider.is_some() || chosen.script.is_some() {
        return flags;
    }
    if file.profiles.contains_key(model) {
        flags.model.profile = Some(model.clone());
    } else {
        warnings.push(format!(
            "agent `{}` asks for model `{model}`, which names no profile of the config file; \
             the session uses the default model",
            agent.name
        ));
    }
    flags
}

/// Whether sessions snapshot their workspace: yes, unless the flag or the
/// config file says no.
fn checkpoints(flags: &Flags, file: &pod_providers::ConfigFile) -> bool {
    !flags.no_checkpoints && file.checkpoints.unwrap_or(true)
}

/// Between tries to resume a session that is still being closed.
const BUSY_POLL: Duration = Duration::from_millis(50);

impl Prepared {
    /// Starts the Pod: a new session, or the planned one resumed from its
    /// log. On failure the MCP servers are shut down.
    pub async fn start(self) -> Result<Session, LaunchError> {
        let model = self.config.provider.model_name();
        let started = match self.resume {
            None => match self.new_id {
                Some(id) => Pod::spawn_as(self.config, id).await,
                None => Pod::spawn(self.config).await,
            }
            .map_err(|err| LaunchError::pod("cannot start the session", err)),
            Some(id) => resume(id, self.config, self.busy_wait)
                .await
                .map_err(|err| LaunchError::pod(format!("cannot resume session {id}"), err)),
        };
        match started {
            Ok(handle) => Ok(Session {
                handle,
                mcp: self.mcp,
                warnings: self.warnings,
                until_done: self.until_done,
                model,
                notifications: self.outbox,
                prices: self.prices,
                key: self.key,
                profile: self.profile,
            }),
            Err(err) => {
                self.mcp.shutdown().await;
                Err(err)
            }
        }
    }
}

/// Resumes `id`, waiting up to `wait` while another Pod still holds it.
async fn resume(id: Uuid, config: PodConfig, wait: Duration) -> Result<PodHandle, PodError> {
    let mut waited = Duration::ZERO;
    loop {
        match Pod::resume(id, config.clone()).await {
            Err(PodError::SessionBusy { .. } | PodError::SessionLeased { .. }) if waited < wait => {
                tokio::time::sleep(BUSY_POLL).await;
                waited += BUSY_POLL;
            }
            result => return result,
        }
    }
}
