//! What a node keeps of the one backup it may run at a time, between the requests that page it
//! out (the coordinator in `coordinate` drives it). Apart from the coordinator so the node can
//! hold it without the backup code depending back on the node.

use std::collections::VecDeque;

use uuid::Uuid;

use crate::backup::snapshot::Snapshot;
use crate::cells::link::CellLink;

/// The one backup a process may run at a time.
#[derive(Default)]
pub struct Backups(pub(super) tokio::sync::Mutex<Option<Run>>);

pub(super) struct Run {
    pub(super) id: Uuid,
    /// The sequence number the next request must carry.
    pub(super) seq: u64,
    pub(super) last_used_ms: i64,
    /// Keys and taxonomy, sent with the first chunk.
    pub(super) files: Vec<(String, Vec<u8>)>,
    /// The directory's snapshot until it has been read out.
    pub(super) account: Option<Snapshot>,
    /// The cells still to read, in order.
    pub(super) cells: VecDeque<(String, CellLink)>,
}

impl Run {
    /// Ends the backup at every cell still holding its part.
    pub(super) async fn end(self) {
        for (name, link) in &self.cells {
            if let Err(e) = link.backup_step(self.id, "end").await {
                tracing::warn!(cell = %name, error = %e, "a cell did not end its part of a backup; it lapses");
            }
        }
    }
}
