//! Storage: redb databases (one per cell, one for the account directory), their tables, the
//! record codec, order-preserving keys, the group-commit writer and format versions.

pub mod applied;
pub mod codec;
pub mod copy;
pub mod keys;
pub mod list;
pub mod list_names;
pub mod list_orders;
pub mod list_snapshot;
pub mod mapped;
pub mod migrations;
pub mod ranked;
pub mod read;
pub mod record;
pub mod row_cache;
pub mod syncs;
pub mod tables;
pub mod tx;
pub mod usage;
pub mod writer;

use std::path::Path;
use std::sync::Arc;

use redb::{Database, ReadableDatabase, TableHandle, WriteTransaction};

use crate::storage::syncs::{SyncedFile, Syncs};
use crate::storage::tables::*;

/// The on-disk format version this build writes. See `data-format/README.md`, "Version changes".
pub const FORMAT_VERSION: u32 = 14;

/// A kind of database, declared by its owner (`account::DATABASE`, `cells::DATABASE`): its name,
/// recorded in the file so a cell file is never opened as the directory; the steps that bring an
/// older file to [`FORMAT_VERSION`]; and the tables it holds.
#[derive(Clone, Copy)]
pub struct DbKind {
    pub name: &'static str,
    pub steps: &'static [migrations::Step],
    /// Creates every table of the kind (declared in [`tables`]), so readers never miss one.
    pub tables: fn(&WriteTransaction) -> Result<(), redb::Error>,
}

/// Why a database could not be opened.
#[derive(Debug)]
pub enum OpenError {
    Io(String),
    NewerFormat { found: u32, supported: u32 },
    WrongKind { found: String, expected: &'static str },
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Io(e) => write!(f, "{e}"),
            OpenError::NewerFormat { found, supported } => {
                write!(f, "the data is in format version {found}, newer than this build supports ({supported}); upgrade shopcell")
            }
            OpenError::WrongKind { found, expected } => write!(f, "this is a {found} database, not a {expected} database"),
        }
    }
}

impl std::error::Error for OpenError {}

fn io<E: std::fmt::Display>(e: E) -> OpenError {
    OpenError::Io(e.to_string())
}

/// redb's page cache of a database opened for a one-off job (a migration check, an admin
/// command): small, as such a job reads each page once.
pub const ONE_OFF_CACHE: u64 = 16 << 20;

/// The `meta` row naming the list snapshot of the database's last clean stop
/// ([`list_snapshot`]). Every open takes it out before anything else can write, so whatever
/// opens the file next (a start that serves, an admin command, a migration) leaves nothing a
/// saved list could be paired with.
pub const LISTS_TOKEN: &str = "lists_snapshot";

/// Opens (or creates) a database of `kind` with a page cache of `cache` bytes (its share of the
/// memory budget): checks kind and format version, runs the migration steps from an older
/// version, and makes sure every table exists so readers never miss one.
pub fn open(path: &Path, kind: DbKind, cache: u64) -> Result<Database, OpenError> {
    Ok(open_with(path, kind, cache)?.db)
}

/// A database opened by [`open_with`], with what its writer needs beside it.
pub struct Opened {
    pub db: Database,
    /// Its file's syncs, which its writer defers (see [`syncs`]).
    pub syncs: Arc<Syncs>,
    /// The [`LISTS_TOKEN`] taken out: the snapshot carrying it holds the lists of exactly the
    /// rows committed now. None when there was none, or when a migration changed the rows since.
    pub lists_token: Option<Vec<u8>>,
}

