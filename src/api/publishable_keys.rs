//! `S/publishable-keys` (create, list masked, revoke) and `POST /auth/publishable-keys/validate`.
//! Like members, the keys live in the directory; a cell reaches them, and the storefront routes
//! check a presented key, through [`DirectoryLink`](crate::account::directory::DirectoryLink).

use schemars::JsonSchema;
use serde::Serialize;
use uuid::Uuid;

use crate::account::directory::Acting;
use crate::account::publishable::{
    CreateKey, CreatedKey, Environment, KeyGrant, KeyView, ValidateKey, key_digest, parse_digest_hex, well_formed,
};
use crate::api::auth::account;
use crate::api::members::{ActorQuery, page_of, paging_params};
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::Page;
use crate::http::parse::parse_json;
use crate::http::query::{Paging, Query};
use crate::http::reply::{Created, Json, NoContent};
use crate::http::route::{Access, Param, QueryParams, Service};
use crate::node::context::{Ctx, Route};

pub fn routes() -> Vec<Route> {
    use Access::*;
    use Service::*;
    let keys = "/stores/{storeId}/publishable-keys";
    let internal = "/internal/v1/stores/{storeId}/publishable-keys";
    vec![
        Route::get(keys, Cell, Member, handler!(list), "The store's publishable keys, masked"),
        Route::post(keys, Cell, Admin, handler!(create), "Create a publishable key; the full key is shown only in this answer")
            .secret()
            .body::<CreateKey>(),
        Route::delete("/stores/{storeId}/publishable-keys/{keyId}", Cell, Admin, handler!(revoke), "Revoke a publishable key")
            .id("revokePublishableKey"),
        Route::post(
            "/auth/publishable-keys/validate",
            Account,
            Public,
            handler!(validate),
            "Check a publishable key: {valid, storeId, type, environment}, or {valid: false}",
        )
        .errors(&[429])
        .id("validatePublishableKey")
        .body::<ValidateKey>(),
        Route::get(internal, Account, Internal, handler!(internal_list), "A store's publishable keys"),
        Route::post(internal, Account, Internal, handler!(internal_create), "Create a key on behalf of `actor`"),
        Route::delete(
            "/internal/v1/stores/{storeId}/publishable-keys/{keyId}",
            Account,
            Internal,
            handler!(internal_revoke),
            "Revoke a key on behalf of `?actor`",
        ),
        Route::get(
            "/internal/v1/publishable-keys/{digest}",
            Account,
            Internal,
            handler!(internal_resolve),
            "The store an unrevoked key (by SHA-256 hex) admits to",
        ),
    ]
}

/// The key list's query: paging, sorted by `created_at`.
pub struct KeyList(Paging);

/// What the key list sorts by.
const KEY_SORTS: &[&str] = &["created_at"];

impl QueryParams for KeyList {
    fn params() -> Vec<Param> {
        paging_params("created_at (default)", KEY_SORTS)
    }
    fn parse(q: &Query) -> ApiResult<Self> {
        Paging::from_query(q, KEY_SORTS, "created_at").map(KeyList)
    }
}

async fn list(cx: Ctx, KeyList(paging): KeyList) -> ApiResult<Json<Page<KeyView>>> {
    let s = cx.scope()?;
    let mut keys = cx.node.directory.publishable_keys(s.id).await?;
    if paging.desc {
        keys.reverse();
    }
    Ok(Json(page_of(keys, &paging)))
}

async fn create(cx: Ctx) -> ApiResult<Created<CreatedKey>> {
    let s = cx.scope()?;
    let body: CreateKey = cx.json()?;
    Environment::parse(&body.environment).ok_or_else(|| ApiError::field("environment", "must be live or test"))?;
    let k = cx.node.directory.create_publishable_key(s.id, cx.user()?.user_id, body).await?;
    Ok(Created(k))
}

async fn revoke(cx: Ctx) -> ApiResult<NoContent> {
    let s = cx.scope()?;
    let id = cx.path_id("keyId")?;
    cx.node.directory.revoke_publishable_key(s.id, cx.user()?.user_id, id).await?;
    Ok(NoContent)
}

/// What `POST /auth/publishable-keys/validate` tells of a key: only `valid: false` for one not
/// in force. Fields in key order, as the answer has always listed them.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyCheck {
    /// `LIVE` or `TEST`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store_id: Option<Uuid>,
    /// `PUBLISHABLE`.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    pub valid: bool,
}

/// Always 200: `{valid: true, storeId, type: "PUBLISHABLE", environment: "LIVE" | "TEST"}` for a
/// key in force, `{valid: false}` for a revoked, unknown or malformed one — the answer never
/// tells which.
async fn validate(cx: Ctx) -> ApiResult<Json<KeyCheck>> {
    // Guessing keys is limited per client address like the other sign-in calls.
    crate::api::auth::limit_address(&cx, "keys")?;
    let body: ValidateKey = cx.json()?;
    let grant = match well_formed(&body.key) {
        Some(_) => account(&cx)?.resolve_publishable_key(&key_digest(&body.key))?,
        None => None,
    };
    Ok(Json(match grant {
        Some(g) => KeyCheck {
            environment: Some(g.environment.upper()),
            store_id: Some(g.store_id),
            kind: Some("PUBLISHABLE"),
            valid: true,
        },
        None => KeyCheck { environment: None, store_id: None, kind: None, valid: false },
    }))
}

// ---- the directory side ---------------------------------------------------------------------

async fn internal_list(cx: Ctx) -> ApiResult<Json<Vec<KeyView>>> {
    let keys = account(&cx)?.publishable_keys(cx.path_id("storeId")?)?;
    Ok(Json(keys.iter().map(|k| k.view()).collect()))
}

async fn internal_create(cx: Ctx) -> ApiResult<Created<CreatedKey>> {
    let a: Acting<CreateKey> = parse_json(&cx.body)?;
    Ok(Created(account(&cx)?.create_publishable_key(cx.path_id("storeId")?, a.actor, a.body).await?))
}

async fn internal_revoke(cx: Ctx, q: ActorQuery) -> ApiResult<NoContent> {
    account(&cx)?.revoke_publishable_key(cx.path_id("storeId")?, q.actor, cx.path_id("keyId")?).await?;
    Ok(NoContent)
}

async fn internal_resolve(cx: Ctx) -> ApiResult<Json<KeyGrant>> {
    let digest = parse_digest_hex(cx.param("digest")).ok_or_else(|| ApiError::field("digest", "must be 64 hex digits"))?;
    let grant = account(&cx)?.resolve_publishable_key(&digest)?.ok_or_else(ApiError::not_found)?;
    Ok(Json(grant))
}
