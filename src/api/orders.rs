//! `S/orders`: the orders checkouts became — the paginated list with its filters, one order,
//! and its note and tags.

use crate::cells::orders::{OrderFilter, SORT_FIELDS, UpdateOrder};
use crate::domain::order::{FulfillmentStatus, OrderStatus};
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::context::Ctx;
use crate::http::query::Paging;
use crate::http::route::{Access, Param, Route, Service, param};
use crate::http::{Page, Resp, ok};
use crate::payments::FinancialStatus;

const LIST_PARAMS: &[Param] = &[
    param("page", "integer", "1-based page, default 1"),
    param("limit", "integer", "page size, 1..250, default 20"),
    param("sortBy", "string", "created_at (default), updated_at, total, order_number"),
    param("sortOrder", "string", "asc or desc (default)"),
    param("status", "string", "OPEN, CANCELLED or ANY (comma-separated, any case)"),
    param("financialStatus", "string", "PENDING, AUTHORIZED, PAID (comma-separated, any case)"),
    param("fulfillmentStatus", "string", "UNFULFILLED, PARTIALLY_FULFILLED, FULFILLED (comma-separated, any case)"),
    param("customerId", "string", "orders of one customer"),
    param("search", "string", "an order number (1001 or #1001) or text in the email"),
];

pub fn routes() -> Vec<Route> {
    use Access::Member;
    use Service::Cell;
    let one = "/stores/{storeId}/orders/{orderId}";
    vec![
        Route::get("/stores/{storeId}/orders", Cell, Member, handler!(list), "List orders").query(LIST_PARAMS),
        Route::get(one, Cell, Member, handler!(get), "One order"),
        Route::patch(one, Cell, Member, handler!(update), "Change an order's note and tags").body::<UpdateOrder>(),
    ]
}

/// A comma-separated list of enum names (any case) from the query; `ANY` means no filter.
fn names<T: serde::de::DeserializeOwned>(cx: &Ctx, field: &str) -> ApiResult<Option<Vec<T>>> {
    let Some(raw) = cx.query.str(field) else { return Ok(None) };
    let mut out = Vec::new();
    for name in raw.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let upper = name.to_ascii_uppercase();
        if upper == "ANY" {
            return Ok(None);
        }
        let v = serde_json::from_value(serde_json::Value::String(upper))
            .map_err(|_| ApiError::field(field, format!("unknown value {name}")))?;
        out.push(v);
    }
    Ok(Some(out))
}

async fn list(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let paging = Paging::from_query(&cx.query, SORT_FIELDS, "created_at")?;
    let filter = OrderFilter {
        status: names::<OrderStatus>(&cx, "status")?,
        financial: names::<FinancialStatus>(&cx, "financialStatus")?,
        fulfillment: names::<FulfillmentStatus>(&cx, "fulfillmentStatus")?,
        customer: cx.query.uuid("customerId")?,
        search: cx.query.str("search").map(|q| q.trim().to_lowercase()).filter(|q| !q.is_empty()),
    };
    let (orders, total) = s.cell.list_orders(s.id, &filter, &paging)?;
    Ok(ok(&Page::new(orders, total, paging.page, paging.limit)))
}

async fn get(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    Ok(ok(&s.cell.order(s.id, cx.path_id("orderId")?)?))
}

async fn update(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let body: UpdateOrder = cx.json()?;
    Ok(ok(&s.cell.update_order(s.id, cx.path_id("orderId")?, body).await?))
}
