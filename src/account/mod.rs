//! The account service: users, credentials, sessions, tokens, and the store directory (which
//! cell holds which store, and who is a member with which role).

mod admission;
pub mod closing;
pub mod directory;
pub mod invitations;
pub mod jobs;
pub mod keys;
pub mod links;
pub mod members;
pub mod membership;
pub mod mfa;
mod migrations;
pub mod model;
pub mod oidc;
pub mod passwords;
pub mod plans;
pub mod portable;
pub mod provisioning;
pub mod publishable;
pub mod sessions;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use argon2::{Argon2, PasswordHash, PasswordHasher, PasswordVerifier};
use redb::{Database, ReadableDatabase, ReadableTable};
use uuid::Uuid;

pub use admission::Admission;
use model::*;

use crate::account::keys::SigningKey;
use crate::clock::Clock;
use crate::domain::role::Role;
use crate::error::{ApiError, ApiResult, Code};
use crate::http::auth::{ACCESS_TTL_SECS, AUDIENCE, Claims, ISSUER};
use crate::memory::AccountShares;
use crate::storage::codec::{decode, encode};
use crate::storage::tables::*;
use crate::storage::writer::{Writer, WriterThread};
use crate::storage::{self, DbKind};

/// The account directory's database: its tables and format steps.
pub const DATABASE: DbKind = DbKind { name: "account", steps: migrations::STEPS, tables: storage::tables::account_tables };

/// Refresh tokens live 30 days; each use rotates them.
pub const REFRESH_TTL_SECS: i64 = 30 * 24 * 3600;

pub struct AccountService {
    pub db: Arc<Database>,
    pub(crate) writer: Writer,
    thread: Mutex<Option<WriterThread>>,
    /// The account service's mail (resets, notices, invitations), sent by its job runner.
    pub mailer: crate::mail::Mailer,
    /// The runner of the directory's jobs, once started ([`AccountService::start_jobs`]).
    pub jobs: crate::jobs::runner::RunnerSlot,
    pub key: SigningKey,
    pub service_key: String,
    /// A real hash verified when an email is unknown, so failures take the same time.
    dummy_hash: String,
    /// When each session's `lastActive` was last written (see [`AccountService::touch`]).
    touched: Mutex<HashMap<Uuid, i64>>,
    /// Social sign-in: providers, their keys, the HTTP client.
    pub social: oidc::Social,
    /// The platform plan catalogue (built in, or from `--plans`).
    plans: Arc<plans::Catalogue>,
    /// Recent answers of [`AccountService::admission`].
    admissions: admission::Admissions,
    /// The process's clock: record times, new ids, token issue and expiry, what has expired.
    pub clock: Clock,
    /// The shares of the memory budget its caches keep within.
    memory: AccountShares,
    /// `account.redb`, whose size bounds what redb's cache of it can hold.
    file: std::path::PathBuf,
    /// The base of links in mail (`--public-url`, else the URL the process listens on).
    public_url: OnceLock<String>,
    /// Whether anyone may create an account (`--signup`).
    pub signup: provisioning::Signup,
    /// How long a spent refresh token still gets the pair its rotation issued (`--refresh-grace`).
    pub refresh_grace: std::time::Duration,
}

impl AccountService {
    /// Every cache of the directory with its share and what it holds, for `/metrics`.
    pub fn caches(&self) -> Vec<(&'static str, crate::memory::CacheStats)> {
        vec![("redb", crate::memory::redb_stats(&self.file, self.memory.redb)), ("admissions", self.admissions.meter.stats())]
    }
}

