//! The owner is told when a subscription is disabled (a 410 answer, or five days of failures):
//! a job written with the disabling looks the owner's email up in the directory, wherever it
//! runs, and mails the notice. Retried as mail is; the job's id is the Message-ID.

use std::future::Future;
use std::pin::Pin;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::stores;
use crate::domain::time::rfc3339;
use crate::error::ApiResult;
use crate::jobs::runner::Outcome;
use crate::jobs::{self, Job, Kind};
use crate::mail::job::{MAIL, message_id};
use crate::mail::{DEFAULT_LANGUAGE, Letter, Sender, Template};
use crate::storage::codec::{decode, encode};
use crate::storage::tx::Tx;

/// The notice of a disabled subscription: retried as mail is.
pub const DISABLED: Kind = Kind { name: "webhook.disabled", retries: MAIL.retries };

/// Who a store's notices go to, from the directory wherever it runs (set on each cell by the
/// process once it is up: `node::owners`).
pub trait Owners: Send + Sync + 'static {
    /// The store owner's email; `None` when the store has none any more.
    fn owner_email(&self, store: Uuid) -> Pin<Box<dyn Future<Output = ApiResult<Option<String>>> + Send + '_>>;
}

#[derive(Debug, Serialize, Deserialize)]
struct Notice {
    webhook: Uuid,
    url: String,
    failing_since: i64,
    reason: String,
}

/// In the write that disables subscription `webhook`: the job that tells the owner.
pub fn notify(tx: &mut Tx, store: Uuid, webhook: Uuid, url: &str, failing_since: i64, reason: &str, now: i64) -> ApiResult<()> {
    let payload = encode(&Notice { webhook, url: url.to_string(), failing_since, reason: reason.to_string() })?;
    let id = tx.commit_id(now);
    jobs::put(tx, store, &DISABLED, id, payload, now, now)
}

/// A run of the notice.
pub async fn run(cell: &Cell, store: Uuid, job: Job) -> Outcome {
    let Ok(n) = decode::<Notice>(&job.payload) else { return Outcome::Dead("the notice does not decode".into(), None) };
    let Some(owners) = cell.owners.get() else { return Outcome::Failed("the directory is not reachable yet".into(), None) };
    let to = match owners.owner_email(store).await {
        Ok(Some(to)) => to,
        Ok(None) => return Outcome::Done(None),
        Err(e) => return Outcome::Failed(e.to_string(), None),
    };
    let settings = match stores::store_settings(cell, store) {
        Ok(s) => s,
        Err(e) => return Outcome::Failed(e.to_string(), None),
    };
    let base = cell.public_url.get().map(String::as_str).unwrap_or("http://localhost:8080");
    let letter = Letter {
        to,
        language: DEFAULT_LANGUAGE.to_string(),
        sender: Sender::Platform,
        template: Template::WebhookDisabled,
        values: serde_json::json!({
            "store_name": settings.name,
            "subscription_url": n.url,
            "failing_since": rfc3339(n.failing_since),
            "reason": n.reason,
            "reenable_url": format!("{}/admin/stores/{store}/webhooks/{}", base.trim_end_matches('/'), n.webhook),
        }),
        message_id: message_id(job.id),
        date_ms: cell.clock.now_ms(),
    };
    crate::mail::job::deliver(&cell.mailer, &letter).await
}
