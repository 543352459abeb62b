//! The directory's job runner: it sends the account service's mail (password resets, change
//! notices, invitations). The directory has no stores: its jobs are kept under the nil id.

use std::future::Future;
use std::pin::Pin;

use uuid::Uuid;

use crate::error::ApiResult;
use crate::jobs::runner::{Handler, Outcome};
use crate::jobs::{Job, Kind};
use crate::mail::Mailer;
use crate::mail::job::KINDS;

/// The store id the directory's jobs are kept under.
pub const DIRECTORY: Uuid = Uuid::nil();

pub struct DirectoryJobs {
    pub mailer: Mailer,
}

impl Handler for DirectoryJobs {
    fn kind(&self, name: &str) -> Option<&'static Kind> {
        KINDS.iter().find(|k| k.name == name).copied()
    }

    fn stores(&self, _txn: &redb::ReadTransaction) -> ApiResult<Vec<Uuid>> {
        Ok(vec![DIRECTORY])
    }

    fn run(&self, _store: Uuid, job: Job) -> Pin<Box<dyn Future<Output = Outcome> + Send + 'static>> {
        let mailer = self.mailer.clone();
        Box::pin(async move { crate::mail::job::run(&mailer, &job).await })
    }
}
