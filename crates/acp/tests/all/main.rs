//! Integration tests of pod-acp: a client drives the server over pipes with
//! newline-delimited JSON-RPC, exactly as an editor would over stdio.

mod client;
mod load;
mod permission;
mod prompt;
mod protocol;
mod support;
