/// What can go wrong connecting to or preparing the database.
#[derive(Debug, thiserror::Error)]
pub enum PgStoreError {
    /// The connection failed or was refused.
    #[error("cannot connect to {location}")]
    Connect {
        /// The database, without its password.
        location: String,
        /// The cause.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A statement failed.
    #[error("{what} failed on {location}")]
    Query {
        /// What was being done.
        what: &'static str,
        /// The database, without its password.
        location: String,
        /// The cause.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The database was migrated by a newer pod than this one.
    #[error("the database {location} has schema version {found}, newer than this pod knows ({known}): upgrade pod")]
    SchemaTooNew {
        /// The database, without its password.
        location: String,
        /// Its schema version.
        found: i32,
        /// The newest this build knows.
        known: i32,
    },
}

impl PgStoreError {
    /// Whether the database could not be reached (down, restarting,
    /// failing over) rather than refusing: worth waiting for.
    pub fn is_unreachable(&self) -> bool {
        match self {
            PgStoreError::Connect { source, .. } | PgStoreError::Query { source, .. } => {
                crate::health::unreachable(source)
            }
            PgStoreError::SchemaTooNew { .. } => false,
        }
    }
}

/// A failed statement as a Pod error.
pub(crate) fn query(location: &str, what: &str, source: tokio_postgres::Error) -> pod::PodError {
    pod::PodError::Store {
        store: location.to_string(),
        what: what.to_string(),
        source: Box::new(source),
    }
}
