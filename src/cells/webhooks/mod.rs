//! Webhook subscriptions of a store and their delivery log. A subscription names topics and a
//! URL; its sender (a job, [`send`]) walks the store's events from the subscription's cursor and
//! POSTs each one of its topics, signed, one in flight, in event order. A failed first attempt
//! leaves a retry job on the schedule of API.md without holding later events back.

pub mod notice;
pub mod send;

use redb::ReadableTable;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::events::{self, Event};
use crate::domain::time::rfc3339;
use crate::domain::webhook::{self, CreateWebhook, MAX_PER_STORE, MAX_URL, UpdateWebhook};
use crate::error::{ApiError, ApiResult, Check, Code};
use crate::jobs;
use crate::storage::keys::Key;
use crate::storage::record::{self, Filter, FilterValue, List, Record, Sort};
use crate::storage::tables::{DELIVERIES, DELIVERY_ORDER, EVENTS, StoreTable, WEBHOOK_ORDER, WEBHOOKS};
use crate::storage::tx::Tx;

/// A subscription.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Webhook {
    pub id: Uuid,
    pub url: String,
    pub topics: Vec<String>,
    pub secret: String,
    pub enabled: bool,
    /// Why it was disabled: by its owner, a 410 answer, or five days of failures.
    pub disabled_reason: Option<String>,
    /// The last event its sender has looked at; `None`: none after `start_after`.
    pub cursor: Option<Uuid>,
    /// The last event of the store when it was made: it receives the events after it, and
    /// re-enabling walks again from here (skipping what was delivered).
    pub start_after: Option<Uuid>,
    /// When its deliveries started failing without a success since.
    pub failing_since: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Record for Webhook {
    const TABLE: StoreTable = WEBHOOKS;
    const NAME: &'static str = "webhooks";
    const LIST: List<Self> =
        List::sorted(WEBHOOK_ORDER, &[Sort { name: "created_at", tag: 0, key: |w, k| k.i64(w.created_at) }], "created_at");

    fn id(&self) -> Uuid {
        self.id
    }
}

/// What became of a delivery.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum DeliveryStatus {
    /// Not delivered yet: a retry is due, or the subscription is disabled.
    Pending,
    Succeeded,
    /// Every attempt failed.
    Failed,
}

impl crate::domain::Enumerated for DeliveryStatus {
    const NAMES: &'static [&'static str] = &["PENDING", "SUCCEEDED", "FAILED"];
    fn name(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "PENDING",
            DeliveryStatus::Succeeded => "SUCCEEDED",
            DeliveryStatus::Failed => "FAILED",
        }
    }
}

/// One attempt to deliver.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Attempt {
    pub at: i64,
    pub status: Option<u16>,
    pub duration_ms: u64,
    pub error: Option<String>,
    pub response: String,
}

/// An attempt as the log shows it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttemptView {
    /// When it was sent.
    pub at: String,
    /// The receiver's status; absent when no answer came.
    pub status: Option<u16>,
    pub duration_ms: u64,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// The first 1 KiB of the receiver's answer.
    pub response: String,
}

/// An event sent to one subscription, with its attempts. Its id is the event's: the
/// `webhook-id` of every attempt.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Delivery {
    pub id: Uuid,
    pub webhook_id: Uuid,
    pub topic: String,
    pub status: DeliveryStatus,
    pub attempts: Vec<Attempt>,
    pub next_retry: Option<i64>,
    /// The body of a test delivery, which has no stored event.
    pub body: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Record for Delivery {
    const TABLE: StoreTable = DELIVERIES;
    const NAME: &'static str = "deliveries";
    const LIST: List<Self> = List {
        order: Some(DELIVERY_ORDER),
        sorts: &[Sort { name: "created_at", tag: 0, key: |d, k| k.i64(d.created_at) }],
        default_sort: "created_at",
        summaries: "created_at",
        own_order: false,
        filters: &[Filter::enumerated::<DeliveryStatus>(
            "status",
            |d| Some(FilterValue::Enum(crate::domain::Enumerated::name(d.status))),
            "Only deliveries in these states",
        )],
        ranges: &[],
        search: None,
    };

    fn id(&self) -> Uuid {
        self.id
    }

    fn scope(&self) -> Option<Uuid> {
        Some(self.webhook_id)
    }
}

