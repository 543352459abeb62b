//! `S/gift-cards`: issue, list, read and disable gift cards. The code is answered once, by the
//! issue; every later read shows it masked.

use crate::cells::gift_cards;
use crate::domain::gift_card::{GiftCard, GiftCardView, IssueGiftCard, UpdateGiftCard};
use crate::error::ApiResult;
use crate::handler;
use crate::http::Page;
use crate::http::list::ListOf;
use crate::http::reply::{Created, Json};
use crate::http::route::{Access, Service};
use crate::node::context::{Ctx, Route};

pub fn routes() -> Vec<Route> {
    use Access::Member;
    use Service::Cell;
    let p = "/stores/{storeId}/gift-cards";
    let one = "/stores/{storeId}/gift-cards/{giftCardId}";
    vec![
        Route::get(p, Cell, Member, handler!(list), "List gift cards (codes masked)"),
        Route::post(p, Cell, Member, handler!(issue), "Issue a gift card: the answer shows the full code, this once")
            .secret()
            .errors(&[409])
            .body::<IssueGiftCard>(),
        Route::get(one, Cell, Member, handler!(get), "One gift card with its redemptions (code masked)"),
        Route::patch(
            one,
            Cell,
            Member,
            handler!(update),
            "Disable a gift card (for good), or change its note, expiry or customer",
        )
        .errors(&[422])
        .body::<UpdateGiftCard>(),
    ]
}

async fn list(cx: Ctx, q: ListOf<GiftCard>) -> ApiResult<Json<Page<GiftCardView>>> {
    let s = cx.scope()?;
    let now = cx.node.clock.now_ms();
    let listed = s.cell.list::<GiftCard>(s.id, &q.query).await?;
    Ok(Json(q.page(listed.map(|g| g.view(now, None, false)))))
}

async fn issue(cx: Ctx) -> ApiResult<Created<GiftCardView>> {
    let s = cx.scope()?;
    let (card, code) = gift_cards::issue(&s.cell, s.id, cx.json()?).await?;
    Ok(Created(card.view(cx.node.clock.now_ms(), Some(&code), true)))
}

async fn get(cx: Ctx) -> ApiResult<Json<GiftCardView>> {
    let s = cx.scope()?;
    let card = s.cell.get::<GiftCard>(s.id, cx.path_id("giftCardId")?)?;
    Ok(Json(card.view(cx.node.clock.now_ms(), None, true)))
}

async fn update(cx: Ctx) -> ApiResult<Json<GiftCardView>> {
    let s = cx.scope()?;
    let card = gift_cards::update(&s.cell, s.id, cx.path_id("giftCardId")?, cx.json()?).await?;
    Ok(Json(card.view(cx.node.clock.now_ms(), None, true)))
}
