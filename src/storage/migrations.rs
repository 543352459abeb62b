//! Ordered migration steps between format versions. Each step moves a database from `from` to
//! `from + 1` inside one transaction, so a crash mid-migration leaves the old version. The steps
//! of a kind of database are declared by its owner ([`crate::storage::DbKind::steps`]); each is
//! documented in `data-format/README.md`, "Version changes".

use redb::{Database, WriteTransaction};

use crate::storage::tables::META;

/// One migration step.
pub struct Step {
    pub from: u32,
    pub run: fn(&WriteTransaction) -> Result<(), redb::Error>,
}

/// Runs every step from `version` on, in order, each in its own transaction that also records
/// the new version. The version is shared by every kind of database, and a kind that a version
/// did not change has no step from it: a gap before a step means the data is already as that
/// step expects (the account directory's first step is from 8).
pub fn run(db: &Database, name: &str, mut version: u32, steps: &[Step]) -> Result<(), redb::Error> {
    for step in steps {
        if step.from < version {
            continue;
        }
        let txn = db.begin_write()?;
        (step.run)(&txn)?;
        version = step.from + 1;
        txn.open_table(META)?.insert("format_version", version.to_le_bytes().as_slice())?;
        txn.commit()?;
        tracing::info!(kind = name, version, "migrated database");
    }
    Ok(())
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

    fn version(db: &Database) -> u32 {
        let txn = db.begin_read().unwrap();
        let v = txn.open_table(META).unwrap().get("format_version").unwrap().unwrap().value().to_vec();
        u32::from_le_bytes(v.try_into().unwrap())
    }

    fn marks(db: &Database) -> u32 {
        db.begin_read().unwrap().open_table(MARKS).unwrap().get("step").unwrap().map(|v| v.value()).unwrap_or(0)
    }

    #[test]
    fn steps_run_in_order_from_the_found_version() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        // A step from a version below the database's is passed over.
        let steps = [Step { from: 1, run: mark_two }, Step { from: 2, run: mark_three }];
        run(&db, "cell", 2, &steps).unwrap();
        assert_eq!((marks(&db), version(&db)), (3, 3));
        let db2 = Database::create(dir.path().join("t2.redb")).unwrap();
        run(&db2, "cell", 1, &steps).unwrap();
        assert_eq!((marks(&db2), version(&db2)), (23, 3));
    }

    #[test]
    fn a_gap_before_a_step_means_the_versions_between_changed_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        let steps = [Step { from: 4, run: mark_two }, Step { from: 7, run: mark_three }];
        run(&db, "account", 1, &steps).unwrap();
        assert_eq!((marks(&db), version(&db)), (23, 8));
        // At the last version: nothing runs.
        run(&db, "account", 8, &steps).unwrap();
        assert_eq!((marks(&db), version(&db)), (23, 8));
    }
}
