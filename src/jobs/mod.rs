//! Durable background work: a job is a row written in the transaction of the change that calls
//! for it (an event to deliver, a mail to send, a checkout to look at later), and one runner per
//! cell claims due jobs, runs them and records the outcome.
//!
//! - A claim gives the job a lease naming this process's start and when it ends, and moves the
//!   job's due time to that end: a job whose runner dies reappears as due when its lease ends,
//!   and a process started after a `kill -9` takes over every job leased by another start at
//!   once ([`runner`]).
//! - What a job does inside the database (advancing a cursor, recording an attempt) commits with
//!   its completion, in one write: a completed job never runs again. What it does outside (an HTTP
//!   delivery, a mail) carries the job's stable identity, so only work in flight at a kill repeats.
//! - Each kind declares its retry schedule; a job that fails past it is dead: kept, with its last
//!   error, out of the due index.
//! - Writing a job that exists ([`put`]) pokes it: due now, version bumped. A completion removes
//!   the job only when its version is still the one claimed, so a poke during a run is never
//!   lost: the job runs again.

pub mod runner;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::ApiResult;
use crate::storage::codec::{decode, encode};
use crate::storage::keys::Key;
use crate::storage::tables::{JOB_DUE, JOBS};
use crate::storage::tx::Tx;

/// A durable unit of background work of a store.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Job {
    pub id: Uuid,
    /// What runs it: a name declared by the kind ([`Kind::name`]).
    pub kind: String,
    /// The kind's own input.
    pub payload: Vec<u8>,
    /// When it is next due (Unix ms); a claimed job's is its lease's end.
    pub due_at: i64,
    /// Failed runs since the last success.
    pub attempts: u32,
    /// Bumped by every [`put`] of a job that exists.
    pub version: u64,
    pub lease: Option<Lease>,
    pub last_error: Option<String>,
    /// Failed past its kind's schedule: kept for the record, never run again.
    pub dead: bool,
    pub created_at: i64,
}

/// Who runs a claimed job, and until when.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Lease {
    /// The runner's start: a job leased by another start is taken over at once.
    pub start: Uuid,
    pub until: i64,
}

/// A kind of job: its name and how long to wait after each failed run. The runner's handler
/// does the work.
pub struct Kind {
    pub name: &'static str,
    /// Waits after the 1st, 2nd… failed run; past the last, the job is dead.
    pub retries: &'static [Duration],
}

impl Kind {
    /// When a job that has now failed `attempts` times runs again, or `None`: it is dead.
    pub fn next_after(&self, attempts: u32, now: i64) -> Option<i64> {
        let wait = self.retries.get(attempts.checked_sub(1)? as usize)?;
        Some(now.saturating_add(i64::try_from(wait.as_millis()).unwrap_or(i64::MAX)))
    }
}

pub(crate) fn job_key(store: Uuid, id: Uuid) -> Vec<u8> {
    Key::store(store).id(id).into_vec()
}

pub(crate) fn due_key(store: Uuid, due: i64, id: Uuid) -> Vec<u8> {
    Key::store(store).i64(due).id(id).into_vec()
}

/// Job `id` of `store` inside a write.
pub fn load(tx: &Tx, store: Uuid, id: Uuid) -> ApiResult<Option<Job>> {
    tx.get(JOBS, &job_key(store, id))?.map(|b| decode(&b)).transpose()
}

/// Writes `job` in place of `old` with its due row in step.
pub(crate) fn write(tx: &mut Tx, store: Uuid, old: Option<&Job>, job: Option<&Job>) -> ApiResult<()> {
    let due = |j: Option<&Job>| j.filter(|j| !j.dead).map(|j| due_key(store, j.due_at, j.id));
    let (old_due, new_due) = (due(old), due(job));
    if old_due != new_due {
        if let Some(k) = &old_due {
            tx.delete(JOB_DUE, k)?;
        }
        if let Some(k) = &new_due {
            tx.put(JOB_DUE, k, &[])?;
        }
    }
    match job {
        Some(j) => tx.put(JOBS, &job_key(store, j.id), &encode(j)?),
        None => match old {
            Some(o) => tx.delete(JOBS, &job_key(store, o.id)),
            None => Ok(()),
        },
    }
}