/// A subscription as the API shows it; the secret only when it is made.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookView {
    pub id: Uuid,
    pub url: String,
    pub topics: Vec<String>,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub failing_since: Option<String>,
    /// `whsec_…`: shown once, when the subscription is made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl Webhook {
    pub fn view(&self, with_secret: bool) -> WebhookView {
        WebhookView {
            id: self.id,
            url: self.url.clone(),
            topics: self.topics.clone(),
            enabled: self.enabled,
            disabled_reason: self.disabled_reason.clone(),
            failing_since: self.failing_since.map(rfc3339),
            secret: with_secret.then(|| self.secret.clone()),
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }
}

/// A delivery as the log shows it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryView {
    /// The event's id, and the `webhook-id` of every attempt.
    pub id: Uuid,
    pub webhook_id: Uuid,
    pub topic: String,
    pub status: DeliveryStatus,
    pub attempts: Vec<AttemptView>,
    pub next_retry: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl Delivery {
    pub fn view(&self) -> DeliveryView {
        DeliveryView {
            id: self.id,
            webhook_id: self.webhook_id,
            topic: self.topic.clone(),
            status: self.status,
            attempts: self
                .attempts
                .iter()
                .map(|a| AttemptView {
                    at: rfc3339(a.at),
                    status: a.status,
                    duration_ms: a.duration_ms,
                    error: a.error.clone(),
                    response: a.response.clone(),
                })
                .collect(),
            next_retry: self.next_retry.map(rfc3339),
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }
}

/// The sending job of a subscription: one per subscription, poked when events arrive.
pub fn sender_id(webhook: Uuid) -> Uuid {
    jobs::derived_id(send::SEND.name, webhook)
}

/// The retry job of one delivery.
pub fn retry_id(webhook: Uuid, event: Uuid) -> Uuid {
    jobs::derived_id(send::RETRY.name, Uuid::from_u128(webhook.as_u128() ^ event.as_u128().rotate_left(64)))
}

/// The last event of `store`, inside a write.
fn last_event(tx: &Tx, store: Uuid) -> ApiResult<Option<Uuid>> {
    let prefix = Key::store(store).into_vec();
    let range = crate::storage::keys::prefix_range(&prefix);
    let end = range.1.as_deref().map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
    let last = tx.with_table(EVENTS, |t| {
        let mut r = t.range::<&[u8]>((std::ops::Bound::Included(range.0.as_slice()), end))?;
        Ok(r.next_back().transpose()?.map(|(k, _)| k.value().to_vec()))
    })?;
    Ok(last.as_deref().and_then(crate::storage::keys::trailing_id))
}

/// Checks a subscription's URL: its length and form here, then the outbound client's rules
/// (scheme, credentials, where it resolves), each a 400 naming `url`.
async fn check_url(cell: &Cell, url: &str) -> ApiResult<String> {
    let url = url.trim();
    if url.is_empty() || url.len() > MAX_URL {
        return Err(ApiError::field("url", format!("must be 1 to {MAX_URL} characters")));
    }
    cell.outbound.check_url(url).await.map_err(|e| ApiError::field("url", e.to_string()))?;
    Ok(url.to_string())
}

pub async fn create(cell: &Cell, store: Uuid, input: CreateWebhook) -> ApiResult<Webhook> {
    let mut c = Check::new();
    let topics = webhook::check_topics(&mut c, &input.topics, events::TOPIC_NAMES);
    c.finish()?;
    let url = check_url(cell, &input.url).await?;
    let now = cell.clock.now_ms();
    let w = Webhook {
        id: cell.clock.new_id(),
        url,
        topics,
        secret: webhook::new_secret()?,
        enabled: true,
        disabled_reason: None,
        cursor: None,
        start_after: None,
        failing_since: None,
        created_at: now,
        updated_at: now,
    };
    cell.writer
        .write(Some(store), move |tx| {
            if record::count::<Webhook>(tx, store, None)? >= MAX_PER_STORE {
                return Err(ApiError::msg(
                    Code::BUSINESS_RULE,
                    format!("a store keeps at most {MAX_PER_STORE} webhook subscriptions"),
                ));
            }
            let w = Webhook { start_after: last_event(tx, store)?, ..w.clone() };
            record::write(tx, store, None, Some(&w))?;
            Ok(w)
        })
        .await
}

pub async fn update(cell: &Cell, store: Uuid, id: Uuid, input: UpdateWebhook) -> ApiResult<Webhook> {
    let mut c = Check::new();
    let topics = input.topics.as_ref().map(|t| webhook::check_topics(&mut c, t, events::TOPIC_NAMES));
    c.finish()?;
    let url = match &input.url {
        Some(u) => Some(check_url(cell, u).await?),
        None => None,
    };
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<Webhook>(tx, store, id)?;
            let mut w = old.clone();
            if let Some(t) = &topics {
                w.topics = t.clone();
            }
            if let Some(u) = &url {
                w.url = u.clone();
            }
            match input.enabled {
                Some(true) if !old.enabled => {
                    // Everything kept and not delivered goes out again, in order.
                    w.enabled = true;
                    w.disabled_reason = None;
                    w.failing_since = None;
                    w.cursor = None;
                }
                Some(false) if old.enabled => {
                    w.enabled = false;
                    w.disabled_reason = Some("disabled by a member of the store".into());
                }
                _ => {}
            }
            w.updated_at = now;
            record::write(tx, store, Some(&old), Some(&w))?;
            if w.enabled {
                jobs::put(tx, store, &send::SEND, sender_id(id), id.as_bytes().to_vec(), now, now)?;
            }
            Ok(w)
        })
        .await
}

