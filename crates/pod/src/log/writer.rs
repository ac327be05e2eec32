//! The task that owns a session log file: the file store's [`LogSink`].
//!
//! Append, sync and shutdown are commands with an acknowledgement, so "on
//! disk" is a fact the caller waited for. Every append is written to the file
//! (one `write` of the whole line) before it is acknowledged, so a killed
//! process loses nothing it was told was committed; `fsync` is what the
//! durability setting adds, against power loss and kernel crashes.

use super::codec::encode_line;
use super::reader::{read_log, LogContents};
use super::record::LogRecord;
use crate::error::PodError;
use crate::store::LogSink;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

// Appends are awaited one by one by their callers, so the queue stays short;
// the capacity only absorbs a burst from several handles.
const QUEUE: usize = 64;

enum Command {
    Append {
        line: Vec<u8>,
        sync: bool,
        ack: oneshot::Sender<io::Result<()>>,
    },
    Sync {
        ack: oneshot::Sender<io::Result<()>>,
    },
    Shutdown {
        ack: oneshot::Sender<io::Result<()>>,
    },
}

/// A handle to the log-writer task of one session file.
#[derive(Clone, Debug)]
pub struct FileLog {
    tx: mpsc::Sender<Command>,
    path: PathBuf,
}

impl FileLog {
    /// Creates a new log (mode 0600) holding `header`, synced to disk with
    /// its directory entry.
    pub fn create(path: &Path, header: &LogRecord) -> Result<Self, PodError> {
        let io_err = |source| PodError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut options = OpenOptions::new();
        options.create_new(true).append(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(path).map_err(io_err)?;
        lock(&file, path)?;
        let line = encode_line(header).map_err(PodError::Encode)?;
        file.write_all(&line).map_err(io_err)?;
        file.sync_all().map_err(io_err)?;
        if let Some(dir) = path.parent() {
            sync_dir(dir).map_err(io_err)?;
        }
        let len = line.len() as u64;
        Ok(Self::start(file, len, path))
    }

    /// Opens an existing log for appending: takes its lock, then reads and
    /// verifies it, and cuts off a torn tail beyond its verified prefix.
    pub fn open(path: &Path) -> Result<(Self, LogContents), PodError> {
        let io_err = |source| PodError::Io {
            path: path.to_path_buf(),
            source,
        };
        // Append mode: every write lands at the end, also after a rollback.
        let file = OpenOptions::new().append(true).open(path).map_err(io_err)?;
        // Locked before it is read, so no other writer can add to what
        // this one continues after.
        lock(&file, path)?;
        let contents = read_log(path)?;
        let valid_len = contents.valid_len;
        let len = file.metadata().map_err(io_err)?.len();
        if len != valid_len {
            tracing::warn!(
                path = %path.display(),
                dropped = len.saturating_sub(valid_len),
                "repairing session log: cutting its torn tail"
            );
            file.set_len(valid_len).map_err(io_err)?;
            file.sync_all().map_err(io_err)?;
        }
        Ok((Self::start(file, valid_len, path), contents))
    }

    fn start(file: File, len: u64, path: &Path) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::spawn(run(Arc::new(file), len, rx, path.to_path_buf()));
        Self {
            tx,
            path: path.to_path_buf(),
        }
    }
}

#[async_trait::async_trait]
impl LogSink for FileLog {
    async fn append(&self, record: &LogRecord, sync: bool) -> Result<(), PodError> {
        let line = encode_line(record).map_err(PodError::Encode)?;
        self.request(|ack| Command::Append { line, sync, ack })
            .await
    }

    async fn sync(&self) -> Result<(), PodError> {
        self.request(|ack| Command::Sync { ack }).await
    }

    async fn shutdown(&self) -> Result<(), PodError> {
        self.request(|ack| Command::Shutdown { ack }).await
    }

    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }
}

