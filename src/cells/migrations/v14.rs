//! Format 14: a kind listed by default in its records' own order (`List::own_order`: events and
//! inventory history, whose ids grow in commit order) keeps no rows for that sort; its lists
//! read the record table itself, and work its summaries out from the records. The rows format
//! 13 kept for that sort are dropped: each such kind's order table is written again from its
//! records (its partition rows, keys alone, come back as they were). Counters are unchanged.

use redb::WriteTransaction;

pub(super) fn own_order_keeps_no_rows(txn: &WriteTransaction) -> Result<(), redb::Error> {
    for kind in crate::cells::kinds::KINDS {
        let Some(order) = kind.order.filter(|_| (kind.shape)().is_some_and(|s| s.own.is_some())) else { continue };
        txn.open_table(order.def)?.retain(|_, _| false)?;
        (kind.refill_order)(txn)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use redb::ReadableDatabase;
    use uuid::Uuid;

    use crate::cells::events::Event;
    use crate::cells::migrations::fixture::{migrated, reopened_with_row, rows_of};
    use crate::storage::list::{ListQuery, page_from_rows};
    use crate::storage::record::PARTITION;
    use crate::storage::tables::EVENT_ORDER;

    fn event(at: i64, topic: &str) -> Event {
        Event { id: Uuid::from_u128(at as u128), topic: topic.into(), created_at: at, data: format!("{{\"at\":{at}}}") }
    }

    /// The event order table's rows: (key, value).
    fn rows(db: &redb::Database) -> Vec<(Vec<u8>, Vec<u8>)> {
        rows_of(db, EVENT_ORDER)
    }

    #[test]
    fn the_own_order_rows_go_and_lists_read_the_records() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cell.redb");
        let store = Uuid::from_u128(1);
        let events =
            [event(100, "order.created"), event(200, "product.created"), event(300, "order.created"), event(400, "order.paid")];
        let db = migrated(&path, 13, store, &events);
        let kept = rows(&db);
        assert_eq!(kept.len(), 4, "a topic partition row per event, and no other");
        assert!(kept.iter().all(|(k, v)| k.get(16) == Some(&PARTITION) && v.is_empty()), "{kept:?}");

        // A row format 13 kept for the created_at sort (tag 0, carrying a summary) is dropped.
        let old = [store.as_bytes(), &[0u8][..], events[0].id.as_bytes()].concat();
        let db = reopened_with_row(db, &path, 13, EVENT_ORDER, &old, b"summary");
        assert_eq!(rows(&db), kept);

        // Newest first from the events themselves; a range tested on summaries worked out from
        // them; one topic from its partition; two topics and a range, tested.
        let txn = db.begin_read().unwrap();
        let ids = |q: &ListQuery| -> Vec<i64> {
            page_from_rows::<Event>(&txn, store, q, 0).unwrap().items.iter().map(|e| e.created_at).collect()
        };
        let newest = ListQuery { sort: "created_at", desc: true, limit: 3, ..Default::default() };
        assert_eq!(ids(&newest), [400, 300, 200]);
        let ranged = ListQuery { ranges: vec![(0, Some(150), Some(350))], ..newest.clone() };
        assert_eq!(ids(&ranged), [300, 200]);
        let orders = ListQuery { filters: vec![(0, vec![b"order.created".to_vec()])], ..newest.clone() };
        assert_eq!(ids(&orders), [300, 100]);
        let two = ListQuery {
            filters: vec![(0, vec![b"order.paid".to_vec(), b"product.created".to_vec()])],
            ranges: vec![(0, None, Some(399))],
            ..newest
        };
        assert_eq!(ids(&two), [200]);
    }
}
