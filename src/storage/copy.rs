//! Copying databases row by row: every table of both kinds, as raw key and value bytes.
//!
//! redb has no hot file copy and opens a table only with its declared key and value types, so
//! each table is listed here once with its types; rows travel as the bytes redb itself stores
//! (`Key::as_bytes`) and are written back through the same types. An online backup reads them
//! from one read transaction and writes a fresh file (see `backup`).

use std::borrow::Borrow;
use std::ops::Bound;

use redb::{Key, ReadTransaction, ReadableTableMetadata, TableDefinition, TableHandle, Value, WriteTransaction};

use crate::storage::tables::*;

/// Where rows read by [`CopyTable::read`] go, each as redb's own bytes (borrowed: a sink copies
/// what it keeps, so a row is copied once, into the sink).
pub trait RowSink {
    fn row(&mut self, key: &[u8], value: &[u8]);
}

/// A table whose rows can be read and written as bytes.
pub trait CopyTable: Sync {
    fn name(&self) -> &str;
    /// Hands the rows after `after` (from the start when `None`) to `out` until about
    /// `max_bytes` (at least one row); the last key handed over when the budget ran out.
    fn read(
        &self,
        txn: &ReadTransaction,
        after: Option<&[u8]>,
        max_bytes: usize,
        out: &mut dyn RowSink,
    ) -> Result<Option<Vec<u8>>, redb::Error>;
    /// Inserts `rows` (read by [`CopyTable::read`]).
    fn write<'a>(&self, txn: &WriteTransaction, rows: &mut dyn Iterator<Item = (&'a [u8], &'a [u8])>) -> Result<(), redb::Error>;
    /// How many rows the table holds (0 when it does not exist).
    fn count(&self, txn: &ReadTransaction) -> Result<u64, redb::Error>;
}

struct Typed<K: Key + 'static, V: Value + 'static>(TableDefinition<'static, K, V>);

impl<K: Key + Sync + 'static, V: Value + Sync + 'static> CopyTable for Typed<K, V> {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn read(
        &self,
        txn: &ReadTransaction,
        after: Option<&[u8]>,
        max_bytes: usize,
        out: &mut dyn RowSink,
    ) -> Result<Option<Vec<u8>>, redb::Error> {
        let table = match txn.open_table(self.0) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let start = after.map(|a| K::from_bytes(a));
        let lower = match &start {
            Some(k) => Bound::Excluded(k.borrow()),
            None => Bound::Unbounded,
        };
        let mut bytes = 0;
        for item in table.range::<K::SelfType<'_>>((lower, Bound::Unbounded))? {
            let (k, v) = item?;
            let (k, v) = (k.value(), v.value());
            let (k, v) = (K::as_bytes(&k), V::as_bytes(&v));
            out.row(k.as_ref(), v.as_ref());
            bytes += k.as_ref().len() + v.as_ref().len() + 16;
            if bytes >= max_bytes {
                return Ok(Some(k.as_ref().to_vec()));
            }
        }
        Ok(None)
    }

    fn write<'a>(&self, txn: &WriteTransaction, rows: &mut dyn Iterator<Item = (&'a [u8], &'a [u8])>) -> Result<(), redb::Error> {
        let mut table = txn.open_table(self.0)?;
        for (k, v) in rows {
            table.insert(K::from_bytes(k), V::from_bytes(v))?;
        }
        Ok(())
    }

    fn count(&self, txn: &ReadTransaction) -> Result<u64, redb::Error> {
        match txn.open_table(self.0) {
            Ok(t) => Ok(t.len()?),
            Err(redb::TableError::TableDoesNotExist(_)) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }
}

impl CopyTable for StoreTable {
    fn name(&self) -> &str {
        self.def.name()
    }
    fn read(
        &self,
        txn: &ReadTransaction,
        after: Option<&[u8]>,
        max_bytes: usize,
        out: &mut dyn RowSink,
    ) -> Result<Option<Vec<u8>>, redb::Error> {
        Typed(self.def).read(txn, after, max_bytes, out)
    }
    fn write<'a>(&self, txn: &WriteTransaction, rows: &mut dyn Iterator<Item = (&'a [u8], &'a [u8])>) -> Result<(), redb::Error> {
        Typed(self.def).write(txn, rows)
    }
    fn count(&self, txn: &ReadTransaction) -> Result<u64, redb::Error> {
        Typed(self.def).count(txn)
    }
}

static ACCOUNT_TABLES: &[&dyn CopyTable] = &[
    &Typed(META),
    &Typed(USERS),
    &Typed(USER_EMAILS),
    &Typed(SESSIONS),
    &Typed(USER_SESSIONS),
    &Typed(STORE_DIRECTORY),
    &Typed(MEMBERS),
    &Typed(USER_STORES),
    &Typed(CELL_LOAD),
    &Typed(MFA),
    &Typed(MFA_CHALLENGES),
    &Typed(OIDC_STATES),
    &Typed(SOCIAL_LINKS),
    &Typed(SOCIAL_CODES),
    &Typed(SUBSCRIPTIONS),
    &Typed(PUBLISHABLE_KEYS),
    &Typed(STORE_PUBLISHABLE_KEYS),
    &Typed(CLOSED_STORES),
    &Typed(IDEMPOTENCY_KEYS),
    &Typed(PASSWORD_RESETS),
    &Typed(USER_PASSWORD_RESETS),
    &Typed(INVITATIONS),
    &Typed(INVITATION_TOKENS),
    &Typed(EMAIL_INVITATIONS),
];

