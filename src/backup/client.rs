//! `shopcell admin backup`: pages a backup from the running service and writes it on this
//! host: a fresh redb file per database, the keys and the taxonomy (0600, in 0700
//! directories), and `manifest.json` last. Without the manifest the directory is no backup.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use hyper::Method;
use redb::{Durability, WriteTransaction};

use crate::backup::manifest::{self, Entry, Manifest};
use crate::backup::{BACKUP_FORMAT, Begun, Chunk, Part};
use crate::error::BoxError;
use crate::http::upstream::{Body, Upstream};
use crate::private_files::{private_dir, write_private};
use crate::storage::FORMAT_VERSION;
use crate::storage::copy::{self, CopyTable};

/// What a finished backup reports.
#[derive(Debug)]
pub struct Report {
    pub manifest: Manifest,
    pub elapsed: std::time::Duration,
}

/// Backs up the service at `url` into `to`, which must be absent or empty.
pub async fn backup(url: &str, service_key: &str, to: &Path) -> Result<Report, BoxError> {
    let started = std::time::Instant::now();
    prepare(to)?;
    let up = Upstream::new(url, service_key);
    let begun: Begun =
        up.call(Method::POST, "/internal/v1/backups", Body::Empty).await.map_err(|e| format!("backup not started: {e}"))?;
    let mut writing = Writing { to: to.to_path_buf(), begun: begun.clone(), open: HashMap::new(), done: Vec::new() };
    match fetch(&up, &mut writing).await {
        Ok(manifest) => Ok(Report { manifest, elapsed: started.elapsed() }),
        Err(e) => {
            // The service drops its read transactions at once rather than when they lapse.
            let _ = up.call_raw(Method::DELETE, &format!("/internal/v1/backups/{}", begun.id), Body::Empty).await;
            let written = writing.remove_all();
            Err(format!("backup failed, no manifest written ({written} partial files removed from {}): {e}", to.display()).into())
        }
    }
}

/// `to` as an empty directory of mode 0700, refused when it holds anything: a backup never
/// mixes with older files.
fn prepare(to: &Path) -> Result<(), BoxError> {
    if to.exists() {
        let mut entries = std::fs::read_dir(to).map_err(|e| format!("{}: {e}", to.display()))?;
        if entries.next().is_some() {
            return Err(format!("{} is not empty: back up into a new directory", to.display()).into());
        }
    }
    private_dir(to).map_err(|e| format!("{}: {e}", to.display()))?;
    // Written and removed before the service is asked anything: an unwritable place fails
    // here, with the service untouched.
    let probe = to.join(".probe");
    write_private(&probe, b"").map_err(|e| format!("{} is not writable: {e}", to.display()))?;
    std::fs::remove_file(&probe)?;
    Ok(())
}

/// A database file being written.
struct Open {
    db: redb::Database,
    tables: Vec<&'static dyn CopyTable>,
    counts: BTreeMap<String, u64>,
}

struct Writing {
    to: PathBuf,
    begun: Begun,
    open: HashMap<String, Open>,
    done: Vec<Entry>,
}

async fn fetch(up: &Upstream, w: &mut Writing) -> Result<Manifest, BoxError> {
    if w.begun.backup_format != BACKUP_FORMAT || w.begun.data_format != FORMAT_VERSION {
        return Err(format!(
            "the service writes backup format {} of data format {}, this shopcell backup format {BACKUP_FORMAT} of data format {FORMAT_VERSION}: use the service's own version of shopcell",
            w.begun.backup_format, w.begun.data_format
        )
        .into());
    }
    let mut seq = 0u64;
    loop {
        let path = format!("/internal/v1/backups/{}/next?seq={seq}", w.begun.id);
        let bytes = up.call_raw(Method::POST, &path, Body::Empty).await.map_err(|e| format!("chunk {seq}: {e}"))?;
        let chunk: Chunk = crate::storage::codec::decode(&bytes).map_err(|e| format!("chunk {seq} unreadable: {e}"))?;
        if chunk.seq != seq {
            return Err(format!("chunk {} came for chunk {seq}", chunk.seq).into());
        }
        for part in chunk.parts {
            w.take(part)?;
        }
        if chunk.last {
            break;
        }
        seq += 1;
    }
    for db in &w.begun.databases {
        if !w.done.iter().any(|e| e.path == db.path) {
            return Err(format!("{} never completed", db.path).into());
        }
    }
    let manifest = Manifest::new(&w.begun, std::mem::take(&mut w.done));
    manifest::write(&w.to, &manifest)?;
    Ok(manifest)
}

