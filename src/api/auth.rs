//! `/auth/*`: registration, login (with MFA), social sign-in, token refresh (body or cookie),
//! the cross-origin cookie exchange, sessions, the current user.

use hyper::StatusCode;
use hyper::header::{HeaderValue, SET_COOKIE};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::account::model::{Login, LoginResult, Refresh, Register, SessionView, User, UserView, normalize_email};
use crate::account::oidc::CallbackOutcome;
use crate::account::sessions::LoginOutcome;
use crate::account::{AccountService, REFRESH_TTL_SECS};
use crate::api::device;
use crate::error::{ApiError, ApiResult, Code};
use crate::handler;
use crate::http::auth::ACCESS_TTL_SECS;
use crate::http::query::Query;
use crate::http::reply::{Created, Json, NoContent, Redirect, Reply};
use crate::http::route::{Access, Param, QueryParams, Service, param};
use crate::http::{Resp, json, no_content};
use crate::node::context::{Ctx, Route};

/// The cookie `POST /auth/exchange` sets and `POST /auth/refresh` reads.
pub const REFRESH_COOKIE: &str = "refresh_token";
/// The cookie is sent back only to the auth routes.
const COOKIE_PATH: &str = "/api/v1/auth";
/// Form bodies of the `form_post` callback (Apple) are small.
const CALLBACK_BODY_LIMIT: usize = 64 * 1024;

pub fn routes() -> Vec<Route> {
    use Access::*;
    use Service::Account;
    vec![
        Route::post("/auth/register", Account, Public, handler!(register), "Create an account and sign in")
            .secret()
            .errors(&[403, 409, 429])
            .id("register")
            .body::<Register>(),
        Route::post("/auth/login", Account, Public, handler!(login), "Sign in with email and password (may ask for MFA)")
            .secret()
            .errors(&[401, 429])
            .id("login")
            .body::<Login>(),
        Route::post("/auth/mfa/verify", Account, Public, handler!(mfa_verify), "Complete an MFA sign-in with a code")
            .secret()
            .errors(&[401, 429])
            .id("verifyMfa")
            .body::<MfaVerify>(),
        Route::post("/auth/mfa/setup", Account, Member, handler!(mfa_setup), "Start MFA enrolment: a TOTP secret")
            .secret()
            .errors(&[409])
            .id("setUpMfa"),
        Route::post("/auth/mfa/enable", Account, Member, handler!(mfa_enable), "Confirm MFA with a code; recovery codes")
            .secret()
            .errors(&[409])
            .id("enableMfa")
            .body::<MfaCode>(),
        Route::post("/auth/mfa/disable", Account, Member, handler!(mfa_disable), "Turn MFA off with a code")
            .errors(&[409])
            .id("disableMfa")
            .body::<MfaCode>(),
        Route::post("/auth/native", Account, Public, handler!(native), "Sign in with a provider's native ID token")
            .secret()
            .errors(&[401, 403, 429, 503])
            .id("signInNative")
            .body::<Native>(),
        Route::get(
            "/auth/social-accounts/connect/{provider}",
            Account,
            Public,
            handler!(social_connect),
            "Start social sign-in: redirect to the provider (state, PKCE, nonce)",
        )
        .errors(&[503])
        .id("socialConnect"),
        Route::get(
            "/auth/social-accounts/callback/{provider}",
            Account,
            Public,
            handler!(social_callback),
            "The provider's redirect back: `code` and `state` (302 to the client URL with a one-time code when one \
             is configured)",
        )
        .secret()
        .errors(&[401, 403, 429, 503])
        .id("socialCallback")
        .answers::<Json<LoginAnswer>>()
        .answers::<Redirect>(),
        Route::post(
            "/auth/social-accounts/callback/{provider}",
            Account,
            Public,
            handler!(social_callback_form),
            "The provider's redirect back as a form post (Apple; 302 to the client URL with a one-time code when one \
             is configured)",
        )
        .secret()
        .errors(&[401, 403, 429, 503])
        .id("socialCallbackForm")
        .raw(CALLBACK_BODY_LIMIT)
        .answers::<Json<LoginAnswer>>()
        .answers::<Redirect>(),
        Route::post(
            "/auth/social-accounts/exchange",
            Account,
            Public,
            handler!(social_exchange),
            "Trade the callback's one-time code for tokens",
        )
        .secret()
        .errors(&[401, 429])
        .id("socialExchange")
        .body::<SocialExchange>(),
        Route::post(
            "/auth/refresh",
            Account,
            Public,
            handler!(refresh),
            "Exchange a refresh token (body or cookie) for a new pair",
        )
        .secret()
        .errors(&[401, 429])
        .id("refreshTokens")
        .optional_body::<Refresh>()
        .answers::<Json<TokenPair>>(),
        Route::post("/auth/exchange", Account, Member, handler!(exchange), "Set a refresh-token cookie for a new session here")
            .secret()
            .id("exchangeSession")
            .answers::<NoContent>(),
        Route::post("/auth/logout", Account, Member, handler!(logout), "End the current session")
            .id("logout")
            .answers::<NoContent>(),
        Route::get("/auth/me", Account, Member, handler!(me), "The signed-in user").id("getMe"),
        Route::get("/auth/sessions", Account, Member, handler!(sessions), "The caller's sessions").id("listSessions"),
        Route::delete("/auth/sessions", Account, Member, handler!(revoke_others), "End every session but the current one")
            .id("deleteOtherSessions"),
        Route::delete("/auth/sessions/{sessionId}", Account, Member, handler!(revoke_one), "End one of the caller's sessions")
            .id("deleteSession"),
    ]
}

