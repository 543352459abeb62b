//! Discounts in a cell. [`write_discount`] is the one function that writes a discount row and all
//! its secondary rows (code claim, list orders, automatic index, counter); [`consume_usage`] is the
//! one place usage counts grow, inside the order-creating write job.
//!
//! Usage is never touched by a calculation or a validation: it is read there and consumed only when
//! an order is created, so a discount is spent exactly once per order even under concurrent
//! checkouts (the writer runs jobs one at a time, and the limit is checked again inside the job).

use std::sync::Arc;

use redb::ReadTransaction;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::account::Role;
use crate::cells::Cell;
use crate::domain::pricing::discount::{Discount, DiscountInput, DiscountStatus, DiscountUsage, ValueType};
use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult, Check, Code};
use crate::http::query::Paging;
use crate::storage::codec::{decode, encode};
use crate::storage::keys::Key;
use crate::storage::read;
use crate::storage::tables::{
    COUNTERS, DISCOUNT_AUTOMATIC, DISCOUNT_CODES, DISCOUNT_COMMENTS, DISCOUNT_ORDER, DISCOUNT_USAGE, DISCOUNTS,
};
use crate::storage::writer::{Rows, Tx, read_u64};

/// The sortable fields of the discount list, in index-field order.
pub const SORT_FIELDS: &[&str] = &["created_at", "updated_at", "title", "code"];
/// Most comments on one discount.
pub const MAX_COMMENTS: usize = 1000;
/// Longest comment, in characters.
pub const MAX_COMMENT_CHARS: usize = 5000;

/// Sort keys longer than this are cut: order among such titles falls back to the id.
const SORT_KEY_CHARS: usize = 64;

pub(crate) fn row_key(store: Uuid, id: Uuid) -> Vec<u8> {
    Key::store(store).id(id).into_vec()
}

/// Codes are ASCII (letters, digits, `-`, `_`), so ASCII lower-casing is the whole case folding.
pub(crate) fn code_key(store: Uuid, code: &str) -> Vec<u8> {
    Key::store(store).str(&code.trim().to_ascii_lowercase()).into_vec()
}

