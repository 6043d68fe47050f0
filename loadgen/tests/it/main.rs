//! carrier-loadgen's integration tests, one binary: every mode of the load generator against a
//! real carrier on loopback (`modes`).

mod modes;
