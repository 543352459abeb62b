//! The account database's format steps: each file names what its version changed. Versions
//! before 9 left the directory's records as format 1 wrote them, so its first step is from 8
//! (`storage::migrations::run` brings an older directory straight to it).

use crate::storage::migrations::Step;

mod v9;

/// Every step, in order.
pub const STEPS: &[Step] = &[Step { from: 8, run: v9::sessions_keep_their_last_rotation }];
