//! What the account service keeps of the imports under way, between the requests that send
//! them (`serve` drives them). Apart from `serve` so the node can hold it without the portable
//! code depending back on the node.

use std::collections::HashMap;

use uuid::Uuid;

use crate::account::portable::Mapping;
use crate::portable::Header;

/// An import no request has touched for this long may be started again (its caller died; the
/// copy it left is replaced by the next attempt's first chunk, or dropped at the next start).
pub const IMPORT_IDLE_MS: i64 = 60_000;

/// The imports under way, by store id.
#[derive(Default)]
pub struct Imports(pub(super) tokio::sync::Mutex<HashMap<Uuid, Run>>);

pub(super) struct Run {
    pub(super) header: Header,
    /// The cell that receives the store.
    pub(super) cell: String,
    pub(super) mapping: Mapping,
    /// The number the next chunk must carry.
    pub(super) seq: u64,
    pub(super) rows: u64,
    pub(super) last_used_ms: i64,
}
