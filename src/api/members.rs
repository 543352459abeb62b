//! `S/members`: a store's members and roles. The rows are cell routes (the store host forwards
//! `S/*` to the store's cell), but the data is the directory's: the cell reads and writes it
//! through the account service — in process under `serve`, over the internal routes below when
//! the cell runs on its own. The directory re-checks the acting member's role on every change.

use hyper::Method;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::account::Role;
use crate::account::members::{AddMember, ChangeRole, MemberView, Transferred, assignable_role};
use crate::api::auth::account;
use crate::cells::forward::{Body, Upstream};
use crate::error::{ApiError, ApiResult, Code};
use crate::handler;
use crate::http::Page;
use crate::http::context::{Ctx, parse_json};
use crate::http::query::{Paging, Query};
use crate::http::reply::{Created, Json, NoContent};
use crate::http::route::{Access, Param, QueryParams, Route, Service, param, required};
use crate::node::Node;

/// The member list's sortable fields; `added_at` is the default.
const SORT_FIELDS: &[&str] = &["added_at", "email"];

pub fn routes() -> Vec<Route> {
    use Access::*;
    use Service::*;
    let one = "/stores/{storeId}/members/{userId}";
    let store = "/internal/v1/stores/{storeId}/members";
    let member = "/internal/v1/stores/{storeId}/members/{userId}";
    vec![
        Route::get("/stores/{storeId}/members", Cell, Member, handler!(list), "The store's members with their roles"),
        Route::post("/stores/{storeId}/members", Cell, Admin, handler!(add), "Add a registered user as admin or staff")
            .body::<AddMember>(),
        Route::patch(one, Cell, Admin, handler!(change), "Change a member's role (admin or staff)").body::<ChangeRole>(),
        Route::delete(one, Cell, Admin, handler!(remove), "Remove a member (never the owner)"),
        Route::post(
            "/stores/{storeId}/members/{userId}/transfer-ownership",
            Cell,
            Admin,
            handler!(transfer),
            "Make a member the owner; the current owner becomes an admin (owner only)",
        ),
        Route::get(store, Account, Internal, handler!(internal_list), "A store's members"),
        Route::post(store, Account, Internal, handler!(internal_add), "Add a member on behalf of `actor`"),
        Route::patch(member, Account, Internal, handler!(internal_change), "Change a role on behalf of `actor`"),
        Route::delete(member, Account, Internal, handler!(internal_remove), "Remove a member on behalf of `?actor`"),
        Route::post(
            "/internal/v1/stores/{storeId}/members/{userId}/transfer-ownership",
            Account,
            Internal,
            handler!(internal_transfer),
            "Transfer ownership on behalf of `actor`",
        ),
    ]
}

/// One page of an in-memory list (members and keys of a store are few).
pub fn page_of<T: Serialize>(items: Vec<T>, paging: &Paging) -> Page<T> {
    let total = items.len() as u64;
    let data = items.into_iter().skip(paging.offset()).take(paging.limit as usize).collect();
    Page::new(data, total, paging.page, paging.limit)
}

/// The parameters of an in-memory list's paging; `sort_doc` names its sortable fields.
pub fn paging_params(sort_doc: &'static str) -> Vec<Param> {
    vec![
        param("page", "integer", "1-based page, default 1"),
        param("limit", "integer", "page size, 1..250, default 20"),
        param("sortBy", "string", sort_doc),
        param("sortOrder", "string", "asc or desc (default)"),
    ]
}

/// The member list's query: paging, sorted by `added_at` or `email`.
pub struct MemberList(Paging);

impl QueryParams for MemberList {
    fn params() -> Vec<Param> {
        paging_params("added_at (default) or email")
    }
    fn parse(q: &Query) -> ApiResult<Self> {
        Paging::from_query(q, SORT_FIELDS, "added_at").map(MemberList)
    }
}

/// `?actor=`: the member an internal removal is made on behalf of (a DELETE has no body).
pub struct ActorQuery {
    pub actor: Uuid,
}

impl QueryParams for ActorQuery {
    fn params() -> Vec<Param> {
        vec![required("actor", "string", "the acting member's user id")]
    }
    fn parse(q: &Query) -> ApiResult<Self> {
        let actor = q.uuid("actor")?.ok_or_else(|| ApiError::field("actor", "is required"))?;
        Ok(ActorQuery { actor })
    }
}

async fn list(cx: Ctx, MemberList(paging): MemberList) -> ApiResult<Json<Page<MemberView>>> {
    let s = cx.scope()?;
    let mut members = cx.node.store_members(s.id).await?;
    if paging.sort_by == "email" {
        members.sort_by(|a, b| a.email.cmp(&b.email));
    }
    if paging.desc {
        members.reverse();
    }
    Ok(Json(page_of(members, &paging)))
}

/// Field checks the cell can make itself, so callers get the named fields in every deployment
/// (field lists do not survive an internal hop).
fn check_add(body: &AddMember) -> ApiResult<()> {
    if body.email.trim().is_empty() {
        return Err(ApiError::field("email", "is required"));
    }
    assignable_role(&body.role).map(|_| ())
}

async fn add(cx: Ctx) -> ApiResult<Created<MemberView>> {
    let s = cx.scope()?;
    let body: AddMember = cx.json()?;
    check_add(&body)?;
    let m = cx.node.add_store_member(s.id, cx.user()?.user_id, body).await?;
    Ok(Created(m))
}

