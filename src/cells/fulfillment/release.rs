//! Letting go of an order's unshipped units, for what comes after the sale (an order cancelled,
//! lines refunded), and putting returned units back on a shelf. Both run inside the caller's
//! write, so the stock moves exactly when the cancel, refund or return is written.

use std::collections::HashMap;

use uuid::Uuid;

use super::{of_order, order_ref, write_fo, write_order_state};
use crate::cells::stock::levels::{self, Change, Level};
use crate::domain::fulfillment::{Action, next};
use crate::domain::order::Order;
use crate::domain::stock::{Actor, Quantities, Reason, Why};
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::tx::Tx;

/// Which unshipped units to release.
#[derive(Debug, Clone, Copy)]
pub enum Units<'a> {
    /// Every unit of the order not shipped yet.
    All,
    /// Of each line item, this many units.
    Lines(&'a [(Uuid, u32)]),
}

/// Releases an order's unshipped units inside the caller's write. Its unfinished fulfillment
/// orders shrink (what remains is lowered, newest first) and those left with nothing are
/// cancelled (INCOMPLETE when some units had shipped), with their `fulfillment_order.cancelled`
/// event. With `restock` the tracked units go back to available where they were committed
/// (reason restock); without, they leave committed and onHand (reason released: a write-off).
/// Asking more of a line than it has unshipped is a 422 naming the line. Answers the order with
/// its fulfillment state written.
pub fn release(tx: &mut Tx, store: Uuid, order: Uuid, units: Units, restock: bool, actor: Actor, now: i64) -> ApiResult<Order> {
    let fos = of_order(tx, store, order)?;
    let mut wanted: Option<HashMap<Uuid, u32>> = match units {
        Units::All => None,
        Units::Lines(lines) => {
            let mut w: HashMap<Uuid, u32> = HashMap::new();
            for (line, n) in lines {
                let e = w.entry(*line).or_default();
                *e = e.saturating_add(*n);
            }
            Some(w)
        }
    };
    let mut changes = Vec::new();
    // The newest first: units moved or split last are the first let go.
    for old in fos.iter().rev().filter(|f| !f.status.is_final()) {
        let mut new = old.clone();
        for l in &mut new.lines {
            let take = match wanted.as_mut() {
                None => l.remaining,
                Some(w) => match w.get_mut(&l.line_item_id) {
                    Some(left) => {
                        let take = (*left).min(l.remaining);
                        *left = left.saturating_sub(take);
                        take
                    }
                    None => 0,
                },
            };
            if take == 0 {
                continue;
            }
            l.remaining = l.remaining.saturating_sub(take);
            if l.tracked {
                let n = i64::from(take);
                changes.push(if restock {
                    Change::commit(l.variant_id, old.location_id, n.saturating_neg())
                } else {
                    Change {
                        variant: l.variant_id,
                        location: old.location_id,
                        delta: Quantities { committed: n.saturating_neg(), ..Default::default() },
                    }
                });
            }
        }
        if new == *old {
            continue;
        }
        new.updated_at = now;
        let topic = if new.remaining() == 0 {
            new.status = next(old.status, Action::Cancel, old.shipped())?;
            new.hold = None;
            Some("fulfillment_order.cancelled")
        } else {
            None
        };
        write_fo(tx, store, Some(old), &new, topic, now)?;
    }
    if let Some((line, left)) = wanted.iter().flatten().find(|(_, left)| **left > 0) {
        return Err(ApiError::msg(
            Code::BUSINESS_RULE,
            format!("line item {line}: {left} more units asked than remain unshipped"),
        ));
    }
    let why = Why { reason: if restock { Reason::Restock } else { Reason::Released }, actor, reference: order_ref(order) };
    levels::apply(tx, store, &changes, &why, None, now)?;
    write_order_state(tx, store, order, now)
}

/// Puts `n` returned units of `variant` back on sale at `location` (available and onHand go
/// up), inside the caller's write, for returns and refunds of shipped units.
pub fn restock(tx: &mut Tx, store: Uuid, variant: Uuid, location: Uuid, n: u32, why: &Why, now: i64) -> ApiResult<Level> {
    if n == 0 {
        return Err(ApiError::msg(Code::BUSINESS_RULE, "a restock moves at least one unit"));
    }
    let levels = levels::apply(tx, store, &[Change::available(variant, location, i64::from(n))], why, None, now)?;
    levels.into_iter().next().ok_or_else(|| ApiError::internal("a restock changes one level"))
}
