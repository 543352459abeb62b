//! What a node keeps of the one backup it may run at a time, between the requests that page it
//! out (the coordinator in `coordinate` drives it). Apart from the coordinator so the node can
//! hold it without the backup code depending back on the node.

use std::collections::VecDeque;

use tokio::task::JoinHandle;
use uuid::Uuid;

use crate::backup::Part;
use crate::backup::snapshot::Snapshot;
use crate::cells::link::CellLink;
use crate::error::ApiResult;

/// The one backup a process may run at a time.
#[derive(Default)]
pub struct Backups(pub(super) tokio::sync::Mutex<Option<Run>>);

pub(super) struct Run {
    pub(super) id: Uuid,
    /// The sequence number the next request must carry.
    pub(super) seq: u64,
    pub(super) last_used_ms: i64,
    pub(super) ahead: Ahead,
}

/// What is left to read of a backup, in the order it is sent.
pub(super) struct Source {
    pub(super) id: Uuid,
    /// Keys and taxonomy, sent with the first chunk.
    pub(super) files: Vec<(String, Vec<u8>)>,
    /// The directory's snapshot until it has been read out.
    pub(super) account: Option<Snapshot>,
    /// The cells still to read, in order.
    pub(super) cells: VecDeque<(String, CellLink)>,
}

/// The next chunk: read ahead while the one before it is sent and written, so the service's
/// reading, the wire and the caller's disk work at once. One chunk at most is read ahead: with
/// the one being sent, a backup holds two in memory.
pub(super) enum Ahead {
    /// Nothing read ahead yet: the first chunk is read when asked for.
    Ready(Box<Source>),
    /// The next chunk's parts being read, and what is left after it.
    Reading(JoinHandle<(Source, ApiResult<Vec<Part>>)>),
    /// Taken by the request being answered.
    Taken,
}

impl Source {
    /// Whether everything has been read.
    pub(super) fn finished(&self) -> bool {
        self.files.is_empty() && self.account.is_none() && self.cells.is_empty()
    }

    /// Ends the backup at every cell still holding its part.
    pub(super) async fn end(self) {
        for (name, link) in &self.cells {
            if let Err(e) = link.backup_step(self.id, "end").await {
                tracing::warn!(cell = %name, error = %e, "a cell did not end its part of a backup; it lapses");
            }
        }
    }
}

impl Run {
    /// Ends the backup everywhere, once a chunk being read ahead is done with its cell.
    pub(super) async fn end(self) {
        let source = match self.ahead {
            Ahead::Ready(source) => Some(*source),
            Ahead::Reading(task) => task.await.ok().map(|(source, _)| source),
            Ahead::Taken => None,
        };
        if let Some(source) = source {
            source.end().await;
        }
    }
}