static CELL_LOCAL_TABLES: &[&dyn CopyTable] =
    &[&Typed(META), &Typed(STORE_STATE), &Typed(STORE_CLOSED), &Typed(MOVE_LOG), &Typed(OUTBOX)];

/// Every table a database of kind `kind` (`"account"` or `"cell"`) may hold, in copy order.
/// The writer opens store tables in either kind (the directory's jobs and counters live in
/// them under the nil store), so both list them all; a copy skips those absent.
pub fn tables(kind: &str) -> Vec<&'static dyn CopyTable> {
    let stores = STORE_TABLES.iter().map(|t| t as &'static dyn CopyTable);
    match kind {
        "account" => ACCOUNT_TABLES.iter().copied().chain(stores).collect(),
        "cell" => CELL_LOCAL_TABLES.iter().copied().chain(stores).collect(),
        _ => Vec::new(),
    }
}

/// The tables of kind `kind` that `txn` holds, in copy order; refused naming any table that
/// [`tables`] does not list (added without being listed here), which a copy would miss.
pub fn present(txn: &ReadTransaction, kind: &str) -> Result<Vec<&'static dyn CopyTable>, String> {
    let names: Vec<String> = txn.list_tables().map_err(|e| e.to_string())?.map(|t| t.name().to_string()).collect();
    let listed = tables(kind);
    let unlisted: Vec<&str> = names.iter().map(String::as_str).filter(|n| !listed.iter().any(|t| t.name() == *n)).collect();
    if !unlisted.is_empty() {
        return Err(format!("tables a backup does not know: {}", unlisted.join(", ")));
    }
    Ok(listed.into_iter().filter(|t| names.iter().any(|n| n == t.name())).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::ReadableDatabase;

    impl RowSink for Vec<(Vec<u8>, Vec<u8>)> {
        fn row(&mut self, key: &[u8], value: &[u8]) {
            self.push((key.to_vec(), value.to_vec()));
        }
    }

    #[test]
    fn every_table_of_either_kind_is_listed_and_rows_of_every_type_copy_in_chunks() {
        let dir = tempfile::tempdir().unwrap();
        for (kind, db) in [("account", crate::account::DATABASE), ("cell", crate::cells::DATABASE)] {
            let src = crate::storage::open(&dir.path().join(format!("{kind}.redb")), db, crate::storage::ONE_OFF_CACHE).unwrap();
            let txn = src.begin_write().unwrap();
            if kind == "account" {
                let mut emails = txn.open_table(USER_EMAILS).unwrap();
                for i in 0..50u128 {
                    emails.insert(format!("u{i:03}@example.com").as_str(), i).unwrap();
                }
                drop(emails);
                txn.open_table(INVITATION_TOKENS).unwrap().insert([7u8; 32].as_slice(), (1u128, 2u128)).unwrap();
            } else {
                txn.open_table(STORE_STATE).unwrap().insert(9u128, 1u8).unwrap();
                txn.open_table(PRODUCTS.def).unwrap().insert([1u8; 20].as_slice(), [2u8; 300].as_slice()).unwrap();
            }
            txn.commit().unwrap();
            let read = src.begin_read().unwrap();
            let present = present(&read, kind).expect("every table a fresh database holds is listed");
            let copy = redb::Database::create(dir.path().join(format!("{kind}-copy.redb"))).unwrap();
            let mut total = 0;
            for t in &present {
                // Chunks of about 100 bytes: several per table with rows.
                let mut after = None;
                loop {
                    let mut rows: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
                    let more = t.read(&read, after.as_deref(), 100, &mut rows).unwrap();
                    total += rows.len() as u64;
                    let w = copy.begin_write().unwrap();
                    t.write(&w, &mut rows.iter().map(|(k, v)| (k.as_slice(), v.as_slice()))).unwrap();
                    w.commit().unwrap();
                    match more {
                        Some(last) => after = Some(last),
                        None => break,
                    }
                }
            }
            let copied = copy.begin_read().unwrap();
            let mut expected = 0;
            for t in &present {
                assert_eq!(t.count(&copied).unwrap(), t.count(&read).unwrap(), "{kind}: {}", t.name());
                expected += t.count(&read).unwrap();
            }
            assert_eq!(total, expected);
            if kind == "account" {
                let emails = copied.open_table(USER_EMAILS).unwrap();
                assert_eq!(emails.get("u042@example.com").unwrap().unwrap().value(), 42);
                let tokens = copied.open_table(INVITATION_TOKENS).unwrap();
                assert_eq!(tokens.get([7u8; 32].as_slice()).unwrap().unwrap().value(), (1, 2));
            } else {
                assert_eq!(copied.open_table(STORE_STATE).unwrap().get(9u128).unwrap().unwrap().value(), 1);
            }
        }
    }
}
