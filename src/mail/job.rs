//! Mail as jobs: every message is composed when the change that sends it commits, kept in a job
//! row, and delivered by the job runner of the database it was written to (a cell for store mail,
//! the directory for account mail). Connection errors and 4xx answers are retried over about a
//! day; a 5xx answer ends the job, dead with the server's reason. The Message-ID is the job's
//! identity: a delivery cut off by a crash is sent again with the same one.

use std::time::Duration;

use uuid::Uuid;

use crate::error::{ApiError, ApiResult};
use crate::jobs::runner::Outcome;
use crate::jobs::{self, Job, Kind};
use crate::mail::{Composed, Letter, MailError, Mailer};
use crate::storage::codec::{decode, encode};
use crate::storage::writer::Tx;

/// A message to deliver: waits of 1, 5, 15 and 30 min, 1, 2, 4, 8 and 8 h (about a day).
pub const MAIL: Kind = Kind {
    name: "mail",
    retries: &[
        Duration::from_secs(60),
        Duration::from_secs(5 * 60),
        Duration::from_secs(15 * 60),
        Duration::from_secs(30 * 60),
        Duration::from_secs(3600),
        Duration::from_secs(2 * 3600),
        Duration::from_secs(4 * 3600),
        Duration::from_secs(8 * 3600),
        Duration::from_secs(8 * 3600),
    ],
};

/// The Message-ID of the mail whose job is `id`.
pub fn message_id(id: Uuid) -> String {
    format!("<{id}@shopcell>")
}

/// Composes `letter` (its Message-ID and date set from `id` and `now`) and writes the job that
/// delivers it, in the write under way: the mail exists exactly when the change committed.
/// `store` is the store it is sent for (the nil id in the directory).
pub fn send(tx: &mut Tx, mailer: &Mailer, store: Uuid, id: Uuid, mut letter: Letter, now: i64) -> ApiResult<()> {
    letter.message_id = message_id(id);
    letter.date_ms = now;
    let composed = mailer.compose(&letter).map_err(|e| ApiError::internal(format!("mail not composed: {e}")))?;
    jobs::put(tx, store, &MAIL, id, encode(&composed)?, now, now)
}

/// A run of a mail job.
pub async fn run(mailer: &Mailer, job: &Job) -> Outcome {
    let Ok(mail) = decode::<Composed>(&job.payload) else {
        return Outcome::Dead("the stored message does not decode".into(), None);
    };
    match mailer.deliver(&mail).await {
        Ok(()) => Outcome::Done(None),
        Err(MailError::Retry(why)) => Outcome::Failed(why, None),
        Err(MailError::Final(why)) => Outcome::Dead(why, None),
    }
}
