//! Comments on a discount: a record scoped to its discount (`store ‖ discount ‖ comment`), so a
//! discount's comments are one list with its own total, and deleting the discount removes them
//! as one range. Only the author, an owner or an admin may change or delete one.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::Cell;
use crate::domain::fields;
use crate::domain::pricing::discount::Discount;
use crate::domain::role::Role;
use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult, Check, Code};
use crate::storage::record::{self, List, Record, Sort};
use crate::storage::tables::{DISCOUNT_COMMENT_ORDER, DISCOUNT_COMMENTS, StoreTable};
use crate::storage::tx::Tx;

/// Most comments on one discount.
pub const MAX_COMMENTS: u64 = 1000;
/// Longest comment, in characters.
pub const MAX_COMMENT_CHARS: usize = 5000;

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

impl Record for DiscountComment {
    const TABLE: StoreTable = DISCOUNT_COMMENTS;
    const NAME: &'static str = "discount_comments";
    const LIST: List<Self> = List::sorted(
        DISCOUNT_COMMENT_ORDER,
        &[Sort { name: "created_at", tag: 0, key: |c, k| k.i64(c.created_at) }],
        "created_at",
    );

    fn id(&self) -> Uuid {
        self.id
    }

    fn scope(&self) -> Option<Uuid> {
        Some(self.discount_id)
    }
}

/// `POST` and `PATCH S/discounts/{discountId}/comments[/{commentId}]`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommentInput {
    /// 1 to 5000 characters.
    #[schemars(length(min = 1, max = MAX_COMMENT_CHARS), pattern(fields::NOT_BLANK))]
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
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommentView {
    pub id: Uuid,
    pub discount_id: Uuid,
    pub author_id: Uuid,
    pub body: String,
    pub created_at: String,
    pub updated_at: String,
}

impl DiscountComment {
    pub fn view(&self) -> CommentView {
        CommentView {
            id: self.id,
            discount_id: self.discount_id,
            author_id: self.author_id,
            body: self.body.clone(),
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }
}

/// Who may change a comment: its author, or an owner or admin of the store.
fn may_edit(c: &DiscountComment, user: Uuid, role: Option<Role>) -> bool {
    c.author_id == user || matches!(role, Some(Role::Owner | Role::Admin))
}

fn load(tx: &Tx, store: Uuid, discount: Uuid, comment: Uuid) -> ApiResult<DiscountComment> {
    // The discount first: a comment of a deleted or foreign discount is simply not found.
    record::must_load::<Discount>(tx, store, discount)?;
    record::load_in(tx, store, Some(discount), comment)?.ok_or_else(ApiError::not_found)
}

pub async fn add(cell: &Cell, store: Uuid, discount: Uuid, author: Uuid, input: CommentInput) -> ApiResult<DiscountComment> {
    let body = input.validate()?;
    let now = cell.clock.now_ms();
    let comment = DiscountComment {
        id: cell.clock.new_id(),
        discount_id: discount,
        author_id: author,
        body,
        created_at: now,
        updated_at: now,
    };
    cell.writer
        .write(Some(store), move |tx| {
            record::must_load::<Discount>(tx, store, discount)?;
            if record::count::<DiscountComment>(tx, store, Some(discount))? >= MAX_COMMENTS {
                return Err(ApiError::msg(Code::BUSINESS_RULE, format!("a discount keeps at most {MAX_COMMENTS} comments")));
            }
            record::write(tx, store, None, Some(&comment))?;
            Ok(comment.clone())
        })
        .await
}

/// Changes a comment's body: its author, or an owner or admin, only (403 otherwise).
pub async fn update(
    cell: &Cell,
    store: Uuid,
    (discount, comment): (Uuid, Uuid),
    (user, role): (Uuid, Option<Role>),
    input: CommentInput,
) -> ApiResult<DiscountComment> {
    let body = input.validate()?;
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let old = load(tx, store, discount, comment)?;
            if !may_edit(&old, user, role) {
                return Err(ApiError::msg(Code::FORBIDDEN, "only the author, an owner or an admin may change this comment"));
            }
            let new = DiscountComment { body: body.clone(), updated_at: now, ..old.clone() };
            record::write(tx, store, Some(&old), Some(&new))?;
            Ok(new)
        })
        .await
}

/// Deletes a comment: its author, or an owner or admin, only (403 otherwise).
pub async fn delete(
    cell: &Cell,
    store: Uuid,
    (discount, comment): (Uuid, Uuid),
    (user, role): (Uuid, Option<Role>),
) -> ApiResult<()> {
    cell.writer
        .write(Some(store), move |tx| {
            let old = load(tx, store, discount, comment)?;
            if !may_edit(&old, user, role) {
                return Err(ApiError::msg(Code::FORBIDDEN, "only the author, an owner or an admin may delete this comment"));
            }
            record::write(tx, store, Some(&old), None)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cells::discounts;
    use crate::domain::pricing::discount::DiscountInput;
    use crate::storage::list::ListQuery;

    #[tokio::test]
    async fn a_discount_s_comments_are_counted_per_discount_and_go_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let cell =
            Cell::open("test", dir.path(), crate::clock::Clock::system(), &crate::memory::Shares::of_one_cell(256 << 20).cell)
                .unwrap();
        let store = cell.clock.new_id();
        let input = |title: &str| -> DiscountInput {
            serde_json::from_value(serde_json::json!({"title": title, "valueType": "percentage", "value": 500})).unwrap()
        };
        let (a, b) = (
            discounts::create(&cell, store, input("A")).await.unwrap(),
            discounts::create(&cell, store, input("B")).await.unwrap(),
        );
        let author = cell.clock.new_id();
        for (discount, body) in [(a.id, "one"), (a.id, "two"), (b.id, "three")] {
            add(&cell, store, discount, author, CommentInput { body: body.into() }).await.unwrap();
        }
        let of = |discount: Uuid| ListQuery { scope: Some(discount), sort: "created_at", limit: 10, ..Default::default() };
        let listed = cell.list::<DiscountComment>(store, &of(a.id)).await.unwrap();
        assert_eq!((listed.total, listed.items.iter().map(|c| c.body.as_str()).collect::<Vec<_>>()), (2, vec!["one", "two"]));
        assert_eq!(cell.list::<DiscountComment>(store, &of(b.id)).await.unwrap().total, 1);

        discounts::delete(&cell, store, a.id).await.unwrap();
        let gone = cell.list::<DiscountComment>(store, &of(a.id)).await.unwrap();
        assert_eq!((gone.total, gone.items.len()), (0, 0), "rows, order rows and the counter went with the discount");
        assert_eq!(cell.list::<DiscountComment>(store, &of(b.id)).await.unwrap().total, 1, "another discount's comments stay");
        cell.close();
    }
}
