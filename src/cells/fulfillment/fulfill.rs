//! Shipping: a fulfillment takes units of one fulfillment order out of its location (committed
//! and onHand go down), keeps its tracking numbers, and mails the shopper. The writer runs
//! writes one after another, so two fulfills of the last unit never both see it: the second
//! finds the fulfillment order CLOSED (409).

use std::collections::HashSet;

use schemars::JsonSchema;
use serde::Serialize;
use uuid::Uuid;

use super::{load_with_order, mail, write_fo, write_order_state_of};
use crate::cells::Cell;
use crate::cells::events;
use crate::cells::stock::levels::{self, Change};
use crate::cells::stores;
use crate::domain::fulfillment::{
    Action, FulfillInput, Fulfillment, FulfillmentLine, FulfillmentOrderView, FulfillmentView, MAX_TRACKING, OneOrMany,
    ShipmentStatus, Tracking, TrackingUpdate, next,
};
use crate::domain::order::Order;
use crate::domain::stock::{Actor, Quantities, Reason, Reference, ReferenceKind, Why};
use crate::error::{ApiError, ApiResult, Check, Code};
use crate::storage::list::{ListQuery, Listed};
use crate::storage::record;

/// The answer of a fulfill: the shipment and the fulfillment order it was made from.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Fulfilled {
    pub fulfillment: FulfillmentView,
    pub fulfillment_order: FulfillmentOrderView,
}

/// The tracking entries of a fulfill, checked, each with its id.
fn tracking_of(cell: &Cell, input: &FulfillInput) -> ApiResult<Vec<Tracking>> {
    let given = match &input.tracking {
        None => Vec::new(),
        Some(OneOrMany::One(t)) => vec![t.clone()],
        Some(OneOrMany::Many(ts)) => ts.clone(),
    };
    let mut c = Check::new();
    c.ensure(given.len() <= MAX_TRACKING, "tracking", format!("at most {MAX_TRACKING} tracking numbers"));
    let out = given.iter().enumerate().map(|(i, t)| t.tracking(&mut c, &format!("tracking[{i}]"), cell.clock.new_id())).collect();
    c.finish()?;
    Ok(out)
}

/// The units asked for, by line item, checked for shape (in range, each line once).
fn asked(input: &FulfillInput) -> ApiResult<Option<Vec<(Uuid, u32)>>> {
    let Some(lines) = &input.line_items else { return Ok(None) };
    let mut c = Check::new();
    c.ensure(!lines.is_empty(), "lineItems", "must name at least one line (or be left out for every unit that remains)");
    let mut seen = HashSet::new();
    for (i, l) in lines.iter().enumerate() {
        c.ensure(l.quantity >= 1, &format!("lineItems[{i}].quantity"), "must be at least 1");
        c.ensure(seen.insert(l.line_item_id), &format!("lineItems[{i}].lineItemId"), "is named twice");
    }
    c.finish()?;
    Ok(Some(lines.iter().map(|l| (l.line_item_id, l.quantity)).collect()))
}