impl AccountService {
    /// Opens the directory in `dir` (`account.redb`, the signing key, the service key); every
    /// "now" of the service is read from `clock`.
    /// Its caches keep within `memory`.
    pub fn open(
        dir: &Path,
        clock: Clock,
        memory: &AccountShares,
    ) -> Result<AccountService, Box<dyn std::error::Error + Send + Sync>> {
        std::fs::create_dir_all(dir)?;
        let storage::Opened { db, syncs, .. } = storage::open_with(&dir.join("account.redb"), DATABASE, memory.redb)?;
        let db = Arc::new(db);
        // The directory keeps no product rows and no list orders: its writer caches nothing.
        let budgets = storage::writer::Budgets::default();
        let (writer, thread) = Writer::start_after(db.clone(), Some(syncs), "account", budgets, None)?;
        let key = SigningKey::load_or_create(dir)?;
        let service_key = keys::load_or_create_service_key(dir)?;
        let dummy_hash = hash_password("shopcell-timing-equalizer")?;
        Ok(AccountService {
            db,
            writer,
            thread: Mutex::new(Some(thread)),
            mailer: crate::mail::Mailer::offline(&dir.join("mail"))?,
            jobs: Default::default(),
            key,
            service_key,
            dummy_hash,
            touched: Mutex::new(HashMap::new()),
            social: oidc::Social::default(),
            plans: Arc::new(plans::Catalogue::default()),
            admissions: admission::Admissions::new(memory.entries),
            memory: *memory,
            file: dir.join("account.redb"),
            clock,
            public_url: OnceLock::new(),
            signup: provisioning::Signup::Open,
            refresh_grace: sessions::DEFAULT_REFRESH_GRACE,
        })
    }

    /// The account directory (`account.redb`, the keys).
    pub fn dir(&self) -> std::path::PathBuf {
        self.file.parent().map(std::path::Path::to_path_buf).unwrap_or_default()
    }

    /// Replaces the built-in plan catalogue (the `--plans` file).
    pub fn with_plans(mut self, catalogue: plans::Catalogue) -> Self {
        self.plans = Arc::new(catalogue);
        self
    }

    /// Links in mail start with `url` (`--public-url`, checked by the command line).
    pub fn with_public_url(self, url: Option<&str>) -> Self {
        if let Some(u) = url {
            self.default_public_url(u);
        }
        self
    }

    /// Sends mail through `mailer` (built from the operator's flags).
    pub fn with_mailer(mut self, mailer: crate::mail::Mailer) -> Self {
        self.mailer = mailer;
        self
    }

    /// Starts running the directory's jobs (its mail).
    pub fn start_jobs(&self) -> std::io::Result<()> {
        let handler = std::sync::Arc::new(jobs::DirectoryJobs { mailer: self.mailer.clone() });
        let runner =
            crate::jobs::runner::Runner::start(self.db.clone(), self.writer.clone(), self.clock.clone(), handler, "account")?;
        self.jobs.set(runner);
        Ok(())
    }

