//! The replay's IO: a scratch home and workspace, a Pod started with the
//! recording's settings on the recording's answers, its runs, and its log
//! read back and compared.

use super::approver::{interrupted_calls, Interrupted, ReplayApprover};
use super::compare::{compare, Comparison};
use super::normalise::{entries, Renames};
use super::runs::{self, Cursor, Start};
use super::{workspace, Located, Recorded, Recording, Report, WhatIf};
use crate::error::LaunchError;
use crate::flags::{Flags, ModelFlags};
use crate::launcher::{Options, Place, Plan};
use crate::record::Launch;
use crate::settings::Resolved;
use pod::log::LogRecord;
use pod::{FileStore, PodHandle, PodHome, Store};
use pod_llm::ItemKind;
use pod_mcp::McpServers;
use pod_providers::{ConfigFile, ProviderKind};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use uuid::Uuid;

/// Replays `recording` (whose checkpoints are in `home`'s shadow store)
/// with `what_if`'s changes, and compares the replay with it.
pub async fn replay(
    recording: &Recording,
    home: &PodHome,
    what_if: &WhatIf,
) -> Result<Report, LaunchError> {
    let scratch = tempfile::Builder::new()
        .prefix("pod-replay-")
        .tempdir()
        .map_err(|err| {
            LaunchError::settings(
                format!("cannot make a scratch directory: {err}"),
                "check that TMPDIR is writable",
            )
        })?;
    let root = &recording.root;
    let dir = scratch.path().join("workspace");
    workspace::prepare(
        root,
        &recording.children,
        home,
        what_if.workspace.as_deref(),
        &dir,
        scratch.path(),
    )
    .await?;
    let dir = dir.canonicalize().unwrap_or(dir);
    let place = Place {
        home: PodHome::new(scratch.path().join("home")),
        store: Arc::new(FileStore::new(PodHome::new(scratch.path().join("home")))) as Store,
    };
    let (handle, servers, narrowed) = start(recording, &place, home, &dir, what_if).await?;
    let actual_id = handle.session_id();
    let mut renames = Renames::default();
    renames.add(
        dir.display().to_string(),
        root.header.workspace.display().to_string(),
    );
    renames.add(actual_id.to_string(), recording.id().to_string());
    let driven = drive(&handle, root, &place, &renames).await;
    if let Err(err) = handle.shutdown().await {
        tracing::warn!(err = %pod_llm::error_chain(&err), "replay shutdown");
    }
    servers.shutdown().await;
    driven?;
    let mut renames = Renames::default();
    renames.add(
        dir.display().to_string(),
        root.header.workspace.display().to_string(),
    );
    let actual = actual_logs(recording, actual_id, &place, &mut renames).await?;
    let mut report = report(recording, &actual, &renames);
    report.narrowed = narrowed;
    Ok(report)
}

