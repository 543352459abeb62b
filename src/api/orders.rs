//! `S/orders`: the orders checkouts became — the paginated list with its filters, one order,
//! and its note and tags.

use crate::cells::orders::{self, UpdateOrder};
use crate::domain::order::Order;
use crate::error::ApiResult;
use crate::handler;
use crate::http::Page;
use crate::http::list::ListOf;
use crate::http::reply::Json;
use crate::http::route::{Access, Service};
use crate::node::context::{Ctx, Route};

pub fn routes() -> Vec<Route> {
    use Access::Member;
    use Service::Cell;
    let one = "/stores/{storeId}/orders/{orderId}";
    vec![
        Route::get("/stores/{storeId}/orders", Cell, Member, handler!(list), "List orders"),
        Route::get(one, Cell, Member, handler!(get), "One order"),
        Route::patch(one, Cell, Member, handler!(update), "Change an order's note and tags").body::<UpdateOrder>(),
    ]
}

async fn list(cx: Ctx, q: ListOf<Order>) -> ApiResult<Json<Page<Order>>> {
    let s = cx.scope()?;
    Ok(Json(q.page(s.cell.list::<Order>(s.id, &q.query).await?)))
}

async fn get(cx: Ctx) -> ApiResult<Json<Order>> {
    let s = cx.scope()?;
    Ok(Json(s.cell.get::<Order>(s.id, cx.path_id("orderId")?)?))
}

async fn update(cx: Ctx) -> ApiResult<Json<Order>> {
    let s = cx.scope()?;
    Ok(Json(orders::update(&s.cell, s.id, cx.path_id("orderId")?, cx.json()?).await?))
}
