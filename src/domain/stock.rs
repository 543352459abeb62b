//! Where the stock is: locations, the quantities of each variant at each location (its level),
//! and the history of every change with its reason.
//!
//! A level keeps four quantities, none below zero: `available` (can be sold), `committed`
//! (ordered, not shipped), `reserved` (set aside for transfers) and `incoming` (a forecast);
//! `onHand` = available + committed + reserved. What a variant sells is the sum of `available`
//! over the active locations that fulfill online orders ([`Location::sellable`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::Enumerated;
use crate::domain::fields::{self, check_line, check_text};
use crate::domain::product::MAX_STOCK;
use crate::domain::store::StoreAddress;
use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult, Check, Code};

/// Most locations of one store.
pub const MAX_LOCATIONS: u64 = 1000;
/// Longest location name.
pub const MAX_NAME_CHARS: usize = 100;
/// The name of the location every store is made with.
pub const DEFAULT_NAME: &str = "Default location";

/// A place stock is kept and orders are fulfilled from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Location {
    pub id: Uuid,
    pub name: String,
    pub address: StoreAddress,
    pub active: bool,
    pub fulfills_online_orders: bool,
    /// Lower first when orders are placed; ties go to the older location.
    pub priority: i32,
    /// Exactly one per store: always active and fulfilling online orders.
    pub default: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Location {
    /// Whether its available units are sold online.
    pub fn sellable(&self) -> bool {
        self.active && self.fulfills_online_orders
    }

    /// The location a store is made with.
    pub fn default_for(id: Uuid, address: StoreAddress, now: i64) -> Location {
        Location {
            id,
            name: DEFAULT_NAME.to_string(),
            address,
            active: true,
            fulfills_online_orders: true,
            priority: 0,
            default: true,
            created_at: now,
            updated_at: now,
        }
    }

    pub fn view(&self) -> LocationView {
        LocationView {
            id: self.id,
            name: self.name.clone(),
            address: self.address.clone(),
            active: self.active,
            fulfills_online_orders: self.fulfills_online_orders,
            priority: self.priority,
            default: self.default,
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }
}

/// A location as the API shows it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocationView {
    pub id: Uuid,
    pub name: String,
    pub address: StoreAddress,
    pub active: bool,
    pub fulfills_online_orders: bool,
    pub priority: i32,
    pub default: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// `POST S/locations`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateLocation {
    /// Unique in the store without regard to case; 1 to 100 characters.
    #[schemars(length(min = 1, max = MAX_NAME_CHARS), pattern(fields::LINE))]
    pub name: String,
    pub address: Option<StoreAddress>,
    /// Default true.
    pub active: Option<bool>,
    /// Default true.
    pub fulfills_online_orders: Option<bool>,
    /// Lower first when orders are placed (default 0; ties go to the older location).
    pub priority: Option<i32>,
}

/// `PATCH S/locations/{locationId}`: absent fields stay.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateLocation {
    #[schemars(length(min = 1, max = MAX_NAME_CHARS), pattern(fields::LINE))]
    pub name: Option<String>,
    pub address: Option<StoreAddress>,
    pub active: Option<bool>,
    pub fulfills_online_orders: Option<bool>,
    pub priority: Option<i32>,
    /// `true` makes this the store's default location (the former one stays as it is); `false`
    /// is refused: another location becomes the default instead.
    #[schemars(extend("enum" = [true, null]))]
    pub default: Option<bool>,
}

fn check_address(c: &mut Check, a: &StoreAddress) {
    for (name, v, max) in [
        ("address.address1", &a.address1, 255),
        ("address.address2", &a.address2, 255),
        ("address.city", &a.city, 100),
        ("address.province", &a.province, 100),
        ("address.postalCode", &a.postal_code, 20),
        ("address.phone", &a.phone, 40),
    ] {
        check_line(c, name, v, max, false);
    }
    let country = a.country.trim();
    c.ensure(
        country.is_empty() || (country.len() == 2 && country.bytes().all(|b| b.is_ascii_alphabetic())),
        "address.country",
        "must be a two-letter country code",
    );
}