/// Starts the Pod: the recording's settings (over the config file, or the
/// one `what_if` names), its hooks or `what_if`'s, its answers as the
/// model, its stdio MCP servers (or `what_if`'s by their names); no
/// notifications, no subagent model of its own.
async fn start(
    recording: &Recording,
    place: &Place,
    place_home: &PodHome,
    dir: &Path,
    what_if: &WhatIf,
) -> Result<(PodHandle, McpServers, Vec<String>), LaunchError> {
    let root = &recording.root;
    let recorded = Launch::from_header(&root.header);
    let flags = Flags {
        hooks: what_if.hooks.clone(),
        ..Flags::default()
    };
    let file = match &what_if.config {
        Some(path) => config_file(path)?,
        None => crate::model::config_file(&ModelFlags::default())?,
    };
    let mut settings = Resolved::resolve_in(file, &flags, recorded.as_ref())?;
    if let Some(limits) = pod::SessionBudget::recorded(&root.records) {
        settings = settings.with_recorded_limits(limits, &flags)?;
    }
    let (sandbox, narrowed) = super::confine::narrow(settings.sandbox);
    settings.sandbox = sandbox;
    settings.notify = pod_notify::NotifyConfig::default();
    settings.file.mcp_servers = None;
    settings.choice.raw.mcp_servers = None;
    // Subagents answer from the recording too, through the same model.
    settings.choice.raw.subagent_model = None;
    let context_window = context_window(&settings);
    // Crashes are told by today's default reminder cadence (a `tune` may
    // change the replay's, which is then the replay's difference).
    let every = pod::PodConfig::new(
        place.home.clone(),
        dir.to_path_buf(),
        Arc::new(pod_llm::ScriptedProvider::from_steps(Vec::new())),
    )
    .remind_every;
    let script = super::script::script(
        root,
        &recording.children,
        root.header.model.clone(),
        context_window,
        &runs::crash_points(&root.records, every),
    );
    // Only the hooks the replay's command line names: a recording's (or
    // the replaying user's config file's) would run as the user.
    let hooks = crate::hooks::from_files(&what_if.hooks)?;
    let checkpoints = recorded.as_ref().is_none_or(|launch| launch.checkpoints);
    // Out of reach of the replay's commands and servers: the user's own
    // sessions and token, besides the scratch home.
    let private = vec![place_home.path().to_path_buf()];
    let servers = super::confine::servers(
        super::servers::servers(
            recorded.as_ref().map_or(&[][..], |l| &l.mcp_servers[..]),
            &what_if.mcp_config,
        )?,
        settings.sandbox,
        dir,
        &private,
    );
    // The grader's verdicts as it gave them: a replay asks no model.
    let verdicts = root
        .records
        .iter()
        .filter_map(|record| match record {
            LogRecord::Verify(verify) => verify.grader.as_ref(),
            _ => None,
        })
        .map(|verdict| {
            serde_json::json!({
                "verdict": if verdict.passed { "pass" } else { "fail" },
                "reasons": verdict.reasons,
            })
            .to_string()
        })
        .collect();
    let plan = Plan::replaying(
        place.clone(),
        settings,
        dir.to_path_buf(),
        hooks,
        checkpoints,
        // The prompt the session started with, as recorded.
        recorded
            .as_ref()
            .and_then(|launch| launch.prompt.clone())
            .unwrap_or_default(),
        crate::launcher::Replaying {
            script,
            servers,
            verdicts,
        },
    );
    let sessions = std::iter::once(root).chain(&recording.children);
    let options = Options {
        approver: ReplayApprover::of(sessions).map(|a| Arc::new(a) as Arc<dyn pod::Approver>),
        private_paths: private,
        ..Options::default()
    };
    let mut prepared = plan.prepare(options).await?;
    let calls: std::collections::HashSet<String> =
        interrupted_calls(&root.records).into_iter().collect();
    prepared.config.interceptors.push(Arc::new(move || {
        Box::new(Interrupted {
            calls: calls.clone(),
        })
    }));
    // Refused where the recording was by its profile's shared limits,
    // which no replay can see as they were.
    prepared.config.shared_limits = super::limits::config(&root.records);
    if let Some(tune) = &what_if.tune {
        tune(&mut prepared.config);
    }
    let session = prepared.start().await?;
    Ok((session.handle, session.mcp, narrowed))
}

/// The config file at `path`, which must exist.
fn config_file(path: &Path) -> Result<ConfigFile, LaunchError> {
    if !path.is_file() {
        return Err(LaunchError::settings(
            format!("--config {}: no such file", path.display()),
            "name an existing config file (docs/configuration.md)",
        ));
    }
    ConfigFile::load(path).map_err(|source| LaunchError::Config {
        context: "cannot read the config file".into(),
        source,
    })
}

/// The context window the recording's model had: its settings', or its
/// script's when it was the scripted model.
fn context_window(settings: &Resolved) -> Option<u64> {
    let raw = &settings.choice.raw;
    raw.context_window
        .or_else(|| match (&raw.kind, &raw.script) {
            (Some(ProviderKind::Scripted), Some(path)) => pod_llm::Script::load(path)
                .ok()
                .and_then(|script| script.context_window),
            _ => None,
        })
}

/// Runs the recording's runs, each when the one before it ended, until
/// none is left or the replay went otherwise.
async fn drive(
    handle: &PodHandle,
    root: &Recorded,
    place: &Place,
    renames: &Renames,
) -> Result<(), LaunchError> {
    let expected = entries(&root.records, &Renames::default(), &[]);
    let mut cursor = Cursor::default();
    let mut answered = 0;
    let mut stopped = 0;
    while let Some((start, next)) = runs::next(&root.records, answered, cursor) {
        let ended = match &start {
            Start::Prompt(text) => handle.prompt(text.clone()).await,
            Start::Continue => handle.continue_turn().await,
        };
        // A failed run is in the log (an ended record), compared there.
        if let Err(err) = ended {
            tracing::debug!(err = %pod_llm::error_chain(&err), "a replayed run failed");
        }
        let records = read(place, handle.session_id()).await?;
        let now = answers(&records);
        // A stop by a shared limit is progress while the recording has
        // more of them: its next run was refused again, or went on.
        let stops = shared_stops(&records);
        let stopped_again = stops > stopped && stops <= shared_stops(&root.records);
        stopped = stops;
        if now == answered && next == cursor && !stopped_again {
            // Nothing moved: starting it again would do the same.
            break;
        }
        (answered, cursor) = (now, next);
        // A replay that went otherwise stops; one that is only behind (the
        // recording has more runs) goes on.
        let actual = entries(&records, renames, &[]);
        let shared = actual.len().min(expected.len());
        if compare(&expected[..shared], &actual[..shared], true)
            .divergence
            .is_some()
        {
            break;
        }
    }
    Ok(())
}

