//! End-to-end tests of the `pod` binary, driven as a child process on the
//! scripted model. Every test gets its own POD_HOME and XDG directories.

mod support;

mod errors;
mod run_resume;
mod sessions_show;