fn tidy(mut a: StoreAddress) -> StoreAddress {
    for f in [&mut a.address1, &mut a.address2, &mut a.city, &mut a.province, &mut a.postal_code, &mut a.phone] {
        *f = f.trim().to_string();
    }
    a.country = a.country.trim().to_ascii_uppercase();
    a
}

impl CreateLocation {
    /// The new location, or a 400 naming each bad field.
    pub fn location(&self, id: Uuid, now: i64) -> ApiResult<Location> {
        let mut c = Check::new();
        check_line(&mut c, "name", &self.name, MAX_NAME_CHARS, true);
        if let Some(a) = &self.address {
            check_address(&mut c, a);
        }
        c.finish()?;
        Ok(Location {
            id,
            name: self.name.trim().to_string(),
            address: self.address.clone().map(tidy).unwrap_or_default(),
            active: self.active.unwrap_or(true),
            fulfills_online_orders: self.fulfills_online_orders.unwrap_or(true),
            priority: self.priority.unwrap_or(0),
            default: false,
            created_at: now,
            updated_at: now,
        })
    }
}

impl UpdateLocation {
    /// Applies the change to `l` (a 400 naming each bad field; 422 for what the default
    /// location may not be).
    pub fn apply(&self, l: &mut Location, now: i64) -> ApiResult<()> {
        let mut c = Check::new();
        if let Some(n) = &self.name {
            check_line(&mut c, "name", n, MAX_NAME_CHARS, true);
        }
        if let Some(a) = &self.address {
            check_address(&mut c, a);
        }
        c.ensure(self.default != Some(false), "default", "make another location the default instead");
        c.finish()?;
        let default = l.default || self.default == Some(true);
        let active = self.active.unwrap_or(l.active);
        let online = self.fulfills_online_orders.unwrap_or(l.fulfills_online_orders);
        if default && !(active && online) {
            let field = if active { "fulfillsOnlineOrders" } else { "active" };
            return Err(ApiError::field(field, "the default location is always active and fulfills online orders")
                .with_code(Code::BUSINESS_RULE));
        }
        if let Some(n) = &self.name {
            l.name = n.trim().to_string();
        }
        if let Some(a) = &self.address {
            l.address = tidy(a.clone());
        }
        l.active = active;
        l.fulfills_online_orders = online;
        l.priority = self.priority.unwrap_or(l.priority);
        l.default = default;
        l.updated_at = now;
        Ok(())
    }
}

/// The four quantities of a level, or their changes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Quantities {
    pub available: i64,
    pub committed: i64,
    pub reserved: i64,
    pub incoming: i64,
}

/// The names of the quantities, in the order they are kept.
pub const QUANTITY_NAMES: [&str; 4] = ["available", "committed", "reserved", "incoming"];

impl Quantities {
    pub fn as_array(&self) -> [i64; 4] {
        [self.available, self.committed, self.reserved, self.incoming]
    }

    fn from_array([available, committed, reserved, incoming]: [i64; 4]) -> Quantities {
        Quantities { available, committed, reserved, incoming }
    }

    /// available + committed + reserved (saturating: each is bounded far below overflow).
    pub fn on_hand(&self) -> i64 {
        self.available.saturating_add(self.committed).saturating_add(self.reserved)
    }

    pub fn is_zero(&self) -> bool {
        self.as_array() == [0; 4]
    }

    /// `self` moved by `delta`, or the name of the first quantity that would leave
    /// `0..=MAX_STOCK`.
    pub fn moved(&self, delta: &Quantities) -> Result<Quantities, &'static str> {
        let mut out = [0i64; 4];
        for (i, (q, d)) in self.as_array().into_iter().zip(delta.as_array()).enumerate() {
            let name = QUANTITY_NAMES.get(i).copied().unwrap_or("available");
            let v = q.checked_add(d).filter(|v| (0..=MAX_STOCK).contains(v)).ok_or(name)?;
            if let Some(slot) = out.get_mut(i) {
                *slot = v;
            }
        }
        Ok(Quantities::from_array(out))
    }
}

