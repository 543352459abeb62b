//! Fulfillment orders and fulfillments: which location ships which units of an order, the
//! states a fulfillment order goes through, and the shipments made from it with their tracking.
//! Shopify's fulfillment orders are the model.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::Enumerated;
use crate::domain::fields::{self, check_line, check_text};
use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult, Check, Code};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FoStatus {
    Open,
    /// Some units shipped, some left.
    InProgress,
    OnHold,
    /// Waits for its `fulfillAt`.
    Scheduled,
    /// Everything shipped (or moved on).
    Closed,
    /// Cancelled before anything shipped.
    Cancelled,
    /// Cancelled after some units shipped.
    Incomplete,
}

impl Enumerated for FoStatus {
    const NAMES: &'static [&'static str] = &["OPEN", "IN_PROGRESS", "ON_HOLD", "SCHEDULED", "CLOSED", "CANCELLED", "INCOMPLETE"];
    fn name(self) -> &'static str {
        Self::NAMES.get(self as usize).copied().unwrap_or("OPEN")
    }
}

impl FoStatus {
    /// CLOSED, CANCELLED and INCOMPLETE never change again.
    pub fn is_final(self) -> bool {
        matches!(self, FoStatus::Closed | FoStatus::Cancelled | FoStatus::Incomplete)
    }
}

/// What is done to a fulfillment order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Hold,
    ReleaseHold,
    Move,
    Cancel,
    /// `left`: whether units remain once this fulfillment is made.
    Fulfill {
        left: bool,
    },
    /// The clock reached `fulfillAt`.
    Open,
}

impl Action {
    fn verb(self) -> &'static str {
        match self {
            Action::Hold => "held",
            Action::ReleaseHold => "released from a hold",
            Action::Move => "moved",
            Action::Cancel => "cancelled",
            Action::Fulfill { .. } => "fulfilled",
            Action::Open => "opened",
        }
    }
}

/// The status `action` leaves a fulfillment order of `status` in (`shipped`: some of its units
/// were fulfilled), or a 409 naming the status. A move of an IN_PROGRESS one answers CLOSED:
/// what remains goes to a new OPEN one at the new location.
pub fn next(status: FoStatus, action: Action, shipped: bool) -> ApiResult<FoStatus> {
    use FoStatus::*;
    let to = match (status, action) {
        (Open | InProgress, Action::Hold) => Some(OnHold),
        (OnHold, Action::ReleaseHold) => Some(if shipped { InProgress } else { Open }),
        (Open, Action::Move) => Some(Open),
        (InProgress, Action::Move) => Some(Closed),
        (Scheduled, Action::Move) => Some(Scheduled),
        (Open | Scheduled, Action::Cancel) => Some(Cancelled),
        (InProgress, Action::Cancel) => Some(Incomplete),
        (OnHold, Action::Cancel) => Some(if shipped { Incomplete } else { Cancelled }),
        (Open | InProgress, Action::Fulfill { left }) => Some(if left { InProgress } else { Closed }),
        (Scheduled, Action::Open) => Some(Open),
        _ => None,
    };
    to.ok_or_else(|| {
        ApiError::msg(Code::CONFLICT, format!("a fulfillment order that is {} cannot be {}", status.name(), action.verb()))
    })
}

/// Why a fulfillment order is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum HoldReason {
    AwaitingPayment,
    HighRiskOfFraud,
    IncorrectAddress,
    InventoryOutOfStock,
    UnknownDeliveryDate,
    Other,
}

impl Enumerated for HoldReason {
    const NAMES: &'static [&'static str] = &[
        "AWAITING_PAYMENT",
        "HIGH_RISK_OF_FRAUD",
        "INCORRECT_ADDRESS",
        "INVENTORY_OUT_OF_STOCK",
        "UNKNOWN_DELIVERY_DATE",
        "OTHER",
    ];
    fn name(self) -> &'static str {
        Self::NAMES.get(self as usize).copied().unwrap_or("OTHER")
    }
}

const HOLD_REASONS: &[HoldReason] = &[
    HoldReason::AwaitingPayment,
    HoldReason::HighRiskOfFraud,
    HoldReason::IncorrectAddress,
    HoldReason::InventoryOutOfStock,
    HoldReason::UnknownDeliveryDate,
    HoldReason::Other,
];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub reason: HoldReason,
    pub notes: Option<String>,
    pub held_at: i64,
}