impl FileLog {
    async fn request(
        &self,
        command: impl FnOnce(oneshot::Sender<io::Result<()>>) -> Command,
    ) -> Result<(), PodError> {
        let (ack, done) = oneshot::channel();
        self.tx
            .send(command(ack))
            .await
            .map_err(|_| PodError::LogClosed)?;
        done.await
            .map_err(|_| PodError::LogClosed)?
            .map_err(|source| PodError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

async fn run(file: Arc<File>, mut len: u64, mut rx: mpsc::Receiver<Command>, path: PathBuf) {
    // Set when a failed append could not be rolled back: appending after a
    // partial line would put corruption in the middle of the log.
    let mut broken: Option<String> = None;
    // Whether anything was written since the last fsync: a sync with nothing
    // to flush still costs a journal commit on many filesystems.
    let mut dirty = false;
    while let Some(command) = rx.recv().await {
        match command {
            Command::Append { line, sync, ack } => {
                let result = match &broken {
                    Some(reason) => Err(io::Error::other(reason.clone())),
                    None => append_or_wait(&file, &mut len, &line, &mut broken, &path).await,
                };
                dirty |= result.is_ok();
                let result = match result {
                    Ok(()) if sync => sync_if_dirty(&file, &mut dirty).await,
                    other => other,
                };
                let _ = ack.send(result);
            }
            Command::Sync { ack } => {
                let _ = ack.send(sync_if_dirty(&file, &mut dirty).await);
            }
            Command::Shutdown { ack } => {
                let result = sync_if_dirty(&file, &mut dirty).await;
                // Close the file (and release the session lock) before the
                // caller hears back, so it may reopen the session at once.
                drop(file);
                let _ = ack.send(result);
                return;
            }
        }
    }
}

async fn sync_if_dirty(file: &Arc<File>, dirty: &mut bool) -> io::Result<()> {
    if !*dirty {
        return Ok(());
    }
    sync_data(file).await?;
    *dirty = false;
    Ok(())
}

/// Appends `line`, waiting out a full disk (see [`super::disk`]): the
/// session pauses until the record is written, or the write fails in a way
/// no wait mends.
async fn append_or_wait(
    file: &File,
    len: &mut u64,
    line: &[u8],
    broken: &mut Option<String>,
    path: &Path,
) -> io::Result<()> {
    let mut waiting: Option<super::disk::Waiting> = None;
    loop {
        match append(file, len, line, broken).await {
            Ok(()) => {
                super::disk::written();
                return Ok(());
            }
            // Rolled back (not broken): the log is still a clean prefix,
            // so writing the same line again later is safe.
            Err(err) if broken.is_none() && super::disk::is_waitable(&err) => {
                waiting
                    .get_or_insert_with(|| super::disk::Waiting::begin(path, &err))
                    .wait()
                    .await;
            }
            Err(err) => return Err(err),
        }
    }
}

async fn append(
    file: &File,
    len: &mut u64,
    line: &[u8],
    broken: &mut Option<String>,
) -> io::Result<()> {
    match (&*file).write_all(line) {
        Ok(()) => {
            *len += line.len() as u64;
            Ok(())
        }
        Err(err) => {
            // Roll back a partial write so the log stays a clean prefix.
            if let Err(cut) = file.set_len(*len) {
                *broken = Some(format!(
                    "log writer stopped: a failed append ({err}) could not be rolled back ({cut})"
                ));
            }
            Err(err)
        }
    }
}

async fn sync_data(file: &Arc<File>) -> io::Result<()> {
    // fsync takes milliseconds: keep it off the async worker threads.
    let file = Arc::clone(file);
    tokio::task::spawn_blocking(move || file.sync_data())
        .await
        .unwrap_or_else(|join| Err(io::Error::other(join.to_string())))
}

/// Takes the session's exclusive lock (held until the writer task ends), so
/// two processes never append to one log.
pub(crate) fn lock(file: &File, path: &Path) -> Result<(), PodError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(PodError::SessionBusy {
            path: path.to_path_buf(),
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(PodError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Whether another process holds the session's lock (it is running).
pub fn is_locked(path: &Path) -> bool {
    match File::open(path) {
        Ok(file) => matches!(
            file.try_lock_shared(),
            Err(std::fs::TryLockError::WouldBlock)
        ),
        Err(_) => false,
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}
