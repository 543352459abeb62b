//! One store as a portable file: `shopcell admin export-store` writes it on the caller's host
//! from a running installation, `shopcell admin import-store` gives it to another one.
//!
//! The rows are a store move's ([`crate::cells::moves::Row`]), paged the way a move pages them;
//! only the ends differ: an export reads them from one read transaction of the store's cell
//! and the caller writes them to a file (`file`), an import verifies the whole file before it
//! asks for anything and then hands the chunks to a cell as a move's target receives them
//! (`serve`). The directory's part travels as references: members by email and role, never a
//! credential; publishable keys as the digests they are stored as. The layout is in
//! `data-format/README.md`, "Portable store files".

pub mod client;
pub mod file;
pub mod serve;
pub mod state;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The version of the portable file layout this build writes and reads.
pub const PORTABLE_FORMAT: u32 = 1;

/// Row bytes in one chunk of the file (the move's default).
pub const CHUNK_BYTES: u32 = crate::cells::moves::CHUNK_BYTES;

/// A member as it travels: who (by email, the one thing both installations can agree on) and
/// the role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemberRef {
    pub email: String,
    /// `owner`, `admin` or `staff`.
    pub role: String,
}

/// A publishable key as it travels: the SHA-256 digest it is stored as (the key itself is in
/// storefronts, never here) and its record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyRef {
    /// Hex SHA-256 of the key.
    pub digest: String,
    pub id: Uuid,
    /// `live` or `test`.
    pub environment: String,
    pub last4: String,
    pub created_at_ms: i64,
    pub revoked_at_ms: Option<i64>,
}

/// Something of the store that stays behind and must be entered again where it arrives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReEnter {
    /// The feature that is off until then: `payments`, `webhooks`.
    pub feature: String,
    pub what: String,
}

/// The header of a portable file: what it holds, before any row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// The data format of the rows (`storage::FORMAT_VERSION` of the exporting build).
    pub data_format: u32,
    pub store_id: Uuid,
    pub store_name: String,
    /// When the export's read transaction opened: the rows are the store as it was then.
    pub exported_at_ms: i64,
    /// Rows of each store table, by table name.
    pub counts: BTreeMap<String, u64>,
    /// The owner's email (the owner here is the account with it, or `--owner`).
    pub owner_email: String,
    /// Every member, the owner too.
    pub members: Vec<MemberRef>,
    pub publishable_keys: Vec<KeyRef>,
    /// Secrets that did not travel.
    pub to_reenter: Vec<ReEnter>,
}

impl Header {
    /// Every row the file holds.
    pub fn rows(&self) -> u64 {
        self.counts.values().sum()
    }
}

/// What `POST /internal/v1/store-exports` answers: the export's id and the file's header.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExportBegun {
    pub export_id: Uuid,
    pub header: Header,
}

/// `POST /internal/v1/store-exports`.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BeginExport {
    pub store_id: Uuid,
}

/// `POST /internal/v1/store-imports`: the verified file's header, and who owns the store here.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BeginImport {
    pub header: Header,
    /// The owner's email here; default the exported owner's.
    pub owner: Option<String>,
}

/// What `POST /internal/v1/store-imports` answers once every check passed.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportBegun {
    pub store_id: Uuid,
    /// The cell that receives the store.
    pub cell: String,
    pub owner: String,
}

/// What an import did (answered by its last request and printed by `import-store`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    pub store_id: Uuid,
    pub cell: String,
    pub owner: String,
    pub counts: BTreeMap<String, u64>,
    /// Members whose email has an account here, with their role here.
    pub members_joined: Vec<MemberRef>,
    /// Members whose email has no account here: invite them again.
    pub members_not_found: Vec<MemberRef>,
    pub publishable_keys: usize,
    /// Subscriptions now disabled, each with a new secret.
    pub webhooks_disabled: u64,
    pub to_reenter: Vec<ReEnter>,
}