/// A line of an order as one fulfillment order holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FoLine {
    pub line_item_id: Uuid,
    pub variant_id: Uuid,
    pub product_id: Uuid,
    /// Whether its units were committed at the location (untracked variants sell without stock).
    pub tracked: bool,
    /// Units given to this fulfillment order.
    pub quantity: u32,
    pub fulfilled: u32,
    /// Units still to ship: quantity − fulfilled − released.
    pub remaining: u32,
}

/// Which location ships which units of an order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FulfillmentOrder {
    pub id: Uuid,
    pub order_id: Uuid,
    pub location_id: Uuid,
    pub status: FoStatus,
    pub lines: Vec<FoLine>,
    /// When it may be fulfilled: SCHEDULED until the clock reaches it.
    pub fulfill_at: Option<i64>,
    pub hold: Option<Hold>,
    /// The fulfillment order whose remaining lines this one took over (a move of one in progress).
    pub moved_from: Option<Uuid>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl FulfillmentOrder {
    /// Whether some of its units were shipped.
    pub fn shipped(&self) -> bool {
        self.lines.iter().any(|l| l.fulfilled > 0)
    }

    /// Units still to ship.
    pub fn remaining(&self) -> u64 {
        self.lines.iter().map(|l| u64::from(l.remaining)).sum()
    }

    pub fn view(&self) -> FulfillmentOrderView {
        FulfillmentOrderView {
            id: self.id,
            order_id: self.order_id,
            location_id: self.location_id,
            status: self.status,
            fulfill_at: self.fulfill_at.map(rfc3339),
            hold: self.hold.as_ref().map(|h| HoldView { reason: h.reason, notes: h.notes.clone(), held_at: rfc3339(h.held_at) }),
            line_items: self
                .lines
                .iter()
                .map(|l| FoLineView {
                    line_item_id: l.line_item_id,
                    variant_id: l.variant_id,
                    quantity: l.quantity,
                    fulfilled_quantity: l.fulfilled,
                    remaining_quantity: l.remaining,
                })
                .collect(),
            moved_from: self.moved_from,
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FulfillmentOrderView {
    pub id: Uuid,
    pub order_id: Uuid,
    pub location_id: Uuid,
    pub status: FoStatus,
    pub fulfill_at: Option<String>,
    pub hold: Option<HoldView>,
    pub line_items: Vec<FoLineView>,
    pub moved_from: Option<Uuid>,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HoldView {
    pub reason: HoldReason,
    pub notes: Option<String>,
    pub held_at: String,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FoLineView {
    pub line_item_id: Uuid,
    pub variant_id: Uuid,
    pub quantity: u32,
    pub fulfilled_quantity: u32,
    pub remaining_quantity: u32,
}

/// `POST …/fulfillment-orders/{id}/hold`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HoldInput {
    /// AWAITING_PAYMENT, HIGH_RISK_OF_FRAUD, INCORRECT_ADDRESS, INVENTORY_OUT_OF_STOCK,
    /// UNKNOWN_DELIVERY_DATE or OTHER, any case.
    #[schemars(schema_with = "hold_reason_schema")]
    pub reason: String,
    /// Up to 1,000 characters.
    #[schemars(length(max = 1000), pattern(fields::TEXT_OR_EMPTY))]
    pub notes: Option<String>,
}

fn hold_reason_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    fields::one_of(HoldReason::NAMES, "why the work is held (read in any case)")
}

impl HoldInput {
    pub fn hold(&self, now: i64) -> ApiResult<Hold> {
        let mut c = Check::new();
        let wanted = self.reason.trim().to_ascii_uppercase();
        let reason = HOLD_REASONS.iter().copied().find(|r| r.name() == wanted);
        c.ensure(reason.is_some(), "reason", format!("must be one of {}", HoldReason::NAMES.join(", ")));
        let notes = self.notes.as_deref().map(str::trim).filter(|n| !n.is_empty());
        if let Some(n) = notes {
            check_text(&mut c, "notes", n, 1000, false);
        }
        c.finish()?;
        Ok(Hold { reason: reason.unwrap_or(HoldReason::Other), notes: notes.map(str::to_string), held_at: now })
    }
}

/// `POST …/fulfillment-orders/{id}/move`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MoveInput {
    pub location_id: Uuid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ShipmentStatus {
    Confirmed,
    InTransit,
    OutForDelivery,
    Delivered,
    Failure,
}

/// One tracking number of a shipment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tracking {
    pub id: Uuid,
    pub number: String,
    pub company: Option<String>,
    /// Given, or built from the company's tracking page when it is a known carrier.
    pub url: Option<String>,
}

/// A line of an order shipped by a fulfillment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FulfillmentLine {
    pub line_item_id: Uuid,
    pub variant_id: Uuid,
    pub quantity: u32,
}

/// A shipment of some units of one fulfillment order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fulfillment {
    pub id: Uuid,
    pub order_id: Uuid,
    pub fulfillment_order_id: Uuid,
    pub location_id: Uuid,
    pub lines: Vec<FulfillmentLine>,
    pub tracking: Vec<Tracking>,
    pub shipment_status: ShipmentStatus,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Fulfillment {
    pub fn view(&self) -> FulfillmentView {
        FulfillmentView {
            id: self.id,
            order_id: self.order_id,
            fulfillment_order_id: self.fulfillment_order_id,
            location_id: self.location_id,
            line_items: self.lines.clone(),
            tracking: self.tracking.clone(),
            shipment_status: self.shipment_status,
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FulfillmentView {
    pub id: Uuid,
    pub order_id: Uuid,
    pub fulfillment_order_id: Uuid,
    pub location_id: Uuid,
    pub line_items: Vec<FulfillmentLine>,
    pub tracking: Vec<Tracking>,
    pub shipment_status: ShipmentStatus,
    pub created_at: String,
    pub updated_at: String,
}

/// A tracking number as given.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrackingInput {
    /// 1 to 100 characters.
    #[schemars(length(min = 1, max = 100), pattern(fields::LINE))]
    pub number: String,
    /// The carrier (UPS, USPS, FedEx, DHL Express, Canada Post, Royal Mail, Australia Post,
    /// Thailand Post … give a tracking link without `url`).
    pub company: Option<String>,
    /// http or https.
    pub url: Option<String>,
}

/// One tracking number or several.
#[derive(Debug, Clone, JsonSchema)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

/// Read by hand, not derived: serde's untagged enums buffer their input and read it again past
/// the body's objects-only check, so `[["1Z999", "UPS"]]` would read as a tracking entry by
/// position. Here an entry must be an object, alone or in a list.
impl<'de, T: serde::de::DeserializeOwned> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let one = |v: serde_json::Value| match v {
            v @ serde_json::Value::Object(_) => serde_json::from_value::<T>(v).map_err(D::Error::custom),
            _ => Err(D::Error::custom("each entry must be an object")),
        };
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::Array(items) => items.into_iter().map(one).collect::<Result<_, _>>().map(OneOrMany::Many),
            v => one(v).map(OneOrMany::One),
        }
    }
}