/// How many runs of `records` a profile's shared limit stopped.
fn shared_stops(records: &[LogRecord]) -> usize {
    records
        .iter()
        .filter(|record| {
            matches!(record, LogRecord::Stopped(stopped)
                if matches!(stopped.limit, pod::Limit::Shared { .. }))
        })
        .count()
}

async fn read(place: &Place, id: Uuid) -> Result<Vec<LogRecord>, LaunchError> {
    place
        .store
        .read(id)
        .await
        .map(|contents| contents.records)
        .map_err(|err| LaunchError::pod("cannot read the replay's log", err))
}

fn answers(records: &[LogRecord]) -> usize {
    records
        .iter()
        .filter(|r| matches!(r, LogRecord::Item(i) if matches!(i.kind, ItemKind::Assistant { .. })))
        .count()
}

/// The replay's logs: the root's, then each recorded subagent's
/// counterpart (its id derived from its parent's replayed id and its
/// `task` call), empty where the replay started no such subagent. Each
/// replayed id is renamed to the recorded one.
async fn actual_logs(
    recording: &Recording,
    root_id: Uuid,
    place: &Place,
    renames: &mut Renames,
) -> Result<Vec<Vec<LogRecord>>, LaunchError> {
    let mut ids: HashMap<Uuid, Uuid> = HashMap::new();
    ids.insert(recording.id(), root_id);
    let mut logs = vec![read(place, root_id).await?];
    for child in &recording.children {
        let Some(link) = &child.header.parent else {
            logs.push(Vec::new());
            continue;
        };
        let Some(parent) = ids.get(&link.session_id) else {
            logs.push(Vec::new());
            continue;
        };
        let id = pod::child_session_id(*parent, &link.call_id);
        ids.insert(child.header.session_id, id);
        logs.push(read(place, id).await.unwrap_or_default());
    }
    for (recorded, actual) in ids {
        renames.add(actual.to_string(), recorded.to_string());
        renames.add(actual.simple().to_string(), recorded.simple().to_string());
    }
    Ok(logs)
}

/// The comparison of every session, the root's first; the first
/// divergence found is the report's.
fn report(recording: &Recording, actual: &[Vec<LogRecord>], renames: &Renames) -> Report {
    let sessions: Vec<&Recorded> = std::iter::once(&recording.root)
        .chain(&recording.children)
        .collect();
    let mut report = Report {
        session: recording.id(),
        title: title(&recording.root.records),
        records: 0,
        same: 0,
        answers: 0,
        subagents: recording.children.len(),
        cut: false,
        beyond: 0,
        divergence: None,
        narrowed: Vec::new(),
    };
    for (recorded, actual) in sessions.iter().zip(actual) {
        let skip = interrupted_calls(&recorded.records);
        let expected = entries(&recorded.records, &Renames::default(), &skip);
        let cut = recorded.torn || !runs::is_whole(&recorded.records);
        let Comparison {
            same,
            divergence,
            beyond,
        } = compare(&expected, &entries(actual, renames, &skip), cut);
        report.records += expected.len();
        report.answers += answers(&recorded.records);
        if report.divergence.is_some() {
            continue;
        }
        report.same += same;
        report.beyond += beyond;
        report.cut |= cut;
        report.divergence = divergence.map(|divergence| Located {
            session: recorded.header.session_id,
            subagent_of: recorded.header.parent.as_ref().map(|p| p.call_id.clone()),
            divergence,
        });
    }
    report
}

/// The first line of the first prompt.
fn title(records: &[LogRecord]) -> Option<String> {
    records.iter().find_map(|record| match record {
        LogRecord::Item(item) => match &item.kind {
            ItemKind::User { text } => text.lines().next().map(str::to_string),
            _ => None,
        },
        _ => None,
    })
}
