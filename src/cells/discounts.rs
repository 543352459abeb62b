//! Discounts in a cell: the record declaration (list orders, the code claim, the automatic
//! index, filters with status read at the list's moment) and the rules of their writes;
//! [`consume_usage`] is the one place usage counts grow, inside the order-creating write job.
//!
//! Usage is never touched by a calculation or a validation: it is read there and consumed only when
//! an order is created, so a discount is spent exactly once per order even under concurrent
//! checkouts (the writer runs jobs one at a time, and the limit is checked again inside the job).

use redb::ReadTransaction;
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::discount_comments::DiscountComment;
use crate::cells::pricing_version;
use crate::domain::pricing::discount::{Discount, DiscountInput, DiscountStatus, DiscountUsage, ValueType, status_at};
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::keys::Key;
use crate::storage::read;
use crate::storage::record::{self, Claim, Enumerated, Filter, FilterValue, List, Record, Search, Sort, row_key};
use crate::storage::tables::{DISCOUNT_AUTOMATIC, DISCOUNT_CODES, DISCOUNT_ORDER, DISCOUNT_USAGE, DISCOUNTS, StoreTable};
use crate::storage::tx::{Tx, read_u64};

/// Sort keys longer than this are cut: order among such titles falls back to the id.
const SORT_KEY_CHARS: usize = 64;

fn sort_text(s: &str) -> String {
    s.to_lowercase().chars().take(SORT_KEY_CHARS).collect()
}

impl Record for Discount {
    const TABLE: StoreTable = DISCOUNTS;
    const NAME: &'static str = "discounts";
    const LIST: List<Self> = List {
        order: Some(DISCOUNT_ORDER),
        sorts: &[
            Sort { name: "created_at", tag: 0, key: |d, k| k.i64(d.created_at) },
            Sort { name: "updated_at", tag: 1, key: |d, k| k.i64(d.updated_at) },
            Sort { name: "title", tag: 2, key: |d, k| k.str(&sort_text(&d.title)) },
            Sort { name: "code", tag: 3, key: |d, k| k.str(&sort_text(d.code.as_deref().unwrap_or(""))) },
        ],
        default_sort: "created_at",
        summaries: "updated_at",
        own_order: false,
        filters: &[
            Filter::timed(
                "status",
                DiscountStatus::NAMES,
                |d: &Discount| {
                    let ends = d.ends_at.unwrap_or(i64::MAX);
                    Some(FilterValue::Times(vec![i64::from(d.disabled), d.starts_at, ends]))
                },
                |t, now| {
                    let at = |i: usize| t.get(i).copied().unwrap_or_default();
                    status_at(at(0) != 0, at(1), Some(at(2)).filter(|e| *e != i64::MAX), now).name()
                },
                // It starts being active at its start and expires at its end.
                |t, now| t.get(1..3).and_then(|times| times.iter().copied().filter(|m| *m > now && *m != i64::MAX).min()),
                "status at the time of the request",
            ),
            Filter::enumerated::<ValueType>("type", |d: &Discount| Some(FilterValue::Enum(d.value_type.name())), "what it gives")
                .alias("valueType"),
            Filter::names(
                "method",
                &["code", "automatic"],
                |d: &Discount| Some(FilterValue::Enum(if d.code.is_some() { "code" } else { "automatic" })),
                "code discounts or automatic ones",
            ),
        ],
        ranges: &[],
        search: Some(Search::new(
            |d| format!("{}\n{}", d.title, d.code.as_deref().unwrap_or("")).to_lowercase(),
            |text, q, _| text.split('\n').any(|part| part.contains(q)),
            "text in the title or the code (any case)",
        )),
    };

    fn id(&self) -> Uuid {
        self.id
    }

    /// The code claim (`store ‖ lower-cased code → id`), or for an automatic discount its row in
    /// the index every calculation reads.
    fn claims(&self, store: Uuid) -> ApiResult<Vec<Claim>> {
        Ok(match &self.code {
            Some(code) => vec![(DISCOUNT_CODES, code_key(store, code), self.id.as_bytes().to_vec())],
            None => vec![(DISCOUNT_AUTOMATIC, row_key(store, self.id), Vec::new())],
        })
    }
}

/// Codes are ASCII (letters, digits, `-`, `_`), so ASCII lower-casing is the whole case folding.
pub(crate) fn code_key(store: Uuid, code: &str) -> Vec<u8> {
    Key::store(store).str(&code.trim().to_ascii_lowercase()).into_vec()
}

