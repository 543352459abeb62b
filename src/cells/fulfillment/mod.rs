//! Fulfillment in a cell: fulfillment orders (which location ships which units of an order),
//! made in the order's own write by [`place_order`], and the fulfillments shipped from them.
//! Both are records scoped to their order. The order keeps, per line, what was fulfilled and
//! what can still be, and its `fulfillmentStatus`, written by [`write_order_state`] whenever a
//! fulfillment order or fulfillment changes.

pub mod actions;
pub mod fulfill;
mod mail;
pub mod release;

use std::collections::HashMap;
use std::time::Duration;

use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::events;
use crate::cells::stock::levels::{self, Change};
use crate::cells::stock::locations;
use crate::domain::fulfillment::{
    Action, FoLine, FoStatus, Fulfillment, FulfillmentOrder, FulfillmentOrderView, Want, allocate, next,
};
use crate::domain::order::{FulfillmentStatus, Order};
use crate::domain::stock::{Actor, Reason, Reference, ReferenceKind, Why};
use crate::error::{ApiError, ApiResult, Code};
use crate::jobs::runner::{Effect, Outcome};
use crate::jobs::{self, Job, Kind};
use crate::storage::keys::Key;
use crate::storage::list::{ListQuery, Listed};
use crate::storage::record::{self, Claim, List, Record, Sort};
use crate::storage::tables::{
    FULFILLMENT_LIST, FULFILLMENT_ORDER_LIST, FULFILLMENT_ORDERS, FULFILLMENTS, LOCATION_WORK, StoreTable,
};
use crate::storage::tx::Tx;

impl Record for FulfillmentOrder {
    const TABLE: StoreTable = FULFILLMENT_ORDERS;
    const NAME: &'static str = "fulfillment_orders";
    const LIST: List<Self> = List::sorted(
        FULFILLMENT_ORDER_LIST,
        &[Sort { name: "created_at", tag: 0, key: |f, k| k.i64(f.created_at) }],
        "created_at",
    );

    fn id(&self) -> Uuid {
        self.id
    }

    fn scope(&self) -> Option<Uuid> {
        Some(self.order_id)
    }

    /// An unfinished one is listed under its location (which then stays active).
    fn claims(&self, store: Uuid) -> ApiResult<Vec<Claim>> {
        if self.status.is_final() {
            return Ok(Vec::new());
        }
        Ok(vec![(
            LOCATION_WORK,
            Key::store(store).id(self.location_id).id(self.id).into_vec(),
            self.order_id.as_bytes().to_vec(),
        )])
    }
}

impl Record for Fulfillment {
    const TABLE: StoreTable = FULFILLMENTS;
    const NAME: &'static str = "fulfillments";
    const LIST: List<Self> =
        List::sorted(FULFILLMENT_LIST, &[Sort { name: "created_at", tag: 0, key: |f, k| k.i64(f.created_at) }], "created_at");

    fn id(&self) -> Uuid {
        self.id
    }

    fn scope(&self) -> Option<Uuid> {
        Some(self.order_id)
    }
}

/// Opens a SCHEDULED fulfillment order when the clock reaches its `fulfillAt`.
pub const OPEN: Kind = Kind { name: "fulfillment_order.open", retries: &[Duration::from_secs(60), Duration::from_secs(600)] };

/// The reference of a change made for an order.
pub fn order_ref(order: Uuid) -> Option<Reference> {
    Some(Reference { kind: ReferenceKind::Order, id: order })
}

