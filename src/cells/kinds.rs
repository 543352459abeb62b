//! Every record kind of a cell, listed once: what is done with all the records of a kind at
//! once, across stores. `admin check` recounts each kind's rows against its counters
//! (`recount`); a restore writes each kind's order rows again (`rebuilt`).

use redb::{ReadTransaction, WriteTransaction};
use uuid::Uuid;

use crate::error::ApiResult;
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
}

const fn kind<R: Record>() -> Kind {
    Kind { table: R::TABLE, order: R::LIST.order, recount: record::recount::<R>, refill_order: record::refill_order::<R> }
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