pub(crate) fn total_usage_key(store: Uuid, id: Uuid) -> Vec<u8> {
    Key::store(store).id(id).u8(0).into_vec()
}

pub(crate) fn customer_usage_key(store: Uuid, id: Uuid, customer: &str) -> Vec<u8> {
    Key::store(store).id(id).u8(1).str(customer).into_vec()
}

/// How a customer is named in usage rows: their id, or for a guest the lower-cased checkout email.
pub fn customer_key(id: Option<Uuid>, email: Option<&str>) -> Option<String> {
    id.map(|i| i.to_string()).or_else(|| email.map(|e| e.trim().to_lowercase()).filter(|e| !e.is_empty()))
}

/// Writes `new` in place of `old` (either may be absent: create, delete) through the record
/// layer. A code another discount of the store claims (in any case) is a 409 naming `code`;
/// deleting a discount removes its usage counts and comments with it. Calculations read
/// discounts, so the store's pricing version moves on too.
fn write_discount(tx: &mut Tx, store: Uuid, old: Option<&Discount>, new: Option<&Discount>) -> ApiResult<()> {
    pricing_version::pricing_changed(tx, store)?;
    if let Some(n) = new
        && let Some(code) = &n.code
        && let Some(owner) = tx.get(DISCOUNT_CODES, &code_key(store, code))?
        && owner != n.id.as_bytes()
    {
        return Err(
            ApiError::field("code", "another discount of this store already has this code").with_code(Code::DISCOUNT_CODE_TAKEN)
        );
    }
    if let (Some(o), None) = (old, new) {
        tx.delete_prefix(DISCOUNT_USAGE, &row_key(store, o.id))?;
        record::delete_scope::<DiscountComment>(tx, store, o.id)?;
    }
    record::write(tx, store, old, new)
}

/// The usage counts of a discount, through `get` (a read or a write transaction).
pub(crate) fn usage_with(
    get: impl Fn(&[u8]) -> ApiResult<Option<Vec<u8>>>,
    store: Uuid,
    id: Uuid,
    customer: Option<&str>,
) -> ApiResult<DiscountUsage> {
    let count =
        |k: &[u8]| -> ApiResult<u32> { Ok(get(k)?.map(|b| u32::try_from(read_u64(&b)).unwrap_or(u32::MAX)).unwrap_or(0)) };
    let total = count(&total_usage_key(store, id))?;
    let by_customer = match customer {
        Some(c) => count(&customer_usage_key(store, id, c))?,
        None => 0,
    };
    Ok(DiscountUsage { total, by_customer })
}

/// The usage counts of a discount in a read transaction (calculations, validations).
pub fn usage(txn: &ReadTransaction, store: Uuid, id: Uuid, customer: Option<&str>) -> ApiResult<DiscountUsage> {
    usage_with(|k| read::get_raw(txn, DISCOUNT_USAGE, k), store, id, customer)
}

/// Consumes one use of a discount for an order being created, inside that order's write job.
///
/// Checked again here, under the writer, whatever the calculation said: the discount must still
/// exist and be active at `now` (422 `BUSINESS_RULE` otherwise), and neither the total limit nor, for a
/// once-per-customer discount, this customer's use may be reached (409
/// `DISCOUNT_USAGE_LIMIT_REACHED`). `customer` is [`customer_key`]'s name for the buyer; a
/// once-per-customer discount needs one. On error nothing is written and the job fails, so the
/// order is not created either.
pub fn consume_usage(tx: &mut Tx, store: Uuid, discount_id: Uuid, customer: Option<&str>, now: i64) -> ApiResult<()> {
    let Some(d) = record::load::<Discount>(tx, store, discount_id)? else {
        return Err(ApiError::msg(Code::BUSINESS_RULE, "the discount no longer exists"));
    };
    if d.status(now) != DiscountStatus::Active {
        return Err(ApiError::msg(Code::BUSINESS_RULE, format!("{} is no longer active", d.label())));
    }
    let customer = customer.map(str::trim).filter(|c| !c.is_empty());
    if d.once_per_customer && customer.is_none() {
        return Err(ApiError::msg(Code::BUSINESS_RULE, format!("{} needs a known customer", d.label())));
    }
    let used = usage_with(|k| tx.get(DISCOUNT_USAGE, k), store, discount_id, customer)?;
    if d.usage_limit.is_some_and(|limit| used.total >= limit) {
        return Err(ApiError::msg(Code::DISCOUNT_USAGE_LIMIT_REACHED, format!("{} has reached its usage limit", d.label())));
    }
    if d.once_per_customer && used.by_customer > 0 {
        return Err(ApiError::msg(Code::DISCOUNT_USAGE_LIMIT_REACHED, format!("{} can be used once per customer", d.label())));
    }
    tx.bump(DISCOUNT_USAGE, &total_usage_key(store, discount_id), 1)?;
    if let Some(c) = customer {
        tx.bump(DISCOUNT_USAGE, &customer_usage_key(store, discount_id, c), 1)?;
    }
    Ok(())
}