/// Writes the due row of every live job, in every store, from the jobs ([`write`]'s rule): a
/// restore's step, as the backup leaves the due rows out (`tables::REBUILT`).
pub fn refill_due(txn: &redb::WriteTransaction) -> Result<(), redb::Error> {
    use redb::ReadableTable;
    let jobs = txn.open_table(JOBS.def)?;
    let mut due = txn.open_table(JOB_DUE.def)?;
    for item in jobs.iter()? {
        let (k, v) = item?;
        let Some(store) = crate::storage::keys::leading_store(k.value()) else { continue };
        let j: Job = decode(v.value()).map_err(|e| redb::Error::Corrupted(format!("jobs: {e}")))?;
        if !j.dead {
            due.insert(due_key(store, j.due_at, j.id).as_slice(), [].as_slice())?;
        }
    }
    Ok(())
}

/// Writes job `id` of `kind`, due at `due`: a new job, or a poke of the one that exists (its
/// payload replaced, due by `due` at the latest, version bumped; a running job runs again when
/// it completes). A dead job comes back to life with its attempts cleared.
pub fn put(tx: &mut Tx, store: Uuid, kind: &Kind, id: Uuid, payload: Vec<u8>, due: i64, now: i64) -> ApiResult<()> {
    let old = load(tx, store, id)?;
    // Waiting already, due no later, with this payload: the poke would change nothing its run
    // sees (a version read at the claim, not before). A checkout written again and again keeps
    // its one look instead of rewriting two rows each time.
    if let Some(o) = &old
        && !o.dead
        && o.lease.is_none()
        && o.due_at <= due
        && o.payload == payload
    {
        return Ok(());
    }
    let job = match &old {
        Some(o) if !o.dead => Job {
            payload,
            // A claimed job keeps its lease's end: the poke is seen when it completes.
            due_at: if o.lease.is_some() { o.due_at } else { o.due_at.min(due) },
            version: o.version.wrapping_add(1),
            ..o.clone()
        },
        _ => Job {
            id,
            kind: kind.name.to_string(),
            payload,
            due_at: due,
            attempts: 0,
            version: old.as_ref().map_or(0, |o| o.version.wrapping_add(1)),
            lease: None,
            last_error: None,
            dead: false,
            created_at: now,
        },
    };
    write(tx, store, old.as_ref(), Some(&job))
}

/// In the write that makes a moved store served here: the jobs its source had claimed are due
/// at once (the source's runs of them could not record their outcomes once the store froze), so
/// they go on without waiting for the source's leases to end.
pub fn release_leases(tx: &mut Tx, store: Uuid, now: i64) -> ApiResult<()> {
    for (_, v) in tx.scan_prefix(JOBS, Key::store(store).bytes(), None, usize::MAX)? {
        let old: Job = decode(&v)?;
        if old.lease.is_some() && !old.dead {
            write(tx, store, Some(&old), Some(&Job { lease: None, due_at: now, ..old.clone() }))?;
        }
    }
    Ok(())
}

/// Removes job `id` (a subscription deleted takes its sending job with it).
pub fn remove(tx: &mut Tx, store: Uuid, id: Uuid) -> ApiResult<()> {
    let old = load(tx, store, id)?;
    write(tx, store, old.as_ref(), None)
}

/// A job id derived from what it is about (a subscription's sender, a checkout's check), so
/// writing it twice pokes one job instead of making two.
pub fn derived_id(kind: &str, about: Uuid) -> Uuid {
    let digest = ring::digest::digest(&ring::digest::SHA256, &[kind.as_bytes(), about.as_bytes()].concat());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest.as_ref()[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

#[cfg(test)]
mod tests;
