//! `S/webhooks` and `S/events`: subscriptions (owner or admin), their delivery log, resends and
//! test pings, and the store's events for reconciliation and replay.

use crate::cells::events::{Event, EventView};
use crate::cells::webhooks::{self, Delivery, DeliveryView, Webhook, WebhookView};
use crate::domain::webhook::{CreateWebhook, UpdateWebhook};
use crate::error::ApiResult;
use crate::handler;
use crate::http::Page;
use crate::http::list::ListOf;
use crate::http::reply::{Accepted, Created, Json, NoContent};
use crate::http::route::{Access, Service};
use crate::node::context::{Ctx, Route};

pub fn routes() -> Vec<Route> {
    use Access::{Admin, Member};
    use Service::Cell;
    let p = "/stores/{storeId}/webhooks";
    let one = "/stores/{storeId}/webhooks/{webhookId}";
    vec![
        Route::get(p, Cell, Member, handler!(list), "List webhook subscriptions (secrets are never shown again)"),
        Route::post(
            p,
            Cell,
            Admin,
            handler!(create),
            "Subscribe a URL to topics: the answer shows the signing secret, this once",
        )
        .secret()
        .errors(&[422])
        .body::<CreateWebhook>(),
        Route::get(one, Cell, Member, handler!(get), "One subscription"),
        Route::patch(one, Cell, Admin, handler!(update), "Change a subscription's URL or topics, or enable or disable it")
            .body::<UpdateWebhook>(),
        Route::delete(one, Cell, Admin, handler!(delete), "Remove a subscription with its delivery log"),
        Route::post(
            "/stores/{storeId}/webhooks/{webhookId}/ping",
            Cell,
            Admin,
            handler!(ping),
            "Send a signed webhook.ping now, enabled or not, and answer how it went",
        )
        .id("pingWebhook"),
        Route::get(
            "/stores/{storeId}/webhooks/{webhookId}/deliveries",
            Cell,
            Member,
            handler!(deliveries),
            "A subscription's delivery log, newest first: every attempt with its status, duration, error and the answer's first 1 KiB",
        ),
        Route::post(
            "/stores/{storeId}/webhooks/{webhookId}/deliveries/{deliveryId}/resend",
            Cell,
            Admin,
            handler!(resend),
            "Send a delivery again, with the same webhook-id",
        )
        .id("resendWebhookDelivery")
        .errors(&[409]),
        Route::get(
            "/stores/{storeId}/events",
            Cell,
            Member,
            handler!(events),
            "The store's events, newest first; sortOrder=asc replays them in order",
        ),
    ]
}

async fn list(cx: Ctx, q: ListOf<Webhook>) -> ApiResult<Json<Page<WebhookView>>> {
    let s = cx.scope()?;
    Ok(Json(q.page(s.cell.list::<Webhook>(s.id, &q.query).await?.map(|w| w.view(false)))))
}

async fn create(cx: Ctx) -> ApiResult<Created<WebhookView>> {
    let s = cx.scope()?;
    Ok(Created(webhooks::create(&s.cell, s.id, cx.json()?).await?.view(true)))
}

async fn get(cx: Ctx) -> ApiResult<Json<WebhookView>> {
    let s = cx.scope()?;
    Ok(Json(s.cell.get::<Webhook>(s.id, cx.path_id("webhookId")?)?.view(false)))
}

async fn update(cx: Ctx) -> ApiResult<Json<WebhookView>> {
    let s = cx.scope()?;
    let w = webhooks::update(&s.cell, s.id, cx.path_id("webhookId")?, cx.json()?).await?;
    s.cell.jobs.wake();
    Ok(Json(w.view(false)))
}

async fn delete(cx: Ctx) -> ApiResult<NoContent> {
    let s = cx.scope()?;
    webhooks::delete(&s.cell, s.id, cx.path_id("webhookId")?).await?;
    Ok(NoContent)
}

async fn ping(cx: Ctx) -> ApiResult<Json<DeliveryView>> {
    let s = cx.scope()?;
    Ok(Json(webhooks::ping(&s.cell, s.id, cx.path_id("webhookId")?).await?.view()))
}

async fn deliveries(cx: Ctx, mut q: ListOf<Delivery>) -> ApiResult<Json<Page<DeliveryView>>> {
    let s = cx.scope()?;
    let webhook = cx.path_id("webhookId")?;
    s.cell.get::<Webhook>(s.id, webhook)?;
    q.query.scope = Some(webhook);
    Ok(Json(q.page(s.cell.list::<Delivery>(s.id, &q.query).await?.map(|d| d.view()))))
}

async fn resend(cx: Ctx) -> ApiResult<Accepted<DeliveryView>> {
    let s = cx.scope()?;
    let d = webhooks::resend(&s.cell, s.id, cx.path_id("webhookId")?, cx.path_id("deliveryId")?).await?;
    Ok(Accepted(d.view()))
}

async fn events(cx: Ctx, q: ListOf<Event>) -> ApiResult<Json<Page<EventView>>> {
    let s = cx.scope()?;
    Ok(Json(q.page(s.cell.list::<Event>(s.id, &q.query).await?.map(|e| e.view(s.id)))))
}
