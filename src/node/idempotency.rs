//! `Idempotency-Key` on POST requests: the same key and body within 24 hours answers the first
//! response again instead of running the operation twice; the same key with another body is 422.
//!
//! The layer runs in the dispatcher around the handler call, so exactly where the handler runs:
//! a router forwards before it, and the cell or account service that answers runs it once.
//!
//! - Scope: a key belongs to one caller and one operation. The table key is
//!   `sha256(caller ‖ method ‖ path ‖ key)`, where the caller is the signed-in user, else the
//!   anonymous shopper's publishable key, else the client address (public routes). The path
//!   names the store of `S/` routes, and the row sits in that store's range of the cell's
//!   `idempotency` table, so it moves with the store. Routes outside a store use the account
//!   directory's `idempotency_keys` table.
//! - What is recorded: responses below 400, once the handler has finished. An error leaves
//!   nothing behind (a failing handler writes nothing), so a retry of a 4xx simply runs again and
//!   a client that corrects its request may keep its key; 5xx and 503 `STORE_MOVING` stay
//!   retryable by definition. The record holds the request fingerprint (`sha256` of query and
//!   body), the status, every header the handler set and the body. Replays carry
//!   `Idempotent-Replayed: true`.
//! - `Set-Cookie` is replayed with the rest: a client retrying a sign-in or a token refresh whose
//!   answer it lost must receive the tokens the first call issued (the refresh rotated already;
//!   presenting the old token again would revoke the session).
//! - Concurrency: a second request with the same scoped key waits for the first to finish, then
//!   answers from its record (or runs, when the first failed). The handler runs in its own task,
//!   so a client that hangs up does not leave an operation done but unrecorded.
//! - Sealed: a response may carry secrets shown once (tokens, a gift card's code, a publishable
//!   key), so the record is encrypted (ChaCha20-Poly1305) under `sha256("seal" ‖ caller ‖ method ‖
//!   path ‖ key)`. Only a caller presenting the same key can open it; the stored table key is a
//!   different digest and reveals nothing of it.
//! - Expiry: records older than 24 h are ignored when read and deleted by a sweep that a
//!   recording starts at most every ten minutes per database.
//!
//! A request without the header costs nothing: the dispatcher calls [`run`] only when it is there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{HeaderMap, Response, StatusCode};
use redb::{ReadableDatabase, ReadableTable};
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::digest::{Context, SHA256};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::account::AccountService;
use crate::cells::Cell;
use crate::error::{ApiError, ApiResult, Code};
use crate::http::Resp;
use crate::http::route::Handler;
use crate::node::context::Ctx;
use crate::storage::codec::{decode, encode};
use crate::storage::keys::Key;
use crate::storage::tables::{IDEMPOTENCY, IDEMPOTENCY_KEYS};

/// The request header (lower case, as hyper stores names).
pub const HEADER: &str = "idempotency-key";
/// Set on a response that is a replay of a recorded one.
pub const REPLAYED: &str = "idempotent-replayed";
/// How long a record answers.
pub const TTL_MS: i64 = 24 * 3600 * 1000;
/// Longest accepted key.
pub const MAX_KEY_LEN: usize = 255;
/// A database is swept at most this often.
const SWEEP_EVERY_MS: i64 = 10 * 60 * 1000;
/// Most expired rows one sweep deletes (the next sweep takes the rest).
const SWEEP_BATCH: usize = 10_000;

/// The first response to a keyed request. Stored as `createdAt i64 big-endian ‖ bincode(self)`,
/// so a sweep reads 8 bytes per row to decide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    /// `sha256(len(query) ‖ query ‖ body)` of the request.
    pub fingerprint: [u8; 32],
    pub status: u16,
    /// Every header the handler set, in order (names lower case).
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl Recorded {
    /// `at` (i64 big-endian) ‖ nonce (12 bytes) ‖ the sealed record: the time stays readable for
    /// the sweep.
    fn to_value(&self, at: i64, seal: &[u8; 32]) -> ApiResult<Vec<u8>> {
        let key = sealing_key(seal)?;
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new().fill(&mut nonce).map_err(|_| ApiError::internal("no randomness"))?;
        let mut sealed = encode(self)?;
        key.seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::empty(), &mut sealed)
            .map_err(|_| ApiError::internal("sealing failed"))?;
        let mut v = at.to_be_bytes().to_vec();
        v.extend_from_slice(&nonce);
        v.extend_from_slice(&sealed);
        Ok(v)
    }

    /// The record in `value` unless it is older than the TTL at `now`.
    fn from_value(value: &[u8], now: i64, seal: &[u8; 32]) -> ApiResult<Option<Recorded>> {
        if expired(value, now) {
            return Ok(None);
        }
        let (nonce, sealed) = value[8..].split_at_checked(NONCE_LEN).ok_or_else(|| ApiError::internal("short record"))?;
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| ApiError::internal("bad nonce"))?;
        let mut sealed = sealed.to_vec();
        let plain = sealing_key(seal)?
            .open_in_place(nonce, Aad::empty(), &mut sealed)
            .map_err(|_| ApiError::internal("a recorded response does not open"))?;
        decode(plain).map(Some)
    }
}

