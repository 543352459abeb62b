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

/// Runs every step from `version` on, each in its own transaction that also records
/// the new version.
pub fn run(db: &Database, name: &str, mut version: u32, steps: &[Step]) -> Result<(), redb::Error> {
    for step in steps {
        if step.from != version {
            continue;
        }
        let txn = db.begin_write()?;
        (step.run)(&txn)?;
        version += 1;
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

    #[test]
    fn steps_run_in_order_from_the_found_version() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        // A step from a version the database is not at is passed over.
        let steps = [Step { from: 1, run: mark_two }, Step { from: 2, run: mark_three }, Step { from: 7, run: mark_two }];
        run(&db, "cell", 1, &steps).unwrap();
        let txn = db.begin_read().unwrap();
        assert_eq!(txn.open_table(MARKS).unwrap().get("step").unwrap().unwrap().value(), 23);
        let v = txn.open_table(META).unwrap().get("format_version").unwrap().unwrap().value().to_vec();
        assert_eq!(u32::from_le_bytes(v.try_into().unwrap()), 3);
    }
}
