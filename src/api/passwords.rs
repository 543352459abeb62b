//! `/auth/password*` and `/auth/invites/accept`: a signed-in change, a forgotten password's mailed
//! link and its reset, an invitation's acceptance; and the operator's reset and account creation
//! behind the service key.

use std::time::Duration;

use crate::account::invitations::AcceptInvite;
use crate::account::model::{LoginResult, check_password, normalize_email};
use crate::account::passwords::{AdminReset, ChangePassword, ForgotAccepted, ForgotPassword, ResetPassword};
use crate::account::provisioning::CreatedUser;
use crate::api::auth::{account, limit_account, limit_address, tokens};
use crate::api::device;
use crate::error::{ApiResult, Check, Code};
use crate::handler;
use crate::http::parse::parse_json;
use crate::http::reply::{Accepted, Created, Json, NoContent};
use crate::http::route::{Access, Service};
use crate::node::context::{Ctx, Route};

/// A forgot answer never comes sooner than this, known email or not: the mail's composition and
/// a write differ by less, so the time of an answer does not tell whether an account exists.
const FORGOT_FLOOR: Duration = Duration::from_millis(150);

pub fn routes() -> Vec<Route> {
    use Access::*;
    use Service::Account;
    vec![
        Route::post("/auth/password", Account, Member, handler!(change), "Change the password; ends every other session")
            .errors(&[429])
            .id("changePassword")
            .body::<ChangePassword>(),
        Route::post(
            "/auth/password/forgot",
            Account,
            Public,
            handler!(forgot),
            "Mail a one-use password reset link (the same answer for unknown emails)",
        )
        .errors(&[429])
        .id("forgotPassword")
        .body::<ForgotPassword>(),
        Route::post(
            "/auth/password/reset",
            Account,
            Public,
            handler!(reset),
            "Set a new password with a mailed token; ends every session",
        )
        .errors(&[429])
        .id("resetPassword")
        .body::<ResetPassword>(),
        Route::post(
            "/auth/invites/accept",
            Account,
            Public,
            handler!(accept),
            "Accept a store invitation: create the account and sign in",
        )
        .secret()
        .errors(&[409, 429])
        .id("acceptInvite")
        .body::<AcceptInvite>(),
        Route::post(
            "/internal/v1/users/reset-password",
            Account,
            Internal,
            handler!(internal_reset),
            "End a user's sessions; set a password or answer a one-use reset link",
        )
        .secret()
        .body::<InternalReset>(),
        Route::post(
            "/internal/v1/users",
            Account,
            Internal,
            handler!(internal_create),
            "Create an account whatever `--signup` says; a generated password is answered once",
        )
        .secret()
        .errors(&[409])
        .body::<InternalCreate>(),
    ]
}

/// `POST /internal/v1/users` (`shopcell admin create-user`).
#[derive(Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InternalCreate {
    pub email: String,
    pub name: String,
    /// The password; without it, one is generated and answered.
    pub password: Option<String>,
}

/// `POST /internal/v1/users/reset-password` (`shopcell admin reset-password`).
#[derive(Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InternalReset {
    pub email: String,
    /// The new password; without it, a reset link is answered.
    pub password: Option<String>,
}

async fn change(cx: Ctx) -> ApiResult<NoContent> {
    let p = cx.user()?;
    let body: ChangePassword = cx.json()?;
    let a = account(&cx)?;
    let user = a.user(p.user_id)?.ok_or_else(crate::error::ApiError::not_found)?;
    // The new password's rules first, outside the limit: only wrong current passwords count.
    let mut c = Check::new();
    check_password(&mut c, "newPassword", &body.new_password, &user.email);
    c.finish()?;
    // Wrong current passwords spend from the same allowance as failed sign-ins of the account:
    // a stolen access token is no way around the login limit.
    let key = format!("login:{}", user.email);
    limit_account(&cx, &key, Code::VALIDATION_FAILED, a.change_password(p.user_id, p.session_id, body)).await?;
    Ok(NoContent)
}

async fn forgot(cx: Ctx) -> ApiResult<Accepted<ForgotAccepted>> {
    limit_address(&cx, "forgot")?;
    let body: ForgotPassword = cx.json()?;
    let email = normalize_email(&body.email);
    cx.node.limits.account.take(&format!("forgot:{email}"), cx.node.clock.now_ms())?;
    let started = tokio::time::Instant::now();
    account(&cx)?.forgot_password(&email).await?;
    tokio::time::sleep_until(started + FORGOT_FLOOR).await;
    Ok(Accepted(ForgotAccepted::default()))
}

async fn reset(cx: Ctx) -> ApiResult<NoContent> {
    limit_address(&cx, "reset")?;
    let body: ResetPassword = cx.json()?;
    account(&cx)?.reset_password(body).await?;
    Ok(NoContent)
}

async fn accept(cx: Ctx) -> ApiResult<Created<LoginResult>> {
    limit_address(&cx, "reset")?;
    let body: AcceptInvite = cx.json()?;
    let (user, access, refresh) = account(&cx)?.accept_invite(body, device(&cx)).await?;
    Ok(Created(tokens(&user, access, refresh)))
}

async fn internal_create(cx: Ctx) -> ApiResult<Created<CreatedUser>> {
    let body: InternalCreate = parse_json(&cx.body)?;
    Ok(Created(account(&cx)?.create_user(&body.email, &body.name, body.password).await?))
}

async fn internal_reset(cx: Ctx) -> ApiResult<Json<AdminReset>> {
    let body: InternalReset = parse_json(&cx.body)?;
    Ok(Json(account(&cx)?.admin_reset_password(&body.email, body.password).await?))
}