/// A line to fulfill and how many of its units.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FulfillLineInput {
    pub line_item_id: Uuid,
    /// At least 1, at most what remains of the line in this fulfillment order.
    #[schemars(range(min = 1))]
    pub quantity: u32,
}

/// `POST …/fulfillment-orders/{id}/fulfill`.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FulfillInput {
    /// Absent: every unit that remains.
    #[schemars(length(min = 1))]
    pub line_items: Option<Vec<FulfillLineInput>>,
    pub tracking: Option<OneOrMany<TrackingInput>>,
    /// Mail the shipping confirmation to the customer (default true).
    pub notify_customer: Option<bool>,
}

/// `PUT …/fulfillments/{fulfillmentId}/tracking/{trackingId}`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrackingUpdate {
    /// 1 to 100 characters.
    #[schemars(length(min = 1, max = 100), pattern(fields::LINE))]
    pub number: String,
    pub company: Option<String>,
    pub url: Option<String>,
    /// The shipment's progress, for the whole fulfillment.
    pub shipment_status: Option<ShipmentStatus>,
    /// Mail the tracking update to the customer (default true).
    pub notify_customer: Option<bool>,
}

/// Most tracking numbers on one fulfillment.
pub const MAX_TRACKING: usize = 20;

/// The tracking pages of known carriers: `{}` is the number.
const CARRIERS: &[(&str, &str)] = &[
    ("ups", "https://www.ups.com/track?tracknum={}"),
    ("usps", "https://tools.usps.com/go/TrackConfirmAction?tLabels={}"),
    ("fedex", "https://www.fedex.com/fedextrack/?trknbr={}"),
    ("dhl", "https://www.dhl.com/global-en/home/tracking/tracking-express.html?tracking-id={}"),
    ("dhl express", "https://www.dhl.com/global-en/home/tracking/tracking-express.html?tracking-id={}"),
    ("canada post", "https://www.canadapost-postescanada.ca/track-reperage/en#/search?searchFor={}"),
    ("royal mail", "https://www.royalmail.com/track-your-item#/tracking-results/{}"),
    ("australia post", "https://auspost.com.au/mypost/track/details/{}"),
    ("thailand post", "https://track.thailandpost.co.th/?trackNumber={}"),
    ("japan post", "https://trackings.post.japanpost.jp/services/srv/search/?requestNo1={}"),
    ("la poste", "https://www.laposte.fr/outils/suivre-vos-envois?code={}"),
    ("deutsche post", "https://www.deutschepost.de/de/s/sendungsverfolgung.html?piececode={}"),
];