fn counter_key(store: Uuid) -> Vec<u8> {
    Key::store(store).str("discounts").into_vec()
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

fn order_rows(store: Uuid, d: &Discount) -> Rows {
    let k = |field: u8| Key::store(store).u8(field);
    let title: String = d.title.to_lowercase().chars().take(SORT_KEY_CHARS).collect();
    let code: String = d.code.as_deref().unwrap_or("").to_ascii_lowercase().chars().take(SORT_KEY_CHARS).collect();
    vec![
        (k(0).i64(d.created_at).id(d.id).into_vec(), Vec::new()),
        (k(1).i64(d.updated_at).id(d.id).into_vec(), Vec::new()),
        (k(2).str(&title).id(d.id).into_vec(), Vec::new()),
        (k(3).str(&code).id(d.id).into_vec(), Vec::new()),
    ]
}

fn code_rows(store: Uuid, d: &Discount) -> Rows {
    d.code.iter().map(|c| (code_key(store, c), d.id.as_bytes().to_vec())).collect()
}

fn automatic_rows(store: Uuid, d: &Discount) -> Rows {
    if d.code.is_none() { vec![(row_key(store, d.id), Vec::new())] } else { Vec::new() }
}

/// Writes `new` in place of `old` (either may be absent: create, delete) with every secondary row.
/// A code another discount of the store claims (in any case) is a 409 naming `code`; deleting a
/// discount removes its usage counts and comments with it.
pub fn write_discount(tx: &mut Tx, store: Uuid, old: Option<&Discount>, new: Option<&Discount>) -> ApiResult<()> {
    crate::cells::calculate::pricing_changed(tx, store)?;
    if let Some(n) = new
        && let Some(code) = &n.code
        && let Some(owner) = tx.get(DISCOUNT_CODES, &code_key(store, code))?
        && owner != n.id.as_bytes()
    {
        return Err(
            ApiError::field("code", "another discount of this store already has this code").with_code(Code::DISCOUNT_CODE_TAKEN)
        );
    }
    let rows = |d: Option<&Discount>, f: fn(Uuid, &Discount) -> Rows| d.map(|d| f(store, d)).unwrap_or_default();
    tx.sync_rows(DISCOUNT_ORDER, &rows(old, order_rows), &rows(new, order_rows))?;
    tx.sync_rows(DISCOUNT_CODES, &rows(old, code_rows), &rows(new, code_rows))?;
    tx.sync_rows(DISCOUNT_AUTOMATIC, &rows(old, automatic_rows), &rows(new, automatic_rows))?;
    match (old, new) {
        (_, Some(n)) => {
            if old.is_none() {
                tx.bump(COUNTERS, &counter_key(store), 1)?;
            }
            tx.put(DISCOUNTS, &row_key(store, n.id), &encode(n)?)
        }
        (Some(o), None) => {
            tx.bump(COUNTERS, &counter_key(store), -1)?;
            tx.delete_prefix(DISCOUNT_USAGE, &row_key(store, o.id))?;
            tx.delete_prefix(DISCOUNT_COMMENTS, &row_key(store, o.id))?;
            tx.delete(DISCOUNTS, &row_key(store, o.id))
        }
        (None, None) => Ok(()),
    }
}

fn load(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<Discount> {
    let bytes = tx.get(DISCOUNTS, &row_key(store, id))?.ok_or_else(ApiError::not_found)?;
    decode(&bytes)
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
    let d = match tx.get(DISCOUNTS, &row_key(store, discount_id))? {
        Some(b) => decode::<Discount>(&b)?,
        None => return Err(ApiError::msg(Code::BUSINESS_RULE, "the discount no longer exists")),
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
    read::get(txn, DISCOUNTS, &row_key(store, id))
}

/// Filters of the discount list; all absent lists every discount from the counter and the index.
#[derive(Debug, Default, Clone)]
pub struct DiscountFilter {
    pub status: Option<DiscountStatus>,
    pub value_type: Option<ValueType>,
    /// `Some(true)`: code discounts only; `Some(false)`: automatic ones only.
    pub code: Option<bool>,
    /// Lower-cased text found in the code or the title.
    pub search: Option<String>,
}

impl DiscountFilter {
    fn is_empty(&self) -> bool {
        self.status.is_none() && self.value_type.is_none() && self.code.is_none() && self.search.is_none()
    }

    fn matches(&self, d: &Discount, now: i64) -> bool {
        self.status.is_none_or(|s| d.status(now) == s)
            && self.value_type.is_none_or(|t| d.value_type == t)
            && self.code.is_none_or(|c| d.code.is_some() == c)
            && self.search.as_deref().is_none_or(|s| matches_text(d, s))
    }
}

fn matches_text(d: &Discount, lower: &str) -> bool {
    d.title.to_lowercase().contains(lower) || d.code.as_deref().is_some_and(|c| c.to_ascii_lowercase().contains(lower))
}

/// A comment on a discount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscountComment {
    pub id: Uuid,
    pub discount_id: Uuid,
    /// The member who wrote it; only they (or an owner or admin) may change or delete it.
    pub author_id: Uuid,
    pub body: String,
    pub created_at: i64,
    pub updated_at: i64,
}

/// `POST` and `PATCH S/discounts/{discountId}/comments[/{commentId}]`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommentInput {
    /// 1 to 5000 characters.
    pub body: String,
}

impl CommentInput {
    /// The trimmed body, or a 400 naming `body`.
    pub fn validate(&self) -> ApiResult<String> {
        let body = self.body.trim();
        let mut c = Check::new();
        c.ensure(
            !body.is_empty() && body.chars().count() <= MAX_COMMENT_CHARS,
            "body",
            format!("must be 1 to {MAX_COMMENT_CHARS} characters"),
        );
        c.finish()?;
        Ok(body.to_string())
    }
}

/// A comment as the API shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommentView<'a> {
    pub id: Uuid,
    pub discount_id: Uuid,
    pub author_id: Uuid,
    pub body: &'a str,
    pub created_at: String,
    pub updated_at: String,
}

impl DiscountComment {
    pub fn view(&self) -> CommentView<'_> {
        CommentView {
            id: self.id,
            discount_id: self.discount_id,
            author_id: self.author_id,
            body: &self.body,
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }
}

fn comment_key(store: Uuid, discount: Uuid, comment: Uuid) -> Vec<u8> {
    Key::store(store).id(discount).id(comment).into_vec()
}

