//! Format 7: events, jobs and webhooks (store tables 42–49). The tables are made empty when the
//! database opens, as every table is; the step records that a file of this version has them, so
//! an older build, which would write products without their events, refuses it.

use redb::WriteTransaction;

pub(super) fn events_jobs_and_webhooks(_txn: &WriteTransaction) -> Result<(), redb::Error> {
    Ok(())
}
