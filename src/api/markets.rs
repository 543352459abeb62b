//! `S/markets`: groups of countries sold to in one currency.

use crate::cells::markets;
use crate::domain::market::{CreateMarket, Market, MarketView, UpdateMarket};
use crate::error::ApiResult;
use crate::handler;
use crate::http::Page;
use crate::http::list::ListOf;
use crate::http::reply::{Created, Json, NoContent};
use crate::http::route::{Access, Service};
use crate::node::context::{Ctx, Route};

pub fn routes() -> Vec<Route> {
    use Access::Member;
    use Service::Cell;
    let p = "/stores/{storeId}/markets";
    let one = "/stores/{storeId}/markets/{marketId}";
    vec![
        Route::get(p, Cell, Member, handler!(list), "List markets"),
        Route::post(p, Cell, Member, handler!(create), "Create a market (its countries in no other market)")
            .errors(&[409])
            .body::<CreateMarket>(),
        Route::get(one, Cell, Member, handler!(get), "One market"),
        Route::patch(one, Cell, Member, handler!(update), "Change a market").errors(&[409]).body::<UpdateMarket>(),
        Route::delete(one, Cell, Member, handler!(delete), "Delete a market no catalog uses").errors(&[409]),
    ]
}

async fn list(cx: Ctx, q: ListOf<Market>) -> ApiResult<Json<Page<MarketView>>> {
    let s = cx.scope()?;
    let listed = s.cell.list::<Market>(s.id, &q.query).await?;
    Ok(Json(q.page(listed.map(|m| m.view()))))
}

async fn create(cx: Ctx) -> ApiResult<Created<MarketView>> {
    let s = cx.scope()?;
    let m = markets::create(&s.cell, s.id, cx.json()?).await?;
    Ok(Created(m.view()))
}

async fn get(cx: Ctx) -> ApiResult<Json<MarketView>> {
    let s = cx.scope()?;
    Ok(Json(s.cell.get::<Market>(s.id, cx.path_id("marketId")?)?.view()))
}

async fn update(cx: Ctx) -> ApiResult<Json<MarketView>> {
    let s = cx.scope()?;
    let m = markets::update(&s.cell, s.id, cx.path_id("marketId")?, cx.json()?).await?;
    Ok(Json(m.view()))
}

async fn delete(cx: Ctx) -> ApiResult<NoContent> {
    let s = cx.scope()?;
    markets::delete(&s.cell, s.id, cx.path_id("marketId")?).await?;
    Ok(NoContent)
}
