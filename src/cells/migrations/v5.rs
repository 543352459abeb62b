//! Format 5: partitions. A record's order rows gain, for each counted filter value it has, a row
//! in that value's partition (`store [‖ parent] ‖ 0xF0 ‖ filter position ‖ value ‖ default sort
//! value ‖ id`), so a list filtered on one value in its default order reads its partition.
//! Every record with counted filters has its order rows rebuilt.

use redb::WriteTransaction;

use crate::domain::catalog::Catalog;
use crate::domain::collection::Collection;
use crate::domain::gift_card::GiftCard;
use crate::domain::order::Order;
use crate::domain::pricing::discount::Discount;
use crate::domain::pricing::tax::TaxRate;
use crate::storage::record::rebuild;

pub(super) fn filters_have_partitions(txn: &WriteTransaction) -> Result<(), redb::Error> {
    // Orders as format 7 and earlier wrote them (format 8 added line fields).
    crate::storage::record::rebuild_with::<Order>(txn, super::v8::order_v7)?;
    rebuild::<TaxRate>(txn)?;
    rebuild::<Discount>(txn)?;
    rebuild::<GiftCard>(txn)?;
    rebuild::<Catalog>(txn)?;
    rebuild::<Collection>(txn)
}

#[cfg(test)]
mod tests {
    use redb::ReadableDatabase;
    use uuid::Uuid;

    use crate::cells::migrations::fixture::{migrated, tax_rate};
    use crate::domain::pricing::tax::TaxRate;
    use crate::storage::list::{ListQuery, page_from_rows};
    use crate::storage::record::partition_prefix;
    use crate::storage::tables::TAX_RATE_ORDER;

    #[test]
    fn format_4_records_gain_their_partitions_and_filtered_pages_read_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cell.redb");
        let store = Uuid::from_u128(7);
        let rates: Vec<TaxRate> = (0..30).map(|i| tax_rate(if i % 10 == 0 { "CA" } else { "US" }, &format!("r{i}"), i)).collect();
        let db = migrated(&path, 4, store, &rates);
        let txn = db.begin_read().unwrap();
        let order = txn.open_table(TAX_RATE_ORDER.def).unwrap();
        let (start, end) = crate::storage::keys::prefix_range(&partition_prefix(store, None, 0, b"CA"));
        let canada: Vec<Uuid> = order
            .range(start.as_slice()..end.unwrap().as_slice())
            .unwrap()
            .map(|r| crate::storage::keys::trailing_id(r.unwrap().0.value()).unwrap())
            .collect();
        assert_eq!(canada, [0u128, 10, 20].map(Uuid::from_u128), "the partition holds Canada's rates in the default order");
        let q = ListQuery {
            sort: "created_at",
            desc: true,
            offset: 1,
            limit: 1,
            filters: vec![(0, vec![b"CA".to_vec()])],
            ..Default::default()
        };
        let listed = page_from_rows::<TaxRate>(&txn, store, &q, 0).unwrap();
        assert_eq!(listed.total, 3);
        assert_eq!(listed.items.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["r10"]);
        drop((order, txn));

        // Without the plain created_at rows, the filtered page still answers: it reads the partition.
        let txn = db.begin_write().unwrap();
        let plain = crate::storage::record::order_prefix(store, None, 0);
        txn.open_table(TAX_RATE_ORDER.def).unwrap().retain(|k, _| !k.starts_with(&plain)).unwrap();
        txn.commit().unwrap();
        let txn = db.begin_read().unwrap();
        assert_eq!(page_from_rows::<TaxRate>(&txn, store, &q, 0).unwrap().items[0].name, "r10");
        let all = ListQuery { filters: vec![], ..q };
        assert!(
            page_from_rows::<TaxRate>(&txn, store, &all, 0).unwrap().items.is_empty(),
            "the unfiltered page read the plain rows"
        );
    }
}
