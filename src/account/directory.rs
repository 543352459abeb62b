//! Asking the store directory (sessions, members and roles, publishable keys, which cell holds a
//! store) from wherever this process runs: in process when it hosts the account service, or over
//! HTTP through the account service's internal routes. Both paths end in the same
//! `AccountService` methods, so callers never need to know which one they have.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Method, Request};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::account::members::{AddMember, ChangeRole, Transferred};
use crate::account::membership::MemberView;
use crate::account::publishable::{CreateKey, CreatedKey, KeyCache, KeyGrant, KeyView, digest_hex, key_digest, well_formed};
use crate::account::{AccountService, Admission};
use crate::domain::role::Role;
use crate::error::{ApiError, ApiResult, Code};
use crate::http::Resp;
use crate::http::upstream::{Body, Upstream};

/// How long a cell trusts a membership or session answer from a remote account service: role
/// changes and revocations reach every cell within this time.
const ACCESS_TTL: Duration = Duration::from_secs(2);

/// (store, user, session) → (role, session live, when asked).
type AccessKey = (Uuid, Uuid, Uuid);
type AccessEntry = (Option<Role>, bool, Instant);

/// The store directory as this process reaches it.
pub enum DirectoryLink {
    /// The account service runs in this process (`serve`, `account`).
    Local(Arc<AccountService>),
    /// The account service of a cell or router in its own process.
    Remote(Box<RemoteDirectory>),
}

/// A remote account service and its short-lived memory of the answers every request needs:
/// the service is asked again once they are older than their TTL, never on each request.
pub struct RemoteDirectory {
    upstream: Upstream,
    placement: RwLock<HashMap<Uuid, String>>,
    access: RwLock<HashMap<AccessKey, AccessEntry>>,
    keys: KeyCache,
}

impl DirectoryLink {
    /// The directory of the account service at `upstream`.
    pub fn remote(upstream: Upstream) -> DirectoryLink {
        DirectoryLink::Remote(Box::new(RemoteDirectory {
            upstream,
            placement: RwLock::new(HashMap::new()),
            access: RwLock::new(HashMap::new()),
            keys: KeyCache::default(),
        }))
    }

    /// The account service, when this process hosts it (its own routes are served from it).
    pub fn hosted(&self) -> Option<&Arc<AccountService>> {
        match self {
            DirectoryLink::Local(a) => Some(a),
            DirectoryLink::Remote(_) => None,
        }
    }

    /// The account service in another process, when it is (readiness probes it).
    pub fn upstream(&self) -> Option<&Upstream> {
        match self {
            DirectoryLink::Local(_) => None,
            DirectoryLink::Remote(r) => Some(&r.upstream),
        }
    }

    /// Whether the session is live and the user's role in `store` (when given). In process, the
    /// cell holding the store comes along, read in the same transaction; a remote answer leaves
    /// it `None` (ask [`DirectoryLink::locate`]). Either way the call is a use of the session.
    pub async fn admission(&self, session: Uuid, user: Uuid, store: Option<Uuid>) -> ApiResult<Admission> {
        let r = match self {
            DirectoryLink::Local(a) => {
                let found = a.admission(session, user, store)?;
                if found.0 {
                    a.touch(session);
                }
                return Ok(found);
            }
            DirectoryLink::Remote(r) => r,
        };
        let key = (store.unwrap_or_default(), user, session);
        if let Some((role, active, at)) = r.access.read().ok().and_then(|c| c.get(&key).copied())
            && at.elapsed() < ACCESS_TTL
        {
            return Ok((active, role, None));
        }
        let store_param = store.map(|s| format!("&store={s}")).unwrap_or_default();
        let path = format!("/internal/v1/access?user={user}&session={session}{store_param}");
        let a: SessionAccess = r.upstream.call(Method::GET, &path, Body::Empty).await?;
        let role = a.role.as_deref().and_then(Role::parse);
        if let Ok(mut c) = r.access.write() {
            if c.len() > 100_000 {
                c.clear();
            }
            c.insert(key, (role, a.session_active, Instant::now()));
        }
        Ok((a.session_active, role, None))
    }