fn sealing_key(seal: &[u8; 32]) -> ApiResult<LessSafeKey> {
    Ok(LessSafeKey::new(UnboundKey::new(&CHACHA20_POLY1305, seal).map_err(|_| ApiError::internal("sealing key"))?))
}

/// Whether a stored value is past its 24 h (a value too short to carry its time counts as past).
fn expired(value: &[u8], now: i64) -> bool {
    match value.get(..8).and_then(|b| b.try_into().ok()) {
        Some(b) => now - i64::from_be_bytes(b) >= TTL_MS,
        None => true,
    }
}

/// Per-process state: the scoped keys whose first request is under way, and when each database
/// was last swept. Lives in the [`Node`](crate::node::Node).
#[derive(Default)]
pub struct Idempotency {
    flights: Arc<Mutex<HashMap<[u8; 32], Flight>>>,
    swept: Mutex<HashMap<String, i64>>,
}

struct Flight {
    lock: Arc<tokio::sync::Mutex<()>>,
    /// Requests holding or waiting for `lock`; the entry goes when the last one leaves.
    users: usize,
}

/// The right to act on one scoped key in this process; dropping it lets the next request in.
struct Pass {
    flights: Arc<Mutex<HashMap<[u8; 32], Flight>>>,
    scope: [u8; 32],
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl Drop for Pass {
    fn drop(&mut self) {
        if let Ok(mut m) = self.flights.lock()
            && let Some(f) = m.get_mut(&self.scope)
        {
            f.users -= 1;
            if f.users == 0 {
                m.remove(&self.scope);
            }
        }
    }
}

/// Counts a request as a user of a flight until it holds a [`Pass`] (or gives up waiting).
struct Waiting {
    flights: Arc<Mutex<HashMap<[u8; 32], Flight>>>,
    scope: [u8; 32],
    armed: bool,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        if let Ok(mut m) = self.flights.lock()
            && let Some(f) = m.get_mut(&self.scope)
        {
            f.users -= 1;
            if f.users == 0 {
                m.remove(&self.scope);
            }
        }
    }
}

impl Idempotency {
    /// Waits until no other request of this process holds `scope`, then holds it.
    async fn enter(&self, scope: [u8; 32]) -> ApiResult<Pass> {
        let lock = {
            let mut m = self.flights.lock().map_err(|_| ApiError::internal("idempotency flights poisoned"))?;
            let f = m.entry(scope).or_insert_with(|| Flight { lock: Arc::new(tokio::sync::Mutex::new(())), users: 0 });
            f.users += 1;
            f.lock.clone()
        };
        // Until the pass exists, a cancelled wait must still give its place back.
        let mut waiting = Waiting { flights: self.flights.clone(), scope, armed: true };
        let guard = lock.lock_owned().await;
        waiting.armed = false;
        Ok(Pass { flights: self.flights.clone(), scope, _guard: guard })
    }

    /// Whether `place` is due for a sweep at `now`; marks it swept when so.
    fn sweep_due(&self, place: &str, now: i64) -> bool {
        let Ok(mut m) = self.swept.lock() else { return false };
        match m.get(place) {
            Some(&last) if now - last < SWEEP_EVERY_MS => false,
            _ => {
                m.insert(place.to_string(), now);
                true
            }
        }
    }

    #[cfg(test)]
    fn in_flight(&self) -> usize {
        self.flights.lock().map(|m| m.len()).unwrap_or(0)
    }
}