/// The account service of this process (account-service routes only run where it is).
pub fn account(cx: &Ctx) -> ApiResult<&AccountService> {
    cx.node.account.as_deref().ok_or_else(ApiError::not_found)
}

/// Spends one call of the client address's allowance for `what` (login, mfa, refresh, keys):
/// 429 `RATE_LIMITED` with `Retry-After` when it is used up.
pub fn limit_address(cx: &Ctx, what: &str) -> ApiResult<()> {
    cx.node.limits.address(what, cx.client, cx.node.clock.now_ms())
}

/// Runs a sign-in step under the failure limit of `key` (an account) from this client address:
/// refused while that allowance is used up; a failure with `failure` spends from it. Keyed by
/// account and address together, so a stranger's wrong guesses lock out the stranger, never the
/// account's owner signing in from elsewhere (each address is still bounded by its own limit).
pub(crate) async fn limit_account<T>(
    cx: &Ctx,
    key: &str,
    failure: Code,
    step: impl Future<Output = ApiResult<T>>,
) -> ApiResult<T> {
    let key = match cx.client {
        Some(ip) => format!("{key}@{ip}"),
        None => key.to_string(),
    };
    cx.node.limits.account.check(&key, cx.node.clock.now_ms())?;
    let out = step.await;
    if out.as_ref().is_err_and(|e| e.code == failure) {
        // Already refused or not: the failure is answered as it is; the next attempt sees the limit.
        let _ = cx.node.limits.account.take(&key, cx.node.clock.now_ms());
    }
    out
}

/// A sign-in's answer: tokens, or the challenge of an account with MFA on.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum LoginAnswer {
    Tokens(LoginResult),
    Mfa(MfaRequired),
}

/// The MFA challenge: complete it at `POST /auth/mfa/verify` with the token and a code.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MfaRequired {
    pub mfa_token: String,
    /// Always `true`.
    pub requires_mfa: bool,
}

pub(crate) fn tokens(user: &User, access: String, refresh: String) -> LoginResult {
    LoginResult { user: user.view(), access_token: access, refresh_token: refresh, expires_in: ACCESS_TTL_SECS }
}

