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
    rebuild::<Order>(txn)?;
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

    use crate::domain::pricing::tax::{TaxRate, TaxRateInput};
    use crate::storage::codec::encode;
    use crate::storage::list::{ListQuery, page};
    use crate::storage::record::row_key;
    use crate::storage::tables::{META, TAX_RATES};
    use crate::storage::{DbKind, open};

    fn rate(country: &str, name: &str, at: i64) -> TaxRate {
        let input = TaxRateInput { country: country.into(), province: None, rate: 500, name: name.into(), shipping: false };
        TaxRate::create(&input, Uuid::from_u128(at as u128), at, at).unwrap()
    }

    #[test]
    fn format_2_tax_rates_are_listed_and_counted_after_the_step() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cell.redb");
        let store = Uuid::from_u128(7);
        let rates = [rate("CA", "GST", 1), rate("US", "NY", 2), rate("CA", "PST", 3)];
        {
            // A format-2 cell: tax rate rows only, no order rows, no counters.
            let db = open(&path, DbKind::Cell, crate::storage::ONE_OFF_CACHE).unwrap();
            let txn = db.begin_write().unwrap();
            let mut t = txn.open_table(TAX_RATES.def).unwrap();
            for r in &rates {
                t.insert(row_key(store, r.id).as_slice(), encode(r).unwrap().as_slice()).unwrap();
            }
            drop(t);
            txn.open_table(META).unwrap().insert("format_version", 2u32.to_le_bytes().as_slice()).unwrap();
            txn.commit().unwrap();
        }
        let db = open(&path, DbKind::Cell, crate::storage::ONE_OFF_CACHE).unwrap();
        let txn = db.begin_read().unwrap();
        let q = ListQuery { sort: "name", limit: 2, ..Default::default() };
        let first = page::<TaxRate>(&txn, store, &q, 0).unwrap();
        assert_eq!(first.total, 3);
        assert_eq!(first.items.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["GST", "NY"]);
        let canada = ListQuery { filters: vec![(0, vec![b"CA".to_vec()])], ..q.clone() };
        let listed = page::<TaxRate>(&txn, store, &canada, 0).unwrap();
        assert_eq!((listed.total, listed.items.len()), (2, 2), "the country counter holds the filtered total");
        let newest = page::<TaxRate>(&txn, store, &ListQuery { sort: "created_at", desc: true, limit: 1, ..q }, 0).unwrap();
        assert_eq!(newest.items[0].name, "PST");
    }
}
