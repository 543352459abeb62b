//! `S/orders/{orderId}/fulfillment-orders` and `…/fulfillments`: which location ships which
//! units of an order, and the shipments made.

use crate::cells::fulfillment;
use crate::domain::fulfillment::{FulfillmentOrder, FulfillmentOrderView};
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
    vec![Route::get(
        "/stores/{storeId}/orders/{orderId}/fulfillment-orders",
        Cell,
        Member,
        handler!(list),
        "An order's fulfillment orders: which location ships which units",
    )]
}

async fn list(cx: Ctx, q: ListOf<FulfillmentOrder>) -> ApiResult<Json<Page<FulfillmentOrderView>>> {
    let s = cx.scope()?;
    Ok(Json(q.page(fulfillment::list(&s.cell, s.id, cx.path_id("orderId")?, &q.query)?)))
}