/// Where a request's record lives.
#[derive(Clone)]
enum Place {
    /// The store's range of its cell's `idempotency` table.
    Store { cell: Arc<Cell>, store: Uuid },
    /// The account directory's `idempotency_keys` table.
    Account(Arc<AccountService>),
}

impl Place {
    fn name(&self) -> String {
        match self {
            Place::Store { cell, .. } => format!("cell:{}", cell.name),
            Place::Account(_) => "account".to_string(),
        }
    }

    fn row_key(&self, scope: &[u8; 32]) -> Vec<u8> {
        match self {
            Place::Store { store, .. } => {
                let mut k = Key::store(*store).into_vec();
                k.extend_from_slice(scope);
                k
            }
            Place::Account(_) => scope.to_vec(),
        }
    }

    fn lookup(&self, scope: &[u8; 32], seal: &[u8; 32], now: i64) -> ApiResult<Option<Recorded>> {
        let key = self.row_key(scope);
        let value = match self {
            Place::Store { cell, .. } => {
                let txn = cell.read()?;
                let t = txn.open_table(IDEMPOTENCY.def)?;
                t.get(key.as_slice())?.map(|v| v.value().to_vec())
            }
            Place::Account(a) => {
                let txn = a.db.begin_read()?;
                let t = txn.open_table(IDEMPOTENCY_KEYS)?;
                t.get(key.as_slice())?.map(|v| v.value().to_vec())
            }
        };
        match value {
            Some(v) => Recorded::from_value(&v, now, seal),
            None => Ok(None),
        }
    }

    /// Writes a record durably (fsync'd before this returns).
    async fn save(&self, scope: &[u8; 32], value: Vec<u8>) -> ApiResult<()> {
        let key = self.row_key(scope);
        match self {
            Place::Store { cell, store } => cell.writer.write(Some(*store), move |tx| tx.put(IDEMPOTENCY, &key, &value)).await,
            Place::Account(a) => {
                a.writer
                    .write(None, move |tx| {
                        tx.raw().open_table(IDEMPOTENCY_KEYS)?.insert(key.as_slice(), value.as_slice())?;
                        Ok(())
                    })
                    .await
            }
        }
    }