/// Why a quantity changed. The first seven are what a merchant gives with an adjustment; the
/// rest are written by the service itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    Correction,
    CycleCount,
    Received,
    Damaged,
    Shrinkage,
    Restock,
    Other,
    /// Units committed to an order when it was placed.
    OrderPlaced,
    /// Units shipped by a fulfillment.
    Fulfilled,
    /// Unshipped units of an order let go without restocking (a write-off).
    Released,
    /// A fulfillment order moved to another location, its commitment with it.
    Moved,
    /// Set when the store's stock was first kept per location.
    Migrated,
}

impl Enumerated for Reason {
    const NAMES: &'static [&'static str] = &[
        "correction",
        "cycle_count",
        "received",
        "damaged",
        "shrinkage",
        "restock",
        "other",
        "order_placed",
        "fulfilled",
        "released",
        "moved",
        "migrated",
    ];
    fn name(self) -> &'static str {
        let i = self as usize;
        Self::NAMES.get(i).copied().unwrap_or("other")
    }
}

impl Reason {
    /// The reasons an adjustment or a set may give.
    pub const MANUAL: &'static [&'static str] =
        &["correction", "cycle_count", "received", "damaged", "shrinkage", "restock", "other"];

    /// A merchant's reason (any case; absent = correction), or a 400 naming `reason`.
    pub fn manual(given: Option<&str>) -> ApiResult<Reason> {
        let Some(given) = given else { return Ok(Reason::Correction) };
        let lower = given.trim().to_ascii_lowercase();
        Self::MANUAL
            .iter()
            .position(|n| *n == lower)
            .and_then(|i| Self::ALL.get(i).copied())
            .ok_or_else(|| ApiError::field("reason", format!("must be one of {}", Self::MANUAL.join(", "))))
    }

    const ALL: &'static [Reason] = &[
        Reason::Correction,
        Reason::CycleCount,
        Reason::Received,
        Reason::Damaged,
        Reason::Shrinkage,
        Reason::Restock,
        Reason::Other,
        Reason::OrderPlaced,
        Reason::Fulfilled,
        Reason::Released,
        Reason::Moved,
        Reason::Migrated,
    ];
}

/// Who made a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Actor {
    /// A member of the store, by user id.
    Member(Uuid),
    /// The service itself: orders placed by shoppers, scheduled work, migrations.
    System,
}

/// What a change belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReferenceKind {
    Order,
    Fulfillment,
    Return,
    Transfer,
    PurchaseOrder,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reference {
    #[serde(rename = "type")]
    pub kind: ReferenceKind,
    pub id: Uuid,
}

/// Why a batch of quantity changes is made: the reason, who, what it belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Why {
    pub reason: Reason,
    pub actor: Actor,
    pub reference: Option<Reference>,
}

/// `POST S/inventory-levels/adjust`: moves available (and so onHand) by `delta`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Adjust {
    pub variant_id: Uuid,
    pub location_id: Uuid,
    /// Units, positive or negative; not 0.
    #[schemars(range(min = -MAX_STOCK, max = MAX_STOCK), extend("not" = {"const": 0}))]
    pub delta: i64,
    /// correction (default), cycle_count, received, damaged, shrinkage, restock or other.
    #[serde(default)]
    #[schemars(schema_with = "manual_reason_schema")]
    pub reason: Option<String>,
    /// Up to 500 characters, kept in the history.
    #[schemars(length(max = 500), pattern(fields::TEXT_OR_EMPTY))]
    pub note: Option<String>,
}

/// `POST S/inventory-levels/set`: sets available.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetLevel {
    pub variant_id: Uuid,
    pub location_id: Uuid,
    /// 0 to 1,000,000,000.
    #[schemars(range(min = 0, max = MAX_STOCK))]
    pub available: i64,
    /// correction (default), cycle_count, received, damaged, shrinkage, restock or other.
    #[serde(default)]
    #[schemars(schema_with = "manual_reason_schema")]
    pub reason: Option<String>,
    /// When given, the set happens only if available is still this (409 otherwise): a count
    /// taken while orders came in is not applied over them.
    #[schemars(range(min = 0, max = MAX_STOCK))]
    pub compare_quantity: Option<i64>,
    #[schemars(length(max = 500), pattern(fields::TEXT_OR_EMPTY))]
    pub note: Option<String>,
}

