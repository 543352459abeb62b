//! Orders in a cell: the one writer [`write_order`] with the list orders, reads, the list with
//! its filters, and the note/tags update. Orders are created only by checkout completion
//! ([`crate::cells::completion`]).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::collections::{Rows, sync_rows};
use crate::domain::fields::{check_text, double_option};
use crate::domain::order::{FulfillmentStatus, MAX_TAG_CHARS, MAX_TAGS, Order, OrderStatus};
use crate::error::{ApiError, ApiResult, Check};
use crate::http::query::Paging;
use crate::payments::FinancialStatus;
use crate::storage::codec::{decode, encode};
use crate::storage::keys::Key;
use crate::storage::read;
use crate::storage::tables::{COUNTERS, ORDER_ORDER, ORDERS};
use crate::storage::writer::Tx;

/// The sortable fields of the order list, in index-field order.
pub const SORT_FIELDS: &[&str] = &["created_at", "updated_at", "total", "order_number"];

fn row_key(store: Uuid, id: Uuid) -> Vec<u8> {
    Key::store(store).id(id).into_vec()
}

fn counter_key(store: Uuid) -> Vec<u8> {
    Key::store(store).str("orders").into_vec()
}

/// The counter holding the last order number given.
pub(crate) fn number_key(store: Uuid) -> Vec<u8> {
    Key::store(store).str("order_number").into_vec()
}

/// What a list walk filters on, kept in each list-order row so a filtered page reads no order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Summary {
    status: OrderStatus,
    financial: FinancialStatus,
    fulfillment: FulfillmentStatus,
    customer: Option<Uuid>,
    number: u64,
    email: String,
}

fn order_rows(store: Uuid, o: &Order) -> ApiResult<Rows> {
    let summary = encode(&Summary {
        status: o.status,
        financial: o.financial_status,
        fulfillment: o.fulfillment_status,
        customer: o.customer_id,
        number: o.number,
        email: o.email.as_deref().unwrap_or("").to_lowercase(),
    })?;
    let k = |field: u8| Key::store(store).u8(field);
    Ok(vec![
        (k(0).i64(o.created_at).id(o.id).into_vec(), summary.clone()),
        (k(1).i64(o.updated_at).id(o.id).into_vec(), summary.clone()),
        (k(2).i64(o.total.amount).id(o.id).into_vec(), summary.clone()),
        (k(3).u64(o.number).id(o.id).into_vec(), summary),
    ])
}

/// Writes `new` in place of `old` (absent on create) with its list-order rows and the count.
pub fn write_order(tx: &mut Tx, store: Uuid, old: Option<&Order>, new: &Order) -> ApiResult<()> {
    let old_rows = match old {
        Some(o) => order_rows(store, o)?,
        None => {
            tx.bump(COUNTERS, &counter_key(store), 1)?;
            Vec::new()
        }
    };
    sync_rows(tx, ORDER_ORDER, &old_rows, &order_rows(store, new)?)?;
    tx.put(ORDERS, &row_key(store, new.id), &encode(new)?)
}

/// Moves an order whose payment succeeded after it was placed to PAID (inside the intent's write).
pub fn mark_paid(tx: &mut Tx, store: Uuid, id: Uuid, now: i64) -> ApiResult<()> {
    let Some(bytes) = tx.get(ORDERS, &row_key(store, id))? else { return Ok(()) };
    let old: Order = decode(&bytes)?;
    if old.financial_status == FinancialStatus::Paid {
        return Ok(());
    }
    let mut new = old.clone();
    new.financial_status = FinancialStatus::Paid;
    new.updated_at = now;
    write_order(tx, store, Some(&old), &new)
}

/// The list filters of `GET S/orders`.
#[derive(Debug, Default, Clone)]
pub struct OrderFilter {
    pub status: Option<Vec<OrderStatus>>,
    pub financial: Option<Vec<FinancialStatus>>,
    pub fulfillment: Option<Vec<FulfillmentStatus>>,
    pub customer: Option<Uuid>,
    /// An order number (`1001` or `#1001`) or text in the email, lower-cased.
    pub search: Option<String>,
}