    /// Waits until every queued write is committed (shutdown).
    pub fn close(&self) {
        // Before the writer: the runs under way record their outcomes through it.
        self.jobs.stop();
        self.writer.stop();
        if let Some(t) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            t.join();
        }
    }

    // ---- credentials and sessions -----------------------------------------------------------

    pub async fn register(&self, r: Register, device: String) -> ApiResult<(User, String, String)> {
        self.signup.check()?;
        let user = self.new_user(r).await?;
        let session = new_session(user.id, device, &self.clock);
        let (u, s) = (user.clone(), session.clone());
        self.writer
            .write(None, move |tx| {
                put_new_user(tx.raw(), &u)?;
                put_session(tx.raw(), &s)?;
                Ok(())
            })
            .await?;
        self.note_touched(session.id, session.last_active);
        let (access, refresh) = self.issue(&session)?;
        Ok((user, access, refresh))
    }

    /// A user as registration makes one, not yet written: the rules checked, the password
    /// hashed off the async workers.
    pub(crate) async fn new_user(&self, r: Register) -> ApiResult<User> {
        validate_register(&r)?;
        let Register { email, password, name } = r;
        let hash = tokio::task::spawn_blocking(move || hash_password(&password))
            .await
            .map_err(ApiError::internal)?
            .map_err(ApiError::internal)?;
        let now = self.clock.now_ms();
        Ok(User {
            id: self.clock.new_id(),
            email: normalize_email(&email),
            name: name.trim().to_string(),
            password_hash: hash,
            created_at: now,
            updated_at: now,
        })
    }

    /// Checks a password; answers tokens, or an MFA challenge when the user has MFA on.
    pub async fn login(&self, l: Login, device: String) -> ApiResult<sessions::LoginOutcome> {
        let email = normalize_email(&l.email);
        let user = self.user_by_email(&email)?;
        // Users without a password (created by social sign-in) are checked against the dummy
        // hash too, so their failures take as long as everyone's.
        let hash =
            user.as_ref().map(|u| u.password_hash.clone()).filter(|h| !h.is_empty()).unwrap_or_else(|| self.dummy_hash.clone());
        let password = l.password;
        let ok = tokio::task::spawn_blocking(move || verify_password(&password, &hash)).await.map_err(ApiError::internal)?;
        let user = match user {
            Some(u) if ok && !u.password_hash.is_empty() => u,
            _ => return Err(ApiError::new(Code::INVALID_CREDENTIALS)),
        };
        self.complete_login(user, device).await
    }

    /// A new (access, refresh) pair of `s`, issued now.
    fn issue(&self, s: &Session) -> ApiResult<(String, String)> {
        self.sign_pair(s, self.clock.now_secs(), self.clock.new_id())
    }

    /// The pair of `s` issued at `now` (Unix seconds) with the access token's `jti`: the same
    /// arguments give the same two strings (see [`Rotation`]).
    fn sign_pair(&self, s: &Session, now: i64, access_jti: Uuid) -> ApiResult<(String, String)> {
        let claims = |typ: &str, ttl: i64, jti: Uuid| Claims {
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            sub: s.user_id.to_string(),
            sid: s.id.to_string(),
            iat: now,
            nbf: None,
            exp: now + ttl,
            jti: jti.to_string(),
            typ: typ.into(),
        };
        let access = self.key.sign(&claims("access", ACCESS_TTL_SECS, access_jti)).map_err(ApiError::internal)?;
        let refresh = self.key.sign(&claims("refresh", REFRESH_TTL_SECS, s.refresh_jti)).map_err(ApiError::internal)?;
        Ok((access, refresh))
    }

    pub fn user(&self, id: Uuid) -> ApiResult<Option<User>> {
        let txn = self.db.begin_read()?;
        let t = txn.open_table(USERS)?;
        t.get(id.as_u128())?.map(|v| decode(v.value())).transpose()
    }

    /// The user whose (normalized) email this is.
    pub fn user_by_email(&self, email: &str) -> ApiResult<Option<User>> {
        let txn = self.db.begin_read()?;
        let Some(id) = txn.open_table(USER_EMAILS)?.get(email)?.map(|v| v.value()) else { return Ok(None) };
        txn.open_table(USERS)?.get(id)?.map(|v| decode(v.value())).transpose()
    }

    /// Whether a session exists and is not revoked (checked on every authenticated request).
    pub fn session_active(&self, sid: Uuid) -> ApiResult<bool> {
        let txn = self.db.begin_read()?;
        let t = txn.open_table(SESSIONS)?;
        let Some(v) = t.get(sid.as_u128())? else { return Ok(false) };
        let s: Session = decode(v.value())?;
        Ok(s.revoked_at.is_none())
    }

    /// Everything the dispatcher checks before a store route, from one read transaction: whether
    /// the session is live and, when it is and a store is named, the caller's role there and the
    /// cell holding the store (`None` when the store is not in the directory).
    ///
    /// Answers are kept while the directory is unchanged (every account commit moves its write
    /// generation on, read here before the snapshot), so a revocation, a role change or a store
    /// move is seen by the very next request.
    pub fn admission(&self, sid: Uuid, user: Uuid, store: Option<Uuid>) -> ApiResult<Admission> {
        let generation = self.writer.generations.global();
        let key = (sid, user, store);
        if let Some(found) = self.admissions.get(&key, generation) {
            return Ok(found);
        }
        let found = self.admission_read(sid, user, store)?;
        self.admissions.put(key, generation, found.clone());
        Ok(found)
    }

    fn admission_read(&self, sid: Uuid, user: Uuid, store: Option<Uuid>) -> ApiResult<Admission> {
        let txn = self.db.begin_read()?;
        let active = match txn.open_table(SESSIONS)?.get(sid.as_u128())? {
            Some(v) => decode::<Session>(v.value())?.revoked_at.is_none(),
            None => false,
        };
        let Some(store) = store.filter(|_| active) else { return Ok((active, None, None)) };
        let members = txn.open_table(MEMBERS)?;
        let m: Option<Membership> = members.get((store.as_u128(), user.as_u128()))?.map(|v| decode(v.value())).transpose()?;
        let entry: Option<StoreEntry> =
            txn.open_table(STORE_DIRECTORY)?.get(store.as_u128())?.map(|v| decode(v.value())).transpose()?;
        // A store out of the directory (closed) admits no one, whatever membership is left.
        let Some(entry) = entry else { return Ok((active, None, None)) };
        Ok((active, m.map(|m| m.role), Some(entry.cell)))
    }

    // ---- the store directory ----------------------------------------------------------------

    /// The cell holding a store.
    pub fn locate(&self, store: Uuid) -> ApiResult<Option<String>> {
        Ok(self.store_entry(store)?.map(|e| e.cell))
    }

    pub fn store_entry(&self, store: Uuid) -> ApiResult<Option<StoreEntry>> {
        let txn = self.db.begin_read()?;
        let t = txn.open_table(STORE_DIRECTORY)?;
        t.get(store.as_u128())?.map(|v| decode(v.value())).transpose()
    }

    /// The role of a user in a store, `None` for non-members.
    pub fn role(&self, store: Uuid, user: Uuid) -> ApiResult<Option<Role>> {
        let txn = self.db.begin_read()?;
        let t = txn.open_table(MEMBERS)?;
        let m: Option<Membership> = t.get((store.as_u128(), user.as_u128()))?.map(|v| decode(v.value())).transpose()?;
        Ok(m.map(|m| m.role))
    }

    /// The stores a user is a member of, with the role.
    pub fn stores_of(&self, user: Uuid) -> ApiResult<Vec<(StoreEntry, Role)>> {
        let txn = self.db.begin_read()?;
        let links = txn.open_table(USER_STORES)?;
        let dir = txn.open_table(STORE_DIRECTORY)?;
        let members = txn.open_table(MEMBERS)?;
        let mut out = Vec::new();
        for item in links.range((user.as_u128(), 0)..=(user.as_u128(), u128::MAX))? {
            let (k, _) = item?;
            let store = k.value().1;
            let (Some(e), Some(m)) = (dir.get(store)?, members.get((store, user.as_u128()))?) else { continue };
            let m: Membership = decode(m.value())?;
            out.push((decode(e.value())?, m.role));
        }
        Ok(out)
    }

    /// The cell with the fewest stores among `cells` (ties: the first by name).
    pub fn pick_cell(&self, cells: &[String]) -> ApiResult<String> {
        let txn = self.db.begin_read()?;
        let load = txn.open_table(CELL_LOAD)?;
        let mut best: Option<(u64, &String)> = None;
        for c in cells {
            let n = load.get(c.as_str())?.map(|v| v.value()).unwrap_or(0);
            if best.is_none_or(|(b, bn)| n < b || (n == b && c < bn)) {
                best = Some((n, c));
            }
        }
        best.map(|(_, c)| c.clone()).ok_or_else(|| ApiError::msg(Code::UNAVAILABLE, "no cell is configured"))
    }

    /// Records a new store: directory entry, owner membership, cell load. The owner's plan
    /// limit is checked again here, under the writer, so concurrent creations cannot pass it.
    pub async fn add_store(&self, entry: StoreEntry) -> ApiResult<()> {
        let catalogue = self.plans.clone();
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                let now = entry.created_at;
                plans::ensure_room(txn, &catalogue, entry.owner_id, now, "you own")?;
                txn.open_table(STORE_DIRECTORY)?.insert(entry.id.as_u128(), encode(&entry)?.as_slice())?;
                let m = Membership { role: Role::Owner, added_at: now };
                membership::put_membership(txn, entry.id, entry.owner_id, Some(&m))?;
                count_in_cell(txn, &entry.cell, 1)
            })
            .await
    }

    /// Keeps the directory's copy of a store name in step with the cell's settings.
    pub async fn rename_store(&self, store: Uuid, name: String) -> ApiResult<()> {
        self.writer
            .write(None, move |tx| {
                let mut dir = tx.raw().open_table(STORE_DIRECTORY)?;
                let Some(v) = dir.get(store.as_u128())? else { return Err(ApiError::not_found()) };
                let mut e: StoreEntry = decode(v.value())?;
                drop(v);
                e.name = name.clone();
                dir.insert(store.as_u128(), encode(&e)?.as_slice())?;
                Ok(())
            })
            .await
    }

    /// Points a store at another cell (the flip of a store move).
    pub async fn place_store(&self, store: Uuid, cell: String) -> ApiResult<()> {
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                let mut dir = txn.open_table(STORE_DIRECTORY)?;
                let Some(v) = dir.get(store.as_u128())? else { return Err(ApiError::not_found()) };
                let mut e: StoreEntry = decode(v.value())?;
                drop(v);
                let from = std::mem::replace(&mut e.cell, cell.clone());
                dir.insert(store.as_u128(), encode(&e)?.as_slice())?;
                count_in_cell(txn, &from, -1)?;
                count_in_cell(txn, &cell, 1)
            })
            .await
    }
}

