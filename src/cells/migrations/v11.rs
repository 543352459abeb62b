//! Format 11: a partition row is its key alone. Every record kind's order rows are written
//! again from the records, so the partition rows lose the summary they carried (the sort rows
//! keep theirs, unchanged). Nothing read those summaries but the walk of a view too large to
//! name, which now reads the sort's rows; a change of summary no longer rewrites a row in every
//! partition the record stays in.

use redb::WriteTransaction;

pub(super) fn partition_rows_are_keys(txn: &WriteTransaction) -> Result<(), redb::Error> {
    crate::cells::kinds::refill_orders(txn)
}

#[cfg(test)]
mod tests {
    use redb::ReadableDatabase;
    use uuid::Uuid;

    use crate::cells::migrations::fixture::{migrated, reopened_with_row, rows_of, tax_rate};
    use crate::domain::pricing::tax::TaxRate;
    use crate::storage::list::{ListQuery, page_from_rows};
    use crate::storage::record::PARTITION;
    use crate::storage::tables::TAX_RATE_ORDER;

    type Rows = Vec<(Vec<u8>, Vec<u8>)>;

    /// The order rows of the tax rates: (key, value), partition rows apart.
    fn rows(db: &redb::Database) -> (Rows, Rows) {
        let all = rows_of(db, TAX_RATE_ORDER);
        all.into_iter().partition(|(k, _)| k.get(16) == Some(&PARTITION))
    }

    #[test]
    fn partition_rows_lose_their_summary_and_lists_read_as_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cell.redb");
        let store = Uuid::from_u128(1);
        let rates = [tax_rate("CA", "gst", 100), tax_rate("US", "sales", 200), tax_rate("CA", "hst", 300)];
        let db = migrated(&path, 10, store, &rates);
        let (partitions, sorts) = rows(&db);
        assert_eq!(partitions.len(), 3, "one row per rate in its country's partition");
        assert!(partitions.iter().all(|(_, v)| v.is_empty()), "{partitions:?}");
        // (Format 13, run after this step, empties the rows of every sort but one.)
        let carrying = crate::storage::record::row_shape::<TaxRate>().unwrap().summary_tag;
        assert!(
            sorts.iter().filter(|(k, _)| k.get(16) == Some(&carrying)).all(|(_, v)| !v.is_empty()),
            "the carrying rows keep the summary"
        );

        // A row written by format 10 carries the summary: the step empties it.
        let (stale_key, _) = partitions[0].clone();
        let summary = sorts[0].1.clone();
        let db = reopened_with_row(db, &path, 10, TAX_RATE_ORDER, &stale_key, &summary);
        let (again, sorts_again) = rows(&db);
        assert_eq!(again, partitions);
        assert_eq!(sorts_again, sorts);

        // One country's rates, from its partition (views with more to test read the sort's
        // rows: `gift_cards` compares every kind of query with the held lists).
        let txn = db.begin_read().unwrap();
        let ca = ListQuery { sort: "created_at", limit: 10, filters: vec![(0, vec![b"CA".to_vec()])], ..Default::default() };
        let page = page_from_rows::<TaxRate>(&txn, store, &ca, 0).unwrap();
        // (The fixture writes no counters and this step writes none: the total is not checked.)
        assert_eq!(page.items, vec![rates[0].clone(), rates[2].clone()]);
    }
}
