//! Orders in a cell: the record declaration (list orders, filters with their counters, search),
//! payment moving an order to PAID, and the note/tags update. Orders are created only by checkout
//! completion ([`crate::cells::completion`]).

use serde::Deserialize;
use uuid::Uuid;

use crate::cells::Cell;
use crate::domain::fields::{self, check_line, check_text, double_option};
use crate::domain::order::{FulfillmentStatus, MAX_TAG_CHARS, MAX_TAGS, Order, OrderStatus};
use crate::error::{ApiResult, Check};
use crate::payments::FinancialStatus;
use crate::storage::keys::Key;
use crate::storage::record::{self, Enumerated, Filter, FilterValue, List, Record, Search, Sort};
use crate::storage::tables::{ORDER_ORDER, ORDERS, StoreTable};
use crate::storage::tx::Tx;

impl Record for Order {
    const TABLE: StoreTable = ORDERS;
    const NAME: &'static str = "orders";
    const LIST: List<Self> = List {
        order: Some(ORDER_ORDER),
        sorts: &[
            Sort { name: "created_at", tag: 0, key: |o, k| k.i64(o.created_at) },
            Sort { name: "updated_at", tag: 1, key: |o, k| k.i64(o.updated_at) },
            Sort { name: "total", tag: 2, key: |o, k| k.i64(o.total.amount) },
            Sort { name: "order_number", tag: 3, key: |o, k| k.u64(o.number) },
        ],
        default_sort: "created_at",
        summaries: "updated_at",
        own_order: false,
        filters: &[
            Filter::enumerated::<OrderStatus>("status", |o: &Order| Some(FilterValue::Enum(o.status.name())), "order status")
                .any("ANY"),
            Filter::enumerated::<FinancialStatus>(
                "financialStatus",
                |o: &Order| Some(FilterValue::Enum(o.financial_status.name())),
                "payment status",
            ),
            Filter::enumerated::<FulfillmentStatus>(
                "fulfillmentStatus",
                |o: &Order| Some(FilterValue::Enum(o.fulfillment_status.name())),
                "fulfillment status",
            ),
            Filter::reference("customerId", |o: &Order| o.customer_id.map(FilterValue::Reference), "orders of these customers"),
        ],
        ranges: &[],
        search: Some(Search::new(
            |o| format!("{} {}", o.number, o.email.as_deref().unwrap_or("")).to_lowercase(),
            |text, q, _| {
                let (number, email) = text.split_once(' ').unwrap_or((text, ""));
                q.trim_start_matches('#').parse::<u64>().is_ok_and(|n| number.parse() == Ok(n)) || email.contains(q)
            },
            "an order number (1001 or #1001) or text in the email",
        )),
    };

    fn id(&self) -> Uuid {
        self.id
    }
}

/// The counter holding the last order number given.
pub(crate) fn number_key(store: Uuid) -> Vec<u8> {
    Key::store(store).str("order_number").into_vec()
}

/// Moves an order whose payment succeeded after it was placed to PAID (inside the intent's write).
pub fn mark_paid(tx: &mut Tx, store: Uuid, id: Uuid, now: i64) -> ApiResult<()> {
    let Some(old) = record::load::<Order>(tx, store, id)? else { return Ok(()) };
    if old.financial_status == FinancialStatus::Paid {
        return Ok(());
    }
    let mut new = old.clone();
    new.financial_status = FinancialStatus::Paid;
    new.updated_at = now;
    record::write(tx, store, Some(&old), Some(&new))
}

/// `PATCH S/orders/{orderId}`: the note and tags; absent fields stay, `null` clears the note.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateOrder {
    #[serde(default, deserialize_with = "double_option")]
    #[schemars(length(max = 5000), pattern(fields::TEXT_OR_EMPTY))]
    pub note: Option<Option<String>>,
    /// Replaces the tags (trimmed, duplicates dropped without regard to case).
    #[schemars(length(max = MAX_TAGS), inner(length(min = 1, max = MAX_TAG_CHARS), pattern(fields::LINE)))]
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
                check_line(&mut c, &format!("tags[{i}]"), t, MAX_TAG_CHARS, true);
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

/// Changes an order's note and tags.
pub async fn update(cell: &Cell, store: Uuid, id: Uuid, update: UpdateOrder) -> ApiResult<Order> {
    // Validate before queueing: a bad field never reaches the writer.
    update.apply(&mut cell.get::<Order>(store, id)?)?;
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<Order>(tx, store, id)?;
            let mut new = old.clone();
            update.apply(&mut new)?;
            new.updated_at = now;
            record::write(tx, store, Some(&old), Some(&new))?;
            Ok(new)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names_match_serde<E: Enumerated + serde::Serialize>(all: &[E]) {
        let wire: Vec<String> = all.iter().map(|v| serde_json::to_value(v).unwrap().as_str().unwrap().to_string()).collect();
        assert_eq!(wire, E::NAMES);
        assert!(all.iter().zip(E::NAMES).all(|(v, n)| v.name() == *n));
    }

    #[test]
    fn filter_names_are_the_wire_names() {
        names_match_serde(&[OrderStatus::Open, OrderStatus::Cancelled]);
        names_match_serde(&[FinancialStatus::Pending, FinancialStatus::Authorized, FinancialStatus::Paid]);
        names_match_serde(&[
            FulfillmentStatus::Unfulfilled,
            FulfillmentStatus::PartiallyFulfilled,
            FulfillmentStatus::Fulfilled,
            FulfillmentStatus::OnHold,
            FulfillmentStatus::Scheduled,
        ]);
    }
}