fn login_answer(outcome: LoginOutcome) -> LoginAnswer {
    match outcome {
        LoginOutcome::Tokens { user, access, refresh } => LoginAnswer::Tokens(tokens(&user, access, refresh)),
        LoginOutcome::Mfa { token } => LoginAnswer::Mfa(MfaRequired { mfa_token: token, requires_mfa: true }),
    }
}

async fn register(cx: Ctx) -> ApiResult<Created<LoginResult>> {
    if let Some(ip) = cx.client {
        cx.node.limits.register.take(&ip.to_string(), cx.node.clock.now_ms())?;
    }
    let body: Register = cx.json()?;
    let (user, access, refresh) = account(&cx)?.register(body, device(&cx)).await?;
    Ok(Created(tokens(&user, access, refresh)))
}

async fn login(cx: Ctx) -> ApiResult<Json<LoginAnswer>> {
    limit_address(&cx, "login")?;
    let body: Login = cx.json()?;
    let key = format!("login:{}", normalize_email(&body.email));
    let a = account(&cx)?;
    let outcome = limit_account(&cx, &key, Code::INVALID_CREDENTIALS, a.login(body, device(&cx))).await?;
    Ok(Json(login_answer(outcome)))
}

/// `POST /auth/mfa/verify`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MfaVerify {
    pub mfa_token: String,
    /// A 6-digit TOTP code or a recovery code.
    pub code: String,
}

/// `POST /auth/mfa/enable` and `/disable`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MfaCode {
    pub code: String,
}

/// `POST /auth/mfa/setup`: the secret to enter in an authenticator app. Fields in key order, as
/// the answer has always listed them.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MfaSecret {
    /// `otpauth://totp/…`, for a QR code.
    pub otpauth_url: String,
    /// Base32.
    pub secret: String,
}

/// Whether MFA is on, with the recovery codes when it was just turned on (shown only then).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MfaEnabled {
    pub enabled: bool,
    pub recovery_codes: Vec<String>,
}

/// `POST /auth/mfa/disable`: `{"enabled": false}`.
#[derive(Serialize, JsonSchema)]
pub struct MfaDisabled {
    pub enabled: bool,
}

async fn mfa_verify(cx: Ctx) -> ApiResult<Json<LoginResult>> {
    limit_address(&cx, "mfa")?;
    let body: MfaVerify = cx.json()?;
    let claims = cx.node.verifier.verify(&body.mfa_token, "mfa")?;
    let key = format!("mfa:{}", claims.sub);
    let a = account(&cx)?;
    let (user, access, refresh) =
        limit_account(&cx, &key, Code::INVALID_MFA_CODE, a.mfa_verify(claims, body.code, device(&cx))).await?;
    Ok(Json(tokens(&user, access, refresh)))
}

async fn mfa_setup(cx: Ctx) -> ApiResult<Json<MfaSecret>> {
    let a = account(&cx)?;
    let user = a.user(cx.user()?.user_id)?.ok_or_else(ApiError::not_found)?;
    let setup = a.mfa_setup(&user).await?;
    Ok(Json(MfaSecret { otpauth_url: setup.otpauth_url, secret: setup.secret }))
}

async fn mfa_enable(cx: Ctx) -> ApiResult<Json<MfaEnabled>> {
    let body: MfaCode = cx.json()?;
    let user = cx.user()?.user_id;
    // Wrong codes count against the same allowance as MFA verify: a stolen access token must not
    // be a way to guess codes.
    let key = format!("mfa:{user}");
    let codes = limit_account(&cx, &key, Code::VALIDATION_FAILED, account(&cx)?.mfa_enable(user, body.code)).await?;
    Ok(Json(MfaEnabled { enabled: true, recovery_codes: codes }))
}

async fn mfa_disable(cx: Ctx) -> ApiResult<Json<MfaDisabled>> {
    let body: MfaCode = cx.json()?;
    let user = cx.user()?.user_id;
    let key = format!("mfa:{user}");
    limit_account(&cx, &key, Code::VALIDATION_FAILED, account(&cx)?.mfa_disable(user, body.code)).await?;
    Ok(Json(MfaDisabled { enabled: false }))
}