/// Who may change a comment: its author, or an owner or admin of the store.
fn may_edit(c: &DiscountComment, user: Uuid, role: Option<Role>) -> bool {
    c.author_id == user || matches!(role, Some(Role::Owner | Role::Admin))
}

fn load_comment(tx: &Tx, store: Uuid, discount: Uuid, comment: Uuid) -> ApiResult<DiscountComment> {
    // The discount first: a comment of a deleted or foreign discount is simply not found.
    load(tx, store, discount)?;
    let bytes = tx.get(DISCOUNT_COMMENTS, &comment_key(store, discount, comment))?.ok_or_else(ApiError::not_found)?;
    decode(&bytes)
}

impl Cell {
    pub async fn create_discount(&self, store: Uuid, input: DiscountInput) -> ApiResult<Discount> {
        let d = Discount::create(&input, self.clock.new_id(), self.clock.now_ms())?;
        self.writer
            .write(Some(store), move |tx| {
                write_discount(tx, store, None, Some(&d))?;
                Ok(d.clone())
            })
            .await
    }

    pub fn discount(&self, store: Uuid, id: Uuid) -> ApiResult<Discount> {
        read::get(&self.read()?, DISCOUNTS, &row_key(store, id))?.ok_or_else(ApiError::not_found)
    }

    /// Replaces a discount by `input` (the whole discount), keeping its id, creation time and usage.
    pub async fn update_discount(&self, store: Uuid, id: Uuid, input: DiscountInput) -> ApiResult<Discount> {
        // Validated before queueing so a bad body never costs a place in a batch.
        let now = self.clock.now_ms();
        input.validate(now)?;
        let input = Arc::new(input);
        self.writer
            .write(Some(store), move |tx| {
                let old = load(tx, store, id)?;
                let new = old.replace(&input, now)?;
                write_discount(tx, store, Some(&old), Some(&new))?;
                Ok(new)
            })
            .await
    }

    pub async fn delete_discount(&self, store: Uuid, id: Uuid) -> ApiResult<()> {
        self.writer
            .write(Some(store), move |tx| {
                let old = load(tx, store, id)?;
                write_discount(tx, store, Some(&old), None)
            })
            .await
    }

    /// A page of discounts in the requested order, with the total. Without filters the page is
    /// read from the order index and the total from the counter; filters (status depends on the
    /// clock, so it cannot be indexed) walk the index and test each discount.
    pub fn list_discounts(
        &self,
        store: Uuid,
        filter: &DiscountFilter,
        paging: &Paging,
        now: i64,
    ) -> ApiResult<(Vec<Discount>, u64)> {
        let field = SORT_FIELDS.iter().position(|f| *f == paging.sort_by).unwrap_or(0) as u8;
        let accepts = |d: &Discount| filter.matches(d, now);
        read::record_page(
            &self.read()?,
            DISCOUNT_ORDER,
            DISCOUNTS,
            Key::store(store).u8(field).bytes(),
            paging.desc,
            (paging.offset(), paging.limit as usize),
            &counter_key(store),
            (!filter.is_empty()).then_some(&accepts as &dyn Fn(&Discount) -> bool),
        )
    }

    /// ACTIVE code discounts whose code or title contains `search` (any case), usable on
    /// `channel` when one is named, at most `limit`: codes starting with the search first, then
    /// the other matches, each group in code order.
    pub fn search_codes(
        &self,
        store: Uuid,
        search: Option<&str>,
        channel: Option<&str>,
        limit: usize,
        now: i64,
    ) -> ApiResult<Vec<Discount>> {
        let txn = self.read()?;
        let table = txn.open_table(DISCOUNTS.def)?;
        let lower = search.map(|s| s.trim().to_lowercase()).unwrap_or_default();
        let (mut starts, mut contains) = (Vec::new(), Vec::new());
        read::scan(&txn, DISCOUNT_CODES, Key::store(store).bytes(), false, 0, usize::MAX, |_, v| {
            if starts.len() >= limit {
                return Ok(());
            }
            let Ok(id) = Uuid::from_slice(v) else { return Ok(()) };
            let Some(row) = table.get(row_key(store, id).as_slice())? else { return Ok(()) };
            let d: Discount = decode(row.value())?;
            if d.status(now) != DiscountStatus::Active || channel.is_some_and(|c| !d.available_on(Some(c))) {
                return Ok(());
            }
            let code = d.code.as_deref().unwrap_or("").to_ascii_lowercase();
            if code.starts_with(&lower) {
                starts.push(d);
            } else if contains.len() < limit && matches_text(&d, &lower) {
                contains.push(d);
            }
            Ok(())
        })?;
        starts.extend(contains);
        starts.truncate(limit);
        Ok(starts)
    }

