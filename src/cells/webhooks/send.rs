//! Sending: the two job kinds of webhooks and the signed POST they make.
//!
//! - `webhook.send`, one per subscription: takes the next event of its topics after the
//!   subscription's cursor, attempts it and moves the cursor in the write that records the
//!   attempt, then runs again while events remain. First attempts thus leave in event order, one
//!   in flight; a kill repeats only the attempt in flight, with the same `webhook-id`.
//! - `webhook.retry`, one per failed delivery: attempts again on the schedule of API.md; later
//!   events do not wait for it.

use std::time::{Duration, Instant};

use bytes::Bytes;
use redb::ReadableDatabase;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::events::Event;
use crate::cells::webhooks::{Attempt, Delivery, DeliveryStatus, Webhook, notice, retry_id};
use crate::clock::Clock;
use crate::domain::webhook::{self, ANSWER_KEPT, DISABLE_AFTER_MS, FIRST_RETRY};
use crate::error::ApiResult;
use crate::jobs::runner::{Effect, Outcome};
use crate::jobs::{self, Job, Kind};
use crate::outbound::{Outbound, OutboundRequest, Redirects};
use crate::storage::codec::{decode, encode};
use crate::storage::keys::{Key, prefix_range};
use crate::storage::record;
use crate::storage::tables::EVENTS;
use crate::storage::tx::Tx;

/// A subscription's sender. Its own failures are internal (a read that failed): retried soon.
pub const SEND: Kind = Kind {
    name: "webhook.send",
    retries: &[Duration::from_secs(1), Duration::from_secs(10), Duration::from_secs(60), Duration::from_secs(600)],
};
/// A failed delivery's retries.
pub const RETRY: Kind = Kind { name: "webhook.retry", retries: webhook::RETRIES };

/// Events a sender's run looks at, at most, to find the next of its topics.
const SCAN: usize = 1000;

/// What a retry job is about.
#[derive(Debug, Serialize, Deserialize)]
pub struct RetryPayload {
    pub webhook: Uuid,
    pub event: Uuid,
    /// Asked for by a member: sent even when an earlier attempt succeeded.
    pub resend: bool,
}

impl RetryPayload {
    pub fn encode(&self) -> ApiResult<Vec<u8>> {
        encode(self)
    }
}

/// What sending needs of the cell.
#[derive(Clone)]
pub struct Sender {
    pub db: std::sync::Arc<redb::Database>,
    pub outbound: Outbound,
    pub clock: Clock,
}

/// The next event a subscription's sender has to attempt.
enum Next {
    /// None of its topics among the events looked at after the cursor; the cursor moves to the
    /// last of them, and the walk goes on when the look stopped at its limit (`more`).
    Nothing {
        last: Option<Uuid>,
        more: bool,
    },
    Event(Event),
}

impl Sender {
    pub fn of(cell: &crate::cells::Cell) -> Sender {
        Sender { db: cell.db.clone(), outbound: cell.outbound.clone(), clock: cell.clock.clone() }
    }

    /// A run of `webhook.send`.
    pub async fn run_send(&self, store: Uuid, job: Job) -> Outcome {
        let Some(id) = uuid_of(&job.payload) else { return Outcome::Done(None) };
        let found = self.next_event(store, id);
        let (w, next) = match found {
            Ok(Some(x)) => x,
            Ok(None) => return Outcome::Done(None),
            Err(e) => return Outcome::Failed(e.to_string(), None),
        };
        if !w.enabled {
            return Outcome::Done(None);
        }
        match next {
            Next::Nothing { last: None, .. } => Outcome::Done(None),
            Next::Nothing { last: Some(to), more } => {
                let effect: Effect = Box::new(move |tx: &mut Tx| move_cursor(tx, store, id, to));
                if more { Outcome::Again(self.clock.now_ms(), Some(effect)) } else { Outcome::Done(Some(effect)) }
            }
            Next::Event(event) => {
                let body = match event.body(store) {
                    Ok(b) => b,
                    Err(e) => return Outcome::Failed(e.to_string(), None),
                };
                let attempt = self.attempt(&w, event.id, body).await;
                let now = self.clock.now_ms();
                let ok = attempt.error.is_none();
                let first_retry = now.saturating_add(FIRST_RETRY.as_millis() as i64);
                let effect: Effect = Box::new(move |tx: &mut Tx| {
                    let next_retry = (!ok).then_some(first_retry);
                    let enabled = record_attempt(tx, store, id, (&event.id, &event.topic), attempt.clone(), next_retry, now)?;
                    if !ok && enabled {
                        let payload = RetryPayload { webhook: id, event: event.id, resend: false }.encode()?;
                        jobs::put(tx, store, &RETRY, retry_id(id, event.id), payload, first_retry, now)?;
                    }
                    move_cursor(tx, store, id, event.id)
                });
                Outcome::Again(now, Some(effect))
            }
        }
    }

