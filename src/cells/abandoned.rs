//! Abandoned checkouts: a checkout with an email and no order, untouched for
//! `--checkout-abandoned-after` (1 h), is reported once with the `checkout.abandoned` event.
//! Every write of a checkout schedules a job to look at it then; the job looks again later while
//! the checkout keeps changing, and a marker in the store's counters keeps the report to one.

use std::time::Duration;

use uuid::Uuid;

use crate::cells::Cell;
use crate::cells::events;
use crate::domain::checkout::{Checkout, CheckoutStatus};
use crate::error::ApiResult;
use crate::jobs::runner::{Effect, Outcome};
use crate::jobs::{self, Job, Kind};
use crate::storage::keys::Key;
use crate::storage::record;
use crate::storage::tables::COUNTERS;
use crate::storage::tx::Tx;

/// The look at a checkout. Its failures are internal (a read): retried soon.
pub const ABANDONED: Kind =
    Kind { name: "checkout.abandoned", retries: &[Duration::from_secs(60), Duration::from_secs(600), Duration::from_secs(3600)] };

/// `store ‖ "checkout_abandoned" ‖ checkout` in the counters: 1 once the checkout was reported.
fn reported_key(store: Uuid, checkout: Uuid) -> Vec<u8> {
    Key::store(store).str("checkout_abandoned").id(checkout).into_vec()
}

fn waiting(co: &Checkout) -> bool {
    co.status == CheckoutStatus::Open && co.order_id.is_none() && co.email.is_some()
}

/// In a checkout's write: when it could be abandoned, a look at it `after_ms` after this change.
pub fn watch(tx: &mut Tx, store: Uuid, co: &Checkout, after_ms: i64, now: i64) -> ApiResult<()> {
    if !waiting(co) || tx.counter(COUNTERS, &reported_key(store, co.id))? > 0 {
        return Ok(());
    }
    let id = jobs::derived_id(ABANDONED.name, co.id);
    jobs::put(tx, store, &ABANDONED, id, co.id.as_bytes().to_vec(), co.updated_at.saturating_add(after_ms), now)
}

/// How a checkout is shown (the checkout area's view, as a member reads it): the event's data.
pub type Show = fn(&Cell, Uuid, &Checkout) -> ApiResult<Vec<u8>>;

/// A run of the look: reports the checkout once it has waited long enough untouched, shown by
/// `show`.
pub async fn run(cell: &Cell, store: Uuid, job: Job, show: Show) -> Outcome {
    let Ok(id) = Uuid::from_slice(&job.payload) else { return Outcome::Done(None) };
    let co = match cell.get::<Checkout>(store, id) {
        Ok(co) => co,
        Err(e) if e.code == crate::error::Code::NOT_FOUND => return Outcome::Done(None),
        Err(e) => return Outcome::Failed(e.to_string(), None),
    };
    if !waiting(&co) {
        return Outcome::Done(None);
    }
    let due = co.updated_at.saturating_add(cell.abandoned_after_ms);
    if cell.clock.now_ms() < due {
        return Outcome::Again(due, None);
    }
    let data = match show(cell, store, &co) {
        Ok(d) => d,
        Err(e) => return Outcome::Failed(e.to_string(), None),
    };
    let now = cell.clock.now_ms();
    let seen = co.updated_at;
    let effect: Effect = Box::new(move |tx: &mut Tx| {
        // Changed or completed meanwhile: its next write schedules another look.
        let Some(current) = record::load::<Checkout>(tx, store, id)? else { return Ok(()) };
        let key = reported_key(store, id);
        if current.updated_at != seen || !waiting(&current) || tx.counter(COUNTERS, &key)? > 0 {
            return Ok(());
        }
        events::append(tx, store, "checkout.abandoned", data.clone(), now)?;
        tx.put(COUNTERS, &key, &1u64.to_le_bytes())
    });
    Outcome::Done(Some(effect))
}
