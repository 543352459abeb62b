//! `/subscriptions*`: platform plans and the caller's plan subscription (account service).

use crate::account::plans::{PlanView, Subscribe, SubscriptionView, plan_view};
use crate::api::auth::account;
use crate::error::ApiResult;
use crate::handler;
use crate::http::reply::Json;
use crate::http::route::{Access, Service};
use crate::node::context::{Ctx, Route};

pub fn routes() -> Vec<Route> {
    use Access::*;
    use Service::Account;
    vec![
        Route::get("/subscriptions/plans", Account, Public, handler!(plans), "The platform plans").id("listPlans"),
        Route::get("/subscriptions", Account, Member, handler!(current), "The caller's plan subscription").id("getSubscription"),
        Route::post("/subscriptions", Account, Member, handler!(subscribe), "Subscribe to a plan or change plan")
            .id("subscribe")
            .body::<Subscribe>(),
        Route::post("/subscriptions/cancel", Account, Member, handler!(cancel), "Cancel at the end of the current period")
            .errors(&[409])
            .id("cancelSubscription"),
    ]
}

async fn plans(cx: Ctx) -> ApiResult<Json<Vec<PlanView>>> {
    Ok(Json(account(&cx)?.plans().plans.iter().map(plan_view).collect()))
}

async fn current(cx: Ctx) -> ApiResult<Json<SubscriptionView>> {
    let user = cx.user()?.user_id;
    Ok(Json(account(&cx)?.subscription_view(user)?))
}

async fn subscribe(cx: Ctx) -> ApiResult<Json<SubscriptionView>> {
    let user = cx.user()?.user_id;
    let body: Subscribe = cx.json()?;
    let a = account(&cx)?;
    a.subscribe(user, body.plan_id).await?;
    Ok(Json(a.subscription_view(user)?))
}

async fn cancel(cx: Ctx) -> ApiResult<Json<SubscriptionView>> {
    let user = cx.user()?.user_id;
    let a = account(&cx)?;
    a.cancel_subscription(user).await?;
    Ok(Json(a.subscription_view(user)?))
}