/// The tracking link of `company` for `number`, when the carrier is known.
pub fn carrier_url(company: &str, number: &str) -> Option<String> {
    let company = company.trim().to_lowercase();
    let (_, pattern) = CARRIERS.iter().find(|(name, _)| *name == company)?;
    let encoded: String = url::form_urlencoded::byte_serialize(number.as_bytes()).collect();
    Some(pattern.replace("{}", &encoded))
}

impl TrackingInput {
    /// The tracking entry, checked into `c` under `at` (`tracking[0]`).
    pub fn tracking(&self, c: &mut Check, at: &str, id: Uuid) -> Tracking {
        tracking(c, at, id, &self.number, self.company.as_deref(), self.url.as_deref())
    }
}

impl TrackingUpdate {
    pub fn tracking(&self, id: Uuid) -> ApiResult<Tracking> {
        let mut c = Check::new();
        let t = tracking(&mut c, "", id, &self.number, self.company.as_deref(), self.url.as_deref());
        c.finish()?;
        Ok(t)
    }
}

fn tracking(c: &mut Check, at: &str, id: Uuid, number: &str, company: Option<&str>, url: Option<&str>) -> Tracking {
    let field = |name: &str| if at.is_empty() { name.to_string() } else { format!("{at}.{name}") };
    check_line(c, &field("number"), number, 100, true);
    let company = company.map(str::trim).filter(|s| !s.is_empty());
    if let Some(co) = company {
        check_line(c, &field("company"), co, 100, false);
    }
    let url = url.map(str::trim).filter(|s| !s.is_empty());
    if let Some(u) = url {
        let ok =
            u.len() <= 2048 && url::Url::parse(u).is_ok_and(|p| matches!(p.scheme(), "http" | "https") && p.host_str().is_some());
        c.ensure(ok, &field("url"), "must be an http or https URL");
    }
    let number = number.trim().to_string();
    let url = url.map(str::to_string).or_else(|| company.and_then(|co| carrier_url(co, &number)));
    Tracking { id, number, company: company.map(str::to_string), url }
}

/// A line of an order to place: which variant, how many units, whether its stock is tracked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Want {
    pub variant: Uuid,
    pub quantity: u32,
    pub tracked: bool,
}

/// Where the lines of an order go: for each location used (by its index in the priority
/// order), the units of each line (by index) it takes. Groups are in priority order.
pub type Allocation = Vec<(usize, Vec<(usize, u32)>)>;

