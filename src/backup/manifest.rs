//! `manifest.json`, written last into a backup: what it holds, with the sizes and sha256 of
//! every file and the rows of every table; and its verification, which `restore` and `check`
//! run before they trust a byte of the backup.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::backup::rows_file::{self, Written};
use crate::backup::{BACKUP_FORMAT, Begun};
use crate::error::BoxError;
use crate::private_files::{sync_dir, write_private};
use crate::storage::FORMAT_VERSION;
use crate::storage::copy;

pub const MANIFEST: &str = "manifest.json";

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    pub backup_format: u32,
    /// The data format version of every database.
    pub data_format: u32,
    /// The shopcell that wrote the backup.
    pub written_by: String,
    /// The cut: when every writer was held (RFC 3339 and Unix ms, the service's clock).
    pub cut_at: String,
    pub cut_at_ms: i64,
    /// How long the writers were held at the cut, in microseconds.
    pub held_us: u64,
    pub files: Vec<Entry>,
}

/// One file of a backup.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// Relative to the backup (and to the data directory it restores).
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
    /// `account` or `cell` for a database; absent for other files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The rows of each table of a database.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tables: Option<BTreeMap<String, u64>>,
}

impl Entry {
    pub fn file(path: String, bytes: &[u8]) -> Entry {
        let sha256 = hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref());
        Entry { path, bytes: bytes.len() as u64, sha256, kind: None, tables: None }
    }

    /// A redb file copied row by row (backup format 1).
    pub fn database(path: String, kind: String, file: &Path, tables: BTreeMap<String, u64>) -> Result<Entry, BoxError> {
        let (bytes, sha256) = digest_file(file)?;
        Ok(Entry { path, bytes, sha256, kind: Some(kind), tables: Some(tables) })
    }

    /// A database's rows file (backup format 2), digested as it was written.
    pub fn rows(path: String, kind: String, written: &Written, tables: BTreeMap<String, u64>) -> Entry {
        let sha256 = hex(written.sha256.as_ref());
        Entry { path, bytes: written.bytes, sha256, kind: Some(kind), tables: Some(tables) }
    }
}

impl Manifest {
    pub fn new(begun: &Begun, files: Vec<Entry>) -> Manifest {
        let cut = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(begun.cut_at_ms) * 1_000_000)
            .ok()
            .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
            .unwrap_or_default();
        Manifest {
            backup_format: begun.backup_format,
            data_format: begun.data_format,
            written_by: format!("shopcell {}", env!("CARGO_PKG_VERSION")),
            cut_at: cut,
            cut_at_ms: begun.cut_at_ms,
            held_us: begun.held_us,
            files,
        }
    }

    /// The database entries: `(path, kind)`.
    pub fn databases(&self) -> impl Iterator<Item = (&Entry, &str)> {
        self.files.iter().filter_map(|e| e.kind.as_deref().map(|k| (e, k)))
    }
}

/// Writes the manifest into `dir` durably and last: aside, synced, then renamed into place.
pub fn write(dir: &Path, manifest: &Manifest) -> Result<(), BoxError> {
    let json = serde_json::to_vec_pretty(manifest)?;
    let aside = dir.join(format!("{MANIFEST}.partial"));
    write_private(&aside, &json).map_err(|e| format!("{}: {e}", aside.display()))?;
    std::fs::rename(&aside, dir.join(MANIFEST))?;
    sync_dir(dir)?;
    Ok(())
}

/// Reads and verifies the backup in `dir` before anything is written from it: its format,
/// every file's presence, size and sha256, and every table's rows. Each refusal names why.
pub fn verify(dir: &Path) -> Result<Manifest, BoxError> {
    let path = dir.join(MANIFEST);
    let json = match std::fs::read(&path) {
        Ok(j) => j,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!("{} has no {MANIFEST}: not a complete backup", dir.display()).into());
        }
        Err(e) => return Err(format!("{}: {e}", path.display()).into()),
    };
    let manifest: Manifest = serde_json::from_slice(&json).map_err(|e| format!("{}: unreadable: {e}", path.display()))?;
    if manifest.backup_format > BACKUP_FORMAT {
        return Err(format!(
            "the backup is in backup format {}, newer than this build reads ({BACKUP_FORMAT}); use a newer shopcell",
            manifest.backup_format
        )
        .into());
    }
    if manifest.data_format > FORMAT_VERSION {
        return Err(format!(
            "the backup's data is in format version {}, newer than this build supports ({FORMAT_VERSION}); use a newer shopcell",
            manifest.data_format
        )
        .into());
    }
    if !manifest.files.iter().any(|e| e.kind.as_deref() == Some("account")) {
        return Err(format!("{path:?} lists no account database").into());
    }
    for entry in &manifest.files {
        let file = dir.join(relative(&entry.path)?);
        let (bytes, sha256) = digest_file(&file).map_err(|e| format!("{}: missing or unreadable: {e}", entry.path))?;
        if bytes != entry.bytes {
            return Err(format!(
                "{} is {bytes} bytes, the manifest says {}: the backup is truncated or altered",
                entry.path, entry.bytes
            )
            .into());
        }
        if sha256 != entry.sha256 {
            return Err(format!("{} does not match its checksum: the backup is altered or damaged", entry.path).into());
        }
    }
    for (entry, kind) in manifest.databases() {
        let file = dir.join(relative(&entry.path)?);
        let counts = match manifest.backup_format {
            1 => table_counts(&file, kind)?,
            _ => rows_file::counts(&file)?,
        };
        let listed = entry.tables.clone().unwrap_or_default();
        // Both ways: a table the manifest does not list holds no rows either.
        for table in listed.keys().chain(counts.keys()).collect::<std::collections::BTreeSet<_>>() {
            let (found, says) = (counts.get(table).copied().unwrap_or(0), listed.get(table).copied().unwrap_or(0));
            if found != says {
                return Err(format!("{}: table {table} holds {found} rows, the manifest says {says}", entry.path).into());
            }
        }
    }
    Ok(manifest)
}

/// The rows of every table of the database file `file`, opened read-only.
pub fn table_counts(file: &Path, kind: &str) -> Result<BTreeMap<String, u64>, BoxError> {
    let db = redb::ReadOnlyDatabase::open(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let txn = redb::ReadableDatabase::begin_read(&db)?;
    let mut counts = BTreeMap::new();
    for t in copy::tables(kind) {
        counts.insert(t.name().to_string(), t.count(&txn)?);
    }
    Ok(counts)
}

/// `path` as a relative path that stays inside the directory it is joined to.
pub fn relative(path: &str) -> Result<PathBuf, BoxError> {
    let p = PathBuf::from(path);
    if p.components().all(|c| matches!(c, Component::Normal(_))) && !path.is_empty() {
        Ok(p)
    } else {
        Err(format!("{path:?} is not a path inside a backup").into())
    }
}

/// The size and sha256 (hex) of a file, read in blocks.
pub fn digest_file(path: &Path) -> Result<(u64, String), BoxError> {
    let mut f = std::fs::File::open(path)?;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
        total += n as u64;
    }
    Ok((total, hex(ctx.finish().as_ref())))
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