    /// The cell holding `store`; a remote answer is remembered until [`Self::forget_placement`].
    pub async fn locate(&self, store: Uuid) -> ApiResult<Option<String>> {
        let r = match self {
            DirectoryLink::Local(a) => return a.locate(store),
            DirectoryLink::Remote(r) => r,
        };
        if let Some(c) = r.placement.read().ok().and_then(|p| p.get(&store).cloned()) {
            return Ok(Some(c));
        }
        match r.upstream.call::<Located>(Method::GET, &format!("/internal/v1/directory/stores/{store}"), Body::Empty).await {
            Ok(l) => {
                if let Ok(mut p) = r.placement.write() {
                    p.insert(store, l.cell.clone());
                }
                Ok(Some(l.cell))
            }
            Err(e) if e.code == Code::NOT_FOUND => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Drops a remembered placement (the store moved); the directory in process keeps none.
    pub fn forget_placement(&self, store: Uuid) {
        if let DirectoryLink::Remote(r) = self
            && let Ok(mut p) = r.placement.write()
        {
            p.remove(&store);
        }
    }

    /// Keeps the directory's copy of a store's name in step after a rename in the cell.
    pub async fn rename_store(&self, store: Uuid, name: String) -> ApiResult<()> {
        match self {
            DirectoryLink::Local(a) => a.rename_store(store, name).await,
            DirectoryLink::Remote(r) => {
                let body = Body::json(&serde_json::json!({ "name": name }))?;
                r.upstream.call_raw(Method::PUT, &format!("/internal/v1/directory/stores/{store}"), body).await.map(|_| ())
            }
        }
    }

    /// A store's members in the order they were added.
    pub async fn members(&self, store: Uuid) -> ApiResult<Vec<MemberView>> {
        match self {
            DirectoryLink::Local(a) => a.members(store),
            DirectoryLink::Remote(r) => {
                r.upstream.call(Method::GET, &format!("/internal/v1/stores/{store}/members"), Body::Empty).await
            }
        }
    }

    /// Adds a member on behalf of `actor` (an owner or admin, re-checked by the directory).
    pub async fn add_member(&self, store: Uuid, actor: Uuid, body: AddMember) -> ApiResult<MemberView> {
        match self {
            DirectoryLink::Local(a) => a.add_member(store, actor, body).await,
            DirectoryLink::Remote(r) => {
                let body = Body::json(&Acting { actor, body })?;
                r.upstream.call(Method::POST, &format!("/internal/v1/stores/{store}/members"), body).await
            }
        }
    }

    /// Changes a member's role on behalf of `actor`.
    pub async fn change_role(&self, store: Uuid, actor: Uuid, user: Uuid, body: ChangeRole) -> ApiResult<MemberView> {
        match self {
            DirectoryLink::Local(a) => a.change_role(store, actor, user, body).await,
            DirectoryLink::Remote(r) => {
                let body = Body::json(&Acting { actor, body })?;
                r.upstream.call(Method::PATCH, &format!("/internal/v1/stores/{store}/members/{user}"), body).await
            }
        }
    }

    /// Removes a member on behalf of `actor`.
    pub async fn remove_member(&self, store: Uuid, actor: Uuid, user: Uuid) -> ApiResult<()> {
        match self {
            DirectoryLink::Local(a) => a.remove_member(store, actor, user).await,
            DirectoryLink::Remote(r) => {
                let path = format!("/internal/v1/stores/{store}/members/{user}?actor={actor}");
                r.upstream.call_raw(Method::DELETE, &path, Body::Empty).await.map(|_| ())
            }
        }
    }

    /// Takes a store out of the directory on its owner's word (`actor`, checked again there).
    pub async fn close_store(&self, store: Uuid, actor: Uuid) -> ApiResult<()> {
        let done = match self {
            DirectoryLink::Local(a) => a.close_store(store, actor).await.map(|_| ()),
            DirectoryLink::Remote(r) => {
                let body = Body::json(&Acting { actor, body: () })?;
                r.upstream.call_raw(Method::POST, &format!("/internal/v1/stores/{store}/close"), body).await.map(|_| ())
            }
        };
        self.forget_placement(store);
        done
    }

    /// Forgets a closed store whose rows its cell has removed.
    pub async fn forget_store(&self, store: Uuid) -> ApiResult<()> {
        match self {
            DirectoryLink::Local(a) => a.forget_store(store).await,
            DirectoryLink::Remote(r) => {
                let path = format!("/internal/v1/closed-stores/{store}/forget");
                r.upstream.call_raw(Method::POST, &path, Body::Empty).await.map(|_| ())
            }
        }
    }

    /// Transfers ownership on behalf of `actor` (the owner).
    pub async fn transfer_ownership(&self, store: Uuid, actor: Uuid, user: Uuid) -> ApiResult<Transferred> {
        match self {
            DirectoryLink::Local(a) => a.transfer_ownership(store, actor, user).await,
            DirectoryLink::Remote(r) => {
                let body = Body::json(&Acting { actor, body: () })?;
                let path = format!("/internal/v1/stores/{store}/members/{user}/transfer-ownership");
                r.upstream.call(Method::POST, &path, body).await
            }
        }
    }

    /// A store's publishable keys, masked, oldest first.
    pub async fn publishable_keys(&self, store: Uuid) -> ApiResult<Vec<KeyView>> {
        match self {
            DirectoryLink::Local(a) => Ok(a.publishable_keys(store)?.iter().map(|k| k.view()).collect()),
            DirectoryLink::Remote(r) => {
                r.upstream.call(Method::GET, &format!("/internal/v1/stores/{store}/publishable-keys"), Body::Empty).await
            }
        }
    }

    /// Creates a key on behalf of `actor` (an owner or admin, re-checked by the directory).
    pub async fn create_publishable_key(&self, store: Uuid, actor: Uuid, body: CreateKey) -> ApiResult<CreatedKey> {
        match self {
            DirectoryLink::Local(a) => a.create_publishable_key(store, actor, body).await,
            DirectoryLink::Remote(r) => {
                let body = Body::json(&Acting { actor, body })?;
                r.upstream.call(Method::POST, &format!("/internal/v1/stores/{store}/publishable-keys"), body).await
            }
        }
    }

    /// Revokes a key on behalf of `actor`.
    pub async fn revoke_publishable_key(&self, store: Uuid, actor: Uuid, key: Uuid) -> ApiResult<()> {
        match self {
            DirectoryLink::Local(a) => a.revoke_publishable_key(store, actor, key).await,
            DirectoryLink::Remote(r) => {
                let path = format!("/internal/v1/stores/{store}/publishable-keys/{key}?actor={actor}");
                r.upstream.call_raw(Method::DELETE, &path, Body::Empty).await.map(|_| ())
            }
        }
    }

    /// What a presented key admits to, on the storefront hot path: a point read in process; from
    /// a remote directory, one internal call per key per
    /// [`KEY_CACHE_TTL`](crate::account::publishable::KEY_CACHE_TTL), so a revocation reaches
    /// every cell within that time. Malformed keys are refused without a lookup.
    pub async fn publishable_key(&self, key: &str) -> ApiResult<Option<KeyGrant>> {
        if well_formed(key).is_none() {
            return Ok(None);
        }
        let digest = key_digest(key);
        let r = match self {
            DirectoryLink::Local(a) => return a.resolve_publishable_key(&digest),
            DirectoryLink::Remote(r) => r,
        };
        if let Some(hit) = r.keys.get(&digest) {
            return Ok(hit);
        }
        let path = format!("/internal/v1/publishable-keys/{}", digest_hex(&digest));
        let grant = match r.upstream.call::<KeyGrant>(Method::GET, &path, Body::Empty).await {
            Ok(g) => Some(g),
            Err(e) if e.code == Code::NOT_FOUND => None,
            Err(e) => return Err(e),
        };
        r.keys.put(digest, grant);
        Ok(grant)
    }

    /// Passes a client's request for an account route to the account service: what a router
    /// does, and a router's directory is always remote.
    pub async fn forward(&self, req: Request<Full<Bytes>>, client: Option<IpAddr>) -> ApiResult<Resp> {
        match self {
            DirectoryLink::Local(_) => Err(ApiError::internal("the account service runs in this process")),
            DirectoryLink::Remote(r) => r.upstream.forward(req, client).await,
        }
    }
}

// ---- what travels on the internal routes ----------------------------------------------------

/// An internal write made on behalf of a member (the cell has verified who they are).
#[derive(Serialize, Deserialize)]
pub struct Acting<T> {
    pub actor: Uuid,
    pub body: T,
}

/// The cell that holds a store, as the directory knows it.
#[derive(Serialize, Deserialize, JsonSchema)]
pub struct Located {
    pub cell: String,
}

/// A session's state and a member's role, as a cell in its own process reads them. Fields in key
/// order, as the answer has always listed them.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionAccess {
    /// `owner`, `admin` or `staff`; `null` for no member, no store asked, or an ended session.
    pub role: Option<String>,
    pub session_active: bool,
}
