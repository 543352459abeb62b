//! Mail as jobs: every message is kept as its letter in a job row written with the change that
//! sends it, and composed and delivered by the job runner of the database it was written to (a
//! cell for store mail, the directory for account mail), so the single writer never renders a
//! template. Connection errors and 4xx answers are retried over about a day; a 5xx answer or a
//! letter that cannot be composed ends the job, dead with the reason. The Message-ID is the job's
//! identity: a delivery cut off by a crash is sent again with the same one.

use std::time::Duration;

use uuid::Uuid;

use crate::error::ApiResult;
use crate::jobs::runner::Outcome;
use crate::jobs::{self, Job, Kind};
use crate::mail::{Composed, Letter, MailError, Mailer};
use crate::storage::codec::{decode, encode};
use crate::storage::tx::Tx;

/// Waits of 1, 5, 15 and 30 min, 1, 2, 4, 8 and 8 h (about a day).
const RETRIES: &[Duration] = &[
    Duration::from_secs(60),
    Duration::from_secs(5 * 60),
    Duration::from_secs(15 * 60),
    Duration::from_secs(30 * 60),
    Duration::from_secs(3600),
    Duration::from_secs(2 * 3600),
    Duration::from_secs(4 * 3600),
    Duration::from_secs(8 * 3600),
    Duration::from_secs(8 * 3600),
];

/// A letter to compose and deliver (payload: the [`Letter`]).
pub const LETTER: Kind = Kind { name: "mail.letter", retries: RETRIES };

/// A message composed when it was sent (payload: the [`Composed`] message): what rows written
/// before letters were kept hold. Still delivered; no longer written.
pub const MAIL: Kind = Kind { name: "mail", retries: RETRIES };

/// Both kinds, for the runners that deliver mail.
pub const KINDS: [&Kind; 2] = [&LETTER, &MAIL];

/// The Message-ID of the mail whose job is `id`.
pub fn message_id(id: Uuid) -> String {
    format!("<{id}@shopcell>")
}

/// Writes the job that composes and delivers `letter` (its Message-ID and date set from `id` and
/// `now`), in the write under way: the mail exists exactly when the change committed. `store` is
/// the store it is sent for (the nil id in the directory).
pub fn send(tx: &mut Tx, store: Uuid, id: Uuid, mut letter: Letter, now: i64) -> ApiResult<()> {
    letter.message_id = message_id(id);
    letter.date_ms = now;
    jobs::put(tx, store, &LETTER, id, encode(&letter)?, now, now)
}

/// A run of a mail job of either kind.
pub async fn run(mailer: &Mailer, job: &Job) -> Outcome {
    if job.kind == MAIL.name {
        let Ok(mail) = decode::<Composed>(&job.payload) else {
            return Outcome::Dead("the stored message does not decode".into(), None);
        };
        return outcome(mailer.deliver(&mail).await);
    }
    let Ok(letter) = decode::<Letter>(&job.payload) else {
        return Outcome::Dead("the stored letter does not decode".into(), None);
    };
    deliver(mailer, &letter).await
}

/// Composes `letter` and delivers it: the outcome of a job that sends it.
pub async fn deliver(mailer: &Mailer, letter: &Letter) -> Outcome {
    match mailer.compose(letter) {
        Ok(mail) => outcome(mailer.deliver(&mail).await),
        Err(e) => outcome(Err(e)),
    }
}

fn outcome(delivered: Result<(), MailError>) -> Outcome {
    match delivered {
        Ok(()) => Outcome::Done(None),
        Err(MailError::Retry(why)) => Outcome::Failed(why, None),
        Err(MailError::Final(why)) => Outcome::Dead(why, None),
    }
}
