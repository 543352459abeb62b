//! `S/storefront/*`: request-context operations of the storefront. Each reads the browser's real
//! `User-Agent` and `Referer` headers (a missing one is a 400 naming the header) and the client's
//! address: the peer, or what a router or a `--trusted-proxy` (a storefront host) forwards.

use schemars::JsonSchema;
use serde::Serialize;

use crate::cells::storefront::{self, RequestContext, StorefrontEvent};
use crate::domain::time::rfc3339;
use crate::error::{ApiResult, Check};
use crate::handler;
use crate::http::reply::{Accepted, Created};
use crate::http::route::{Access, Service};
use crate::node::context::{Ctx, Route};

pub fn routes() -> Vec<Route> {
    use Access::Storefront;
    use Service::Cell;
    vec![
        Route::post(
            "/stores/{storeId}/storefront/sessions",
            Cell,
            Storefront,
            handler!(create_session),
            "Start a storefront session from the request context → {sessionToken} for guest checkout",
        )
        .secret()
        .id("startStorefrontSession"),
        Route::post(
            "/stores/{storeId}/storefront/events",
            Cell,
            Storefront,
            handler!(event),
            "Record a storefront event (page views, add-to-cart) from the request context → 202",
        )
        .id("trackStorefrontEvent")
        .body::<StorefrontEvent>(),
    ]
}

/// The request context, every header present and bounded.
fn context(cx: &Ctx) -> ApiResult<RequestContext> {
    let mut c = Check::new();
    let mut header = |name: &str| -> String {
        match cx.header(name).map(str::trim).filter(|v| !v.is_empty()) {
            Some(v) if v.len() <= 2048 => v.to_string(),
            Some(_) => {
                c.fail(name, "must be at most 2048 bytes");
                String::new()
            }
            None => {
                c.fail(name, "the header is required");
                String::new()
            }
        }
    };
    let user_agent = header("user-agent");
    let referer = header("referer");
    c.finish()?;
    // The one answer to who the client is: the peer, or what a trusted proxy or router says.
    let client_address = cx.client.map(|ip| ip.to_string()).unwrap_or_default();
    Ok(RequestContext { user_agent, referer, client_address })
}

/// A new storefront session. Fields in key order, as the answer has always listed them.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionStarted {
    pub expires_at: String,
    /// For guest checkout: shown only in this answer.
    pub session_token: String,
}

/// `{"accepted": true}`: the event is recorded.
#[derive(Serialize, JsonSchema)]
pub struct EventAccepted {
    pub accepted: bool,
}

async fn create_session(cx: Ctx) -> ApiResult<Created<SessionStarted>> {
    let s = cx.scope()?;
    let ctx = context(&cx)?;
    let (token, session) = storefront::create_storefront_session(&s.cell, s.id, ctx).await?;
    Ok(Created(SessionStarted { expires_at: rfc3339(session.expires_at), session_token: token }))
}

async fn event(cx: Ctx) -> ApiResult<Accepted<EventAccepted>> {
    let s = cx.scope()?;
    context(&cx)?;
    let body: StorefrontEvent = cx.json()?;
    body.validate()?;
    storefront::record_storefront_event(&s.cell, s.id, body).await?;
    Ok(Accepted(EventAccepted { accepted: true }))
}
