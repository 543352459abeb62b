//! Format 8: stock kept per location (store tables 50–61). Each store gains its default
//! location; each variant's quantity becomes its available there (a negative one 0, the
//! difference recorded in the history, and the product rewritten with it); each OPEN order gets
//! an OPEN fulfillment order there with its tracked units committed (completion had already
//! taken them from the quantity); order lines gain `fulfilledQuantity` and
//! `fulfillableQuantity`, so every `orders` row is rewritten.

use std::collections::HashMap;

use redb::{ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::fulfillment::order_state;
use crate::cells::products::Rendered;
use crate::cells::stock::history::InventoryChange;
use crate::cells::stock::levels::{Level, level_id};
use crate::domain::cart::Attributes;
use crate::domain::fulfillment::{FoLine, FoStatus, FulfillmentOrder};
use crate::domain::money::Money;
use crate::domain::order::{
    FinancialStatus, FulfillmentStatus, Order, OrderDiscount, OrderGiftCard, OrderLine, OrderPayment, OrderStatus, ShippingLine,
};
use crate::domain::pricing::shipping::Address;
use crate::domain::pricing::tax::TaxLine;
use crate::domain::product::{Product, ProductSorts};
use crate::domain::stock::{Actor, Location, Quantities, Reason, Reference, ReferenceKind};
use crate::domain::store::StoreSettings;
use crate::storage::codec::{decode, encode};
use crate::storage::keys::{Key, leading_store};
use crate::storage::record::{self, Record, key_in, row_key};
use crate::storage::tables::{ORDERS, PRODUCT_SORTS, PRODUCT_VIEWS, PRODUCTS, STORES};

/// An order line as format 7 wrote it.
#[derive(Serialize, Deserialize)]
struct OrderLineV7 {
    id: Uuid,
    variant_id: Uuid,
    product_id: Uuid,
    title: String,
    variant_title: String,
    sku: Option<String>,
    quantity: u32,
    unit_price: Money,
    discount: Money,
    tax: Money,
    total: Money,
    properties: Attributes,
}

/// An order as format 7 wrote it.
#[derive(Serialize, Deserialize)]
struct OrderV7 {
    id: Uuid,
    number: u64,
    checkout_id: Option<Uuid>,
    customer_id: Option<Uuid>,
    email: Option<String>,
    phone: Option<String>,
    status: OrderStatus,
    financial_status: FinancialStatus,
    fulfillment_status: FulfillmentStatus,
    line_items: Vec<OrderLineV7>,
    subtotal: Money,
    discount: Money,
    shipping: Money,
    tax: Money,
    taxes_included: bool,
    tip: Money,
    total: Money,
    gift_card_total: Money,
    payment_total: Money,
    tax_lines: Vec<TaxLine>,
    discount_codes: Vec<String>,
    discount_applications: Vec<OrderDiscount>,
    shipping_line: Option<ShippingLine>,
    shipping_address: Option<Address>,
    billing_address: Option<Address>,
    gift_cards: Vec<OrderGiftCard>,
    payment: Option<OrderPayment>,
    accepts_email_marketing: bool,
    accepts_sms_marketing: bool,
    note: Option<String>,
    tags: Vec<String>,
    cancelled_at: Option<i64>,
    created_at: i64,
    updated_at: i64,
}

impl OrderV7 {
    fn upgrade(self) -> Order {
        let open = self.status == OrderStatus::Open;
        Order {
            id: self.id,
            number: self.number,
            checkout_id: self.checkout_id,
            customer_id: self.customer_id,
            email: self.email,
            phone: self.phone,
            status: self.status,
            financial_status: self.financial_status,
            fulfillment_status: self.fulfillment_status,
            line_items: self
                .line_items
                .into_iter()
                .map(|l| OrderLine {
                    id: l.id,
                    variant_id: l.variant_id,
                    product_id: l.product_id,
                    title: l.title,
                    variant_title: l.variant_title,
                    sku: l.sku,
                    quantity: l.quantity,
                    unit_price: l.unit_price,
                    discount: l.discount,
                    tax: l.tax,
                    total: l.total,
                    properties: l.properties,
                    fulfilled_quantity: 0,
                    fulfillable_quantity: if open { l.quantity } else { 0 },
                })
                .collect(),
            subtotal: self.subtotal,
            discount: self.discount,
            shipping: self.shipping,
            tax: self.tax,
            taxes_included: self.taxes_included,
            tip: self.tip,
            total: self.total,
            gift_card_total: self.gift_card_total,
            payment_total: self.payment_total,
            tax_lines: self.tax_lines,
            discount_codes: self.discount_codes,
            discount_applications: self.discount_applications,
            shipping_line: self.shipping_line,
            shipping_address: self.shipping_address,
            billing_address: self.billing_address,
            gift_cards: self.gift_cards,
            payment: self.payment,
            accepts_email_marketing: self.accepts_email_marketing,
            accepts_sms_marketing: self.accepts_sms_marketing,
            note: self.note,
            tags: self.tags,
            cancelled_at: self.cancelled_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// An `orders` row of format 7 (or earlier: orders kept this layout from format 1 on) as
/// today's order, for the list rebuilds of earlier steps.
pub(super) fn order_v7(bytes: &[u8]) -> crate::error::ApiResult<Order> {
    decode::<OrderV7>(bytes).map(OrderV7::upgrade)
}

fn corrupt(what: &'static str) -> impl Fn(crate::error::ApiError) -> redb::Error {
    move |e| redb::Error::Corrupted(format!("{what}: {e}"))
}

/// The rows of `table` as (key, value) pairs.
fn rows(txn: &WriteTransaction, table: crate::storage::tables::StoreTable) -> Result<crate::storage::tx::Rows, redb::Error> {
    let t = txn.open_table(table.def)?;
    let mut out = Vec::new();
    for item in t.iter()? {
        let (k, v) = item?;
        out.push((k.value().to_vec(), v.value().to_vec()));
    }
    Ok(out)
}

/// Writes a record's row as the record layer keys it; its order rows and counters are rebuilt
/// at the end of the step.
fn put<R: Record>(txn: &WriteTransaction, store: Uuid, r: &R) -> Result<(), redb::Error> {
    let k = key_in(store, r.scope(), r.id());
    txn.open_table(R::TABLE.def)?.insert(k.as_slice(), encode(r).map_err(corrupt(R::NAME))?.as_slice())?;
    Ok(())
}

/// A history row of the step.
fn change(level: &Level, delta: Quantities, reference: Option<Reference>, at: i64) -> InventoryChange {
    InventoryChange {
        id: Uuid::now_v7(),
        variant_id: level.variant_id,
        product_id: level.product_id,
        location_id: level.location_id,
        reason: Reason::Migrated,
        actor: Actor::System,
        reference,
        delta,
        after: level.quantities,
        note: None,
        created_at: at,
    }
}

pub(super) fn stock_per_location(txn: &WriteTransaction) -> Result<(), redb::Error> {
    // Each store's default location, made when the store was.
    let mut defaults: HashMap<Uuid, Uuid> = HashMap::new();
    for (_, v) in rows(txn, STORES)? {
        let s: StoreSettings = decode(&v).map_err(corrupt("stores"))?;
        let l = Location::default_for(Uuid::now_v7(), s.address.clone(), s.created_at);
        put(txn, s.id, &l)?;
        defaults.insert(s.id, l.id);
    }
    // Each variant's quantity becomes its available there.
    let mut levels: HashMap<(Uuid, Uuid), Level> = HashMap::new();
    let mut tracked: HashMap<(Uuid, Uuid), bool> = HashMap::new();
    for (k, v) in rows(txn, PRODUCTS)? {
        let Some(store) = leading_store(&k) else { continue };
        let Some(&at) = defaults.get(&store) else { continue };
        let mut p: Product = decode(&v).map_err(corrupt("products"))?;
        let mut rewritten = false;
        for var in &mut p.variants {
            tracked.insert((store, var.id), var.inventory_tracked);
            let q = var.inventory_quantity;
            let level = Level {
                id: level_id(var.id, at),
                variant_id: var.id,
                product_id: p.id,
                location_id: at,
                quantities: Quantities { available: q.max(0), ..Default::default() },
                created_at: var.created_at,
                updated_at: var.updated_at,
            };
            if q < 0 {
                // Below zero is no stock: the difference is written down.
                let delta = Quantities { available: q.saturating_neg(), ..Default::default() };
                put(txn, store, &change(&level, delta, None, var.updated_at))?;
                var.inventory_quantity = 0;
                rewritten = true;
            }
            levels.insert((store, var.id), level);
        }
        if rewritten {
            let rendered = Rendered::of(&p).map_err(corrupt("products"))?;
            let key = Key::store(store).id(p.id).into_vec();
            txn.open_table(PRODUCTS.def)?.insert(key.as_slice(), rendered.record.as_slice())?;
            txn.open_table(PRODUCT_VIEWS.def)?.insert(key.as_slice(), rendered.view.as_slice())?;
            let sorts = encode(&ProductSorts::of(&p)).map_err(corrupt("products"))?;
            txn.open_table(PRODUCT_SORTS.def)?.insert(key.as_slice(), sorts.as_slice())?;
        }
    }
    // Orders gain their line fields; an OPEN one its fulfillment order, its tracked units
    // committed.
    for (k, v) in rows(txn, ORDERS)? {
        let Some(store) = leading_store(&k) else { continue };
        let old: OrderV7 = decode(&v).map_err(corrupt("orders"))?;
        let mut order = old.upgrade();
        if let (OrderStatus::Open, Some(&at)) = (order.status, defaults.get(&store)) {
            let fo = FulfillmentOrder {
                id: Uuid::now_v7(),
                order_id: order.id,
                location_id: at,
                status: FoStatus::Open,
                lines: order
                    .line_items
                    .iter()
                    .map(|l| FoLine {
                        line_item_id: l.id,
                        variant_id: l.variant_id,
                        product_id: l.product_id,
                        tracked: tracked.get(&(store, l.variant_id)).copied().unwrap_or(false),
                        quantity: l.quantity,
                        fulfilled: 0,
                        remaining: l.quantity,
                    })
                    .collect(),
                fulfill_at: None,
                hold: None,
                moved_from: None,
                created_at: order.created_at,
                updated_at: order.created_at,
            };
            for line in fo.lines.iter().filter(|l| l.tracked) {
                if let Some(level) = levels.get_mut(&(store, line.variant_id)) {
                    let delta = Quantities { committed: i64::from(line.remaining), ..Default::default() };
                    level.quantities.committed = level.quantities.committed.saturating_add(delta.committed);
                    let reference = Some(Reference { kind: ReferenceKind::Order, id: order.id });
                    put(txn, store, &change(level, delta, reference, order.created_at))?;
                }
            }
            put(txn, store, &fo)?;
            order_state(&mut order, std::slice::from_ref(&fo));
        }
        txn.open_table(ORDERS.def)?
            .insert(row_key(store, order.id).as_slice(), encode(&order).map_err(corrupt("orders"))?.as_slice())?;
    }
    for ((store, _), level) in &levels {
        put(txn, *store, level)?;
    }
    record::rebuild::<Location>(txn)?;
    record::rebuild::<Level>(txn)?;
    record::rebuild::<InventoryChange>(txn)?;
    record::rebuild::<FulfillmentOrder>(txn)?;
    record::rebuild::<Order>(txn)?;
    Ok(())
}
