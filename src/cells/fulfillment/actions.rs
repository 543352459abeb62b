//! What a merchant does to a fulfillment order short of shipping it: hold, release the hold,
//! move to another location, cancel. Each is one write that takes the new status from
//! [`next`] (a 409 naming the status otherwise), moves stock through [`levels::apply`], writes
//! the fulfillment order with its event and then the order's fulfillment state.

use std::collections::BTreeMap;

use serde_json::json;
use uuid::Uuid;

use super::{load, order_ref, write_fo, write_order_state};
use crate::cells::Cell;
use crate::cells::events;
use crate::cells::stock::levels::{self, Change};
use crate::domain::fulfillment::{Action, FoLine, FoStatus, FulfillmentOrder, FulfillmentOrderView, HoldInput, MoveInput, next};
use crate::domain::stock::{Actor, Location, Reason, Why};
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::record;
use crate::storage::tx::Tx;

/// `POST …/fulfillment-orders/{id}/hold`: ON_HOLD with the reason. Whether units were shipped
/// decides where a release goes back to, so the status before needs no keeping.
pub async fn hold(cell: &Cell, store: Uuid, order: Uuid, id: Uuid, input: HoldInput) -> ApiResult<FulfillmentOrderView> {
    let now = cell.clock.now_ms();
    let hold = input.hold(now)?;
    cell.writer
        .write(Some(store), move |tx| {
            let old = load(tx, store, order, id)?;
            let mut new = old.clone();
            new.status = next(old.status, Action::Hold, old.shipped())?;
            new.hold = Some(hold.clone());
            new.updated_at = now;
            write_fo(tx, store, Some(&old), &new, Some("fulfillment_order.held"), now)?;
            write_order_state(tx, store, order, now)?;
            Ok(new.view())
        })
        .await
}

/// `POST …/fulfillment-orders/{id}/release-hold`: OPEN again, IN_PROGRESS when some units
/// were shipped before the hold.
pub async fn release_hold(cell: &Cell, store: Uuid, order: Uuid, id: Uuid) -> ApiResult<FulfillmentOrderView> {
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let old = load(tx, store, order, id)?;
            let mut new = old.clone();
            new.status = next(old.status, Action::ReleaseHold, old.shipped())?;
            new.hold = None;
            new.updated_at = now;
            write_fo(tx, store, Some(&old), &new, Some("fulfillment_order.released"), now)?;
            write_order_state(tx, store, order, now)?;
            Ok(new.view())
        })
        .await
}

/// `POST …/fulfillment-orders/{id}/cancel`: CANCELLED (INCOMPLETE when some units were
/// shipped). Its unshipped tracked units go back to available at its location (reason
/// restock): a cancelled fulfillment order leaves the stock sellable, as if never ordered.
/// Writing units off is [`super::release::release`] without restock.
pub async fn cancel(cell: &Cell, store: Uuid, order: Uuid, id: Uuid, actor: Actor) -> ApiResult<FulfillmentOrderView> {
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let old = load(tx, store, order, id)?;
            let mut new = old.clone();
            new.status = next(old.status, Action::Cancel, old.shipped())?;
            let changes: Vec<Change> = old
                .lines
                .iter()
                .filter(|l| l.tracked && l.remaining > 0)
                .map(|l| Change::commit(l.variant_id, old.location_id, i64::from(l.remaining).saturating_neg()))
                .collect();
            for l in &mut new.lines {
                l.remaining = 0;
            }
            new.hold = None;
            new.updated_at = now;
            let why = Why { reason: Reason::Restock, actor, reference: order_ref(order) };
            levels::apply(tx, store, &changes, &why, None, now)?;
            write_fo(tx, store, Some(&old), &new, Some("fulfillment_order.cancelled"), now)?;
            write_order_state(tx, store, order, now)?;
            Ok(new.view())
        })
        .await
}