/// In the order-creating write: places the order's lines at the store's sellable locations
/// ([`allocate`]), writes a fulfillment order per location used and commits its tracked units
/// there (available → committed). `tracked` says which variants keep stock. With `fulfill_at`
/// in the future each is SCHEDULED until then. A line no combination of locations covers is a
/// 409 OUT_OF_STOCK.
pub fn place_order(
    tx: &mut Tx,
    store: Uuid,
    order: &Order,
    tracked: &HashMap<Uuid, bool>,
    fulfill_at: Option<i64>,
    now: i64,
) -> ApiResult<Vec<FulfillmentOrder>> {
    let places = locations::sellable(tx, store)?;
    let wants: Vec<Want> = order
        .line_items
        .iter()
        .map(|l| Want {
            variant: l.variant_id,
            quantity: l.quantity,
            tracked: tracked.get(&l.variant_id).copied().unwrap_or(false),
        })
        .collect();
    // Each level is read once, whatever the number of lines and locations.
    let mut stock: HashMap<(usize, Uuid), i64> = HashMap::new();
    for (i, place) in places.iter().enumerate() {
        for w in wants.iter().filter(|w| w.tracked) {
            if let std::collections::hash_map::Entry::Vacant(e) = stock.entry((i, w.variant)) {
                e.insert(levels::available(tx, store, w.variant, place.id)?);
            }
        }
    }
    let groups = allocate(places.len(), |l, v| stock.get(&(l, v)).copied().unwrap_or(0), &wants).map_err(|variant| {
        let line = order.line_items.iter().find(|l| l.variant_id == variant);
        let name = line.map(|l| format!("{} ({})", l.title, l.variant_title)).unwrap_or_else(|| variant.to_string());
        ApiError::msg(Code::OUT_OF_STOCK, format!("not enough of {name} left"))
    })?;
    let scheduled = fulfill_at.is_some_and(|at| at > now);
    let mut out = Vec::with_capacity(groups.len());
    let mut changes = Vec::new();
    for (l, lines) in groups {
        let place = places.get(l).ok_or_else(|| ApiError::internal("allocation names a location it was not given"))?;
        let fo = FulfillmentOrder {
            id: tx.commit_id(now),
            order_id: order.id,
            location_id: place.id,
            status: if scheduled { FoStatus::Scheduled } else { FoStatus::Open },
            lines: lines
                .iter()
                .filter_map(|(i, n)| {
                    let (line, want) = (order.line_items.get(*i)?, wants.get(*i)?);
                    Some(FoLine {
                        line_item_id: line.id,
                        variant_id: line.variant_id,
                        product_id: line.product_id,
                        tracked: want.tracked,
                        quantity: *n,
                        fulfilled: 0,
                        remaining: *n,
                    })
                })
                .collect(),
            fulfill_at,
            hold: None,
            moved_from: None,
            created_at: now,
            updated_at: now,
        };
        changes.extend(
            fo.lines.iter().filter(|l| l.tracked).map(|l| Change::commit(l.variant_id, place.id, i64::from(l.remaining))),
        );
        record::write(tx, store, None, Some(&fo))?;
        if scheduled && let Some(at) = fulfill_at {
            jobs::put(tx, store, &OPEN, jobs::derived_id(OPEN.name, fo.id), encode_ids(order.id, fo.id), at, now)?;
        }
        out.push(fo);
    }
    let why = Why { reason: Reason::OrderPlaced, actor: Actor::System, reference: order_ref(order.id) };
    levels::apply(tx, store, &changes, &why, None, now)?;
    Ok(out)
}

fn encode_ids(order: Uuid, fo: Uuid) -> Vec<u8> {
    let mut v = order.as_bytes().to_vec();
    v.extend_from_slice(fo.as_bytes());
    v
}

fn decode_ids(b: &[u8]) -> Option<(Uuid, Uuid)> {
    Some((Uuid::from_slice(b.get(..16)?).ok()?, Uuid::from_slice(b.get(16..32)?).ok()?))
}

/// Every fulfillment order of an order, oldest first, inside a write.
pub fn of_order(tx: &Tx, store: Uuid, order: Uuid) -> ApiResult<Vec<FulfillmentOrder>> {
    let at = Key::store(store).id(order).into_vec();
    let mut out: Vec<FulfillmentOrder> = Vec::new();
    for (_, v) in tx.scan_prefix(FULFILLMENT_ORDERS, &at, None, usize::MAX)? {
        out.push(crate::storage::codec::decode(&v)?);
    }
    out.sort_by_key(|f| (f.created_at, f.id));
    Ok(out)
}

/// Loads a fulfillment order of `order` (404 when it is not the order's), inside a write.
pub fn load(tx: &Tx, store: Uuid, order: Uuid, id: Uuid) -> ApiResult<FulfillmentOrder> {
    Ok(load_with_order(tx, store, order, id)?.1)
}

/// [`load`], answering the order too: a write that goes on to [`write_order_state_of`] decodes
/// the order once, not twice.
pub fn load_with_order(tx: &Tx, store: Uuid, order: Uuid, id: Uuid) -> ApiResult<(Order, FulfillmentOrder)> {
    let placed = record::must_load::<Order>(tx, store, order)?;
    let fo = record::load_in::<FulfillmentOrder>(tx, store, Some(order), id)?.ok_or_else(ApiError::not_found)?;
    Ok((placed, fo))
}

