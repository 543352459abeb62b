//! The inventory history: one row per change of a level, written by
//! [`crate::cells::stock::levels::apply`] in the change's own write. Listed newest first from
//! its indexes (a partition per variant, per location and per reason).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::Enumerated;
use crate::domain::stock::{Actor, QUANTITY_NAMES, Quantities, Reason, Reference};
use crate::domain::time::rfc3339;
use crate::storage::record::{Filter, FilterValue, List, Range, Record, Sort};
use crate::storage::tables::{INVENTORY_HISTORY, INVENTORY_HISTORY_ORDER, StoreTable};

/// One change of one level.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InventoryChange {
    /// v7, given in commit order: the table reads in the order changes happened.
    pub id: Uuid,
    pub variant_id: Uuid,
    pub product_id: Uuid,
    pub location_id: Uuid,
    pub reason: Reason,
    pub actor: Actor,
    pub reference: Option<Reference>,
    pub delta: Quantities,
    /// The level's quantities after the change.
    pub after: Quantities,
    pub note: Option<String>,
    pub created_at: i64,
}

impl Record for InventoryChange {
    const TABLE: StoreTable = INVENTORY_HISTORY;
    const NAME: &'static str = "inventory_history";
    const LIST: List<Self> = List {
        order: Some(INVENTORY_HISTORY_ORDER),
        // Ids grow in commit order.
        sorts: &[Sort { name: "created_at", tag: 0, key: |_, k| k }],
        default_sort: "created_at",
        summaries: "created_at",
        own_order: true,
        filters: &[
            Filter::reference("variantId", |c| Some(FilterValue::Reference(c.variant_id)), "Changes of this variant"),
            Filter::reference("locationId", |c| Some(FilterValue::Reference(c.location_id)), "Changes at this location"),
            Filter::enumerated::<Reason>(
                "reason",
                |c| Some(FilterValue::Enum(c.reason.name())),
                "Changes made for these reasons",
            ),
        ],
        ranges: &[Range { from: "dateFrom", to: "dateTo", value: |c| c.created_at }],
        search: None,
    };

    fn id(&self) -> Uuid {
        self.id
    }
}

/// Who made a change, as the API shows it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActorView {
    /// member or system.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The member's user id.
    pub id: Option<Uuid>,
}

/// One quantity's change.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuantityChange {
    /// available, committed, reserved, incoming or onHand.
    pub name: &'static str,
    pub delta: i64,
    /// The quantity after the change.
    pub quantity: i64,
}

/// A change as `GET S/inventory-history` shows it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InventoryChangeView {
    pub id: Uuid,
    pub created_at: String,
    pub variant_id: Uuid,
    pub product_id: Uuid,
    pub location_id: Uuid,
    pub reason: Reason,
    pub actor: ActorView,
    pub reference: Option<Reference>,
    /// Each quantity that moved, then onHand when it moved.
    pub changes: Vec<QuantityChange>,
    pub note: Option<String>,
}

impl InventoryChange {
    pub fn view(&self) -> InventoryChangeView {
        let mut changes: Vec<QuantityChange> = QUANTITY_NAMES
            .iter()
            .zip(self.delta.as_array().into_iter().zip(self.after.as_array()))
            .filter(|(_, (d, _))| *d != 0)
            .map(|(name, (delta, quantity))| QuantityChange { name, delta, quantity })
            .collect();
        if self.delta.on_hand() != 0 {
            changes.push(QuantityChange { name: "onHand", delta: self.delta.on_hand(), quantity: self.after.on_hand() });
        }
        InventoryChangeView {
            id: self.id,
            created_at: rfc3339(self.created_at),
            variant_id: self.variant_id,
            product_id: self.product_id,
            location_id: self.location_id,
            reason: self.reason,
            actor: match self.actor {
                Actor::Member(id) => ActorView { kind: "member", id: Some(id) },
                Actor::System => ActorView { kind: "system", id: None },
            },
            reference: self.reference,
            changes,
            note: self.note.clone(),
        }
    }
}