/// `POST …/fulfillment-orders/{id}/move`: the unshipped units go to another active location of
/// the store, their commitment with them (committed leaves the old level, is taken from
/// available at the new one; reason moved). An OPEN or SCHEDULED one moves whole and keeps its
/// status; of one IN_PROGRESS, what remains goes to a new OPEN one there (`movedFrom`) and this
/// one is CLOSED with what it shipped. Answers the fulfillment order now holding the lines.
pub async fn move_to(
    cell: &Cell,
    store: Uuid,
    order: Uuid,
    id: Uuid,
    input: MoveInput,
    actor: Actor,
) -> ApiResult<FulfillmentOrderView> {
    let now = cell.clock.now_ms();
    let to = input.location_id;
    cell.writer
        .write(Some(store), move |tx| {
            let old = load(tx, store, order, id)?;
            let status = next(old.status, Action::Move, old.shipped())?;
            let place =
                record::load::<Location>(tx, store, to)?.ok_or_else(|| ApiError::field("locationId", "no such location"))?;
            if !place.active {
                return Err(ApiError::msg(Code::BUSINESS_RULE, format!("location {:?} is not active", place.name)));
            }
            if place.id == old.location_id {
                return Err(ApiError::msg(
                    Code::BUSINESS_RULE,
                    format!("the fulfillment order is already at location {:?}", place.name),
                ));
            }
            let changes = carry(tx, store, &old, &place)?;
            let why = Why { reason: Reason::Moved, actor, reference: order_ref(order) };
            levels::apply(tx, store, &changes, &why, None, now)?;
            let (original, moved) = if status == FoStatus::Closed {
                let (closed, moved) = split(tx, &old, to, now);
                (Some(closed), moved)
            } else {
                let mut moved = old.clone();
                moved.location_id = to;
                moved.updated_at = now;
                (None, moved)
            };
            match &original {
                Some(closed) => {
                    write_fo(tx, store, Some(&old), closed, None, now)?;
                    write_fo(tx, store, None, &moved, None, now)?;
                }
                None => write_fo(tx, store, Some(&old), &moved, None, now)?,
            }
            let original = original.as_ref().unwrap_or(&old).view();
            events::append_json(
                tx,
                store,
                "fulfillment_order.moved",
                &json!({"original": original, "moved": moved.view()}),
                now,
            )?;
            write_order_state(tx, store, order, now)?;
            Ok(moved.view())
        })
        .await
}

/// The stock changes of moving `fo`'s unshipped tracked units to `place`, or a 409 naming the
/// variant `place` has too few of.
fn carry(tx: &Tx, store: Uuid, fo: &FulfillmentOrder, place: &Location) -> ApiResult<Vec<Change>> {
    // Two lines may name the same variant: the new location must cover their sum.
    let mut wanted: BTreeMap<Uuid, i64> = BTreeMap::new();
    for l in fo.lines.iter().filter(|l| l.tracked && l.remaining > 0) {
        let n = wanted.entry(l.variant_id).or_default();
        *n = n.saturating_add(i64::from(l.remaining));
    }
    let mut changes = Vec::with_capacity(wanted.len().saturating_mul(2));
    for (variant, n) in wanted {
        let has = levels::available(tx, store, variant, place.id)?;
        if has < n {
            return Err(ApiError::msg(
                Code::CONFLICT,
                format!("location {:?} has {has} of variant {variant} available, {n} needed", place.name),
            ));
        }
        changes.push(Change::commit(variant, fo.location_id, n.saturating_neg()));
        changes.push(Change::commit(variant, place.id, n));
    }
    Ok(changes)
}

/// A move of a fulfillment order in progress: it closes with the units it shipped, and a new
/// OPEN one at `to` takes what remains.
fn split(tx: &mut Tx, old: &FulfillmentOrder, to: Uuid, now: i64) -> (FulfillmentOrder, FulfillmentOrder) {
    let mut closed = old.clone();
    closed.status = FoStatus::Closed;
    closed.lines = old
        .lines
        .iter()
        .filter(|l| l.fulfilled > 0)
        .map(|l| FoLine { quantity: l.fulfilled, remaining: 0, ..l.clone() })
        .collect();
    closed.updated_at = now;
    let moved = FulfillmentOrder {
        id: tx.commit_id(now),
        order_id: old.order_id,
        location_id: to,
        status: FoStatus::Open,
        lines: old
            .lines
            .iter()
            .filter(|l| l.remaining > 0)
            .map(|l| FoLine { quantity: l.remaining, fulfilled: 0, ..l.clone() })
            .collect(),
        fulfill_at: old.fulfill_at,
        hold: None,
        moved_from: Some(old.id),
        created_at: now,
        updated_at: now,
    };
    (closed, moved)
}