/// The order's fulfillment state from its fulfillment orders: per line, units fulfilled and
/// units that can still be; and the status over units not cancelled: FULFILLED (shipped, none
/// left), PARTIALLY_FULFILLED (shipped, some left), ON_HOLD / SCHEDULED (none shipped, every
/// unfinished one held / scheduled), else UNFULFILLED.
pub fn order_state(order: &mut Order, fos: &[FulfillmentOrder]) {
    let mut fulfilled: HashMap<Uuid, u32> = HashMap::new();
    let mut fulfillable: HashMap<Uuid, u32> = HashMap::new();
    for fo in fos {
        for l in &fo.lines {
            let f = fulfilled.entry(l.line_item_id).or_default();
            *f = f.saturating_add(l.fulfilled);
            if !fo.status.is_final() {
                let r = fulfillable.entry(l.line_item_id).or_default();
                *r = r.saturating_add(l.remaining);
            }
        }
    }
    for line in &mut order.line_items {
        line.fulfilled_quantity = fulfilled.get(&line.id).copied().unwrap_or(0);
        line.fulfillable_quantity = fulfillable.get(&line.id).copied().unwrap_or(0);
    }
    let shipped = order.line_items.iter().any(|l| l.fulfilled_quantity > 0);
    let left = order.line_items.iter().any(|l| l.fulfillable_quantity > 0);
    let unfinished: Vec<&FulfillmentOrder> = fos.iter().filter(|f| !f.status.is_final()).collect();
    let all = |s: FoStatus| !unfinished.is_empty() && unfinished.iter().all(|f| f.status == s);
    order.fulfillment_status = match (shipped, left) {
        (true, false) => FulfillmentStatus::Fulfilled,
        (true, true) => FulfillmentStatus::PartiallyFulfilled,
        _ if all(FoStatus::OnHold) => FulfillmentStatus::OnHold,
        _ if all(FoStatus::Scheduled) => FulfillmentStatus::Scheduled,
        _ => FulfillmentStatus::Unfulfilled,
    };
}

/// Writes the order's fulfillment state after its fulfillment orders changed, with the
/// `order.partially_fulfilled` / `order.fulfilled` event when the status becomes one of them.
/// Answers the order as written.
pub fn write_order_state(tx: &mut Tx, store: Uuid, order: Uuid, now: i64) -> ApiResult<Order> {
    let old = record::must_load::<Order>(tx, store, order)?;
    write_order_state_of(tx, store, old, now)
}

/// [`write_order_state`] of the order `old`, read earlier in the same write job (nothing in
/// between may have written it).
pub fn write_order_state_of(tx: &mut Tx, store: Uuid, old: Order, now: i64) -> ApiResult<Order> {
    let mut new = old.clone();
    order_state(&mut new, &of_order(tx, store, old.id)?);
    if new == old {
        return Ok(old);
    }
    new.updated_at = now;
    record::write(tx, store, Some(&old), Some(&new))?;
    if new.fulfillment_status != old.fulfillment_status {
        match new.fulfillment_status {
            FulfillmentStatus::Fulfilled => events::append_json(tx, store, "order.fulfilled", &new, now)?,
            FulfillmentStatus::PartiallyFulfilled => events::append_json(tx, store, "order.partially_fulfilled", &new, now)?,
            _ => {}
        }
    }
    Ok(new)
}

/// Writes a fulfillment order in place of its former self with the `fulfillment_order.*`
/// event named `topic` (when given).
pub fn write_fo(
    tx: &mut Tx,
    store: Uuid,
    old: Option<&FulfillmentOrder>,
    new: &FulfillmentOrder,
    topic: Option<&'static str>,
    now: i64,
) -> ApiResult<()> {
    record::write(tx, store, old, Some(new))?;
    if let Some(t) = topic {
        events::append_json(tx, store, t, &new.view(), now)?;
    }
    Ok(())
}

/// `GET S/orders/{orderId}/fulfillment-orders`.
pub async fn list(cell: &Cell, store: Uuid, order: Uuid, q: &ListQuery) -> ApiResult<Listed<FulfillmentOrderView>> {
    cell.get::<Order>(store, order)?;
    let q = ListQuery { scope: Some(order), ..q.clone() };
    Ok(cell.list::<FulfillmentOrder>(store, &q).await?.map(|f| f.view()))
}

/// A run of [`OPEN`]: the scheduled fulfillment order opens once the clock reaches its time
/// (cancelled or moved on meanwhile: nothing to do).
pub async fn run_open(cell: &Cell, store: Uuid, job: Job) -> Outcome {
    let Some((order, id)) = decode_ids(&job.payload) else { return Outcome::Done(None) };
    // The runner hands a job over only once it is due; the write checks the time again, as it
    // is what decides.
    let now = cell.clock.now_ms();
    let effect: Effect = Box::new(move |tx: &mut Tx| {
        let Some(old) = record::load_in::<FulfillmentOrder>(tx, store, Some(order), id)? else { return Ok(()) };
        if old.status != FoStatus::Scheduled || old.fulfill_at.is_some_and(|at| at > now) {
            return Ok(());
        }
        let mut new = old.clone();
        new.status = next(old.status, Action::Open, old.shipped())?;
        new.updated_at = now;
        write_fo(tx, store, Some(&old), &new, Some("fulfillment_order.opened"), now)?;
        write_order_state(tx, store, order, now)?;
        Ok(())
    });
    Outcome::Done(Some(effect))
}