    /// A run of `webhook.retry`.
    pub async fn run_retry(&self, store: Uuid, job: Job) -> Outcome {
        let Ok(p) = decode::<RetryPayload>(&job.payload) else { return Outcome::Done(None) };
        let read = (|| -> ApiResult<_> {
            let txn = self.db.begin_read()?;
            let w = record::get::<Webhook>(&txn, store, p.webhook)?;
            let d = record::get_in::<Delivery>(&txn, store, Some(p.webhook), p.event)?;
            let e = record::get::<Event>(&txn, store, p.event)?;
            Ok((w, d, e))
        })();
        let (w, d, e) = match read {
            Ok((Some(w), Some(d), e)) => (w, d, e),
            Ok(_) => return Outcome::Done(None),
            Err(e) => return Outcome::Failed(e.to_string(), None),
        };
        // A disabled subscription sends again from its cursor when re-enabled.
        if !w.enabled || (d.status == DeliveryStatus::Succeeded && !p.resend) {
            return Outcome::Done(None);
        }
        let body = match (e, &d.body) {
            (Some(e), _) => e.body(store),
            (None, Some(b)) => Ok(b.clone().into_bytes()),
            (None, None) => {
                let now = self.clock.now_ms();
                return Outcome::Done(Some(Box::new(move |tx: &mut Tx| give_up(tx, store, p.webhook, p.event, now))));
            }
        };
        let body = match body {
            Ok(b) => b,
            Err(e) => return Outcome::Failed(e.to_string(), None),
        };
        let attempt = self.attempt(&w, p.event, body).await;
        let now = self.clock.now_ms();
        let ok = attempt.error.is_none();
        let error = attempt.error.clone().unwrap_or_default();
        let next_retry = if ok { None } else { RETRY.next_after(job.attempts.saturating_add(1), now) };
        let (webhook, event, topic) = (p.webhook, p.event, d.topic.clone());
        let effect: Effect = Box::new(move |tx: &mut Tx| {
            record_attempt(tx, store, webhook, (&event, &topic), attempt.clone(), next_retry, now).map(|_| ())
        });
        match (ok, next_retry) {
            (false, Some(_)) => Outcome::Failed(error, Some(effect)),
            // Delivered, or failed for good: the delivery says which.
            _ => Outcome::Done(Some(effect)),
        }
    }

    /// The subscription and the next event it has to attempt.
    fn next_event(&self, store: Uuid, id: Uuid) -> ApiResult<Option<(Webhook, Next)>> {
        let txn = self.db.begin_read()?;
        let Some(w) = record::get::<Webhook>(&txn, store, id)? else { return Ok(None) };
        let events = txn.open_table(EVENTS.def)?;
        let prefix = Key::store(store).into_vec();
        let (start, end) = prefix_range(&prefix);
        let from = match w.cursor.or(w.start_after) {
            Some(after) => std::ops::Bound::Excluded(Key::store(store).id(after).into_vec()),
            None => std::ops::Bound::Included(start),
        };
        let to = end.map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
        let (mut last, mut seen) = (None, 0usize);
        for item in events.range::<&[u8]>((from.as_ref().map(Vec::as_slice), to.as_ref().map(Vec::as_slice)))?.take(SCAN) {
            let (_, v) = item?;
            let e: Event = decode(v.value())?;
            last = Some(e.id);
            seen += 1;
            if !webhook::matches(&w.topics, &e.topic) {
                continue;
            }
            // Walking again after a re-enable: what was delivered stays delivered.
            let done =
                record::get_in::<Delivery>(&txn, store, Some(id), e.id)?.is_some_and(|d| d.status == DeliveryStatus::Succeeded);
            if !done {
                return Ok(Some((w, Next::Event(e))));
            }
        }
        Ok(Some((w, Next::Nothing { last, more: seen == SCAN })))
    }

    /// POSTs `body` to the subscription, signed, and tells how it went.
    pub async fn attempt(&self, w: &Webhook, id: Uuid, body: Vec<u8>) -> Attempt {
        let at = self.clock.now_ms();
        let timestamp = self.clock.now_secs();
        let started = Instant::now();
        let msg_id = id.to_string();
        let signature = match webhook::sign(&w.secret, &msg_id, timestamp, &body) {
            Ok(s) => s,
            Err(e) => return Attempt { at, status: None, duration_ms: 0, error: Some(e.to_string()), response: String::new() },
        };
        let req = OutboundRequest {
            method: hyper::Method::POST,
            url: w.url.clone(),
            headers: vec![
                ("content-type".into(), "application/json".into()),
                ("webhook-id".into(), msg_id),
                ("webhook-timestamp".into(), timestamp.to_string()),
                ("webhook-signature".into(), signature),
            ],
            body: Bytes::from(body),
            redirects: Redirects::None,
        };
        let result = self.outbound.send(req).await;
        let duration_ms = started.elapsed().as_millis() as u64;
        match result {
            Ok(r) => {
                let kept = &r.body[..r.body.len().min(ANSWER_KEPT)];
                let ok = (200..300).contains(&r.status);
                Attempt {
                    at,
                    status: Some(r.status),
                    duration_ms,
                    error: (!ok).then(|| format!("the receiver answered {}", r.status)),
                    response: String::from_utf8_lossy(kept).into_owned(),
                }
            }
            Err(e) => Attempt { at, status: None, duration_ms, error: Some(e.to_string()), response: String::new() },
        }
    }
}