/// Moves a cell's count of stores (placement picks the emptiest) by `by`, never below zero.
pub(crate) fn count_in_cell(txn: &redb::WriteTransaction, cell: &str, by: i64) -> ApiResult<()> {
    let mut load = txn.open_table(CELL_LOAD)?;
    let n = load.get(cell)?.map(|v| v.value()).unwrap_or(0);
    load.insert(cell, n.saturating_add_signed(by))?;
    Ok(())
}

/// A new session of `user_id`, started now by `clock`.
fn new_session(user_id: Uuid, device: String, clock: &Clock) -> Session {
    let now = clock.now_ms();
    Session {
        id: clock.new_id(),
        user_id,
        device,
        created_at: now,
        last_active: now,
        refresh_jti: clock.new_id(),
        revoked_at: None,
        rotated: None,
    }
}

/// Writes a new user and their email's row; an email some account already uses is 409
/// `EMAIL_TAKEN` (checked here, under the writer, so two sign-ups of one email cannot both win).
fn put_new_user(txn: &redb::WriteTransaction, u: &User) -> ApiResult<()> {
    let mut emails = txn.open_table(USER_EMAILS)?;
    if emails.get(u.email.as_str())?.is_some() {
        return Err(ApiError::new(Code::EMAIL_TAKEN));
    }
    emails.insert(u.email.as_str(), u.id.as_u128())?;
    txn.open_table(USERS)?.insert(u.id.as_u128(), encode(u)?.as_slice())?;
    Ok(())
}

fn put_session(txn: &redb::WriteTransaction, s: &Session) -> ApiResult<()> {
    txn.open_table(SESSIONS)?.insert(s.id.as_u128(), encode(s)?.as_slice())?;
    txn.open_table(USER_SESSIONS)?.insert((s.user_id.as_u128(), s.id.as_u128()), ())?;
    Ok(())
}

fn parse_uuid(s: &str) -> ApiResult<Uuid> {
    Uuid::parse_str(s).map_err(|_| ApiError::new(Code::INVALID_TOKEN))
}

/// Hashes a password with argon2id (default parameters: m=19456 KiB, t=2, p=1). Blocking: call
/// it off the async workers.
pub fn hash_password(password: &str) -> Result<String, argon2::password_hash::Error> {
    let salt = crate::util::random_bytes::<16>();
    let hash: PasswordHash = Argon2::default().hash_password_with_salt(password.as_bytes(), &salt)?;
    Ok(hash.to_string())
}

/// Verifies a password against its PHC hash. Blocking.
pub fn verify_password(password: &str, hash: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
}
