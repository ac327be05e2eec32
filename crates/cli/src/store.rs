//! `--store` / `POD_STORE`: which store holds the session logs.

use anyhow::Result;
use pod::{FileStore, PodHome, Store};
use std::sync::Arc;

/// The store `arg` names: the file store under `home` by default, a
/// directory's file store, or a PostgreSQL database.
pub fn open(arg: Option<&str>, home: &PodHome) -> Result<Store> {
    match arg.map(str::trim).filter(|a| !a.is_empty()) {
        None => Ok(Arc::new(FileStore::new(home.clone()))),
        Some(dir) => Ok(Arc::new(FileStore::new(PodHome::new(dir)))),
    }
}