fn uuid_of(payload: &[u8]) -> Option<Uuid> {
    Uuid::from_slice(payload).ok()
}

fn move_cursor(tx: &mut Tx, store: Uuid, id: Uuid, to: Uuid) -> ApiResult<()> {
    let Some(old) = record::load::<Webhook>(tx, store, id)? else { return Ok(()) };
    if old.cursor.is_some_and(|c| c >= to) {
        return Ok(());
    }
    let new = Webhook { cursor: Some(to), ..old.clone() };
    record::write(tx, store, Some(&old), Some(&new))
}

/// Records an attempt of delivering `event` to subscription `id` in its delivery (made on the
/// first attempt), and in the subscription's health ([`record_health`]). Answers whether the
/// subscription is still enabled.
#[allow(clippy::too_many_arguments)]
pub fn record_attempt(
    tx: &mut Tx,
    store: Uuid,
    id: Uuid,
    (event, topic): (&Uuid, &str),
    attempt: Attempt,
    next_retry: Option<i64>,
    now: i64,
) -> ApiResult<bool> {
    let ok = attempt.error.is_none();
    let status = attempt.status;
    if record_delivery(tx, store, id, (event, topic), attempt, next_retry, None, now)?.is_none() {
        return Ok(false);
    }
    record_health(tx, store, id, ok, status, now)
}

/// Adds `attempt` to the delivery of `event` to subscription `id`, made on the first attempt
/// (with `body` when there is no stored event: a ping). `None` when the subscription is gone.
#[allow(clippy::too_many_arguments)]
pub fn record_delivery(
    tx: &mut Tx,
    store: Uuid,
    id: Uuid,
    (event, topic): (&Uuid, &str),
    attempt: Attempt,
    next_retry: Option<i64>,
    body: Option<String>,
    now: i64,
) -> ApiResult<Option<Delivery>> {
    if !record::exists::<Webhook>(tx, store, id)? {
        return Ok(None);
    }
    let ok = attempt.error.is_none();
    let old: Option<Delivery> = record::load_in(tx, store, Some(id), *event)?;
    let mut d = old.clone().unwrap_or(Delivery {
        id: *event,
        webhook_id: id,
        topic: topic.to_string(),
        status: DeliveryStatus::Pending,
        attempts: Vec::new(),
        next_retry: None,
        body,
        created_at: now,
        updated_at: now,
    });
    d.attempts.push(attempt);
    d.status = match (ok, next_retry) {
        (true, _) => DeliveryStatus::Succeeded,
        (false, Some(_)) => DeliveryStatus::Pending,
        (false, None) => DeliveryStatus::Failed,
    };
    d.next_retry = if ok { None } else { next_retry };
    d.updated_at = now;
    record::write(tx, store, old.as_ref(), Some(&d))?;
    Ok(Some(d))
}

/// A subscription's health after an attempt: a success clears its failing streak; a 410
/// disables it at once, as do five days of failures. Answers whether it is still enabled.
fn record_health(tx: &mut Tx, store: Uuid, id: Uuid, ok: bool, status: Option<u16>, now: i64) -> ApiResult<bool> {
    let Some(old) = record::load::<Webhook>(tx, store, id)? else { return Ok(false) };
    let gone = status == Some(410);
    let mut w = old.clone();
    if ok {
        w.failing_since = None;
    } else {
        let since = *w.failing_since.get_or_insert(now);
        if w.enabled && (gone || now.saturating_sub(since) >= DISABLE_AFTER_MS) {
            let reason = if gone { "the receiver answered 410 Gone" } else { "every delivery failed for five days" };
            w.enabled = false;
            w.disabled_reason = Some(reason.to_string());
            notice::notify(tx, store, id, &w.url, since, reason, now)?;
        }
    }
    if w != old {
        w.updated_at = now;
        record::write(tx, store, Some(&old), Some(&w))?;
    }
    Ok(w.enabled)
}

/// A delivery whose event is no longer kept fails for good.
fn give_up(tx: &mut Tx, store: Uuid, webhook: Uuid, event: Uuid, now: i64) -> ApiResult<()> {
    let Some(old) = record::load_in::<Delivery>(tx, store, Some(webhook), event)? else { return Ok(()) };
    let d = Delivery { status: DeliveryStatus::Failed, next_retry: None, updated_at: now, ..old.clone() };
    record::write(tx, store, Some(&old), Some(&d))
}
