//! What cells ask of the directory in the background (the owner to tell of a disabled webhook),
//! through this process's link to it, wherever the account service runs.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use uuid::Uuid;

use crate::cells::webhooks::notice::Owners;
use crate::error::{ApiError, ApiResult};
use crate::node::Node;

struct NodeOwners(Weak<Node>);

impl Owners for NodeOwners {
    fn owner_email(&self, store: Uuid) -> Pin<Box<dyn Future<Output = ApiResult<Option<String>>> + Send + '_>> {
        Box::pin(async move {
            let node = self.0.upgrade().ok_or_else(|| ApiError::internal("the process is stopping"))?;
            let members = match node.directory.members(store).await {
                Ok(m) => m,
                Err(e) if e.code == crate::error::Code::NOT_FOUND => return Ok(None),
                Err(e) => return Err(e),
            };
            Ok(members.into_iter().find(|m| m.role == "owner").map(|m| m.email))
        })
    }
}

/// Gives every cell of `node` its way to the directory and the base of links in its mail.
pub fn attach(node: &Arc<Node>, public_url: &str) {
    for cell in node.cells.values() {
        let _ = cell.owners.set(Arc::new(NodeOwners(Arc::downgrade(node))));
        let _ = cell.public_url.set(public_url.to_string());
    }
}
