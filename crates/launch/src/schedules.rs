//! Schedules on the file store: one JSON file each under
//! `POD_HOME/schedules/NAME.json`, private (0700/0600), written whole (a
//! temporary file synced and renamed over it, then the directory synced),
//! so a crash leaves the old file or the new one.
//!
//! A schedule's file holds its timing, task and session template and its
//! fire records: the next fire time, the last one acted on and the session
//! it started, the counts, and the recent fires. Before a session is
//! started for fire time T, T is written as taken ([`Schedules::take`]):
//! a restart finds the next fire time moved past T and never fires T again
//! (a crash between the two loses that one session rather than doubling
//! it), the file store's form of the PostgreSQL store's unique key.
//!
//! Only one process fires a home's schedules: it holds
//! `schedules/.fire.lock` ([`FireLock`]) for as long as it runs. Every
//! change of a schedule's file (the firing loop's, `pod schedule pause`'s)
//! is made under `schedules/.write.lock`, held for the read and the write
//! only, so two processes never lose each other's change.
//!
//! A heartbeat (a schedule with a `session`) continues that session at each
//! fire time instead of starting one: skipped while anyone holds it open or
//! its log ends inside a tool call, as on a fleet.

mod fire;

pub use fire::{Adopt, Fired, Firer};

use crate::timing::Timing;
use chrono::{DateTime, Utc};
use pod::log::SessionHeader;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// How many recent fires a schedule's file keeps (`pod schedule show`):
/// a minutely schedule's file would otherwise grow for ever.
const RECENT: usize = 20;

/// Whether a fire time that finds the last session still going starts
/// another.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// Skip the fire time (the default).
    #[default]
    Skip,
    /// Start another session.
    Allow,
}

impl Overlap {
    /// `skip` or `allow`.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Allow => "allow",
        }
    }
}

/// One fire time acted on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FireRecord {
    /// The fire time.
    pub fire_at: DateTime<Utc>,
    /// The session it started; `None` if it was skipped (overlap).
    pub session: Option<Uuid>,
    /// When it was acted on.
    pub fired_at: DateTime<Utc>,
}

/// A schedule as its file holds it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Schedule {
    /// Its name (letters, digits, `-`, `_`, `.`).
    pub name: String,
    /// When it fires.
    pub timing: Timing,
    /// Each session's task.
    pub task: String,
    /// The header each session starts from (its `launch` recorded).
    pub template: SessionHeader,
    /// The limits each session records before its task.
    #[serde(default)]
    pub limits: Option<pod::SessionBudget>,
    /// What a fire time finding the last session still going does.
    #[serde(default)]
    pub overlap: Overlap,
    /// A heartbeat's session: each fire continues it with `task`.
    #[serde(default)]
    pub session: Option<Uuid>,
    /// Paused: fires nothing.
    #[serde(default)]
    pub paused: bool,
    /// The next fire time not yet acted on.
    pub next_fire: DateTime<Utc>,
    /// When it was added.
    pub created_at: DateTime<Utc>,
    /// `pod schedule run-now` asked for a fire at this time; the firing
    /// loop acts on it and clears it.
    #[serde(default)]
    pub run_now: Option<DateTime<Utc>>,
    /// The last fire time acted on.
    #[serde(default)]
    pub last_fire: Option<DateTime<Utc>>,
    /// The last session it started.
    #[serde(default)]
    pub last_session: Option<Uuid>,
    /// Sessions started.
    #[serde(default)]
    pub fires: u64,
    /// Fire times skipped (overlap).
    #[serde(default)]
    pub skipped: u64,
    /// Fire times passed over (downtime).
    #[serde(default)]
    pub missed: u64,
    /// The most recent fires, oldest first.
    #[serde(default)]
    pub recent: Vec<FireRecord>,
}