    /// The usage counts of a discount (total, and by `customer` when named).
    pub fn discount_usage(&self, store: Uuid, id: Uuid, customer: Option<&str>) -> ApiResult<DiscountUsage> {
        usage(&self.read()?, store, id, customer)
    }

    pub async fn add_discount_comment(
        &self,
        store: Uuid,
        discount: Uuid,
        author: Uuid,
        input: CommentInput,
    ) -> ApiResult<DiscountComment> {
        let body = input.validate()?;
        let now = self.clock.now_ms();
        let comment = DiscountComment {
            id: self.clock.new_id(),
            discount_id: discount,
            author_id: author,
            body,
            created_at: now,
            updated_at: now,
        };
        self.writer
            .write(Some(store), move |tx| {
                load(tx, store, discount)?;
                let prefix = row_key(store, discount);
                if tx.scan_prefix(DISCOUNT_COMMENTS, &prefix, None, MAX_COMMENTS)?.len() >= MAX_COMMENTS {
                    return Err(ApiError::msg(Code::BUSINESS_RULE, format!("a discount keeps at most {MAX_COMMENTS} comments")));
                }
                tx.put(DISCOUNT_COMMENTS, &comment_key(store, discount, comment.id), &encode(&comment)?)?;
                Ok(comment.clone())
            })
            .await
    }

    /// A page of a discount's comments in time order (ids are time-ordered), with the total.
    pub fn list_discount_comments(&self, store: Uuid, discount: Uuid, paging: &Paging) -> ApiResult<(Vec<DiscountComment>, u64)> {
        let txn = self.read()?;
        if read::get_raw(&txn, DISCOUNTS, &row_key(store, discount))?.is_none() {
            return Err(ApiError::not_found());
        }
        let prefix = row_key(store, discount);
        let mut total = 0u64;
        read::scan(&txn, DISCOUNT_COMMENTS, &prefix, false, 0, usize::MAX, |_, _| {
            total += 1;
            Ok(())
        })?;
        let mut out = Vec::with_capacity(paging.limit as usize);
        read::scan(&txn, DISCOUNT_COMMENTS, &prefix, paging.desc, paging.offset(), paging.limit as usize, |_, v| {
            out.push(decode(v)?);
            Ok(())
        })?;
        Ok((out, total))
    }

    /// Changes a comment's body: its author, or an owner or admin, only (403 otherwise).
    pub async fn update_discount_comment(
        &self,
        store: Uuid,
        discount: Uuid,
        comment: Uuid,
        user: Uuid,
        role: Option<Role>,
        input: CommentInput,
    ) -> ApiResult<DiscountComment> {
        let body = input.validate()?;
        let now = self.clock.now_ms();
        self.writer
            .write(Some(store), move |tx| {
                let mut c = load_comment(tx, store, discount, comment)?;
                if !may_edit(&c, user, role) {
                    return Err(ApiError::msg(Code::FORBIDDEN, "only the author, an owner or an admin may change this comment"));
                }
                c.body = body.clone();
                c.updated_at = now;
                tx.put(DISCOUNT_COMMENTS, &comment_key(store, discount, comment), &encode(&c)?)?;
                Ok(c)
            })
            .await
    }

    /// Deletes a comment: its author, or an owner or admin, only (403 otherwise).
    pub async fn delete_discount_comment(
        &self,
        store: Uuid,
        discount: Uuid,
        comment: Uuid,
        user: Uuid,
        role: Option<Role>,
    ) -> ApiResult<()> {
        self.writer
            .write(Some(store), move |tx| {
                let c = load_comment(tx, store, discount, comment)?;
                if !may_edit(&c, user, role) {
                    return Err(ApiError::msg(Code::FORBIDDEN, "only the author, an owner or an admin may delete this comment"));
                }
                tx.delete(DISCOUNT_COMMENTS, &comment_key(store, discount, comment))
            })
            .await
    }
}
