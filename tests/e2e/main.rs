//! End-to-end suites across crates, built as one binary: a Pod against the
//! real providers over loopback HTTP, a worker session with the real tools,
//! and the embedding example's behaviour.

mod embedding;
mod group_commit;
mod mcp;
mod pod_faults;
mod session;
mod shared_limits;
mod store;
mod worker_e2e;
