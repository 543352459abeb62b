//! Format 13: only one sort's order rows carry a record's summary (`List::summaries`: its
//! `updated_at` sort where it has one, else the default); the other sorts' rows are their keys
//! alone, as partition rows are since format 11. A change of summary (an order's fulfillment or
//! financial status) so rewrites no row but the one its `updated_at` moves anyway, instead of
//! one per sort. Every record kind's order rows are written again from the records; keys and
//! counters are unchanged. A list tested on summaries in another sort reads them from the
//! carrying rows (`storage::list_names::RowShape`).

use redb::WriteTransaction;

pub(super) fn summaries_in_one_sort(txn: &WriteTransaction) -> Result<(), redb::Error> {
    crate::cells::kinds::refill_orders(txn)
}

#[cfg(test)]
mod tests {
    use redb::ReadableDatabase;
    use uuid::Uuid;

    use crate::cells::migrations::fixture::{migrated, reopened_with_row, rows_of, tax_rate};
    use crate::domain::pricing::tax::TaxRate;
    use crate::storage::list::{ListQuery, page_from_rows};
    use crate::storage::record::{PARTITION, row_shape};
    use crate::storage::tables::TAX_RATE_ORDER;

    /// The tax rates' sort rows (partitions left out): (key, value).
    fn sort_rows(db: &redb::Database) -> Vec<(Vec<u8>, Vec<u8>)> {
        rows_of(db, TAX_RATE_ORDER).into_iter().filter(|(k, _)| k.get(16) != Some(&PARTITION)).collect()
    }

    #[test]
    fn rows_of_other_sorts_lose_the_summary_and_lists_read_as_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cell.redb");
        let store = Uuid::from_u128(1);
        let rates = [tax_rate("CA", "gst", 100), tax_rate("US", "sales", 200), tax_rate("CA", "hst", 300)];
        let db = migrated(&path, 12, store, &rates);
        let carrying = row_shape::<TaxRate>().unwrap().summary_tag;
        assert_eq!(carrying, 1, "a tax rate's updated_at rows");
        let rows = sort_rows(&db);
        let (carriers, others): (Vec<_>, Vec<_>) = rows.iter().cloned().partition(|(k, _)| k.get(16) == Some(&carrying));
        assert_eq!(carriers.len(), 3, "one carrying row per rate");
        assert!(carriers.iter().all(|(_, v)| !v.is_empty()), "the carrying rows keep the summary");
        assert_eq!(others.len(), 9, "three more sorts");
        assert!(others.iter().all(|(_, v)| v.is_empty()), "{others:?}");

        // A row written by format 12 carries the summary in every sort: the step empties it.
        let db = reopened_with_row(db, &path, 12, TAX_RATE_ORDER, &others[0].0, &carriers[0].1);
        assert_eq!(sort_rows(&db), rows);

        // One country's rates by name, a sort whose rows carry no summary, and by creation, the
        // default sort (whose rows carry none either).
        let txn = db.begin_read().unwrap();
        let ca = ListQuery { sort: "name", limit: 10, filters: vec![(0, vec![b"CA".to_vec()])], ..Default::default() };
        let page = page_from_rows::<TaxRate>(&txn, store, &ca, 0).unwrap();
        assert_eq!(page.items, vec![rates[0].clone(), rates[2].clone()], "gst before hst");
        let desc = ListQuery { desc: true, ..ca };
        let page = page_from_rows::<TaxRate>(&txn, store, &desc, 0).unwrap();
        assert_eq!(page.items, vec![rates[2].clone(), rates[0].clone()]);
        let both = vec![(0, vec![b"US".to_vec(), b"CA".to_vec()])];
        let newest = ListQuery { sort: "created_at", desc: true, limit: 2, filters: both, ..Default::default() };
        let page = page_from_rows::<TaxRate>(&txn, store, &newest, 0).unwrap();
        assert_eq!(page.items, vec![rates[2].clone(), rates[1].clone()]);
    }
}