/// The discount a code names (without regard to case), in a read transaction.
pub fn find_code(txn: &ReadTransaction, store: Uuid, code: &str) -> ApiResult<Option<Discount>> {
    let Some(id) = read::get_raw(txn, DISCOUNT_CODES, &code_key(store, code))? else { return Ok(None) };
    let id = Uuid::from_slice(&id).map_err(ApiError::internal)?;
    record::get(txn, store, id)
}

pub async fn create(cell: &Cell, store: Uuid, input: DiscountInput) -> ApiResult<Discount> {
    let d = Discount::create(&input, cell.clock.new_id(), cell.clock.now_ms())?;
    cell.writer
        .write(Some(store), move |tx| {
            write_discount(tx, store, None, Some(&d))?;
            Ok(d.clone())
        })
        .await
}

/// Replaces a discount by `input` (the whole discount), keeping its id, creation time and usage.
pub async fn update(cell: &Cell, store: Uuid, id: Uuid, input: DiscountInput) -> ApiResult<Discount> {
    // Validated before queueing so a bad body never costs a place in a batch.
    let now = cell.clock.now_ms();
    input.validate(now)?;
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<Discount>(tx, store, id)?;
            let new = old.replace(&input, now)?;
            write_discount(tx, store, Some(&old), Some(&new))?;
            Ok(new)
        })
        .await
}

pub async fn delete(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<()> {
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<Discount>(tx, store, id)?;
            write_discount(tx, store, Some(&old), None)
        })
        .await
}

/// ACTIVE code discounts whose code or title contains `search` (any case), usable on `channel`
/// when one is named, at most `limit`: codes starting with the search first, then the other
/// matches, each group in code order.
/// The active code discounts matching `search`, codes starting with it first, then codes or
/// titles containing it, each group in code order: the window `offset..offset + limit` of them
/// and how many match in all. Walks the store's codes (a store has few compared with products).
pub fn search_codes(
    cell: &Cell,
    store: Uuid,
    search: Option<&str>,
    channel: Option<&str>,
    (offset, limit): (usize, usize),
    now: i64,
) -> ApiResult<(Vec<Discount>, u64)> {
    let txn = cell.read()?;
    let lower = search.map(|s| s.trim().to_lowercase()).unwrap_or_default();
    let keep = offset.saturating_add(limit);
    let (mut starts, mut contains) = (Vec::new(), Vec::new());
    let mut total = 0u64;
    read::walk(&txn, DISCOUNT_CODES, Key::store(store).bytes(), false, |_, v| {
        let Ok(id) = Uuid::from_slice(v) else { return Ok(true) };
        let Some(d) = record::get::<Discount>(&txn, store, id)? else { return Ok(true) };
        if d.status(now) != DiscountStatus::Active || channel.is_some_and(|c| !d.available_on(Some(c))) {
            return Ok(true);
        }
        let code = d.code.as_deref().unwrap_or("").to_ascii_lowercase();
        if code.starts_with(&lower) {
            total += 1;
            if starts.len() < keep {
                starts.push(d);
            }
        } else if matches_text(&d, &lower) {
            total += 1;
            if contains.len() < keep {
                contains.push(d);
            }
        }
        Ok(true)
    })?;
    starts.extend(contains);
    Ok((starts.into_iter().skip(offset).take(limit).collect(), total))
}

fn matches_text(d: &Discount, lower: &str) -> bool {
    d.title.to_lowercase().contains(lower) || d.code.as_deref().is_some_and(|c| c.to_ascii_lowercase().contains(lower))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_names_are_the_wire_names() {
        let wire = |v: serde_json::Value| v.as_str().unwrap().to_string();
        for s in [DiscountStatus::Active, DiscountStatus::Scheduled, DiscountStatus::Expired, DiscountStatus::Disabled] {
            assert_eq!(wire(serde_json::to_value(s).unwrap()), s.name());
        }
        for t in [ValueType::Percentage, ValueType::FixedAmount, ValueType::FreeShipping, ValueType::BuyXGetY] {
            assert_eq!(wire(serde_json::to_value(t).unwrap()), t.name());
        }
    }
}
