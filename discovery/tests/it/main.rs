//! carrier-discovery's integration tests, one binary: how a runtime file is judged
//! (`runtime_files`).

mod runtime_files;
