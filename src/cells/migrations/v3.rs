//! Format 3: records on the record layer (`storage::record`) keep their lists in order tables and
//! count their filter values. Orders' list rows are rebuilt with the layer's summary and a counter
//! per status, financial status, fulfillment status and customer; shipping zones and tax rates,
//! read whole and sorted in memory before, gain order tables (`shipping_zone_order`,
//! `tax_rate_order`), their totals and, for tax rates, a counter per country. Discounts' list rows
//! gain the summary (status times, value type, method, search text) and counters per value type
//! and method; a discount's comments gain their list (`discount_comment_order`) and a total each.
//! Gift cards' list rows gain the summary (status times, customer, search text) and a counter per
//! customer. Catalogs' list rows lose their per-market scope: the market is a counted filter,
//! status too, with the name as search text.

use redb::WriteTransaction;

use crate::cells::discount_comments::DiscountComment;
use crate::domain::catalog::Catalog;
use crate::domain::gift_card::GiftCard;
use crate::domain::order::Order;
use crate::domain::pricing::discount::Discount;
use crate::domain::pricing::shipping::ShippingZone;
use crate::domain::pricing::tax::TaxRate;
use crate::storage::record::rebuild;

pub(super) fn records_count_their_filters(txn: &WriteTransaction) -> Result<(), redb::Error> {
    // Orders as format 7 and earlier wrote them (format 8 added line fields).
    crate::storage::record::rebuild_with::<Order>(txn, super::v8::order_v7)?;
    rebuild::<ShippingZone>(txn)?;
    rebuild::<Discount>(txn)?;
    rebuild::<DiscountComment>(txn)?;
    rebuild::<GiftCard>(txn)?;
    rebuild::<Catalog>(txn)?;
    rebuild::<TaxRate>(txn)
}

#[cfg(test)]
mod tests {
    use redb::ReadableDatabase;
    use uuid::Uuid;

    use crate::cells::migrations::fixture::{migrated, tax_rate};
    use crate::domain::pricing::tax::TaxRate;
    use crate::storage::list::{ListQuery, page_from_rows};

    #[test]
    fn format_2_tax_rates_are_listed_and_counted_after_the_step() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cell.redb");
        let store = Uuid::from_u128(7);
        let rates = [tax_rate("CA", "GST", 1), tax_rate("US", "NY", 2), tax_rate("CA", "PST", 3)];
        let db = migrated(&path, 2, store, &rates);
        let txn = db.begin_read().unwrap();
        let q = ListQuery { sort: "name", limit: 2, ..Default::default() };
        let first = page_from_rows::<TaxRate>(&txn, store, &q, 0).unwrap();
        assert_eq!(first.total, 3);
        assert_eq!(first.items.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["GST", "NY"]);
        let canada = ListQuery { filters: vec![(0, vec![b"CA".to_vec()])], ..q.clone() };
        let listed = page_from_rows::<TaxRate>(&txn, store, &canada, 0).unwrap();
        assert_eq!((listed.total, listed.items.len()), (2, 2), "the country counter holds the filtered total");
        let newest =
            page_from_rows::<TaxRate>(&txn, store, &ListQuery { sort: "created_at", desc: true, limit: 1, ..q }, 0).unwrap();
        assert_eq!(newest.items[0].name, "PST");
    }
}
