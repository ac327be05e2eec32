//! `pod schedule`: sessions started by the clock (docs/schedules.md).

use clap::{Args, Subcommand, ValueEnum};

/// `pod schedule`.
#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Add a schedule: at each fire time a fleet worker starts a session of
    /// TASK with these flags (as `pod submit` queues one).
    #[command(after_help = "Examples:
  pod schedule add nightly-deps --cron \"0 3 * * *\" --tz Europe/Berlin --yes \\
      --verify \"cargo test\" \"Upgrade the dependencies and open a PR\"
  pod schedule add ci-watch --every 1h --yes \"Check CI on main; fix what broke\"
  pod schedule add pr-watch --every 30m --session 4c1d \"Check the PR's review comments\"")]
    Add(Box<ScheduleAddArgs>),
    /// List the schedules: when each fires next, and its last session.
    List(ScheduleListArgs),
    /// One schedule: its settings and its recent fire times.
    Show(ScheduleNameArgs),
    /// Fire nothing until resumed.
    Pause(ScheduleNameArgs),
    /// Fire again, from the next fire time after now (what passed while
    /// it was paused is not caught up).
    Resume(ScheduleNameArgs),
    /// Remove a schedule (not the sessions it started).
    Rm(ScheduleNameArgs),
    /// Start a session of the schedule now, besides its fire times.
    RunNow(ScheduleNameArgs),
}

/// `pod schedule add`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("when").required(true).args(["cron", "every"]))]
pub struct ScheduleAddArgs {
    /// The schedule's name (letters, digits, `-`, `_`, `.`).
    #[arg(value_name = "NAME")]
    pub name: String,
    /// A cron expression: minute hour day-of-month month day-of-week
    /// (`0 3 * * *`: 03:00 every day), six fields with seconds first, or
    /// @hourly, @daily, @weekly, @monthly.
    #[arg(long, value_name = "EXPR")]
    pub cron: Option<String>,
    /// The time zone of --cron (an IANA name, `Europe/Berlin`); UTC by
    /// default. Daylight saving follows the zone.
    #[arg(long, value_name = "ZONE", requires = "cron")]
    pub tz: Option<String>,
    /// A fixed period from now (`15m`, `1h`, `2s`; at least 1s).
    #[arg(long, value_name = "AGE", value_parser = super::parse_age)]
    pub every: Option<std::time::Duration>,
    /// A heartbeat: continue this session (an id or a unique prefix) at
    /// each fire time, with TASK as its next message, instead of starting a
    /// new one. Its recorded settings, plan and limits apply (the other
    /// session flags are not used); a fire time that finds it still going
    /// is skipped.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// When a fire time comes while the schedule's last session is still
    /// going: skip it (default) or start another anyway.
    #[arg(long, value_name = "POLICY", default_value = "skip")]
    pub overlap: OverlapArg,
    /// The session each fire starts, as `pod submit` takes it.
    #[command(flatten)]
    pub run: super::RunArgs,
}

/// `--overlap`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OverlapArg {
    /// Skip the fire time.
    Skip,
    /// Start another session.
    Allow,
}

/// `pod schedule list`.
#[derive(Debug, Args)]
pub struct ScheduleListArgs {
    /// One JSON object per schedule.
    #[arg(long)]
    pub json: bool,
}

/// A command on one schedule.
#[derive(Debug, Args)]
pub struct ScheduleNameArgs {
    /// The schedule.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// As JSON.
    #[arg(long)]
    pub json: bool,
}
