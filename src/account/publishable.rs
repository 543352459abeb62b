//! Publishable keys: `pk_live_…` / `pk_test_…` identify a store to anonymous shoppers.
//!
//! A key is 32 base62 characters after its prefix (about 190 bits from the system's secure
//! generator). Only its SHA-256 digest is stored, so a copy of the directory reveals no usable
//! key; the full key is shown once, when it is created. Lookups on the storefront hot path are
//! one point read by digest.

use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, Instant};

use redb::{ReadableDatabase, ReadableTable, WriteTransaction};
use ring::digest::{SHA256, digest};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::account::AccountService;
use crate::account::model::Membership;
use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::codec::{decode, encode};
use crate::storage::tables::{MEMBERS, PUBLISHABLE_KEYS, STORE_DIRECTORY, STORE_PUBLISHABLE_KEYS};

/// The request header that carries a publishable key on storefront routes.
pub const KEY_HEADER: &str = "x-publishable-key";
/// Random characters after the prefix.
const SECRET_LEN: usize = 32;
const BASE62: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
/// Unrevoked keys a store may hold at once; more is a mistake or abuse, not a need.
pub const MAX_ACTIVE_KEYS: usize = 50;

/// Which environment a key serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Environment {
    Live,
    Test,
}

impl Environment {
    pub fn parse(s: &str) -> Option<Environment> {
        match s {
            "live" => Some(Environment::Live),
            "test" => Some(Environment::Test),
            _ => None,
        }
    }

    /// As requests name it and `S/publishable-keys` shows it: `live`, `test`.
    pub fn name(self) -> &'static str {
        match self {
            Environment::Live => "live",
            Environment::Test => "test",
        }
    }

    /// As the validation result shows it (spec §2): `LIVE`, `TEST`.
    pub fn upper(self) -> &'static str {
        match self {
            Environment::Live => "LIVE",
            Environment::Test => "TEST",
        }
    }

    pub fn prefix(self) -> &'static str {
        match self {
            Environment::Live => "pk_live_",
            Environment::Test => "pk_test_",
        }
    }
}

/// A stored key (`publishable_keys` table, by digest). The key itself is never stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PublishableKey {
    pub id: Uuid,
    pub store: Uuid,
    pub environment: Environment,
    /// The key's last four characters, for the masked form.
    pub last4: String,
    pub created_at: i64,
    pub created_by: Uuid,
    pub revoked_at: Option<i64>,
}

impl PublishableKey {
    /// `pk_live_…abcd`.
    pub fn masked(&self) -> String {
        format!("{}…{}", self.environment.prefix(), self.last4)
    }

    /// The key as `S/publishable-keys` lists it.
    pub fn view(&self) -> KeyView {
        KeyView {
            id: self.id,
            masked_key: self.masked(),
            environment: self.environment.name().into(),
            created_at: rfc3339(self.created_at),
            revoked_at: self.revoked_at.map(rfc3339),
        }
    }
}

/// A key as `GET S/publishable-keys` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyView {
    pub id: Uuid,
    pub masked_key: String,
    /// `live` or `test`.
    pub environment: String,
    pub created_at: String,
    pub revoked_at: Option<String>,
}

/// The answer of `POST S/publishable-keys`: the only time the full key is shown.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CreatedKey {
    pub id: Uuid,
    pub key: String,
    pub masked_key: String,
    pub environment: String,
    pub created_at: String,
}

/// `POST S/publishable-keys`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateKey {
    /// `live` or `test`.
    #[schemars(schema_with = "environment_schema")]
    pub environment: String,
}

fn environment_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    crate::domain::fields::one_of(&["live", "test"], "as `Environment::parse` reads it")
}

/// `POST /auth/publishable-keys/validate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidateKey {
    pub key: String,
}

/// What a valid, unrevoked key admits: a shopper of `store`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyGrant {
    pub id: Uuid,
    pub store_id: Uuid,
    pub environment: Environment,
}

/// A shopper admitted by a publishable key: on storefront routes, in place of a member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shopper {
    pub key_id: Uuid,
    pub environment: Environment,
}

/// A new random key of `env`.
pub fn generate(env: Environment) -> String {
    let mut out = String::with_capacity(8 + SECRET_LEN);
    out.push_str(env.prefix());
    let mut have = 0;
    while have < SECRET_LEN {
        // Rejection sampling keeps every character uniform: bytes 248..=255 would favour the
        // first eight symbols.
        for b in crate::util::random_bytes::<64>() {
            if b < 248 && have < SECRET_LEN {
                out.push(char::from(BASE62[usize::from(b % 62)]));
                have += 1;
            }
        }
    }
    out
}

/// The environment of a key of the right shape, `None` for anything else (never looked up).
pub fn well_formed(key: &str) -> Option<Environment> {
    let env = [Environment::Live, Environment::Test].into_iter().find(|e| key.starts_with(e.prefix()))?;
    let secret = &key[env.prefix().len()..];
    (secret.len() == SECRET_LEN && secret.bytes().all(|b| b.is_ascii_alphanumeric())).then_some(env)
}

