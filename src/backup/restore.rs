//! `shopcell admin restore` and the placement half of `admin check`: a verified backup becomes
//! a data directory every role starts on, with the same keys (tokens issued before stay valid).
//!
//! The directory owns placement. A store a cell holds that the directory does not place there
//! (a store whose creation was under way at the cut, the source or target copy of a move) is
//! marked `Incoming` in the restored cell, which its next start discards, exactly as after a
//! crash at that moment.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use redb::{ReadableDatabase, ReadableTable};
use uuid::Uuid;

use crate::account::closing::ClosedStore;
use crate::account::model::StoreEntry;
use crate::backup::manifest::{self, Manifest};
use crate::backup::{REBUILT_FROM, rows_file};
use crate::error::BoxError;
use crate::private_files::{private_dir, sync_dir, write_private};
use crate::storage::codec::decode;
use crate::storage::tables::{CLOSED_STORES, STORE_DIRECTORY, STORE_STATE, StoreState};

/// What a restore did.
#[derive(Debug)]
pub struct Restored {
    pub manifest: Manifest,
    /// Where the directory that was at the target went (`--replace`).
    pub kept_aside: Option<PathBuf>,
    /// Stores dropped at the next start: `(cell, store)`.
    pub unplaced: Vec<(String, Uuid)>,
    /// Products indexed, by cell.
    pub indexed: BTreeMap<String, u64>,
}

