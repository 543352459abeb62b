//! Storefront sessions and events: how an anonymous shopper's browser is recognised across
//! guest-checkout calls. A session token is shown once; the cell keeps only its sha256.

use std::collections::HashMap;

use redb::{Database, ReadableDatabase, ReadableTable};
use ring::digest::{SHA256, digest};
use ring::rand::{SecureRandom, SystemRandom};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::Cell;
use crate::domain::cart::Cart;
use crate::domain::fields::check_line;
use crate::error::{ApiError, ApiResult, Check};
use crate::storage::codec::{decode, encode};
use crate::storage::keys::{Key, leading_store};
use crate::storage::read;
use crate::storage::tables::{CARTS, COUNTERS, STOREFRONT_SESSIONS, StoreTable};
use crate::storage::writer::Writer;

/// How long a storefront session lasts without use.
pub const SESSION_TTL_MS: i64 = 30 * 24 * 3600 * 1000;
/// How long an untouched cart is kept: carts are the shopper's, and nobody else removes them.
pub const CART_TTL_MS: i64 = 30 * 24 * 3600 * 1000;
/// Most rows one sweep deletes, so a pass stays short.
const SWEEP_BATCH: usize = 10_000;
/// The event kinds a storefront reports.
pub const EVENT_TYPES: &[&str] = &["page_view", "product_view", "collection_view", "search", "add_to_cart", "checkout_started"];

/// The request context every storefront operation carries (`User-Agent`, `Referer`,
/// `X-Forwarded-For`), as sent by the shopper's browser through the storefront host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestContext {
    pub user_agent: String,
    pub referer: String,
    /// The first address of `X-Forwarded-For`: the shopper's, as the first proxy saw it.
    pub client_address: String,
}

/// `store ‖ sha256(token) → StorefrontSession`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StorefrontSession {
    pub context: RequestContext,
    pub created_at: i64,
    /// Moved forward by every event of the session.
    pub expires_at: i64,
}

/// `POST S/storefront/events`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StorefrontEvent {
    /// page_view, product_view, collection_view, search, add_to_cart or checkout_started.
    #[serde(rename = "type")]
    #[schemars(schema_with = "event_type_schema")]
    pub kind: String,
    pub session_token: Option<String>,
    /// The page's path, e.g. `/products/red-shirt`.
    pub path: Option<String>,
    pub product_id: Option<Uuid>,
    pub variant_id: Option<Uuid>,
}

fn event_type_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    crate::domain::fields::one_of(EVENT_TYPES, "what the shopper did")
}

/// A new random token: `sst_` and 43 characters of base64url (256 bits).
pub fn new_token() -> ApiResult<String> {
    let mut bytes = [0u8; 32];
    SystemRandom::new().fill(&mut bytes).map_err(|_| ApiError::internal("no randomness"))?;
    use base64::Engine;
    Ok(format!("sst_{}", base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)))
}

/// What is stored of a token.
pub fn token_hash(token: &str) -> Vec<u8> {
    digest(&SHA256, token.trim().as_bytes()).as_ref().to_vec()
}

fn row_key(store: Uuid, hash: &[u8]) -> Vec<u8> {
    let mut k = Key::store(store).into_vec();
    k.extend_from_slice(hash);
    k
}

/// `store ‖ "events:" ‖ type ‖ ":" ‖ day` → count: the storefront's daily event totals.
fn event_counter(store: Uuid, kind: &str, now: i64) -> Vec<u8> {
    let day = now.div_euclid(86_400_000);
    Key::store(store).str(&format!("events:{kind}:{day}")).into_vec()
}

impl StorefrontEvent {
    pub fn validate(&self) -> ApiResult<()> {
        let mut c = Check::new();
        c.ensure(EVENT_TYPES.contains(&self.kind.as_str()), "type", format!("must be one of {}", EVENT_TYPES.join(", ")));
        if let Some(p) = &self.path {
            check_line(&mut c, "path", p, 2048, false);
        }
        c.finish()
    }
}