/// The SHA-256 digest a key is stored under.
pub fn key_digest(key: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, key.as_bytes()).as_ref());
    out
}

/// The digest as lower-case hex (how a cell asks the account service about a key: the key
/// itself never travels between services).
pub fn digest_hex(d: &[u8; 32]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses [`digest_hex`] output.
pub fn parse_digest_hex(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// The one writer of a key row and its per-store index.
fn put_key(txn: &WriteTransaction, hash: &[u8; 32], k: &PublishableKey) -> ApiResult<()> {
    txn.open_table(PUBLISHABLE_KEYS)?.insert(hash.as_slice(), encode(k)?.as_slice())?;
    txn.open_table(STORE_PUBLISHABLE_KEYS)?.insert((k.store.as_u128(), k.id.as_u128()), hash.as_slice())?;
    Ok(())
}

/// Writes the keys of a store imported from another installation, digests as they were, so
/// the keys its storefronts embed admit to it here. A digest already known here is a 409 (the
/// same key cannot admit to two stores).
pub(crate) fn put_imported_keys(txn: &WriteTransaction, keys: &[([u8; 32], PublishableKey)]) -> ApiResult<()> {
    for (hash, k) in keys {
        if txn.open_table(PUBLISHABLE_KEYS)?.get(hash.as_slice())?.is_some() {
            return Err(ApiError::msg(Code::CONFLICT, format!("publishable key {} is already in use here", k.masked())));
        }
        put_key(txn, hash, k)?;
    }
    Ok(())
}

/// The acting member must still be an owner or admin of a store that exists.
fn require_admin(txn: &WriteTransaction, store: Uuid, actor: Uuid) -> ApiResult<()> {
    if txn.open_table(STORE_DIRECTORY)?.get(store.as_u128())?.is_none() {
        return Err(ApiError::not_found());
    }
    let m: Option<Membership> =
        txn.open_table(MEMBERS)?.get((store.as_u128(), actor.as_u128()))?.map(|v| decode(v.value())).transpose()?;
    match m.map(|m| m.role) {
        None => Err(ApiError::not_found()),
        Some(r) if !r.is_admin() => Err(ApiError::new(Code::FORBIDDEN)),
        Some(_) => Ok(()),
    }
}

impl AccountService {
    /// Creates a key; the answer holds the full key, which is never shown again.
    pub async fn create_publishable_key(&self, store: Uuid, actor: Uuid, body: CreateKey) -> ApiResult<CreatedKey> {
        let env = Environment::parse(&body.environment).ok_or_else(|| ApiError::field("environment", "must be live or test"))?;
        let key = generate(env);
        let hash = key_digest(&key);
        let record = PublishableKey {
            id: self.clock.new_id(),
            store,
            environment: env,
            last4: key[key.len() - 4..].to_string(),
            created_at: self.clock.now_ms(),
            created_by: actor,
            revoked_at: None,
        };
        let r = record.clone();
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                require_admin(txn, store, actor)?;
                let active = store_keys(&txn.open_table(STORE_PUBLISHABLE_KEYS)?, &txn.open_table(PUBLISHABLE_KEYS)?, store)?
                    .iter()
                    .filter(|k| k.revoked_at.is_none())
                    .count();
                if active >= MAX_ACTIVE_KEYS {
                    return Err(ApiError::msg(
                        Code::BUSINESS_RULE,
                        format!("a store holds at most {MAX_ACTIVE_KEYS} active publishable keys; revoke one first"),
                    ));
                }
                put_key(txn, &hash, &r)
            })
            .await?;
        let v = record.view();
        Ok(CreatedKey { id: v.id, key, masked_key: v.masked_key, environment: v.environment, created_at: v.created_at })
    }

    /// Every key of a store, revoked ones included, oldest first.
    pub fn publishable_keys(&self, store: Uuid) -> ApiResult<Vec<PublishableKey>> {
        let txn = self.db.begin_read()?;
        if txn.open_table(STORE_DIRECTORY)?.get(store.as_u128())?.is_none() {
            return Err(ApiError::not_found());
        }
        store_keys(&txn.open_table(STORE_PUBLISHABLE_KEYS)?, &txn.open_table(PUBLISHABLE_KEYS)?, store)
    }

    /// Every key of a store with its digest, revoked ones included (a portable export).
    pub fn publishable_key_digests(&self, store: Uuid) -> ApiResult<Vec<([u8; 32], PublishableKey)>> {
        let txn = self.db.begin_read()?;
        let index = txn.open_table(STORE_PUBLISHABLE_KEYS)?;
        let keys = txn.open_table(PUBLISHABLE_KEYS)?;
        let mut out = Vec::new();
        for item in index.range((store.as_u128(), 0)..=(store.as_u128(), u128::MAX))? {
            let (_, hash) = item?;
            let hash: [u8; 32] = hash.value().try_into().map_err(|_| ApiError::internal("a key digest is not 32 bytes"))?;
            if let Some(v) = keys.get(hash.as_slice())? {
                out.push((hash, decode(v.value())?));
            }
        }
        Ok(out)
    }

    /// Revokes a key: it stops admitting shoppers at once here, within seconds in other cells.
    /// Revoking a revoked key is accepted and keeps the first revocation time.
    pub async fn revoke_publishable_key(&self, store: Uuid, actor: Uuid, key_id: Uuid) -> ApiResult<()> {
        let now = self.clock.now_ms();
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                require_admin(txn, store, actor)?;
                let hash: Option<[u8; 32]> = txn
                    .open_table(STORE_PUBLISHABLE_KEYS)?
                    .get((store.as_u128(), key_id.as_u128()))?
                    .and_then(|v| v.value().try_into().ok());
                let hash = hash.ok_or_else(ApiError::not_found)?;
                let k: Option<PublishableKey> =
                    txn.open_table(PUBLISHABLE_KEYS)?.get(hash.as_slice())?.map(|v| decode(v.value())).transpose()?;
                let mut k = k.ok_or_else(|| ApiError::internal("publishable key index without its row"))?;
                if k.revoked_at.is_some() {
                    return Ok(());
                }
                k.revoked_at = Some(now);
                put_key(txn, &hash, &k)
            })
            .await
    }

    /// The store a valid, unrevoked key admits to; `None` for unknown and revoked keys.
    pub fn resolve_publishable_key(&self, hash: &[u8; 32]) -> ApiResult<Option<KeyGrant>> {
        let txn = self.db.begin_read()?;
        let t = txn.open_table(PUBLISHABLE_KEYS)?;
        let Some(v) = t.get(hash.as_slice())? else { return Ok(None) };
        let k: PublishableKey = decode(v.value())?;
        // A closed store's keys stay stored (a reopened store's shoppers keep theirs) but admit no one.
        let open = txn.open_table(STORE_DIRECTORY)?.get(k.store.as_u128())?.is_some();
        Ok((open && k.revoked_at.is_none()).then_some(KeyGrant { id: k.id, store_id: k.store, environment: k.environment }))
    }
}

