//! `S/orders/{orderId}/fulfillment-orders` and `…/fulfillments`: which location ships which
//! units of an order, what is done to them before they ship, and the shipments made.

use crate::cells::fulfillment::fulfill::{self, Fulfilled};
use crate::cells::fulfillment::{self, actions};
use crate::domain::fulfillment::{
    FulfillInput, Fulfillment, FulfillmentOrder, FulfillmentOrderView, FulfillmentView, HoldInput, MoveInput, TrackingUpdate,
};
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
    let one = |action: &str| format!("/stores/{{storeId}}/orders/{{orderId}}/fulfillment-orders/{{fulfillmentOrderId}}/{action}");
    vec![
        Route::get(
            "/stores/{storeId}/orders/{orderId}/fulfillment-orders",
            Cell,
            Member,
            handler!(list),
            "An order's fulfillment orders: which location ships which units",
        ),
        Route::post(&one("hold"), Cell, Member, handler!(hold), "Hold a fulfillment order (OPEN or IN_PROGRESS) with a reason")
            .id("holdFulfillmentOrder")
            .errors(&[409])
            .body::<HoldInput>(),
        Route::post(
            &one("release-hold"),
            Cell,
            Member,
            handler!(release_hold),
            "Release a held fulfillment order: OPEN again, IN_PROGRESS when some units shipped",
        )
        .id("releaseFulfillmentOrderHold")
        .errors(&[409]),
        Route::post(
            &one("move"),
            Cell,
            Member,
            handler!(move_to),
            "Move a fulfillment order's unshipped units, their commitment with them, to another active location",
        )
        .id("moveFulfillmentOrder")
        .errors(&[409, 422])
        .body::<MoveInput>(),
        Route::post(
            &one("cancel"),
            Cell,
            Member,
            handler!(cancel),
            "Cancel a fulfillment order: its unshipped units go back to available",
        )
        .id("cancelFulfillmentOrder")
        .errors(&[409]),
        Route::post(
            &one("fulfill"),
            Cell,
            Member,
            handler!(fulfill),
            "Ship units of a fulfillment order (absent lineItems: all that remain), with tracking",
        )
        .id("fulfillFulfillmentOrder")
        .errors(&[409, 422])
        .optional_body::<FulfillInput>(),
        Route::get(
            "/stores/{storeId}/orders/{orderId}/fulfillments",
            Cell,
            Member,
            handler!(list_fulfillments),
            "An order's fulfillments",
        ),
        Route::put(
            "/stores/{storeId}/orders/{orderId}/fulfillments/{fulfillmentId}/tracking/{trackingId}",
            Cell,
            Member,
            handler!(update_tracking),
            "Replace one tracking entry of a fulfillment, and its shipment status when given",
        )
        .id("updateFulfillmentTracking")
        .body::<TrackingUpdate>(),
    ]
}

async fn list(cx: Ctx, q: ListOf<FulfillmentOrder>) -> ApiResult<Json<Page<FulfillmentOrderView>>> {
    let s = cx.scope()?;
    Ok(Json(q.page(fulfillment::list(&s.cell, s.id, cx.path_id("orderId")?, &q.query).await?)))
}

async fn hold(cx: Ctx) -> ApiResult<Json<FulfillmentOrderView>> {
    let s = cx.scope()?;
    let (order, id) = (cx.path_id("orderId")?, cx.path_id("fulfillmentOrderId")?);
    Ok(Json(actions::hold(&s.cell, s.id, order, id, cx.json()?).await?))
}

async fn release_hold(cx: Ctx) -> ApiResult<Json<FulfillmentOrderView>> {
    let s = cx.scope()?;
    let (order, id) = (cx.path_id("orderId")?, cx.path_id("fulfillmentOrderId")?);
    Ok(Json(actions::release_hold(&s.cell, s.id, order, id).await?))
}

async fn move_to(cx: Ctx) -> ApiResult<Json<FulfillmentOrderView>> {
    let s = cx.scope()?;
    let (order, id) = (cx.path_id("orderId")?, cx.path_id("fulfillmentOrderId")?);
    Ok(Json(actions::move_to(&s.cell, s.id, order, id, cx.json()?, cx.actor()).await?))
}

async fn cancel(cx: Ctx) -> ApiResult<Json<FulfillmentOrderView>> {
    let s = cx.scope()?;
    let (order, id) = (cx.path_id("orderId")?, cx.path_id("fulfillmentOrderId")?);
    Ok(Json(actions::cancel(&s.cell, s.id, order, id, cx.actor()).await?))
}

async fn fulfill(cx: Ctx) -> ApiResult<Created<Fulfilled>> {
    let s = cx.scope()?;
    let (order, id) = (cx.path_id("orderId")?, cx.path_id("fulfillmentOrderId")?);
    Ok(Created(fulfill::fulfill(&s.cell, s.id, order, id, cx.json_or_default()?, cx.actor()).await?))
}

async fn list_fulfillments(cx: Ctx, q: ListOf<Fulfillment>) -> ApiResult<Json<Page<FulfillmentView>>> {
    let s = cx.scope()?;
    Ok(Json(q.page(fulfill::list(&s.cell, s.id, cx.path_id("orderId")?, &q.query).await?)))
}

async fn update_tracking(cx: Ctx) -> ApiResult<Json<FulfillmentView>> {
    let s = cx.scope()?;
    let (order, id, tracking) = (cx.path_id("orderId")?, cx.path_id("fulfillmentId")?, cx.path_id("trackingId")?);
    Ok(Json(fulfill::update_tracking(&s.cell, s.id, order, id, tracking, cx.json()?).await?))
}