    /// Deletes expired rows (at most [`SWEEP_BATCH`]); returns how many.
    async fn sweep(&self, now: i64) -> ApiResult<usize> {
        match self {
            Place::Store { cell, .. } => sweep_cell(cell, now).await,
            Place::Account(a) => {
                a.writer
                    .write(None, move |tx| {
                        let mut t = tx.raw().open_table(IDEMPOTENCY_KEYS)?;
                        let mut old = Vec::new();
                        for item in t.iter()? {
                            let (k, v) = item?;
                            if expired(v.value(), now) {
                                old.push(k.value().to_vec());
                                if old.len() >= SWEEP_BATCH {
                                    break;
                                }
                            }
                        }
                        for k in &old {
                            t.remove(k.as_slice())?;
                        }
                        Ok(old.len())
                    })
                    .await
            }
        }
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> ApiResult<T> + Send + 'static) -> ApiResult<T> {
    tokio::task::spawn_blocking(f).await.map_err(ApiError::internal)?
}

/// Finds the cell's expired rows with a read, then deletes them store by store through the
/// writer, each row checked again there (a fresh record may have replaced it meanwhile).
async fn sweep_cell(cell: &Arc<Cell>, now: i64) -> ApiResult<usize> {
    let reader = cell.clone();
    let old: Vec<Vec<u8>> = blocking(move || {
        let txn = reader.read()?;
        let t = txn.open_table(IDEMPOTENCY.def)?;
        let mut old = Vec::new();
        for item in t.iter()? {
            let (k, v) = item?;
            if expired(v.value(), now) {
                old.push(k.value().to_vec());
                if old.len() >= SWEEP_BATCH {
                    break;
                }
            }
        }
        Ok(old)
    })
    .await?;
    let mut by_store: HashMap<Uuid, Vec<Vec<u8>>> = HashMap::new();
    for k in old {
        if let Some(store) = k.get(..16).and_then(|b| Uuid::from_slice(b).ok()) {
            by_store.entry(store).or_default().push(k);
        }
    }
    let mut deleted = 0;
    for (store, keys) in by_store {
        // A store in the last step of a move refuses writes; its rows go with it and are swept there.
        if let Ok(n) = cell
            .writer
            .write(Some(store), move |tx| {
                let mut n = 0;
                for k in &keys {
                    if tx.get(IDEMPOTENCY, k)?.is_some_and(|v| expired(&v, now)) {
                        tx.delete(IDEMPOTENCY, k)?;
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

/// Checks the `Idempotency-Key` header: exactly one, 1..255 visible ASCII characters.
pub fn parse_key(headers: &HeaderMap) -> ApiResult<&str> {
    let invalid = || ApiError::field("Idempotency-Key", format!("must be 1 to {MAX_KEY_LEN} visible ASCII characters"));
    let mut values = headers.get_all(HEADER).iter();
    let (Some(v), None) = (values.next(), values.next()) else {
        return Err(ApiError::field("Idempotency-Key", "send the header once"));
    };
    let b = v.as_bytes();
    if b.is_empty() || b.len() > MAX_KEY_LEN || !b.iter().all(u8::is_ascii_graphic) {
        return Err(invalid());
    }
    v.to_str().map_err(|_| invalid())
}

/// Who is calling, for scoping keys: the signed-in user, else the shopper's publishable key,
/// else the client address.
fn caller(cx: &Ctx) -> String {
    match (&cx.principal, &cx.shopper) {
        (Some(p), _) => format!("user:{}", p.user_id),
        (None, Some(s)) => format!("key:{}", s.key_id),
        (None, None) => format!("addr:{}", cx.client.map(|a| a.to_string()).unwrap_or_default()),
    }
}

/// `sha256` over length-prefixed parts, so no two part lists hash alike by concatenation.
fn digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut c = Context::new(&SHA256);
    for p in parts {
        c.update(&(p.len() as u64).to_be_bytes());
        c.update(p);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(c.finish().as_ref());
    out
}

/// The answer to a repeated key: the recorded response, or 422 when the request differs.
fn replay(r: Recorded, fingerprint: &[u8; 32]) -> ApiResult<Resp> {
    if &r.fingerprint != fingerprint {
        return Err(ApiError::msg(
            Code::IDEMPOTENCY_KEY_REUSED,
            "this Idempotency-Key was already used with a different request; use a new key for a new request",
        ));
    }
    let mut resp = Response::new(Full::new(Bytes::from(r.body)));
    *resp.status_mut() = StatusCode::from_u16(r.status).map_err(ApiError::internal)?;
    let headers = resp.headers_mut();
    for (name, value) in r.headers {
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(name.as_bytes()), HeaderValue::from_bytes(&value)) {
            headers.append(n, v);
        }
    }
    headers.insert(REPLAYED, HeaderValue::from_static("true"));
    Ok(resp)
}

/// Runs `handler` under the request's `Idempotency-Key` (the dispatcher calls this for POST
/// requests that carry the header).
pub async fn run(cx: Ctx, handler: Handler<Ctx>) -> ApiResult<Resp> {
    let key = parse_key(&cx.headers)?;
    let place = match (&cx.store, &cx.node.account) {
        (Some(s), _) => Place::Store { cell: s.cell.clone(), store: s.id },
        (None, Some(a)) => Place::Account(a.clone()),
        // Nowhere to keep a record in this process (no such POST route exists today).
        (None, None) => return handler(cx).await,
    };
    let who = caller(&cx);
    let parts = [who.as_bytes(), cx.method.as_str().as_bytes(), cx.uri.path().as_bytes(), key.as_bytes()];
    let scope = digest(&parts);
    let seal = digest(&[b"seal".as_slice(), parts[0], parts[1], parts[2], parts[3]]);
    let query = cx.uri.query().unwrap_or("");
    let fingerprint = digest(&[query.as_bytes(), &cx.body]);
    let node = cx.node.clone();

    let pass = node.idempotency.enter(scope).await?;
    if let Some(r) = place.lookup(&scope, &seal, node.clock.now_ms())? {
        return replay(r, &fingerprint);
    }
    // Its own task: the operation and its record finish even if this request is dropped.
    let task = tokio::spawn(async move {
        let _pass = pass;
        let resp = handler(cx).await?;
        if resp.status().as_u16() >= 400 {
            return Ok(resp);
        }
        let (parts, body) = resp.into_parts();
        let body = body.collect().await.map(|c| c.to_bytes()).unwrap_or_default();
        let record = Recorded {
            fingerprint,
            status: parts.status.as_u16(),
            headers: parts.headers.iter().map(|(n, v)| (n.as_str().to_string(), v.as_bytes().to_vec())).collect(),
            body: body.to_vec(),
        };
        let now = node.clock.now_ms();
        // The operation is done: a record that cannot be written costs only the replay, so the
        // caller still gets its answer.
        match record.to_value(now, &seal) {
            Ok(value) => {
                if let Err(e) = place.save(&scope, value).await {
                    tracing::warn!(error = %e, "an idempotent response was not recorded");
                }
            }
            Err(e) => tracing::warn!(error = %e, "an idempotent response was not recorded"),
        }
        if node.idempotency.sweep_due(&place.name(), now) {
            tokio::spawn(async move {
                match place.sweep(now).await {
                    Ok(n) if n > 0 => tracing::debug!(deleted = n, "idempotency records swept"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "idempotency sweep failed"),
                }
            });
        }
        Ok(Response::from_parts(parts, Full::new(body)))
    });
    task.await.map_err(ApiError::internal)?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&[u8]]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(HEADER, HeaderValue::from_bytes(v).unwrap());
        }
        h
    }

    #[test]
    fn keys_are_one_to_255_visible_ascii_characters() {
        assert_eq!(parse_key(&headers(&[b"a"])).unwrap(), "a");
        let longest = "k".repeat(255);
        assert_eq!(parse_key(&headers(&[longest.as_bytes()])).unwrap(), longest);
        for bad in [&b""[..], "k".repeat(256).as_bytes(), b"with space", "caf\u{e9}".as_bytes(), b"tab\there"] {
            let e = parse_key(&headers(&[bad])).unwrap_err();
            assert_eq!(e.code, Code::VALIDATION_FAILED);
            assert_eq!(e.fields[0].field, "Idempotency-Key");
        }
        assert!(parse_key(&headers(&[b"a", b"b"])).is_err());
    }

    #[test]
    fn records_round_trip_and_expire_after_a_day() {
        let r = Recorded {
            fingerprint: [7; 32],
            status: 201,
            headers: vec![("content-type".into(), b"application/json".to_vec())],
            body: b"{}".to_vec(),
        };
        let v = r.to_value(1_000, &[3; 32]).unwrap();
        assert!(!v.windows(16).any(|w| w == b"application/json"), "the record is sealed");
        assert_eq!(Recorded::from_value(&v, 1_000 + TTL_MS - 1, &[3; 32]).unwrap(), Some(r));
        assert_eq!(Recorded::from_value(&v, 1_000 + TTL_MS, &[3; 32]).unwrap(), None);
        assert!(Recorded::from_value(&v, 1_000, &[4; 32]).is_err(), "another key does not open it");
        assert!(expired(b"short", 0));
    }

    #[test]
    fn parts_are_length_prefixed() {
        assert_ne!(digest(&[b"ab", b"c"]), digest(&[b"a", b"bc"]));
    }

    #[test]
    fn a_replay_of_another_request_is_refused() {
        let r = Recorded { fingerprint: [1; 32], status: 201, headers: vec![], body: b"{}".to_vec() };
        let e = replay(r.clone(), &[2; 32]).unwrap_err();
        assert_eq!((e.code, e.code.status()), (Code::IDEMPOTENCY_KEY_REUSED, 422));
        let ok = replay(r, &[1; 32]).unwrap();
        assert_eq!(ok.status(), StatusCode::CREATED);
        assert_eq!(ok.headers().get(REPLAYED).unwrap(), "true");
    }

    #[tokio::test]
    async fn a_second_request_waits_for_the_first_and_the_map_empties() {
        let i = Arc::new(Idempotency::default());
        let first = i.enter([9; 32]).await.unwrap();
        let i2 = i.clone();
        let second = tokio::spawn(async move { i2.enter([9; 32]).await.map(|_| ()) });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!second.is_finished());
        drop(first);
        second.await.unwrap().unwrap();
        assert_eq!(i.in_flight(), 0);

        // A wait given up half way gives its place back too.
        let held = i.enter([8; 32]).await.unwrap();
        let i3 = i.clone();
        let waiter = tokio::spawn(async move { i3.enter([8; 32]).await.map(|_| ()) });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        waiter.abort();
        let _ = waiter.await;
        drop(held);
        assert_eq!(i.in_flight(), 0);
    }
}
