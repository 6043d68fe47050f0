//! The reference channels over real sockets on 127.0.0.1, one module per subject, in one test
//! binary (each binary links the whole stack): payload channels end to end (`end_to_end`), bulk
//! without head-of-line blocking on a `relay:bulk` channel (`bulk_credit`).

mod bulk_credit;
mod end_to_end;