/// A schedule file that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    /// The filesystem refused.
    #[error("cannot {what} {}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file pod did not write.
    #[error("{} is not a schedule pod wrote", path.display())]
    Damaged {
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// Another process fires this home's schedules.
    #[error(
        "another `pod serve` fires the schedules of this POD_HOME ({} is locked); this one \
         does not fire them",
        .0.display()
    )]
    Locked(PathBuf),
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> ScheduleError {
    let path = path.to_path_buf();
    move |source| ScheduleError::Io { what, path, source }
}

/// The schedules of one `POD_HOME`.
#[derive(Clone, Debug)]
pub struct Schedules {
    dir: PathBuf,
}

/// The firing loop's lock: only its holder fires this home's schedules.
/// Released when dropped (or when the process dies: the kernel drops the
/// lock with the file).
#[derive(Debug)]
pub struct FireLock {
    _file: File,
}

impl Schedules {
    /// The schedules under `home`.
    pub fn new(home: &pod::PodHome) -> Self {
        Self {
            dir: home.path().join("schedules"),
        }
    }

    fn ensure_dir(&self) -> Result<(), ScheduleError> {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true).mode(0o700);
        builder.create(&self.dir).map_err(io("create", &self.dir))?;
        // Private whatever the umask or whoever made it.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io("secure", &self.dir))
    }

    fn open_lock(&self, name: &str) -> Result<(File, PathBuf), ScheduleError> {
        self.ensure_dir()?;
        let path = self.dir.join(name);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(io("open", &path))?;
        Ok((file, path))
    }

    /// Takes the firing lock, or says who holds it.
    pub fn lock_firing(&self) -> Result<FireLock, ScheduleError> {
        let (file, path) = self.open_lock(".fire.lock")?;
        match file.try_lock() {
            Ok(()) => Ok(FireLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(ScheduleError::Locked(path)),
            Err(std::fs::TryLockError::Error(err)) => Err(io("lock", &path)(err)),
        }
    }

    /// Runs `change` on the schedules under the write lock: a blocking
    /// lock held for a read and a rename, so the wait is short.
    fn under_write_lock<T>(
        &self,
        change: impl FnOnce() -> Result<T, ScheduleError>,
    ) -> Result<T, ScheduleError> {
        let (file, path) = self.open_lock(".write.lock")?;
        file.lock().map_err(io("lock", &path))?;
        let result = change();
        let _ = file.unlock();
        result
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.json"))
    }

    /// Schedule `name`, if there is one. `name` must be a valid name
    /// (the front ends check it).
    pub fn get(&self, name: &str) -> Result<Option<Schedule>, ScheduleError> {
        let path = self.path(name);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|source| ScheduleError::Damaged { path, source }),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(io("read", &path)(err)),
        }
    }

    /// Every schedule, by name.
    pub fn list(&self) -> Result<Vec<Schedule>, ScheduleError> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(err) => return Err(io("read", &self.dir)(err)),
        };
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(io("read", &self.dir))?;
            let file = entry.file_name().to_string_lossy().into_owned();
            if let Some(name) = file.strip_suffix(".json").filter(|n| !n.starts_with('.')) {
                names.push(name.to_string());
            }
        }
        names.sort();
        let mut out = Vec::new();
        for name in names {
            if let Some(schedule) = self.get(&name)? {
                out.push(schedule);
            }
        }
        Ok(out)
    }

    /// Writes `schedule` whole: a temporary file, synced, renamed over the
    /// old one, and the directory synced, so the change survives a crash.
    fn put(&self, schedule: &Schedule) -> Result<(), ScheduleError> {
        self.ensure_dir()?;
        let path = self.path(&schedule.name);
        let text =
            serde_json::to_vec_pretty(schedule).map_err(|source| ScheduleError::Damaged {
                path: path.clone(),
                source,
            })?;
        let temporary = self.dir.join(format!(
            ".{}.json.{}",
            schedule.name,
            Uuid::new_v4().simple()
        ));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut file| {
                file.write_all(&text)?;
                file.sync_all()
            })
            .and_then(|()| std::fs::rename(&temporary, &path))
            .and_then(|()| File::open(&self.dir)?.sync_all());
        if let Err(err) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(io("write", &path)(err));
        }
        Ok(())
    }

    /// Adds `schedule`; `false` if one of its name exists.
    pub fn add(&self, schedule: &Schedule) -> Result<bool, ScheduleError> {
        self.under_write_lock(|| {
            if self.get(&schedule.name)?.is_some() {
                return Ok(false);
            }
            self.put(schedule).map(|()| true)
        })
    }

    /// Removes schedule `name` (not its sessions); `false` if none.
    pub fn remove(&self, name: &str) -> Result<bool, ScheduleError> {
        self.under_write_lock(|| {
            let path = self.path(name);
            match std::fs::remove_file(&path) {
                Ok(()) => Ok(true),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(err) => Err(io("remove", &path)(err)),
            }
        })
    }

    /// Changes schedule `name` by `change` and writes it; the schedule as
    /// written, or `None` if there is none (or `change` declined).
    pub fn update(
        &self,
        name: &str,
        change: impl FnOnce(&mut Schedule) -> bool,
    ) -> Result<Option<Schedule>, ScheduleError> {
        self.under_write_lock(|| {
            let Some(mut schedule) = self.get(name)? else {
                return Ok(None);
            };
            if !change(&mut schedule) {
                return Ok(None);
            }
            self.put(&schedule)?;
            Ok(Some(schedule))
        })
    }

    /// Pauses or resumes `name` (resumed, it waits for its first fire time
    /// after `now`: a paused schedule catches nothing up).
    pub fn set_paused(
        &self,
        name: &str,
        paused: bool,
        now: DateTime<Utc>,
    ) -> Result<Option<Schedule>, ScheduleError> {
        let next = match self.get(name)? {
            Some(schedule) if !paused => schedule.timing.next_after(now).ok(),
            _ => None,
        };
        self.update(name, |s| {
            s.paused = paused;
            // A paused schedule starts nothing, a `run-now` asked before
            // included.
            if paused {
                s.run_now = None;
            }
            if let Some(next) = next {
                s.next_fire = next;
            }
            true
        })
    }

    /// Records fire time `fire_at` of `name` as taken, if the schedule
    /// still waits for `expected` and is not paused: the next fire time
    /// becomes `next`, and the fire is counted (a started `session`, or a
    /// skip when `None`). `None` if the schedule moved on (or is gone).
    /// Durable when it returns: call it before starting the session.
    pub fn take(&self, fire: &Take) -> Result<Option<Schedule>, ScheduleError> {
        let now = Utc::now();
        self.update(&fire.name, |s| {
            let due = match fire.run_now {
                true => s.run_now.is_some(),
                false => !s.paused && s.next_fire == fire.expected,
            };
            if !due {
                return false;
            }
            match fire.run_now {
                true => s.run_now = None,
                false => s.next_fire = fire.next,
            }
            s.missed += fire.missed;
            s.last_fire = Some(fire.fire_at);
            match fire.session {
                Some(id) => {
                    s.fires += 1;
                    s.last_session = Some(id);
                }
                None => s.skipped += 1,
            }
            s.recent.push(FireRecord {
                fire_at: fire.fire_at,
                session: fire.session,
                fired_at: now,
            });
            let extra = s.recent.len().saturating_sub(RECENT);
            s.recent.drain(..extra);
            true
        })
    }
}

/// A fire time to record as taken ([`Schedules::take`]).
#[derive(Clone, Debug)]
pub struct Take {
    /// The schedule.
    pub name: String,
    /// The next fire time it was read with.
    pub expected: DateTime<Utc>,
    /// The fire time acted on.
    pub fire_at: DateTime<Utc>,
    /// The next fire time after it.
    pub next: DateTime<Utc>,
    /// Fire times passed over.
    pub missed: u64,
    /// The session to start; `None` to skip.
    pub session: Option<Uuid>,
    /// A `pod schedule run-now` request rather than a fire time.
    pub run_now: bool,
}

#[cfg(test)]
#[path = "schedules_tests.rs"]
mod tests;
