//! `S/gift-cards`: issue, list, read and disable gift cards. The code is answered once, by the
//! issue; every later read shows it masked.

use crate::cells::gift_cards::{GiftCardFilter, SORT_FIELDS};
use crate::domain::gift_card::{GiftCardStatus, IssueGiftCard, UpdateGiftCard, normalise_search};
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::context::Ctx;
use crate::http::query::{Paging, Query};
use crate::http::route::{Access, Param, Route, Service, param};
use crate::http::{Page, Resp, created, ok};

const LIST_PARAMS: &[Param] = &[
    param("page", "integer", "1-based page, default 1"),
    param("limit", "integer", "page size, 1..250, default 20"),
    param("status", "string", "comma-separated: ACTIVE, DISABLED, EXPIRED, DEPLETED (any case)"),
    param("customerId", "string", "cards of this customer"),
    param("search", "string", "the last characters of the code (up to 4), or a whole code"),
    param("sortBy", "string", "created_at (default), updated_at, balance, initial_value"),
    param("sortOrder", "string", "asc or desc (default)"),
];

pub fn routes() -> Vec<Route> {
    use Access::Member;
    use Service::Cell;
    let p = "/stores/{storeId}/gift-cards";
    let one = "/stores/{storeId}/gift-cards/{giftCardId}";
    vec![
        Route::get(p, Cell, Member, handler!(list), "List gift cards (codes masked)").query(LIST_PARAMS),
        Route::post(p, Cell, Member, handler!(issue), "Issue a gift card: the answer shows the full code, this once")
            .body::<IssueGiftCard>(),
        Route::get(one, Cell, Member, handler!(get), "One gift card with its redemptions (code masked)"),
        Route::patch(
            one,
            Cell,
            Member,
            handler!(update),
            "Disable a gift card (for good), or change its note, expiry or customer",
        )
        .body::<UpdateGiftCard>(),
    ]
}

fn statuses(q: &Query) -> ApiResult<Vec<GiftCardStatus>> {
    let Some(raw) = q.str("status") else { return Ok(Vec::new()) };
    raw.split(',')
        .map(|s| {
            GiftCardStatus::parse(s.trim())
                .ok_or_else(|| ApiError::field("status", format!("must be among: {}", GiftCardStatus::NAMES.join(", "))))
        })
        .collect()
}

fn filter(cx: &Ctx) -> ApiResult<GiftCardFilter> {
    let q = &cx.query;
    let search = q
        .str("search")
        .map(|s| {
            normalise_search(s)
                .ok_or_else(|| ApiError::field("search", "must be 1 to 20 letters or digits (spaces and dashes are ignored)"))
        })
        .transpose()?;
    Ok(GiftCardFilter { statuses: statuses(q)?, customer_id: q.uuid("customerId")?, search })
}

async fn list(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let paging = Paging::from_query(&cx.query, SORT_FIELDS, "created_at")?;
    let filter = filter(&cx)?;
    let now = cx.node.clock.now_ms();
    let (cards, total) = s.cell.list_gift_cards(s.id, &filter, &paging, now)?;
    let data: Vec<_> = cards.iter().map(|g| g.view(now, None, false)).collect();
    Ok(ok(&Page::new(data, total, paging.page, paging.limit)))
}

async fn issue(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let body: IssueGiftCard = cx.json()?;
    let (card, code) = s.cell.issue_gift_card(s.id, body).await?;
    Ok(created(&card.view(cx.node.clock.now_ms(), Some(&code), true)))
}

async fn get(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let card = s.cell.gift_card(s.id, cx.path_id("giftCardId")?)?;
    Ok(ok(&card.view(cx.node.clock.now_ms(), None, true)))
}

async fn update(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let id = cx.path_id("giftCardId")?;
    let body: UpdateGiftCard = cx.json()?;
    let card = s.cell.update_gift_card(s.id, id, body).await?;
    Ok(ok(&card.view(cx.node.clock.now_ms(), None, true)))
}