/// Restores the backup in `from` as the data directory `data`. Everything is verified before
/// anything is written; the new directory is built aside and renamed into place.
pub fn restore(from: &Path, data: &Path, replace: bool) -> Result<Restored, BoxError> {
    let manifest = manifest::verify(from)?;
    let occupied = data.exists() && std::fs::read_dir(data)?.next().is_some();
    if occupied {
        if !replace {
            return Err(format!(
                "{} is not empty: restore into an empty directory, or pass --replace to keep the current one aside",
                data.display()
            )
            .into());
        }
        refuse_if_open(data)?;
    }
    let stamp = time::OffsetDateTime::now_utc().unix_timestamp();
    let name = data.file_name().ok_or_else(|| format!("{} names no directory", data.display()))?.to_string_lossy().into_owned();
    let parent = match data.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    // Made when missing; an existing parent (`/var/lib`) keeps its own mode.
    if !parent.exists() {
        private_dir(&parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    let staging = parent.join(format!(".{name}.restoring-{stamp}"));
    let built = build(from, &manifest, &staging);
    let (unplaced, indexed) = match built {
        Ok(done) => done,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    let kept_aside = if data.exists() {
        let aside = parent.join(format!("{name}.before-restore-{stamp}"));
        std::fs::rename(data, &aside).map_err(|e| format!("{} could not be moved aside: {e}", data.display()))?;
        Some(aside)
    } else {
        None
    };
    std::fs::rename(&staging, data).map_err(|e| format!("{}: {e}", data.display()))?;
    sync_dir(&parent)?;
    Ok(Restored { manifest, kept_aside, unplaced, indexed })
}

type Built = (Vec<(String, Uuid)>, BTreeMap<String, u64>);

/// Lays the backup in `from` out in `into` as a data directory: keys and taxonomy copied, each
/// database built from its rows (backup format 2) or copied (format 1, where the backup holds
/// redb files). Answers the account database and each cell's, by name.
pub fn materialize(from: &Path, manifest: &Manifest, into: &Path) -> Result<Databases, BoxError> {
    private_dir(into)?;
    for entry in &manifest.files {
        let rel = manifest::relative(&entry.path)?;
        let target = into.join(manifest::relative(&place(manifest, &entry.path))?);
        if let Some(dir) = target.parent() {
            private_dir(dir)?;
        }
        match (&entry.kind, manifest.backup_format) {
            (Some(kind), format @ 2..) => {
                let tables = entry.tables.clone().unwrap_or_default();
                // Since format 3 the tables that follow from others are rebuilt, not restored.
                rows_file::to_redb(&from.join(&rel), &target, kind, &tables, |txn| {
                    if format >= REBUILT_FROM { crate::cells::rebuilt::rebuild(txn, kind) } else { Ok(()) }
                })?
            }
            _ => copy_private(&from.join(&rel), &target)?,
        }
    }
    databases(into, manifest)
}

/// Copies the backup's files into `staging`, drops unplaced stores, rebuilds search.
fn build(from: &Path, manifest: &Manifest, staging: &Path) -> Result<Built, BoxError> {
    let (account, cells) = materialize(from, manifest, staging)?;
    let placement = placement(&account, &cells)?;
    if let Some(problem) = placement.problems.first() {
        return Err(format!("the backup's directory and cells disagree: {problem}").into());
    }
    for (cell, store) in &placement.unplaced {
        let db = redb::Database::open(&cells[cell])?;
        let txn = db.begin_write()?;
        txn.open_table(STORE_STATE)?.insert(store.as_u128(), StoreState::Incoming as u8)?;
        txn.commit()?;
    }
    let mut indexed = BTreeMap::new();
    for (name, file) in &cells {
        let dir = file.parent().ok_or("a cell file without a directory")?;
        indexed.insert(name.clone(), crate::cells::product_search::reindex_offline(dir)?);
    }
    Ok((placement.unplaced, indexed))
}

/// The account database and each cell's by name.
pub type Databases = (PathBuf, BTreeMap<String, PathBuf>);

/// Where the backup's file `path` goes in a data directory: a database's rows file (backup
/// format 2) becomes its redb file, everything else keeps its path.
fn place(manifest: &Manifest, path: &str) -> String {
    match path.strip_suffix(".rows") {
        Some(db) if manifest.backup_format >= 2 => format!("{db}.redb"),
        _ => path.to_string(),
    }
}

/// The account database and each cell's, in the data directory `root` a backup is laid out
/// in ([`materialize`]).
pub fn databases(root: &Path, manifest: &Manifest) -> Result<Databases, BoxError> {
    let mut account = None;
    let mut cells = BTreeMap::new();
    for (entry, kind) in manifest.databases() {
        let path = place(manifest, &entry.path);
        let file = root.join(manifest::relative(&path)?);
        match kind {
            "account" => account = Some(file),
            "cell" => {
                let name = path.strip_prefix("cells/").and_then(|p| p.strip_suffix("/cell.redb"));
                let name = name.ok_or_else(|| format!("{}: not where a cell lives", entry.path))?;
                cells.insert(name.to_string(), file);
            }
            other => return Err(format!("{}: unknown kind {other:?}", entry.path).into()),
        }
    }
    Ok((account.ok_or("no account database")?, cells))
}

/// Whether the directory and the cells agree on where each store lives.
#[derive(Debug, Default)]
pub struct Placement {
    /// Stores the directory places (open and closed).
    pub placed: usize,
    /// Disagreements that lose a store: placed in a cell that does not hold it.
    pub problems: Vec<String>,
    /// Stores a cell holds that the directory does not place there (dropped at restore).
    pub unplaced: Vec<(String, Uuid)>,
}

/// Compares the directory in `account` with the cells' files (all opened read-only).
pub fn placement(account: &Path, cells: &BTreeMap<String, PathBuf>) -> Result<Placement, BoxError> {
    let db = redb::ReadOnlyDatabase::open(account).map_err(|e| format!("{}: {e}", account.display()))?;
    let txn = db.begin_read()?;
    let mut places: BTreeSet<(String, Uuid)> = BTreeSet::new();
    for row in txn.open_table(STORE_DIRECTORY)?.iter()? {
        let (_, v) = row?;
        let entry: StoreEntry = decode(v.value())?;
        places.insert((entry.cell, entry.id));
    }
    for row in txn.open_table(CLOSED_STORES)?.iter()? {
        let (_, v) = row?;
        let closed: ClosedStore = decode(v.value())?;
        places.insert((closed.entry.cell, closed.entry.id));
    }
    let mut held: BTreeSet<(String, Uuid)> = BTreeSet::new();
    for (name, file) in cells {
        let db = redb::ReadOnlyDatabase::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let txn = db.begin_read()?;
        for row in txn.open_table(STORE_STATE)?.iter()? {
            let (k, v) = row?;
            let state = StoreState::from_u8(v.value());
            let store = Uuid::from_u128(k.value());
            if matches!(state, Some(StoreState::Active | StoreState::Closed)) {
                held.insert((name.clone(), store));
            }
        }
    }
    let mut out = Placement { placed: places.len(), ..Placement::default() };
    for (cell, store) in &places {
        if !cells.contains_key(cell) {
            out.problems.push(format!("store {store} is placed in cell {cell}, which is not here"));
        } else if !held.contains(&(cell.clone(), *store)) {
            out.problems.push(format!("store {store} is placed in cell {cell}, which does not hold it"));
        }
    }
    out.unplaced = held.difference(&places).cloned().collect();
    Ok(out)
}

/// Refuses a data directory a process holds (redb's lock on any of its databases).
fn refuse_if_open(data: &Path) -> Result<(), BoxError> {
    let mut files = vec![crate::run::account_dir(data).join("account.redb")];
    if let Ok(cells) = std::fs::read_dir(data.join("cells")) {
        files.extend(cells.flatten().map(|c| c.path().join("cell.redb")));
    }
    for file in files.into_iter().filter(|f| f.exists()) {
        // Read-only: the check writes nothing, not even a repair.
        if let Err(redb::DatabaseError::DatabaseAlreadyOpen) = redb::ReadOnlyDatabase::open(&file) {
            return Err(format!("{} is open in a running shopcell: stop it before restoring over it", file.display()).into());
        }
    }
    Ok(())
}

/// Copies `from` to `to` (0600, synced), a block at a time.
fn copy_private(from: &Path, to: &Path) -> Result<(), BoxError> {
    write_private(to, b"").map_err(|e| format!("{}: {e}", to.display()))?;
    std::fs::copy(from, to).map_err(|e| format!("{} → {}: {e}", from.display(), to.display()))?;
    std::fs::File::open(to)?.sync_all()?;
    Ok(())
}