/// `POST /auth/native`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Native {
    /// `google` or `apple`.
    #[schemars(schema_with = "native_provider_schema")]
    pub provider: String,
    pub id_token: String,
}

fn native_provider_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    crate::domain::fields::one_of(&["apple", "google"], "the identity provider that signed `idToken`")
}

/// `POST /auth/social-accounts/exchange`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SocialExchange {
    pub code: String,
}

async fn native(cx: Ctx) -> ApiResult<Json<LoginAnswer>> {
    limit_address(&cx, "login")?;
    let body: Native = cx.json()?;
    let a = account(&cx)?;
    let user = a.social_native(&body.provider, &body.id_token).await?;
    Ok(Json(login_answer(a.complete_login(user, device(&cx)).await?)))
}

async fn social_connect(cx: Ctx) -> ApiResult<Redirect> {
    // Each connect stores a pending flow: limited like the sign-in calls it starts.
    limit_address(&cx, "login")?;
    let a = account(&cx)?;
    let base = match &a.social.redirect_base {
        Some(b) => b.clone(),
        None => format!("http://{}", cx.header("host").ok_or_else(|| ApiError::field("host", "is required"))?),
    };
    let url = a.social_connect(cx.param("provider"), &base).await?;
    Redirect::to(&url)
}

/// What a provider sends back to the callback: `code` and `state`, or `error`. In the query
/// (GET) or as a form (POST, `response_mode=form_post`); values are kept as sent, empty ones too.
pub struct CallbackParams {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

impl CallbackParams {
    fn from_form(body: &[u8]) -> CallbackParams {
        let form: Vec<(String, String)> = form_urlencoded::parse(body).into_owned().collect();
        let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        CallbackParams { code: get("code"), state: get("state"), error: get("error") }
    }
}

impl QueryParams for CallbackParams {
    fn params() -> Vec<Param> {
        vec![
            param("code", "string", "the provider's authorization code"),
            param("state", "string", "the state the connect step sent"),
            param("error", "string", "the provider's error, when it did not sign the user in"),
        ]
    }
    fn parse(q: &Query) -> ApiResult<Self> {
        let get = |k: &str| q.raw(k).map(str::to_string);
        Ok(CallbackParams { code: get("code"), state: get("state"), error: get("error") })
    }
}

async fn social_callback(cx: Ctx, p: CallbackParams) -> ApiResult<Resp> {
    callback(cx, p).await
}

async fn social_callback_form(cx: Ctx) -> ApiResult<Resp> {
    let p = CallbackParams::from_form(&cx.body);
    callback(cx, p).await
}

async fn callback(cx: Ctx, p: CallbackParams) -> ApiResult<Resp> {
    limit_address(&cx, "login")?;
    if let Some(error) = p.error {
        return Err(ApiError::msg(Code::UNAUTHORIZED, format!("the provider did not sign you in: {error}")));
    }
    let code = p.code.ok_or_else(|| ApiError::field("code", "is required"))?;
    let state = p.state.ok_or_else(|| ApiError::field("state", "is required"))?;
    let a = account(&cx)?;
    match a.social_callback(cx.param("provider"), &code, &state).await? {
        CallbackOutcome::Redirect(url) => Ok(Redirect::to(&url)?.into_resp()),
        CallbackOutcome::User(user) => Ok(Json(login_answer(a.complete_login(user, device(&cx)).await?)).into_resp()),
    }
}

async fn social_exchange(cx: Ctx) -> ApiResult<Json<LoginAnswer>> {
    limit_address(&cx, "login")?;
    let body: SocialExchange = cx.json()?;
    let a = account(&cx)?;
    let user = a.social_exchange(&body.code).await?;
    Ok(Json(login_answer(a.complete_login(user, device(&cx)).await?)))
}

/// The `refresh_token` cookie of a request, if any.
fn cookie_token(cx: &Ctx) -> Option<String> {
    cx.headers
        .get_all(hyper::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .find(|(name, value)| *name == REFRESH_COOKIE && !value.is_empty())
        .map(|(_, value)| value.to_string())
}

/// `Set-Cookie` for the refresh token: httpOnly (scripts never see it), Secure, SameSite=Lax
/// (no cross-site POST carries it), scoped to the auth routes. `None` clears it.
fn refresh_cookie(token: Option<&str>) -> ApiResult<HeaderValue> {
    let (value, max_age) = match token {
        Some(t) => (t, REFRESH_TTL_SECS),
        None => ("", 0),
    };
    HeaderValue::from_str(&format!(
        "{REFRESH_COOKIE}={value}; HttpOnly; Secure; SameSite=Lax; Path={COOKIE_PATH}; Max-Age={max_age}"
    ))
    .map_err(ApiError::internal)
}

/// A new token pair. Fields in key order, as the answer has always listed them.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenPair {
    pub access_token: String,
    /// Seconds the access token lives.
    pub expires_in: i64,
    pub refresh_token: String,
}

async fn refresh(cx: Ctx) -> ApiResult<Resp> {
    limit_address(&cx, "refresh")?;
    let body: Refresh = cx.json_or_default()?;
    let (token, from_cookie) = match body.refresh_token {
        Some(t) => (t, false),
        None => (cookie_token(&cx).ok_or_else(|| ApiError::field("refreshToken", "is required"))?, true),
    };
    let claims = cx.node.verifier.verify(&token, "refresh")?;
    let key = format!("refresh:{}", claims.sub);
    let a = account(&cx)?;
    let (access_token, refresh_token) = limit_account(&cx, &key, Code::INVALID_TOKEN, a.refresh(claims)).await?;
    let cookie = if from_cookie { Some(refresh_cookie(Some(&refresh_token))?) } else { None };
    let mut resp = json(StatusCode::OK, &TokenPair { access_token, expires_in: ACCESS_TTL_SECS, refresh_token });
    if let Some(c) = cookie {
        resp.headers_mut().insert(SET_COOKIE, c);
    }
    Ok(resp)
}

async fn exchange(cx: Ctx) -> ApiResult<Resp> {
    let user = cx.user()?.user_id;
    let (_, refresh) = account(&cx)?.start_session(user, device(&cx)).await?;
    let mut resp = no_content();
    resp.headers_mut().insert(SET_COOKIE, refresh_cookie(Some(&refresh))?);
    Ok(resp)
}

async fn logout(cx: Ctx) -> ApiResult<Resp> {
    let p = cx.user()?;
    account(&cx)?.revoke_session(p.user_id, p.session_id).await?;
    let mut resp = no_content();
    if cookie_token(&cx).is_some() {
        resp.headers_mut().insert(SET_COOKIE, refresh_cookie(None)?);
    }
    Ok(resp)
}

async fn me(cx: Ctx) -> ApiResult<Json<UserView>> {
    let p = cx.user()?;
    let user = account(&cx)?.user(p.user_id)?.ok_or_else(ApiError::not_found)?;
    Ok(Json(user.view()))
}

async fn sessions(cx: Ctx) -> ApiResult<Json<Vec<SessionView>>> {
    let p = cx.user()?;
    let list = account(&cx)?.sessions_of(p.user_id)?;
    Ok(Json(list.iter().map(|s| s.view(p.session_id)).collect()))
}

async fn revoke_one(cx: Ctx) -> ApiResult<NoContent> {
    let p = cx.user()?;
    let sid = cx.path_id("sessionId")?;
    account(&cx)?.revoke_session(p.user_id, sid).await?;
    Ok(NoContent)
}

async fn revoke_others(cx: Ctx) -> ApiResult<NoContent> {
    let p = cx.user()?;
    account(&cx)?.revoke_other_sessions(p.user_id, p.session_id).await?;
    Ok(NoContent)
}