async fn change(cx: Ctx) -> ApiResult<Json<MemberView>> {
    let s = cx.scope()?;
    let user = cx.path_id("userId")?;
    let body: ChangeRole = cx.json()?;
    assignable_role(&body.role)?;
    let m = cx.node.change_member_role(s.id, cx.user()?.user_id, user, body).await?;
    Ok(Json(m))
}

async fn remove(cx: Ctx) -> ApiResult<NoContent> {
    let s = cx.scope()?;
    let user = cx.path_id("userId")?;
    cx.node.remove_store_member(s.id, cx.user()?.user_id, user).await?;
    Ok(NoContent)
}

async fn transfer(cx: Ctx) -> ApiResult<Json<Transferred>> {
    let s = cx.scope()?;
    let user = cx.path_id("userId")?;
    if s.role != Some(Role::Owner) {
        return Err(ApiError::msg(Code::FORBIDDEN, "only the owner can transfer ownership"));
    }
    let t = cx.node.transfer_store_ownership(s.id, cx.user()?.user_id, user).await?;
    // The cell's copy of the owner (shown by `GET S`) follows the directory. The transfer is
    // done once the directory has it — the directory decides who may do what — so a failure
    // here (the store frozen for the last step of a move) is logged, not answered: a retry by
    // the caller, no longer the owner, could not repeat it.
    if let Err(e) = s.cell.set_store_owner(s.id, user).await {
        tracing::warn!(store = %s.id, error = %e, "the cell's copy of the store owner is stale");
    }
    Ok(Json(t))
}

// ---- the directory side: internal routes for cells in their own process ---------------------

/// An internal write made on behalf of a member (the cell has verified who they are).
#[derive(Serialize, Deserialize)]
pub struct Acting<T> {
    pub actor: Uuid,
    pub body: T,
}

async fn internal_list(cx: Ctx) -> ApiResult<Json<Vec<MemberView>>> {
    Ok(Json(account(&cx)?.members(cx.path_id("storeId")?)?))
}

async fn internal_add(cx: Ctx) -> ApiResult<Created<MemberView>> {
    let a: Acting<AddMember> = parse_json(&cx.body)?;
    Ok(Created(account(&cx)?.add_member(cx.path_id("storeId")?, a.actor, a.body).await?))
}

async fn internal_change(cx: Ctx) -> ApiResult<Json<MemberView>> {
    let a: Acting<ChangeRole> = parse_json(&cx.body)?;
    Ok(Json(account(&cx)?.change_role(cx.path_id("storeId")?, a.actor, cx.path_id("userId")?, a.body).await?))
}

async fn internal_remove(cx: Ctx, q: ActorQuery) -> ApiResult<NoContent> {
    account(&cx)?.remove_member(cx.path_id("storeId")?, q.actor, cx.path_id("userId")?).await?;
    Ok(NoContent)
}

async fn internal_transfer(cx: Ctx) -> ApiResult<Json<Transferred>> {
    let a: Acting<()> = parse_json(&cx.body)?;
    Ok(Json(account(&cx)?.transfer_ownership(cx.path_id("storeId")?, a.actor, cx.path_id("userId")?).await?))
}

/// The account service of a cell that runs as its own process.
pub fn directory(node: &Node) -> ApiResult<&Upstream> {
    node.account_upstream.as_ref().ok_or_else(|| ApiError::internal("no account service configured"))
}

/// Members through the directory, wherever it runs (the pattern of [`Node::rename_store`]).
impl Node {
    /// A store's members in the order they were added.
    pub async fn store_members(&self, store: Uuid) -> ApiResult<Vec<MemberView>> {
        if let Some(a) = &self.account {
            return a.members(store);
        }
        directory(self)?.call(Method::GET, &format!("/internal/v1/stores/{store}/members"), Body::Empty).await
    }

    /// Adds a member on behalf of `actor` (an owner or admin, re-checked by the directory).
    pub async fn add_store_member(&self, store: Uuid, actor: Uuid, body: AddMember) -> ApiResult<MemberView> {
        if let Some(a) = &self.account {
            return a.add_member(store, actor, body).await;
        }
        let body = Body::json(&Acting { actor, body })?;
        directory(self)?.call(Method::POST, &format!("/internal/v1/stores/{store}/members"), body).await
    }

    /// Changes a member's role on behalf of `actor`.
    pub async fn change_member_role(&self, store: Uuid, actor: Uuid, user: Uuid, body: ChangeRole) -> ApiResult<MemberView> {
        if let Some(a) = &self.account {
            return a.change_role(store, actor, user, body).await;
        }
        let body = Body::json(&Acting { actor, body })?;
        directory(self)?.call(Method::PATCH, &format!("/internal/v1/stores/{store}/members/{user}"), body).await
    }

    /// Removes a member on behalf of `actor`.
    pub async fn remove_store_member(&self, store: Uuid, actor: Uuid, user: Uuid) -> ApiResult<()> {
        if let Some(a) = &self.account {
            return a.remove_member(store, actor, user).await;
        }
        let path = format!("/internal/v1/stores/{store}/members/{user}?actor={actor}");
        directory(self)?.call_raw(Method::DELETE, &path, Body::Empty).await.map(|_| ())
    }

    /// Transfers ownership on behalf of `actor` (the owner).
    pub async fn transfer_store_ownership(&self, store: Uuid, actor: Uuid, user: Uuid) -> ApiResult<Transferred> {
        if let Some(a) = &self.account {
            return a.transfer_ownership(store, actor, user).await;
        }
        let body = Body::json(&Acting { actor, body: () })?;
        directory(self)?.call(Method::POST, &format!("/internal/v1/stores/{store}/members/{user}/transfer-ownership"), body).await
    }
}
