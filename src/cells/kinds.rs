//! Every record kind of a cell, listed once: what is done with all the records of a kind at
//! once, across stores. `admin check` recounts each kind's rows against its counters
//! (`recount`); a restore writes each kind's order rows again (`rebuilt`).

use redb::{ReadTransaction, WriteTransaction};
use uuid::Uuid;

use crate::error::ApiResult;
use crate::storage::list_names::RowShape;
use crate::storage::record::{self, Record};
use crate::storage::tables::StoreTable;

/// One record kind's operations over a whole database.
pub struct Kind {
    /// Its records' table.
    pub table: StoreTable,
    /// Its order table, if it is listed.
    pub order: Option<StoreTable>,
    /// Its rows by store against its total counters, the disagreements described.
    pub recount: fn(&ReadTransaction, &[Uuid]) -> ApiResult<Vec<String>>,
    /// Writes its order rows from its records.
    pub refill_order: fn(&WriteTransaction) -> Result<(), redb::Error>,
    /// How its order rows are laid out, if it is listed: what builds its lists by name needs.
    pub shape: fn() -> Option<RowShape>,
}

const fn kind<R: Record>() -> Kind {
    Kind {
        table: R::TABLE,
        order: R::LIST.order,
        recount: record::recount::<R>,
        refill_order: record::refill_order::<R>,
        shape: record::row_shape::<R>,
    }
}

/// Writes every kind's order rows from its records (over rows of the same keys, a format step's
/// new values; into empty tables, a restore's).
pub fn refill_orders(txn: &WriteTransaction) -> Result<(), redb::Error> {
    for kind in KINDS {
        (kind.refill_order)(txn)?;
    }
    Ok(())
}

/// How the rows of order table `order` are laid out: its record kind's [`RowShape`].
pub fn row_shape(order: StoreTable) -> Option<RowShape> {
    KINDS.iter().find(|k| k.order.is_some_and(|o| o.index == order.index)).and_then(|k| (k.shape)())
}

/// Every record kind of a cell.
pub const KINDS: &[Kind] = &[
    kind::<crate::cells::payments::PaymentIntent>(),
    kind::<crate::domain::catalog::Catalog>(),
    kind::<crate::domain::gift_card::GiftCard>(),
    kind::<crate::domain::market::Market>(),
    kind::<crate::domain::checkout::Checkout>(),
    kind::<crate::cells::events::Event>(),
    kind::<crate::domain::fulfillment::FulfillmentOrder>(),
    kind::<crate::domain::fulfillment::Fulfillment>(),
    kind::<crate::cells::discount_comments::DiscountComment>(),
    kind::<crate::domain::pricing::discount::Discount>(),
    kind::<crate::cells::webhooks::Webhook>(),
    kind::<crate::cells::webhooks::Delivery>(),
    kind::<crate::domain::cart::Cart>(),
    kind::<crate::domain::pricing::shipping::ShippingZone>(),
    kind::<crate::cells::stock::levels::Level>(),
    kind::<crate::cells::stock::history::InventoryChange>(),
    kind::<crate::domain::stock::Location>(),
    kind::<crate::domain::order::Order>(),
    kind::<crate::domain::collection::Collection>(),
    kind::<crate::domain::pricing::tax::TaxRate>(),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Every listed kind names, in `summaries`, a sort of its own: its lists built by name find
    /// the rows that carry its summaries.
    #[test]
    fn every_listed_kind_knows_which_rows_carry_its_summaries() {
        for kind in KINDS {
            let Some(order) = kind.order else { continue };
            assert!((kind.shape)().is_some(), "the kind listed in order table {}", order.index);
            assert_eq!(row_shape(order), (kind.shape)());
        }
    }
}