impl OrderFilter {
    fn is_empty(&self) -> bool {
        self.status.is_none()
            && self.financial.is_none()
            && self.fulfillment.is_none()
            && self.customer.is_none()
            && self.search.is_none()
    }

    fn accepts(&self, s: &Summary) -> bool {
        self.status.as_ref().is_none_or(|set| set.contains(&s.status))
            && self.financial.as_ref().is_none_or(|set| set.contains(&s.financial))
            && self.fulfillment.as_ref().is_none_or(|set| set.contains(&s.fulfillment))
            && self.customer.is_none_or(|c| s.customer == Some(c))
            && self.search.as_deref().is_none_or(|q| {
                let number = q.trim_start_matches('#');
                number.parse::<u64>().is_ok_and(|n| n == s.number) || s.email.contains(q)
            })
    }
}

/// `PATCH S/orders/{orderId}`: the note and tags; absent fields stay, `null` clears the note.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateOrder {
    #[serde(default, deserialize_with = "double_option")]
    pub note: Option<Option<String>>,
    /// Replaces the tags (trimmed, duplicates dropped without regard to case).
    pub tags: Option<Vec<String>>,
}

impl UpdateOrder {
    fn apply(&self, o: &mut Order) -> ApiResult<()> {
        let mut c = Check::new();
        if let Some(note) = &self.note {
            if let Some(n) = note {
                check_text(&mut c, "note", n, 5000, false);
            }
            o.note = note.as_deref().map(str::trim).filter(|n| !n.is_empty()).map(str::to_string);
        }
        if let Some(tags) = &self.tags {
            c.ensure(tags.len() <= MAX_TAGS, "tags", format!("at most {MAX_TAGS} tags"));
            let mut out: Vec<String> = Vec::new();
            for (i, t) in tags.iter().enumerate() {
                check_text(&mut c, &format!("tags[{i}]"), t, MAX_TAG_CHARS, true);
                let t = t.trim();
                if !out.iter().any(|o| o.eq_ignore_ascii_case(t)) {
                    out.push(t.to_string());
                }
            }
            o.tags = out;
        }
        c.finish()
    }
}

impl Cell {
    pub fn order(&self, store: Uuid, id: Uuid) -> ApiResult<Order> {
        read::get(&self.read()?, ORDERS, &row_key(store, id))?.ok_or_else(ApiError::not_found)
    }

    /// A page of orders in the requested order, with the number of orders matching `filter`.
    pub fn list_orders(&self, store: Uuid, filter: &OrderFilter, paging: &Paging) -> ApiResult<(Vec<Order>, u64)> {
        let txn = self.read()?;
        let field = SORT_FIELDS.iter().position(|f| *f == paging.sort_by).unwrap_or(0) as u8;
        let prefix = Key::store(store).u8(field).into_vec();
        let (ids, total) = if filter.is_empty() {
            let mut ids = Vec::with_capacity(paging.limit as usize);
            read::scan(&txn, ORDER_ORDER, &prefix, paging.desc, paging.offset(), paging.limit as usize, |k, _| {
                ids.extend(crate::storage::keys::trailing_id(k));
                Ok(())
            })?;
            (ids, read::counter(&txn, COUNTERS, &counter_key(store))?)
        } else {
            read::filtered_page(&txn, ORDER_ORDER, &prefix, paging.desc, paging.offset(), paging.limit as usize, |v| {
                decode::<Summary>(v).is_ok_and(|s| filter.accepts(&s))
            })?
        };
        let mut orders = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(o) = read::get(&txn, ORDERS, &row_key(store, id))? {
                orders.push(o);
            }
        }
        Ok((orders, total))
    }

    pub async fn update_order(&self, store: Uuid, id: Uuid, update: UpdateOrder) -> ApiResult<Order> {
        // Validate before queueing: a bad field never reaches the writer.
        update.apply(&mut self.order(store, id)?)?;
        let now = self.clock.now_ms();
        self.writer
            .write(Some(store), move |tx| {
                let old: Order = decode(&tx.get(ORDERS, &row_key(store, id))?.ok_or_else(ApiError::not_found)?)?;
                let mut new = old.clone();
                update.apply(&mut new)?;
                new.updated_at = now;
                write_order(tx, store, Some(&old), &new)?;
                Ok(new)
            })
            .await
    }
}