/// Removes a subscription with its delivery log and its jobs.
pub async fn delete(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<()> {
    cell.writer
        .write(Some(store), move |tx| {
            let old = record::must_load::<Webhook>(tx, store, id)?;
            record::write(tx, store, Some(&old), None)?;
            record::delete_scope::<Delivery>(tx, store, id)?;
            // Retry jobs find their subscription gone and end.
            jobs::remove(tx, store, sender_id(id))
        })
        .await
}

/// Asks for a delivery to be attempted again now: 202, same `webhook-id`.
pub async fn resend(cell: &Cell, store: Uuid, webhook: Uuid, delivery: Uuid) -> ApiResult<Delivery> {
    let now = cell.clock.now_ms();
    let d = cell
        .writer
        .write(Some(store), move |tx| {
            if !record::must_load::<Webhook>(tx, store, webhook)?.enabled {
                return Err(ApiError::msg(
                    Code::CONFLICT,
                    "the subscription is disabled: enable it, and what was not delivered is sent",
                ));
            }
            let d: Delivery = record::load_in(tx, store, Some(webhook), delivery)?.ok_or_else(ApiError::not_found)?;
            let payload = send::RetryPayload { webhook, event: delivery, resend: true }.encode()?;
            jobs::put(tx, store, &send::RETRY, retry_id(webhook, delivery), payload, now, now)?;
            Ok(d)
        })
        .await?;
    cell.jobs.wake();
    Ok(d)
}

/// The event `id` of `store`, if still kept.
pub fn event(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<Option<Event>> {
    record::get::<Event>(&cell.read()?, store, id)
}

/// Sends a signed `webhook.ping` to the subscription now, enabled or not, and records it in its
/// delivery log; its health is left as it is.
pub async fn ping(cell: &Cell, store: Uuid, id: Uuid) -> ApiResult<Delivery> {
    let w = cell.get::<Webhook>(store, id)?;
    let now = cell.clock.now_ms();
    let event = cell.clock.new_id();
    let body = serde_json::json!({
        "id": event,
        "type": events::PING,
        "storeId": store,
        "timestamp": rfc3339(now),
        "data": {"webhookId": id},
    })
    .to_string();
    let attempt = send::Sender::of(cell).attempt(&w, event, body.clone().into_bytes()).await;
    cell.writer
        .write(Some(store), move |tx| {
            send::record_delivery(tx, store, id, (&event, events::PING), attempt.clone(), None, Some(body.clone()), now)?
                .ok_or_else(ApiError::not_found)
        })
        .await
}

/// Removes deliveries older than the events they carry are kept ([`events::KEPT_MS`]), per
/// subscription the oldest first, in bounded writes. Answers how many went.
pub async fn purge(db: &redb::Database, writer: &crate::storage::writer::Writer, now: i64) -> ApiResult<usize> {
    let cutoff = now.saturating_sub(events::KEPT_MS);
    let subscriptions = |txn: &redb::ReadTransaction, store: Uuid| -> ApiResult<Vec<Vec<u8>>> {
        let mut prefixes = Vec::new();
        crate::storage::read::walk(txn, WEBHOOKS, Key::store(store).bytes(), false, |k, _| {
            prefixes.extend(crate::storage::keys::trailing_id(k).map(|id| Key::store(store).id(id).into_vec()));
            Ok(true)
        })?;
        Ok(prefixes)
    };
    let stale = events::oldest_rows_under(db, DELIVERIES, 1000, subscriptions, |v| {
        Ok(crate::storage::codec::decode::<Delivery>(v)?.created_at < cutoff)
    })?;
    Ok(events::delete_records::<Delivery>(writer, stale).await)
}