/// Starts a storefront session; returns its token (shown once) and the session.
pub async fn create_storefront_session(
    cell: &Cell,
    store: Uuid,
    context: RequestContext,
) -> ApiResult<(String, StorefrontSession)> {
    let token = new_token()?;
    let now = cell.clock.now_ms();
    let session = StorefrontSession { context, created_at: now, expires_at: now + SESSION_TTL_MS };
    let key = row_key(store, &token_hash(&token));
    let row = encode(&session)?;
    cell.writer.write(Some(store), move |tx| tx.put(STOREFRONT_SESSIONS, &key, &row)).await?;
    Ok((token, session))
}

/// The live session a token names, if any.
pub fn storefront_session(cell: &Cell, store: Uuid, token: &str) -> ApiResult<Option<StorefrontSession>> {
    let found: Option<StorefrontSession> = read::get(&cell.read()?, STOREFRONT_SESSIONS, &row_key(store, &token_hash(token)))?;
    Ok(found.filter(|s| s.expires_at > cell.clock.now_ms()))
}

/// Counts the event for its day and, when it names a live session, keeps that session alive.
/// An unknown or expired token is a 403: the storefront should start a new session.
pub async fn record_storefront_event(cell: &Cell, store: Uuid, event: StorefrontEvent) -> ApiResult<()> {
    let now = cell.clock.now_ms();
    let session = match &event.session_token {
        Some(t) => {
            let key = row_key(store, &token_hash(t));
            let mut s = storefront_session(cell, store, t)?
                .ok_or_else(|| ApiError::msg(crate::error::Code::INVALID_SESSION_TOKEN, "the session is unknown or expired"))?;
            s.expires_at = now + SESSION_TTL_MS;
            Some((key, encode(&s)?))
        }
        None => None,
    };
    let counter = event_counter(store, &event.kind, now);
    cell.writer
        .write(Some(store), move |tx| {
            tx.bump(COUNTERS, &counter, 1)?;
            if let Some((key, row)) = &session {
                tx.put(STOREFRONT_SESSIONS, key, row)?;
            }
            Ok(())
        })
        .await
}

/// Events of `kind` counted on the day holding `at` (ms).
pub fn storefront_event_count(cell: &Cell, store: Uuid, kind: &str, at: i64) -> ApiResult<u64> {
    read::counter(&cell.read()?, COUNTERS, &event_counter(store, kind, at))
}

/// Deletes carts untouched for [`CART_TTL_MS`] and expired storefront sessions (at most
/// [`SWEEP_BATCH`] of each); returns how many rows went. Run by the cell's background task.
/// Found with a read, deleted store by store through the writer, each row checked again there.
pub async fn sweep_stale(db: &Database, writer: &Writer, now: i64) -> ApiResult<usize> {
    let mut stale: HashMap<Uuid, Vec<(StoreTable, Vec<u8>)>> = HashMap::new();
    {
        let txn = db.begin_read()?;
        for table in [CARTS, STOREFRONT_SESSIONS] {
            let mut found = 0;
            for item in txn.open_table(table.def)?.iter()? {
                let (k, v) = item?;
                if is_stale(table, v.value(), now)
                    && let Some(store) = leading_store(k.value())
                {
                    stale.entry(store).or_default().push((table, k.value().to_vec()));
                    found += 1;
                    if found >= SWEEP_BATCH {
                        break;
                    }
                }
            }
        }
    }
    let mut deleted = 0;
    for (store, rows) in stale {
        // A store in the last step of a move refuses writes; its rows are swept where it lands.
        if let Ok(n) = writer
            .write(Some(store), move |tx| {
                let mut n = 0;
                for (table, key) in &rows {
                    if tx.get(*table, key)?.is_some_and(|v| is_stale(*table, &v, now)) {
                        tx.delete(*table, key)?;
                        n += 1;
                    }
                }
                Ok(n)
            })
            .await
        {
            deleted += n;
        }
    }
    Ok(deleted)
}

/// Whether a row of `table` (carts or storefront sessions) has outlived its time at `now`.
fn is_stale(table: StoreTable, bytes: &[u8], now: i64) -> bool {
    if table.index == CARTS.index {
        decode::<Cart>(bytes).is_ok_and(|c| now - c.updated_at >= CART_TTL_MS)
    } else {
        decode::<StorefrontSession>(bytes).is_ok_and(|s| s.expires_at <= now)
    }
}
