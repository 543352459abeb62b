//! Ordered migration steps between format versions. Each step moves a database of one kind from
//! `from` to `from + 1` inside one transaction, so a crash mid-migration leaves the old version.
//! Add one file-level function per step and list it in [`STEPS`]; document it in
//! `data-format/README.md`, "Version changes".

use redb::{Database, WriteTransaction};

use crate::storage::DbKind;
use crate::storage::tables::META;

/// One migration step.
pub struct Step {
    pub kind: DbKind,
    pub from: u32,
    pub run: fn(&WriteTransaction) -> Result<(), redb::Error>,
}

mod v2;
mod v3;
mod v4;
mod v5;
mod v6;

/// Every step, in order: each file names what its version changed.
pub const STEPS: &[Step] = &[
    Step { kind: DbKind::Cell, from: 1, run: v2::product_orders_in_memory },
    Step { kind: DbKind::Cell, from: 2, run: v3::records_count_their_filters },
    Step { kind: DbKind::Cell, from: 3, run: v4::collections_are_records },
    Step { kind: DbKind::Cell, from: 4, run: v5::filters_have_partitions },
    Step { kind: DbKind::Cell, from: 5, run: v6::product_sorts_apart },
];

/// Runs every step of `kind` from `version` on, each in its own transaction that also records
/// the new version.
pub fn run(db: &Database, kind: DbKind, mut version: u32, steps: &[Step]) -> Result<(), redb::Error> {
    for step in steps.iter().filter(|s| s.kind == kind) {
        if step.from != version {
            continue;
        }
        let txn = db.begin_write()?;
        (step.run)(&txn)?;
        version += 1;
        txn.open_table(META)?.insert("format_version", version.to_le_bytes().as_slice())?;
        txn.commit()?;
        tracing::info!(kind = ?kind, version, "migrated database");
    }
    Ok(())
}

/// What the steps' tests share: a cell written at an older format, opened through the steps.
#[cfg(test)]
mod fixture {
    use std::path::Path;

    use redb::Database;
    use uuid::Uuid;

    use crate::domain::pricing::tax::{TaxRate, TaxRateInput};
    use crate::storage::codec::encode;
    use crate::storage::record::{Record, row_key};
    use crate::storage::tables::META;
    use crate::storage::{DbKind, ONE_OFF_CACHE, open};

    /// Writes a cell at format `version` holding `records` of `store` and nothing else (no list
    /// rows, no counters), then opens it: every step from `version` on runs.
    pub fn migrated<R: Record>(path: &Path, version: u32, store: Uuid, records: &[R]) -> Database {
        {
            let db = open(path, DbKind::Cell, ONE_OFF_CACHE).unwrap();
            let txn = db.begin_write().unwrap();
            let mut t = txn.open_table(R::TABLE.def).unwrap();
            for r in records {
                t.insert(row_key(store, r.id()).as_slice(), encode(r).unwrap().as_slice()).unwrap();
            }
            drop(t);
            txn.open_table(META).unwrap().insert("format_version", version.to_le_bytes().as_slice()).unwrap();
            txn.commit().unwrap();
        }
        open(path, DbKind::Cell, ONE_OFF_CACHE).unwrap()
    }

    /// A 5 % tax rate of `country` named `name`, made at `at` with the id `at`.
    pub fn tax_rate(country: &str, name: &str, at: i64) -> TaxRate {
        let input = TaxRateInput { country: country.into(), province: None, rate: 500, name: name.into(), shipping: false };
        TaxRate::create(&input, Uuid::from_u128(at as u128), at, at).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::{ReadableDatabase, ReadableTable, TableDefinition};

    const MARKS: TableDefinition<&str, u32> = TableDefinition::new("marks");

    fn mark_two(txn: &WriteTransaction) -> Result<(), redb::Error> {
        txn.open_table(MARKS)?.insert("step", 2)?;
        Ok(())
    }

    fn mark_three(txn: &WriteTransaction) -> Result<(), redb::Error> {
        let mut t = txn.open_table(MARKS)?;
        let seen = t.get("step")?.map(|v| v.value()).unwrap_or(0);
        t.insert("step", seen * 10 + 3)?;
        Ok(())
    }

    #[test]
    fn steps_run_in_order_from_the_found_version() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        let steps = [
            Step { kind: DbKind::Cell, from: 2, run: mark_three },
            Step { kind: DbKind::Cell, from: 1, run: mark_two },
            Step { kind: DbKind::Account, from: 1, run: mark_three },
        ];
        // Steps are listed in order in STEPS; here the order is checked by `from`.
        let mut ordered: Vec<_> = steps.iter().collect();
        ordered.sort_by_key(|s| s.from);
        let ordered: Vec<Step> = ordered.into_iter().map(|s| Step { kind: s.kind, from: s.from, run: s.run }).collect();
        run(&db, DbKind::Cell, 1, &ordered).unwrap();
        let txn = db.begin_read().unwrap();
        assert_eq!(txn.open_table(MARKS).unwrap().get("step").unwrap().unwrap().value(), 23);
        let v = txn.open_table(META).unwrap().get("format_version").unwrap().unwrap().value().to_vec();
        assert_eq!(u32::from_le_bytes(v.try_into().unwrap()), 3);
    }
}