/// Places an order's lines at `locations` (sellable ones, in priority order; never empty):
/// the first whose `available` covers every tracked line takes all; else each line goes to the
/// first covering it whole; a line none covers is split by priority; untracked lines join the
/// first group. The variant whose units no combination covers is the error.
pub fn allocate(locations: usize, available: impl Fn(usize, Uuid) -> i64, wants: &[Want]) -> Result<Allocation, Uuid> {
    use std::collections::HashMap;
    let tracked: Vec<usize> = (0..wants.len()).filter(|i| wants.get(*i).is_some_and(|w| w.tracked)).collect();
    // Units asked of each variant (two lines may name the same one).
    let mut asked: HashMap<Uuid, i64> = HashMap::new();
    for w in wants.iter().filter(|w| w.tracked) {
        let n = asked.entry(w.variant).or_default();
        *n = n.saturating_add(i64::from(w.quantity));
    }
    let all = |l: usize| asked.iter().all(|(v, n)| available(l, *v) >= *n);
    let mut groups: Vec<(usize, Vec<(usize, u32)>)> = Vec::new();
    if let Some(l) = (0..locations).find(|l| all(*l)) {
        groups.push((l, tracked.iter().filter_map(|i| wants.get(*i).map(|w| (*i, w.quantity))).collect()));
    } else {
        // What each location still has once earlier lines took theirs.
        let mut taken: HashMap<(usize, Uuid), i64> = HashMap::new();
        let left = |taken: &HashMap<(usize, Uuid), i64>, l: usize, v: Uuid| {
            available(l, v).saturating_sub(taken.get(&(l, v)).copied().unwrap_or(0)).max(0)
        };
        let place = |groups: &mut Vec<(usize, Vec<(usize, u32)>)>, l: usize, line: usize, n: u32| match groups
            .iter_mut()
            .find(|(g, _)| *g == l)
        {
            Some((_, lines)) => lines.push((line, n)),
            None => groups.push((l, vec![(line, n)])),
        };
        for &i in &tracked {
            let Some(w) = wants.get(i) else { continue };
            let need = i64::from(w.quantity);
            if let Some(l) = (0..locations).find(|l| left(&taken, *l, w.variant) >= need) {
                let t = taken.entry((l, w.variant)).or_default();
                *t = t.saturating_add(need);
                place(&mut groups, l, i, w.quantity);
                continue;
            }
            let mut rest = need;
            for l in 0..locations {
                let take = left(&taken, l, w.variant).min(rest);
                if take > 0 {
                    let t = taken.entry((l, w.variant)).or_default();
                    *t = t.saturating_add(take);
                    place(&mut groups, l, i, u32::try_from(take).unwrap_or(u32::MAX));
                    rest = rest.saturating_sub(take);
                }
                if rest == 0 {
                    break;
                }
            }
            if rest > 0 {
                return Err(w.variant);
            }
        }
        groups.sort_by_key(|(l, _)| *l);
    }
    let untracked: Vec<(usize, u32)> =
        (0..wants.len()).filter_map(|i| wants.get(i).filter(|w| !w.tracked).map(|w| (i, w.quantity))).collect();
    if !untracked.is_empty() {
        match groups.first_mut() {
            Some((_, lines)) => lines.extend(untracked),
            None => groups.push((0, untracked)),
        }
    }
    for (_, lines) in &mut groups {
        lines.sort_by_key(|(i, _)| *i);
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn the_table_of_transitions() {
        use FoStatus::*;
        let cases: &[(FoStatus, Action, bool, Option<FoStatus>)] = &[
            (Open, Action::Hold, false, Some(OnHold)),
            (Open, Action::ReleaseHold, false, None),
            (Open, Action::Move, false, Some(Open)),
            (Open, Action::Cancel, false, Some(Cancelled)),
            (Open, Action::Fulfill { left: true }, false, Some(InProgress)),
            (Open, Action::Fulfill { left: false }, false, Some(Closed)),
            (Open, Action::Open, false, None),
            (InProgress, Action::Hold, true, Some(OnHold)),
            (InProgress, Action::ReleaseHold, true, None),
            (InProgress, Action::Move, true, Some(Closed)),
            (InProgress, Action::Cancel, true, Some(Incomplete)),
            (InProgress, Action::Fulfill { left: false }, true, Some(Closed)),
            (OnHold, Action::Hold, false, None),
            (OnHold, Action::ReleaseHold, false, Some(Open)),
            (OnHold, Action::ReleaseHold, true, Some(InProgress)),
            (OnHold, Action::Move, false, None),
            (OnHold, Action::Cancel, false, Some(Cancelled)),
            (OnHold, Action::Cancel, true, Some(Incomplete)),
            (OnHold, Action::Fulfill { left: false }, false, None),
            (Scheduled, Action::Hold, false, None),
            (Scheduled, Action::ReleaseHold, false, None),
            (Scheduled, Action::Move, false, Some(Scheduled)),
            (Scheduled, Action::Cancel, false, Some(Cancelled)),
            (Scheduled, Action::Fulfill { left: false }, false, None),
            (Scheduled, Action::Open, false, Some(Open)),
        ];
        for (from, action, shipped, to) in cases {
            assert_eq!(next(*from, *action, *shipped).ok(), *to, "{from:?} {action:?}");
        }
        for done in [Closed, Cancelled, Incomplete] {
            for a in
                [Action::Hold, Action::ReleaseHold, Action::Move, Action::Cancel, Action::Fulfill { left: false }, Action::Open]
            {
                let e = next(done, a, true).unwrap_err();
                assert_eq!(e.code, Code::CONFLICT);
                assert!(e.message.contains(done.name()), "{}", e.message);
            }
        }
    }

    #[test]
    fn one_location_covering_everything_takes_all() {
        // The second location covers both lines; the first only one.
        let stock = |l: usize, var: Uuid| match (l, var.as_u128()) {
            (0, 1) => 5,
            (1, 1) | (1, 2) => 5,
            _ => 0,
        };
        let wants = [
            Want { variant: v(1), quantity: 2, tracked: true },
            Want { variant: v(9), quantity: 1, tracked: false },
            Want { variant: v(2), quantity: 3, tracked: true },
        ];
        assert_eq!(allocate(3, stock, &wants).unwrap(), vec![(1, vec![(0, 2), (1, 1), (2, 3)])]);
    }

    #[test]
    fn lines_go_whole_where_they_can_and_split_where_none_covers() {
        let stock = |l: usize, var: Uuid| match (l, var.as_u128()) {
            (0, 1) => 2,
            (1, 1) => 1,
            (2, 1) => 4,
            (1, 2) => 3,
            _ => 0,
        };
        let wants = [
            Want { variant: v(1), quantity: 4, tracked: true },
            Want { variant: v(2), quantity: 2, tracked: true },
            Want { variant: v(3), quantity: 1, tracked: false },
        ];
        // Variant 1 goes whole to location 2; variant 2 whole to location 1; the untracked line
        // joins the first group (location 1).
        assert_eq!(allocate(3, stock, &wants).unwrap(), vec![(1, vec![(1, 2), (2, 1)]), (2, vec![(0, 4)])]);
        let wants = [Want { variant: v(1), quantity: 6, tracked: true }];
        assert_eq!(allocate(3, stock, &wants).unwrap(), vec![(0, vec![(0, 2)]), (1, vec![(0, 1)]), (2, vec![(0, 3)])]);
        let wants = [Want { variant: v(1), quantity: 8, tracked: true }];
        assert_eq!(allocate(3, stock, &wants), Err(v(1)));
    }

    proptest! {
        #[test]
        fn every_unit_is_placed_once_and_no_location_gives_more_than_it_has(
            stock in proptest::collection::vec(proptest::collection::vec(0i64..6, 3), 1..5),
            wants in proptest::collection::vec((0u128..3, 1u32..6, any::<bool>()), 1..6),
        ) {
            let wants: Vec<Want> = wants.into_iter().map(|(var, quantity, tracked)| Want { variant: v(var), quantity, tracked }).collect();
            let available = |l: usize, var: Uuid| stock[l][var.as_u128() as usize];
            match allocate(stock.len(), available, &wants) {
                Ok(groups) => {
                    let mut placed = vec![0u32; wants.len()];
                    let mut used = std::collections::HashMap::new();
                    for (l, lines) in &groups {
                        for (i, n) in lines {
                            placed[*i] += n;
                            if wants[*i].tracked {
                                *used.entry((*l, wants[*i].variant)).or_insert(0i64) += i64::from(*n);
                            }
                        }
                    }
                    prop_assert_eq!(placed, wants.iter().map(|w| w.quantity).collect::<Vec<_>>());
                    for ((l, var), n) in used {
                        prop_assert!(n <= available(l, var));
                    }
                    let locations: Vec<usize> = groups.iter().map(|(l, _)| *l).collect();
                    prop_assert!(locations.windows(2).all(|w| w[0] < w[1]));
                }
                Err(var) => {
                    let asked: i64 = wants.iter().filter(|w| w.tracked && w.variant == var).map(|w| i64::from(w.quantity)).sum();
                    let have: i64 = (0..stock.len()).map(|l| available(l, var)).sum();
                    prop_assert!(asked > have);
                }
            }
        }
    }
}