/// A merchant's reason in the document, as [`Reason::manual`] reads it.
fn manual_reason_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    fields::or_null(fields::one_of(Reason::MANUAL, "correction when absent (read in any case)"))
}

/// Checks a note of a change.
pub fn check_note(c: &mut Check, note: Option<&str>) -> Option<String> {
    let n = note.map(str::trim).filter(|n| !n.is_empty())?;
    check_text(c, "note", n, 500, false);
    Some(n.to_string())
}

impl Adjust {
    pub fn validate(&self) -> ApiResult<(Reason, Option<String>)> {
        let mut c = Check::new();
        c.ensure(self.delta != 0, "delta", "must not be 0");
        c.ensure(self.delta.unsigned_abs() <= MAX_STOCK.unsigned_abs(), "delta", "is out of range");
        let note = check_note(&mut c, self.note.as_deref());
        c.finish()?;
        Ok((Reason::manual(self.reason.as_deref())?, note))
    }
}

impl SetLevel {
    pub fn validate(&self) -> ApiResult<(Reason, Option<String>)> {
        let mut c = Check::new();
        c.ensure((0..=MAX_STOCK).contains(&self.available), "available", format!("must be 0 to {MAX_STOCK}"));
        if let Some(q) = self.compare_quantity {
            c.ensure((0..=MAX_STOCK).contains(&q), "compareQuantity", format!("must be 0 to {MAX_STOCK}"));
        }
        let note = check_note(&mut c, self.note.as_deref());
        c.finish()?;
        Ok((Reason::manual(self.reason.as_deref())?, note))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reason_names_are_the_wire_names_in_order() {
        for (i, r) in Reason::ALL.iter().enumerate() {
            assert_eq!(serde_json::to_value(r).unwrap(), Reason::NAMES[i]);
            assert_eq!(r.name(), Reason::NAMES[i]);
        }
        assert_eq!(Reason::manual(Some(" Cycle_Count ")).unwrap(), Reason::CycleCount);
        assert_eq!(Reason::manual(None).unwrap(), Reason::Correction);
        // The service's own reasons are not a merchant's to give.
        let e = Reason::manual(Some("order_placed")).unwrap_err();
        assert_eq!(e.fields[0].field, "reason");
    }

    #[test]
    fn quantities_never_leave_their_range() {
        let q = Quantities { available: 2, committed: 1, ..Default::default() };
        let moved = q.moved(&Quantities { available: -2, committed: 2, ..Default::default() }).unwrap();
        assert_eq!((moved.available, moved.committed, moved.on_hand()), (0, 3, 3));
        assert_eq!(q.moved(&Quantities { available: -3, ..Default::default() }), Err("available"));
        assert_eq!(q.moved(&Quantities { committed: -2, ..Default::default() }), Err("committed"));
        assert_eq!(q.moved(&Quantities { incoming: i64::MAX, ..Default::default() }), Err("incoming"));
        assert_eq!(q.moved(&Quantities { available: MAX_STOCK, ..Default::default() }), Err("available"));
    }

    #[test]
    fn the_default_location_stays_active_and_online() {
        let mut l = Location::default_for(Uuid::nil(), StoreAddress::default(), 1);
        let e = UpdateLocation { active: Some(false), ..Default::default() }.apply(&mut l, 2).unwrap_err();
        assert_eq!((e.code, e.fields[0].field.as_str()), (Code::BUSINESS_RULE, "active"));
        let e = UpdateLocation { default: Some(false), ..Default::default() }.apply(&mut l, 2).unwrap_err();
        assert_eq!(e.fields[0].field, "default");
        assert!(l.sellable() && l.updated_at == 1);
    }
}
