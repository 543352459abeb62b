//! `S/markets`: groups of countries sold to in one currency.

use crate::cells::markets::SORT_FIELDS;
use crate::domain::market::{CreateMarket, UpdateMarket};
use crate::error::ApiResult;
use crate::handler;
use crate::http::context::Ctx;
use crate::http::query::Paging;
use crate::http::route::{Access, Param, Route, Service, param};
use crate::http::{Page, Resp, created, no_content, ok};

const LIST_PARAMS: &[Param] = &[
    param("page", "integer", "1-based page, default 1"),
    param("limit", "integer", "page size, 1..250, default 20"),
    param("sortBy", "string", "createdAt (default), updatedAt, name"),
    param("sortOrder", "string", "asc or desc (default)"),
];

pub fn routes() -> Vec<Route> {
    use Access::Member;
    use Service::Cell;
    let p = "/stores/{storeId}/markets";
    let one = "/stores/{storeId}/markets/{marketId}";
    vec![
        Route::get(p, Cell, Member, handler!(list), "List markets").query(LIST_PARAMS),
        Route::post(p, Cell, Member, handler!(create), "Create a market (its countries in no other market)")
            .body::<CreateMarket>(),
        Route::get(one, Cell, Member, handler!(get), "One market"),
        Route::patch(one, Cell, Member, handler!(update), "Change a market").body::<UpdateMarket>(),
        Route::delete(one, Cell, Member, handler!(delete), "Delete a market no catalog uses"),
    ]
}

async fn list(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let paging = Paging::from_query(&cx.query, SORT_FIELDS, "createdAt")?;
    let (markets, total) = s.cell.list_markets(s.id, &paging)?;
    let data: Vec<_> = markets.iter().map(|m| m.view()).collect();
    Ok(ok(&Page::new(data, total, paging.page, paging.limit)))
}

async fn create(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let body: CreateMarket = cx.json()?;
    let m = s.cell.create_market(s.id, body).await?;
    Ok(created(&m.view()))
}

async fn get(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let m = s.cell.market(s.id, cx.path_id("marketId")?)?;
    Ok(ok(&m.view()))
}

async fn update(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let id = cx.path_id("marketId")?;
    let body: UpdateMarket = cx.json()?;
    let m = s.cell.update_market(s.id, id, body).await?;
    Ok(ok(&m.view()))
}

async fn delete(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    s.cell.delete_market(s.id, cx.path_id("marketId")?).await?;
    Ok(no_content())
}
