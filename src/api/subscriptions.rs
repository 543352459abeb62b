//! `/subscriptions*`: platform plans and the caller's plan subscription (account service).

use crate::account::plans::{Subscribe, plan_view};
use crate::api::auth::account;
use crate::error::ApiResult;
use crate::handler;
use crate::http::context::Ctx;
use crate::http::route::{Access, Route, Service};
use crate::http::{Resp, ok};

pub fn routes() -> Vec<Route> {
    use Access::*;
    use Service::Account;
    vec![
        Route::get("/subscriptions/plans", Account, Public, handler!(plans), "The platform plans"),
        Route::get("/subscriptions", Account, Member, handler!(current), "The caller's plan subscription"),
        Route::post("/subscriptions", Account, Member, handler!(subscribe), "Subscribe to a plan or change plan")
            .body::<Subscribe>(),
        Route::post("/subscriptions/cancel", Account, Member, handler!(cancel), "Cancel at the end of the current period"),
    ]
}

async fn plans(cx: Ctx) -> ApiResult<Resp> {
    let plans: Vec<_> = account(&cx)?.plans().plans.iter().map(plan_view).collect();
    Ok(ok(&plans))
}

async fn current(cx: Ctx) -> ApiResult<Resp> {
    let user = cx.user()?.user_id;
    Ok(ok(&account(&cx)?.subscription_view(user)?))
}

async fn subscribe(cx: Ctx) -> ApiResult<Resp> {
    let user = cx.user()?.user_id;
    let body: Subscribe = cx.json()?;
    let a = account(&cx)?;
    a.subscribe(user, body.plan_id).await?;
    Ok(ok(&a.subscription_view(user)?))
}

async fn cancel(cx: Ctx) -> ApiResult<Resp> {
    let user = cx.user()?.user_id;
    let a = account(&cx)?;
    a.cancel_subscription(user).await?;
    Ok(ok(&a.subscription_view(user)?))
}