impl Writing {
    fn take(&mut self, part: Part) -> Result<(), BoxError> {
        match part {
            Part::File { path, bytes } => {
                let file = self.path_of(&path)?;
                write_private(&file, &bytes).map_err(|e| format!("{}: {e}", file.display()))?;
                self.done.push(Entry::file(path, &bytes));
            }
            Part::Rows { db, table, rows } => {
                let open = self.open_db(&db)?;
                let t = open.tables.iter().find(|t| t.name() == table).ok_or_else(|| format!("{db}: unknown table {table}"))?;
                let txn = begin(&open.db, Durability::None)?;
                t.write(&txn, &rows).map_err(|e| format!("{db}: {e}"))?;
                txn.commit().map_err(|e| format!("{db}: {e}"))?;
                *open.counts.entry(table).or_insert(0) += rows.len() as u64;
            }
            Part::Done { db, counts } => {
                let open = self.open.remove(&db).ok_or_else(|| format!("{db} completed before it began"))?;
                // Every table exists in the copy, the empty ones too; the last commit is the
                // durable one (an fsync of everything written before it).
                let txn = begin(&open.db, Durability::Immediate)?;
                for t in open.tables.iter().filter(|t| counts.contains_key(t.name())) {
                    t.write(&txn, &[]).map_err(|e| format!("{db}: {e}"))?;
                }
                txn.commit().map_err(|e| format!("{db}: {e}"))?;
                drop(open.db);
                for (table, n) in &counts {
                    let got = open.counts.get(table).copied().unwrap_or(0);
                    if got != *n {
                        return Err(format!("{db}: table {table} sent {n} rows, {got} arrived").into());
                    }
                }
                let file = self.path_of(&db)?;
                let kind = self.begun.databases.iter().find(|d| d.path == db).map(|d| d.kind.clone()).unwrap_or_default();
                self.done.push(Entry::database(db, kind, &file, counts)?);
            }
        }
        Ok(())
    }

    fn open_db(&mut self, db: &str) -> Result<&mut Open, BoxError> {
        if !self.open.contains_key(db) {
            let kind = self.begun.databases.iter().find(|d| d.path == db).ok_or_else(|| format!("{db} is not in this backup"))?;
            let file = self.path_of(db)?;
            if file.exists() {
                return Err(format!("{db} sent twice").into());
            }
            write_private(&file, b"").map_err(|e| format!("{}: {e}", file.display()))?;
            let database = redb::Database::create(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let tables = copy::tables(&kind.kind);
            self.open.insert(db.to_string(), Open { db: database, tables, counts: BTreeMap::new() });
        }
        self.open.get_mut(db).ok_or_else(|| "database not open".into())
    }

    /// Where `path` (as the service names it) goes under the backup directory, its parent
    /// directories made 0700.
    fn path_of(&self, path: &str) -> Result<PathBuf, BoxError> {
        let file = self.to.join(manifest::relative(path)?);
        if let Some(parent) = file.parent() {
            private_dir(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        Ok(file)
    }

    /// Removes every file this backup wrote; answers how many.
    fn remove_all(&mut self) -> usize {
        let paths: Vec<String> = self.open.drain().map(|(p, _)| p).chain(self.done.drain(..).map(|e| e.path)).collect();
        paths.iter().filter(|p| self.path_of(p).is_ok_and(|f| std::fs::remove_file(f).is_ok())).count()
    }
}

fn begin(db: &redb::Database, durability: Durability) -> Result<WriteTransaction, BoxError> {
    let mut txn = db.begin_write()?;
    txn.set_durability(durability)?;
    Ok(txn)
}