fn store_keys<I, K>(index: &I, keys: &K, store: Uuid) -> ApiResult<Vec<PublishableKey>>
where
    I: ReadableTable<(u128, u128), &'static [u8]>,
    K: ReadableTable<&'static [u8], &'static [u8]>,
{
    let mut out = Vec::new();
    for item in index.range((store.as_u128(), 0)..=(store.as_u128(), u128::MAX))? {
        let (_, hash) = item?;
        if let Some(v) = keys.get(hash.value())? {
            out.push(decode(v.value())?);
        }
    }
    Ok(out)
}

/// How long a cell trusts an answer about a key from a remote account service: a revoked key
/// stops working in every cell within this time.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(2);

/// A cell's short-lived memory of key lookups (negative answers too, so a flood of bad keys
/// costs the account service one call per key per TTL).
#[derive(Default)]
pub struct KeyCache(RwLock<HashMap<[u8; 32], CachedKey>>);

/// A lookup answer and when it was asked.
type CachedKey = (Option<KeyGrant>, Instant);

impl KeyCache {
    pub fn get(&self, hash: &[u8; 32]) -> Option<Option<KeyGrant>> {
        let c = self.0.read().ok()?;
        let (grant, at) = c.get(hash)?;
        (at.elapsed() < KEY_CACHE_TTL).then_some(*grant)
    }

    pub fn put(&self, hash: [u8; 32], grant: Option<KeyGrant>) {
        if let Ok(mut c) = self.0.write() {
            if c.len() > 100_000 {
                c.clear();
            }
            c.insert(hash, (grant, Instant::now()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_are_well_formed_and_distinct() {
        let a = generate(Environment::Live);
        let b = generate(Environment::Live);
        assert!(a.starts_with("pk_live_") && a.len() == 8 + SECRET_LEN);
        assert_ne!(a, b);
        assert_eq!(well_formed(&a), Some(Environment::Live));
        assert_eq!(well_formed(&generate(Environment::Test)), Some(Environment::Test));
        for bad in ["", "pk_live_", "pk_prod_abc", &a[..a.len() - 1], &format!("{a}x"), &format!("{}-", &a[..a.len() - 1])] {
            assert_eq!(well_formed(bad), None, "{bad}");
        }
    }

    #[test]
    fn digests_round_trip_through_hex() {
        let d = key_digest("pk_test_x");
        assert_eq!(parse_digest_hex(&digest_hex(&d)), Some(d));
        assert_eq!(parse_digest_hex("zz"), None);
    }
}