/// `POST …/fulfillment-orders/{id}/fulfill`: ships the units asked for (absent: every unit
/// that remains) from an OPEN or IN_PROGRESS fulfillment order. Tracked units leave committed
/// (and so onHand) at its location. The order's lines and status follow; the shopper is
/// mailed a shipping confirmation unless `notifyCustomer` is false.
pub async fn fulfill(cell: &Cell, store: Uuid, order: Uuid, id: Uuid, input: FulfillInput, actor: Actor) -> ApiResult<Fulfilled> {
    let tracking = tracking_of(cell, &input)?;
    let asked = asked(&input)?;
    let notify = input.notify_customer != Some(false);
    let settings = stores::store_settings_cached(cell, store)?;
    let (mail_id, now) = (cell.clock.new_id(), cell.clock.now_ms());
    cell.writer
        .write(Some(store), move |tx| {
            let (placed, old) = load_with_order(tx, store, order, id)?;
            // The status first: a final one is a 409 whatever is asked of it.
            next(old.status, Action::Fulfill { left: true }, old.shipped())?;
            let take: Vec<(usize, u32)> = match &asked {
                None => old.lines.iter().enumerate().filter(|(_, l)| l.remaining > 0).map(|(i, l)| (i, l.remaining)).collect(),
                Some(asked) => {
                    let mut take = Vec::with_capacity(asked.len());
                    for (k, (line, n)) in asked.iter().enumerate() {
                        let Some(i) = old.lines.iter().position(|l| l.line_item_id == *line) else {
                            let e = ApiError::field(format!("lineItems[{k}].lineItemId"), "is not in this fulfillment order");
                            return Err(e.with_code(Code::BUSINESS_RULE));
                        };
                        let remaining = old.lines.get(i).map_or(0, |l| l.remaining);
                        if *n > remaining {
                            let e = ApiError::field(
                                format!("lineItems[{k}].quantity"),
                                format!("only {remaining} remain to fulfill"),
                            );
                            return Err(e.with_code(Code::BUSINESS_RULE));
                        }
                        take.push((i, *n));
                    }
                    take
                }
            };
            if take.is_empty() {
                return Err(ApiError::msg(Code::BUSINESS_RULE, "nothing remains to fulfill"));
            }
            let mut new = old.clone();
            let mut lines = Vec::with_capacity(take.len());
            let mut changes = Vec::new();
            for (i, n) in take {
                let Some(l) = new.lines.get_mut(i) else { continue };
                l.fulfilled = l.fulfilled.saturating_add(n);
                l.remaining = l.remaining.saturating_sub(n);
                lines.push(FulfillmentLine { line_item_id: l.line_item_id, variant_id: l.variant_id, quantity: n });
                if l.tracked {
                    let delta = Quantities { committed: i64::from(n).saturating_neg(), ..Default::default() };
                    changes.push(Change { variant: l.variant_id, location: old.location_id, delta });
                }
            }
            new.status = next(old.status, Action::Fulfill { left: new.remaining() > 0 }, old.shipped())?;
            new.updated_at = now;
            let shipment = Fulfillment {
                id: tx.commit_id(now),
                order_id: order,
                fulfillment_order_id: old.id,
                location_id: old.location_id,
                lines,
                tracking: tracking.clone(),
                shipment_status: ShipmentStatus::Confirmed,
                created_at: now,
                updated_at: now,
            };
            let why = Why {
                reason: Reason::Fulfilled,
                actor,
                reference: Some(Reference { kind: ReferenceKind::Fulfillment, id: shipment.id }),
            };
            levels::apply(tx, store, &changes, &why, None, now)?;
            write_fo(tx, store, Some(&old), &new, None, now)?;
            record::write(tx, store, None, Some(&shipment))?;
            events::append_json(tx, store, "fulfillment.created", &shipment.view(), now)?;
            // Nothing above writes the order: the copy read first is still the stored one.
            let written = write_order_state_of(tx, store, placed, now)?;
            if notify && let Some(letter) = mail::shipping_confirmation(&settings, &written, &shipment) {
                crate::mail::job::send(tx, store, mail_id, letter, now)?;
            }
            Ok(Fulfilled { fulfillment: shipment.view(), fulfillment_order: new.view() })
        })
        .await
}

/// `PUT …/fulfillments/{fulfillmentId}/tracking/{trackingId}`: replaces one tracking entry
/// (a missing `url` is built again from the carrier) and, when given, the shipment's status;
/// mails the shopper a tracking update unless `notifyCustomer` is false.
pub async fn update_tracking(
    cell: &Cell,
    store: Uuid,
    order: Uuid,
    id: Uuid,
    tracking: Uuid,
    input: TrackingUpdate,
) -> ApiResult<FulfillmentView> {
    let entry = input.tracking(tracking)?;
    let notify = input.notify_customer != Some(false);
    let settings = stores::store_settings_cached(cell, store)?;
    let (mail_id, now) = (cell.clock.new_id(), cell.clock.now_ms());
    cell.writer
        .write(Some(store), move |tx| {
            let placed = record::must_load::<Order>(tx, store, order)?;
            let old = record::load_in::<Fulfillment>(tx, store, Some(order), id)?.ok_or_else(ApiError::not_found)?;
            let mut new = old.clone();
            let slot = new.tracking.iter_mut().find(|t| t.id == tracking).ok_or_else(ApiError::not_found)?;
            *slot = entry.clone();
            if let Some(s) = input.shipment_status {
                new.shipment_status = s;
            }
            if new == old {
                return Ok(old.view());
            }
            new.updated_at = now;
            record::write(tx, store, Some(&old), Some(&new))?;
            events::append_json(tx, store, "fulfillment.updated", &new.view(), now)?;
            if notify && let Some(letter) = mail::tracking_update(&settings, &placed, &new, &entry) {
                crate::mail::job::send(tx, store, mail_id, letter, now)?;
            }
            Ok(new.view())
        })
        .await
}

/// `GET S/orders/{orderId}/fulfillments`.
pub async fn list(cell: &Cell, store: Uuid, order: Uuid, q: &ListQuery) -> ApiResult<Listed<FulfillmentView>> {
    cell.get::<Order>(store, order)?;
    let q = ListQuery { scope: Some(order), ..q.clone() };
    Ok(cell.list::<Fulfillment>(store, &q).await?.map(|f| f.view()))
}
