//! Online backup, restore and check of a whole installation.
//!
//! A backup is one cut across every database: every writer (the account directory's and each
//! cell's) is held at a barrier while each database opens a read transaction, then all are
//! released together (`coordinate`). The rows are then copied from those read transactions,
//! table by table in chunks, to the caller (`shopcell admin backup`), which writes a fresh redb
//! file of each database on its own host, the keys and the taxonomy beside them, and a
//! manifest last (`client`). `restore` and `check` read that directory (`manifest`).
//!
//! The wire is paged rather than one long response: each request carries the next sequence
//! number and answers one [`Chunk`], so neither side holds a database whole, a cell's part is
//! relayed chunk by chunk by the account service in split roles, and a caller that dies leaves
//! nothing held but read transactions, which lapse ([`IDLE_MS`]).

pub mod block;
pub mod client;
pub mod coordinate;
pub mod manifest;
pub mod reader;
pub mod restore;
pub mod rows_file;
pub mod snapshot;
pub mod state;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The version of the backup layout (`manifest.json` and the files beside it) this build
/// writes and reads; see `data-format/README.md`, "Backups". Format 3 leaves out the tables a
/// restore rebuilds (`tables::REBUILT`); 2 held them, 1 held redb files: both still restore.
pub const BACKUP_FORMAT: u32 = 3;

/// The first backup format that leaves out the tables a restore rebuilds.
pub const REBUILT_FROM: u32 = 3;

/// Row bytes in one chunk of a database, before compression ([`block`]).
pub const CHUNK_BYTES: usize = 4 << 20;

/// A backup no request has touched for this long is abandoned: its read transactions end
/// and another backup may begin.
pub const IDLE_MS: i64 = 60_000;

/// What `POST /internal/v1/backups` answers once the cut is taken.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Begun {
    pub id: Uuid,
    pub backup_format: u32,
    /// The data format version of every database in the backup.
    pub data_format: u32,
    /// When the cut was taken (Unix ms, the service's clock).
    pub cut_at_ms: i64,
    /// How long the writers were held, in microseconds.
    pub held_us: u64,
    /// The databases that follow, in order.
    pub databases: Vec<Database>,
}

/// One database of a backup: its path in the data directory and its kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Database {
    pub path: String,
    pub kind: String,
}

/// One piece of a backup in transit.
#[derive(Debug, Serialize, Deserialize)]
pub enum Part {
    /// A whole small file (a key, the taxonomy), by its path in the data directory.
    File {
        path: String,
        #[serde(with = "crate::storage::codec::byte_string")]
        bytes: Vec<u8>,
    },
    /// A compressed [`block`] of database `db`'s rows, and the rows of each table in it.
    Rows {
        db: String,
        tables: Vec<(String, u64)>,
        #[serde(with = "crate::storage::codec::byte_string")]
        block: Vec<u8>,
    },
    /// Database `db` is complete: the rows of each table sent.
    Done { db: String, counts: BTreeMap<String, u64> },
}

/// The answer to one `next` request: its sequence number and parts; `last` ends the backup.
#[derive(Debug, Serialize, Deserialize)]
pub struct Chunk {
    pub seq: u64,
    pub parts: Vec<Part>,
    pub last: bool,
}

/// The next rows of a database's snapshot (what a cell answers to `read`): a compressed
/// [`block`] (none when no rows were left) with the rows of each table in it, and the counts of
/// every table once the database is complete.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Rows {
    #[serde(with = "crate::storage::codec::byte_string")]
    pub block: Vec<u8>,
    pub tables: Vec<(String, u64)>,
    pub done: Option<BTreeMap<String, u64>>,
}

impl Rows {
    /// The parts of database `db` these rows make.
    pub fn into_parts(self, db: &str, parts: &mut Vec<Part>) {
        if !self.tables.is_empty() {
            parts.push(Part::Rows { db: db.to_string(), tables: self.tables, block: self.block });
        }
        if let Some(counts) = self.done {
            parts.push(Part::Done { db: db.to_string(), counts });
        }
    }
}

/// Where a database lives in a data directory (and in a backup).
pub fn account_path() -> String {
    "account/account.redb".into()
}

pub fn cell_path(name: &str) -> String {
    format!("cells/{name}/cell.redb")
}

/// Where a backup keeps the rows of the database at `path` (backup format 2): beside where it
/// restores, `.rows` for `.redb`.
pub fn rows_path(path: &str) -> String {
    format!("{}.rows", path.strip_suffix(".redb").unwrap_or(path))
}
