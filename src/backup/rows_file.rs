//! A database as a backup keeps it (backup format 2): the service's compressed [`block`]s one
//! after another, each behind its length (`u32`, little-endian), exactly as they arrived. The
//! caller writes them without decoding a row; `check` counts the rows, and `restore` builds the
//! redb file from them.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};

use redb::{Durability, WriteTransaction};

use crate::backup::block;
use crate::error::BoxError;
use crate::private_files::{Writeback, create_private_file, sync_dir, write_private};
use crate::storage::copy;

/// Rows a restore inserts in one write transaction.
const RESTORE_TXN_BYTES: usize = 64 << 20;

/// A rows file being written.
pub struct Writer {
    file: File,
    path: PathBuf,
    digest: ring::digest::Context,
    bytes: u64,
    /// Written to the disk step by step: the page cache never holds a burst of a backup's
    /// pages that the service's own fsyncs (on the same disk) would queue behind.
    writeback: Writeback,
    /// Rows of each table written so far.
    pub counts: BTreeMap<String, u64>,
}

/// A rows file written whole: its size, sha256 and rows by table.
pub struct Written {
    pub bytes: u64,
    pub sha256: ring::digest::Digest,
    pub counts: BTreeMap<String, u64>,
}

impl Writer {
    /// A new file at `path` (0600; refused if it exists).
    pub fn create(path: &Path) -> Result<Writer, BoxError> {
        let file = create_private_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let digest = ring::digest::Context::new(&ring::digest::SHA256);
        Ok(Writer { file, path: path.to_path_buf(), digest, bytes: 0, writeback: Writeback::default(), counts: BTreeMap::new() })
    }

    /// Appends a block holding `tables` (rows by table).
    pub fn append(&mut self, tables: &[(String, u64)], block: &[u8]) -> Result<(), BoxError> {
        let len = u32::try_from(block.len()).map_err(|_| "a block of more than 4 GiB")?.to_le_bytes();
        let io = |e: std::io::Error| format!("{}: {e}", self.path.display());
        self.file.write_all(&len).map_err(io)?;
        self.file.write_all(block).map_err(io)?;
        self.digest.update(&len);
        self.digest.update(block);
        let n = (len.len() + block.len()) as u64;
        self.bytes += n;
        self.writeback.written(&self.file, self.bytes).map_err(io)?;
        for (table, rows) in tables {
            *self.counts.entry(table.clone()).or_insert(0) += rows;
        }
        Ok(())
    }

    /// Makes the file durable (its data and its directory entry).
    pub fn finish(self) -> Result<Written, BoxError> {
        self.file.sync_all().map_err(|e| format!("{}: {e}", self.path.display()))?;
        if let Some(dir) = self.path.parent() {
            sync_dir(dir)?;
        }
        Ok(Written { bytes: self.bytes, sha256: self.digest.finish(), counts: self.counts })
    }
}

/// Hands each block of the rows file `path`, decompressed, to `each`.
fn each_block(path: &Path, mut each: impl FnMut(&[u8]) -> Result<(), BoxError>) -> Result<(), BoxError> {
    let name = path.display();
    let mut file = BufReader::with_capacity(1 << 20, File::open(path).map_err(|e| format!("{name}: {e}"))?);
    let mut compressed = Vec::new();
    loop {
        let mut len = [0u8; 4];
        match file.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(format!("{name}: {e}").into()),
        }
        let len = u32::from_le_bytes(len) as usize;
        if len > block::MAX_COMPRESSED {
            return Err(format!("{name}: a block of {len} bytes, more than any block holds: the file is damaged").into());
        }
        compressed.resize(len, 0);
        file.read_exact(&mut compressed).map_err(|e| format!("{name}: ends inside a block: {e}"))?;
        let raw = block::decompress(&compressed).map_err(|e| format!("{name}: {e}"))?;
        each(&raw)?;
    }
}

/// The rows of each table in the rows file `path`.
pub fn counts(path: &Path) -> Result<BTreeMap<String, u64>, BoxError> {
    let mut counts = BTreeMap::new();
    each_block(path, |raw| {
        for (table, rows) in block::sections(raw).map_err(|e| format!("{}: {e}", path.display()))? {
            *counts.entry(table.to_string()).or_insert(0) += rows.len() as u64;
        }
        Ok(())
    })?;
    Ok(counts)
}

/// Builds the redb file `target` (0600, new) of kind `kind` from the rows file `path`. Every
/// table of `tables` exists in it, the empty ones too, as in the database backed up; `last`
/// writes what else it needs (the tables a backup leaves out) in the final, durable transaction.
pub fn to_redb(
    path: &Path,
    target: &Path,
    kind: &str,
    tables: &BTreeMap<String, u64>,
    last: impl FnOnce(&WriteTransaction) -> Result<(), redb::Error>,
) -> Result<(), BoxError> {
    write_private(target, b"").map_err(|e| format!("{}: {e}", target.display()))?;
    let db = redb::Database::create(target).map_err(|e| format!("{}: {e}", target.display()))?;
    let known = copy::tables(kind);
    let find =
        |name: &str| known.iter().find(|t| t.name() == name).ok_or_else(|| format!("{}: unknown table {name}", path.display()));
    // Blocks are inserted a transaction per [`RESTORE_TXN_BYTES`] of rows: a commit per block
    // cost the restore more than its inserts.
    let mut open: Option<(WriteTransaction, usize)> = None;
    each_block(path, |raw| {
        let (txn, bytes) = match open.take() {
            Some(t) => t,
            None => (begin(&db, Durability::None)?, 0),
        };
        for (table, rows) in block::sections(raw).map_err(|e| format!("{}: {e}", path.display()))? {
            find(table)?.write(&txn, &mut rows.into_iter())?;
        }
        let bytes = bytes + raw.len();
        if bytes >= RESTORE_TXN_BYTES {
            txn.commit()?;
        } else {
            open = Some((txn, bytes));
        }
        Ok(())
    })?;
    if let Some((txn, _)) = open {
        txn.commit()?;
    }
    // The last commit is the durable one: an fsync of everything written before it.
    let txn = begin(&db, Durability::Immediate)?;
    for name in tables.keys() {
        find(name)?.write(&txn, &mut std::iter::empty())?;
    }
    last(&txn).map_err(|e| format!("{}: {e}", target.display()))?;
    txn.commit()?;
    Ok(())
}

fn begin(db: &redb::Database, durability: Durability) -> Result<WriteTransaction, BoxError> {
    let mut txn = db.begin_write()?;
    txn.set_durability(durability)?;
    Ok(txn)
}
