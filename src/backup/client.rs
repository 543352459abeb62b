//! `shopcell admin backup`: pages a backup from the running service and writes it on this
//! host: each database's rows as the compressed blocks that arrive (`rows_file`), the keys and
//! the taxonomy (0600, in 0700 directories), and `manifest.json` last. Without the manifest
//! the directory is no backup.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::backup::manifest::{self, Entry, Manifest};
use crate::backup::{BACKUP_FORMAT, Begun, Chunk, Part, rows_file, rows_path};
use crate::error::BoxError;
use crate::http::upstream::{Body, Upstream};
use crate::private_files::{private_dir, write_private};
use crate::storage::FORMAT_VERSION;
use hyper::Method;

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
    match fetch(&up, to, &begun).await {
        Ok(manifest) => Ok(Report { manifest, elapsed: started.elapsed() }),
        Err(e) => {
            // The service drops its read transactions at once rather than when they lapse.
            let _ = up.call_raw(Method::DELETE, &format!("/internal/v1/backups/{}", begun.id), Body::Empty).await;
            let written = remove_contents(to);
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

struct Writing {
    to: PathBuf,
    begun: Begun,
    /// The rows files being written, by the path of their database.
    open: HashMap<String, rows_file::Writer>,
    done: Vec<Entry>,
}

/// Chunks fetched ahead of the one being written: the next is asked for while one is written,
/// so the service, the wire and this disk work at once; at most this many wait in memory.
const FETCHED_AHEAD: usize = 1;

async fn fetch(up: &Upstream, to: &Path, begun: &Begun) -> Result<Manifest, BoxError> {
    if begun.backup_format != BACKUP_FORMAT || begun.data_format != FORMAT_VERSION {
        return Err(format!(
            "the service writes backup format {} of data format {}, this shopcell backup format {BACKUP_FORMAT} of data format {FORMAT_VERSION}: use the service's own version of shopcell",
            begun.backup_format, begun.data_format
        )
        .into());
    }
    let mut w = Writing { to: to.to_path_buf(), begun: begun.clone(), open: HashMap::new(), done: Vec::new() };
    let (chunks, mut arriving) = tokio::sync::mpsc::channel::<Chunk>(FETCHED_AHEAD);
    // The disk's side on a thread of its own: writes and syncs block.
    let writer = tokio::task::spawn_blocking(move || {
        while let Some(chunk) = arriving.blocking_recv() {
            for part in chunk.parts {
                w.take(part)?;
            }
        }
        Ok::<_, BoxError>(w)
    });
    let fetched = async {
        let mut seq = 0u64;
        loop {
            let path = format!("/internal/v1/backups/{}/next?seq={seq}", begun.id);
            let bytes = up.call_raw(Method::POST, &path, Body::Empty).await.map_err(|e| format!("chunk {seq}: {e}"))?;
            let chunk: Chunk = crate::storage::codec::decode(&bytes).map_err(|e| format!("chunk {seq} unreadable: {e}"))?;
            if chunk.seq != seq {
                return Err::<(), BoxError>(format!("chunk {} came for chunk {seq}", chunk.seq).into());
            }
            let last = chunk.last;
            if chunks.send(chunk).await.is_err() || last {
                // A writer that stopped says why below.
                return Ok(());
            }
            seq += 1;
        }
    }
    .await;
    drop(chunks);
    let written = writer.await.map_err(|e| format!("the backup's writer failed: {e}"))?;
    fetched?;
    let mut w = written?;
    for db in &w.begun.databases {
        if !w.done.iter().any(|e| e.path == rows_path(&db.path)) {
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
            Part::Rows { db, tables, block } => self.open_db(&db)?.append(&tables, &block).map_err(|e| format!("{db}: {e}"))?,
            Part::Done { db, counts } => {
                let open = self.open.remove(&db).ok_or_else(|| format!("{db} completed before it began"))?;
                let written = open.finish()?;
                for (table, n) in &counts {
                    let got = written.counts.get(table).copied().unwrap_or(0);
                    if got != *n {
                        return Err(format!("{db}: table {table} sent {n} rows, {got} arrived").into());
                    }
                }
                let kind = self.begun.databases.iter().find(|d| d.path == db).map(|d| d.kind.clone()).unwrap_or_default();
                self.done.push(Entry::rows(rows_path(&db), kind, &written, counts));
            }
        }
        Ok(())
    }

    /// The rows file of database `db`, created on its first rows.
    fn open_db(&mut self, db: &str) -> Result<&mut rows_file::Writer, BoxError> {
        if !self.open.contains_key(db) {
            if !self.begun.databases.iter().any(|d| d.path == db) {
                return Err(format!("{db} is not in this backup").into());
            }
            if self.done.iter().any(|e| e.path == rows_path(db)) {
                return Err(format!("{db} sent twice").into());
            }
            let file = self.path_of(&rows_path(db))?;
            self.open.insert(db.to_string(), rows_file::Writer::create(&file)?);
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
}

/// Removes what a failed backup wrote into `to` (empty before it began: [`prepare`]); answers
/// how many files.
fn remove_contents(to: &Path) -> usize {
    let mut removed = 0;
    let mut dirs = vec![to.to_path_buf()];
    let mut emptied = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                dirs.push(path.clone());
                emptied.push(path);
            } else if std::fs::remove_file(&path).is_ok() {
                removed += 1;
            }
        }
    }
    for dir in emptied.iter().rev() {
        let _ = std::fs::remove_dir(dir);
    }
    removed
}