/// [`open`], answering the file's [`Syncs`] and the [`LISTS_TOKEN`] it took out.
pub fn open_with(path: &Path, kind: DbKind, cache: u64) -> Result<Opened, OpenError> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| OpenError::Io(format!("cannot create {}: {e}", dir.display())))?;
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| OpenError::Io(format!("{}: {e}", path.display())))?;
    let name = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let (backend, syncs) = SyncedFile::new(file, &name).map_err(|e| OpenError::Io(format!("{}: {e}", path.display())))?;
    let db = Database::builder()
        .set_cache_size(crate::memory::redb_cache_size(cache) as usize)
        .create_with_backend(backend)
        .map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => OpenError::Io(format!(
                "database {} is already open: another shopcell process holds it (stop it, or give this one another --data)",
                path.display()
            )),
            e => OpenError::Io(format!("{}: {e}", path.display())),
        })?;
    let (found_kind, found_version) = read_meta(&db)?;
    match found_kind {
        Some(k) if k != kind.name => return Err(OpenError::WrongKind { found: k, expected: kind.name }),
        _ => {}
    }
    let version = found_version.unwrap_or(FORMAT_VERSION);
    if version > FORMAT_VERSION {
        return Err(OpenError::NewerFormat { found: version, supported: FORMAT_VERSION });
    }
    migrations::run(&db, kind.name, version, kind.steps).map_err(io)?;
    let txn = db.begin_write().map_err(io)?;
    txn.open_table(META).map_err(io)?;
    (kind.tables)(&txn).map_err(io)?;
    let token = {
        let mut meta = txn.open_table(META).map_err(io)?;
        meta.insert("kind", kind.name.as_bytes()).map_err(io)?;
        meta.insert("format_version", FORMAT_VERSION.to_le_bytes().as_slice()).map_err(io)?;
        let token = meta.remove(LISTS_TOKEN).map_err(io)?.map(|v| v.value().to_vec());
        token.filter(|_| version == FORMAT_VERSION)
    };
    // Durable (redb's default) before the caller can write anything else.
    txn.commit().map_err(io)?;
    Ok(Opened { db, syncs, lists_token: token })
}

fn read_meta(db: &Database) -> Result<(Option<String>, Option<u32>), OpenError> {
    let txn = db.begin_read().map_err(io)?;
    let meta = match txn.open_table(META) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok((None, None)),
        Err(e) => return Err(io(e)),
    };
    let kind = meta.get("kind").map_err(io)?.map(|v| String::from_utf8_lossy(v.value()).into_owned());
    let version = meta.get("format_version").map_err(io)?.and_then(|v| v.value().try_into().ok().map(u32::from_le_bytes));
    Ok((kind, version))
}

/// Names of the tables present in a database (for `admin check`).
pub fn table_names(db: &Database) -> Result<Vec<String>, redb::Error> {
    let txn = db.begin_read()?;
    Ok(txn.list_tables()?.map(|t| t.name().to_string()).collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The two kinds as storage sees them (their owners add migration steps).
    pub(crate) const CELL: DbKind = DbKind { name: "cell", steps: &[], tables: tables::cell_tables };
    const ACCOUNT: DbKind = DbKind { name: "account", steps: &[], tables: tables::account_tables };

    fn set_version(path: &Path, v: u32) {
        let db = Database::create(path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(META).unwrap().insert("format_version", v.to_le_bytes().as_slice()).unwrap();
        txn.commit().unwrap();
    }

    #[test]
    fn a_newer_format_is_refused_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cell.redb");
        drop(open(&path, CELL, ONE_OFF_CACHE).unwrap());
        set_version(&path, FORMAT_VERSION + 1);
        match open(&path, CELL, ONE_OFF_CACHE) {
            Err(OpenError::NewerFormat { found, supported }) => {
                assert_eq!((found, supported), (FORMAT_VERSION + 1, FORMAT_VERSION))
            }
            other => panic!("expected a refusal, got {:?}", other.map(|_| ())),
        }
        // Refusing wrote nothing: the version is still the newer one.
        let db = Database::create(&path).unwrap();
        let v = db.begin_read().unwrap().open_table(META).unwrap().get("format_version").unwrap().unwrap().value().to_vec();
        assert_eq!(u32::from_le_bytes(v.try_into().unwrap()), FORMAT_VERSION + 1);
    }

    #[test]
    fn a_database_of_the_other_kind_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.redb");
        drop(open(&path, ACCOUNT, ONE_OFF_CACHE).unwrap());
        assert!(matches!(open(&path, CELL, ONE_OFF_CACHE), Err(OpenError::WrongKind { .. })));
    }

    #[test]
    fn every_table_exists_after_open() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(&dir.path().join("c.redb"), CELL, ONE_OFF_CACHE).unwrap();
        let names = table_names(&db).unwrap();
        for t in STORE_TABLES {
            assert!(names.iter().any(|n| n == t.def.name()), "{} missing", t.def.name());
        }
    }
}
