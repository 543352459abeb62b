//! `/auth/*`: registration, login, token refresh, the current user.

use hyper::StatusCode;

use crate::account::AccountService;
use crate::account::model::{Login, LoginResult, Refresh, Register};
use crate::api::device;
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::auth::ACCESS_TTL_SECS;
use crate::http::context::Ctx;
use crate::http::route::{Access, Route, Service};
use crate::http::{Resp, json, ok};

pub fn routes() -> Vec<Route> {
    use Access::*;
    use Service::Account;
    vec![
        Route::post("/auth/register", Account, Public, handler!(register), "Create an account and sign in").body::<Register>(),
        Route::post("/auth/login", Account, Public, handler!(login), "Sign in with email and password").body::<Login>(),
        Route::post("/auth/refresh", Account, Public, handler!(refresh), "Exchange a refresh token for a new pair")
            .body::<Refresh>(),
        Route::get("/auth/me", Account, Member, handler!(me), "The signed-in user"),
    ]
}

/// The account service of this process (account-service routes only run where it is).
pub fn account(cx: &Ctx) -> ApiResult<&AccountService> {
    cx.node.account.as_deref().ok_or_else(ApiError::not_found)
}

async fn register(cx: Ctx) -> ApiResult<Resp> {
    let body: Register = cx.json()?;
    let (user, access_token, refresh_token) = account(&cx)?.register(body, device(&cx)).await?;
    let result = LoginResult { user: user.view(), access_token, refresh_token, expires_in: ACCESS_TTL_SECS };
    Ok(json(StatusCode::CREATED, &result))
}

async fn login(cx: Ctx) -> ApiResult<Resp> {
    let body: Login = cx.json()?;
    let (user, access_token, refresh_token) = account(&cx)?.login(body, device(&cx)).await?;
    Ok(ok(&LoginResult { user: user.view(), access_token, refresh_token, expires_in: ACCESS_TTL_SECS }))
}

async fn refresh(cx: Ctx) -> ApiResult<Resp> {
    let body: Refresh = cx.json_or_default()?;
    let token = body.refresh_token.ok_or_else(|| ApiError::field("refreshToken", "is required"))?;
    let claims = cx.node.verifier.verify(&token, "refresh")?;
    let (access_token, refresh_token) = account(&cx)?.refresh(claims).await?;
    Ok(ok(&serde_json::json!({
        "accessToken": access_token,
        "refreshToken": refresh_token,
        "expiresIn": ACCESS_TTL_SECS,
    })))
}

async fn me(cx: Ctx) -> ApiResult<Resp> {
    let p = cx.user()?;
    let user = account(&cx)?.user(p.user_id)?.ok_or_else(ApiError::not_found)?;
    Ok(ok(&user.view()))
}
