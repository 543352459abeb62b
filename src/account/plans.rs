//! Platform plan subscriptions: the plan catalogue (built in, or from a `--plans` JSON file), a
//! user's subscription, and the store limit that `POST /stores` enforces.
//!
//! There is no billing here: a paid plan renews by itself every 30 days until it is cancelled;
//! a cancelled plan stays in force until the end of its current period and then falls back to
//! the catalogue's default plan. Renewal is computed when the subscription is read, so no
//! background job is needed and a restart changes nothing.

use std::path::Path;

use redb::{ReadableDatabase, ReadableTable, WriteTransaction};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::account::AccountService;
use crate::account::model::Membership;
use crate::domain::money::Currency;
use crate::domain::role::Role;
use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult, Code};
use crate::storage::codec::{decode, encode};
use crate::storage::tables::{MEMBERS, SUBSCRIPTIONS, USER_STORES};

/// A billing period: 30 days, in milliseconds.
pub const PERIOD_MS: i64 = 30 * 24 * 3600 * 1000;

/// One plan of the catalogue.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Plan {
    /// Stable id clients subscribe with (`free`, `basic`, `pro`).
    pub id: String,
    pub name: String,
    /// How many stores a subscriber may own; `null` for no limit.
    pub store_limit: Option<u32>,
    /// Price per 30-day period.
    pub price: PlanPrice,
}

/// A plan's price in minor units.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanPrice {
    pub amount: i64,
    pub currency: String,
}

/// The plan catalogue, exactly as a `--plans` file holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Catalogue {
    /// The plan of users without a subscription and of cancelled ones after their period.
    pub default_plan: String,
    pub plans: Vec<Plan>,
}

impl Default for Catalogue {
    /// The built-in catalogue: free (1 store), basic (3 stores), pro (25 stores), in USD.
    fn default() -> Self {
        let plan = |id: &str, name: &str, limit: u32, amount: i64| Plan {
            id: id.into(),
            name: name.into(),
            store_limit: Some(limit),
            price: PlanPrice { amount, currency: "USD".into() },
        };
        Catalogue {
            default_plan: "free".into(),
            plans: vec![plan("free", "Free", 1, 0), plan("basic", "Basic", 3, 2900), plan("pro", "Pro", 25, 9900)],
        }
    }
}

impl Catalogue {
    /// Reads and checks a catalogue file (see `docs`: the `--plans` format).
    pub fn load(path: &Path) -> Result<Catalogue, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the plans file {}: {e}", path.display()))?;
        let c: Catalogue =
            serde_json::from_str(&text).map_err(|e| format!("the plans file {} is invalid: {e}", path.display()))?;
        c.validate().map_err(|e| format!("the plans file {} is invalid: {e}", path.display()))?;
        Ok(c)
    }

    /// A catalogue is usable when ids are unique and well-formed, prices are whole non-negative
    /// amounts in a known currency, and the default plan exists.
    pub fn validate(&self) -> Result<(), String> {
        if self.plans.is_empty() {
            return Err("it has no plans".into());
        }
        for (i, p) in self.plans.iter().enumerate() {
            let id_ok = !p.id.is_empty()
                && p.id.len() <= 64
                && p.id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_');
            if !id_ok {
                return Err(format!("plan {i}: id {:?} must be 1 to 64 of a-z, 0-9, - and _", p.id));
            }
            if self.plans[..i].iter().any(|q| q.id == p.id) {
                return Err(format!("plan id {:?} appears twice", p.id));
            }
            if p.name.trim().is_empty() {
                return Err(format!("plan {:?}: name is empty", p.id));
            }
            if p.price.amount < 0 {
                return Err(format!("plan {:?}: price.amount must not be negative", p.id));
            }
            if Currency::parse(&p.price.currency).is_none() {
                return Err(format!("plan {:?}: {:?} is not an ISO 4217 currency", p.id, p.price.currency));
            }
        }
        if self.get(&self.default_plan).is_none() {
            return Err(format!("defaultPlan {:?} is not one of the plans", self.default_plan));
        }
        Ok(())
    }

    pub fn get(&self, id: &str) -> Option<&Plan> {
        self.plans.iter().find(|p| p.id == id)
    }

    /// The fallback plan. `validate` guarantees it exists; the first plan stands in otherwise.
    pub fn default_plan(&self) -> &Plan {
        self.get(&self.default_plan).unwrap_or(&self.plans[0])
    }
}

/// A user's plan subscription (`subscriptions` table). Users without a row are on the default
/// plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Subscription {
    pub plan_id: String,
    pub started_at: i64,
    /// The period the subscription was last written in; later periods follow every 30 days.
    pub period_start: i64,
    pub cancel_at_period_end: bool,
    pub canceled_at: Option<i64>,
    pub updated_at: i64,
}

/// `POST /subscriptions`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Subscribe {
    /// A plan id of `GET /subscriptions/plans`.
    pub plan_id: String,
}

/// The subscription in force at a moment: the plan and, for paid plans, the current period.
#[derive(Debug, Clone)]
pub struct Effective<'a> {
    pub plan: &'a Plan,
    /// `(start, end)` of the current period; `None` on the default plan.
    pub period: Option<(i64, i64)>,
    pub cancel_at_period_end: bool,
}

impl Catalogue {
    /// What a stored subscription amounts to at `now`: renewed periods rolled forward, a
    /// cancelled one past its end (or a plan since removed from the catalogue) on the default.
    pub fn effective<'a>(&'a self, sub: Option<&Subscription>, now: i64) -> Effective<'a> {
        let fallback = Effective { plan: self.default_plan(), period: None, cancel_at_period_end: false };
        let Some(s) = sub else { return fallback };
        let Some(plan) = self.get(&s.plan_id) else { return fallback };
        if plan.id == self.default_plan {
            return fallback;
        }
        let end = s.period_start + PERIOD_MS;
        if now < end {
            return Effective { plan, period: Some((s.period_start, end)), cancel_at_period_end: s.cancel_at_period_end };
        }
        if s.cancel_at_period_end {
            return fallback;
        }
        let start = s.period_start + (now - s.period_start) / PERIOD_MS * PERIOD_MS;
        Effective { plan, period: Some((start, start + PERIOD_MS)), cancel_at_period_end: false }
    }
}

// The views below list their fields in key order, as these answers always have.

/// A plan as `GET /subscriptions/plans` shows it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlanView {
    pub id: String,
    /// Always `month`: a period is 30 days.
    pub interval: &'static str,
    pub name: String,
    pub period_days: i64,
    pub price: PriceView,
    /// How many stores a subscriber may own; `null` for no limit.
    pub store_limit: Option<u32>,
}

/// A plan's price per period, in minor units and formatted.
#[derive(Serialize, JsonSchema)]
pub struct PriceView {
    pub amount: i64,
    pub currency: String,
    pub formatted: String,
}

/// A user's plan subscription as `GET /subscriptions` shows it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionView {
    pub cancel_at_period_end: bool,
    /// `null` on the default plan, which has no period.
    pub current_period_end: Option<String>,
    pub current_period_start: Option<String>,
    pub plan: PlanView,
    pub plan_id: String,
    /// Always `ACTIVE`.
    pub status: &'static str,
    pub store_limit: Option<u32>,
    pub stores_owned: u64,
}

/// A plan as `GET /subscriptions/plans` shows it.
pub fn plan_view(p: &Plan) -> PlanView {
    let formatted = Currency::parse(&p.price.currency).map(|c| c.format(p.price.amount)).unwrap_or_default();
    PlanView {
        id: p.id.clone(),
        interval: "month",
        name: p.name.clone(),
        period_days: PERIOD_MS / (24 * 3600 * 1000),
        price: PriceView { amount: p.price.amount, currency: p.price.currency.clone(), formatted },
        store_limit: p.store_limit,
    }
}

/// How many stores `user` owns. Generic over read and write transactions' tables.
pub fn owned_stores<L, M>(links: &L, members: &M, user: Uuid) -> ApiResult<u64>
where
    L: ReadableTable<(u128, u128), ()>,
    M: ReadableTable<(u128, u128), &'static [u8]>,
{
    owned_up_to(links, members, user, u64::MAX)
}

/// The stores `user` owns, counted until `cap`: a check against a limit needs no more.
fn owned_up_to<L, M>(links: &L, members: &M, user: Uuid, cap: u64) -> ApiResult<u64>
where
    L: ReadableTable<(u128, u128), ()>,
    M: ReadableTable<(u128, u128), &'static [u8]>,
{
    let mut n = 0;
    for item in links.range((user.as_u128(), 0)..=(user.as_u128(), u128::MAX))? {
        if n >= cap {
            break;
        }
        let (k, _) = item?;
        let Some(m) = members.get((k.value().1, user.as_u128()))? else { continue };
        let m: Membership = decode(m.value())?;
        if m.role == Role::Owner {
            n += 1;
        }
    }
    Ok(n)
}

/// Fails with 422 unless `user` may own one more store on `plan`. A plan without a limit counts
/// nothing, and one with a limit counts the owned stores up to it (all of them only for the
/// refusal's message), so a store create costs no more for an owner of thousands.
fn check_room<L, M>(links: &L, members: &M, user: Uuid, plan: &Plan, who_owns: &str) -> ApiResult<()>
where
    L: ReadableTable<(u128, u128), ()>,
    M: ReadableTable<(u128, u128), &'static [u8]>,
{
    let Some(limit) = plan.store_limit.map(u64::from) else { return Ok(()) };
    if owned_up_to(links, members, user, limit)? < limit {
        return Ok(());
    }
    Err(limit_reached(plan, owned_stores(links, members, user)?, who_owns))
}

/// The 422 of a user at their plan's store limit; `who_owns` is "you own" or "the new owner owns".
pub fn limit_reached(plan: &Plan, owned: u64, who_owns: &str) -> ApiError {
    let limit = plan.store_limit.unwrap_or(u32::MAX);
    ApiError::msg(
        Code::BUSINESS_RULE,
        format!(
            "the {} plan allows {limit} store{} and {who_owns} {owned}; upgrade the plan (POST /subscriptions) or close a store (DELETE /stores/{{storeId}}) to own more",
            plan.name,
            if limit == 1 { "" } else { "s" }
        ),
    )
}

/// Fails with 422 unless `user` may own one more store under the plan in force at `now`. Runs
/// inside the directory write that adds the ownership, so concurrent requests cannot all pass.
pub fn ensure_room(txn: &WriteTransaction, catalogue: &Catalogue, user: Uuid, now: i64, who_owns: &str) -> ApiResult<()> {
    let sub: Option<Subscription> = txn.open_table(SUBSCRIPTIONS)?.get(user.as_u128())?.map(|v| decode(v.value())).transpose()?;
    let plan = catalogue.effective(sub.as_ref(), now).plan;
    check_room(&txn.open_table(USER_STORES)?, &txn.open_table(MEMBERS)?, user, plan, who_owns)
}

impl AccountService {
    /// The plan catalogue in force.
    pub fn plans(&self) -> &Catalogue {
        &self.plans
    }

    fn stored_subscription(&self, user: Uuid) -> ApiResult<Option<Subscription>> {
        let txn = self.db.begin_read()?;
        let t = txn.open_table(SUBSCRIPTIONS)?;
        t.get(user.as_u128())?.map(|v| decode(v.value())).transpose()
    }

    /// A user's subscription as `GET /subscriptions` shows it.
    pub fn subscription_view(&self, user: Uuid) -> ApiResult<SubscriptionView> {
        let sub = self.stored_subscription(user)?;
        let owned = {
            let txn = self.db.begin_read()?;
            owned_stores(&txn.open_table(USER_STORES)?, &txn.open_table(MEMBERS)?, user)?
        };
        let e = self.plans.effective(sub.as_ref(), self.clock.now_ms());
        Ok(SubscriptionView {
            cancel_at_period_end: e.cancel_at_period_end,
            current_period_end: e.period.map(|(_, end)| rfc3339(end)),
            current_period_start: e.period.map(|(s, _)| rfc3339(s)),
            plan: plan_view(e.plan),
            plan_id: e.plan.id.clone(),
            status: "ACTIVE",
            store_limit: e.plan.store_limit,
            stores_owned: owned,
        })
    }

    /// Fails with 422 when `user` may not own another store under their current plan. Checked
    /// before a store is created and again in the directory write ([`AccountService::add_store`]).
    pub fn ensure_store_allowed(&self, user: Uuid) -> ApiResult<()> {
        let txn = self.db.begin_read()?;
        let sub: Option<Subscription> =
            txn.open_table(SUBSCRIPTIONS)?.get(user.as_u128())?.map(|v| decode(v.value())).transpose()?;
        let plan = self.plans.effective(sub.as_ref(), self.clock.now_ms()).plan;
        check_room(&txn.open_table(USER_STORES)?, &txn.open_table(MEMBERS)?, user, plan, "you own")
    }

    /// Subscribes `user` to a plan (or changes plan): a new 30-day period starts now. Moving to
    /// the default plan ends the paid subscription at once. A plan whose store limit is below
    /// the stores the user already owns is refused.
    pub async fn subscribe(&self, user: Uuid, plan_id: String) -> ApiResult<()> {
        let plan = self
            .plans
            .get(&plan_id)
            .cloned()
            .ok_or_else(|| ApiError::field("planId", format!("is not a plan; one of: {}", self.plan_ids().join(", "))))?;
        let is_default = plan.id == self.plans.default_plan;
        let now = self.clock.now_ms();
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                let owned = owned_stores(&txn.open_table(USER_STORES)?, &txn.open_table(MEMBERS)?, user)?;
                if plan.store_limit.is_some_and(|l| owned > u64::from(l)) {
                    return Err(ApiError::msg(
                        Code::BUSINESS_RULE,
                        format!(
                            "you own {owned} stores and the {} plan allows {}; transfer or close stores first",
                            plan.name,
                            plan.store_limit.unwrap_or_default()
                        ),
                    ));
                }
                let row = (!is_default).then(|| Subscription {
                    plan_id: plan.id.clone(),
                    started_at: now,
                    period_start: now,
                    cancel_at_period_end: false,
                    canceled_at: None,
                    updated_at: now,
                });
                put_subscription(txn, user, row.as_ref())
            })
            .await
    }

    /// Cancels at the end of the current period: the plan stays in force until then.
    /// Cancelling again is accepted and changes nothing; the default plan has nothing to cancel.
    pub async fn cancel_subscription(&self, user: Uuid) -> ApiResult<()> {
        let plans = self.plans.clone();
        let now = self.clock.now_ms();
        self.writer
            .write(None, move |tx| {
                let txn = tx.raw();
                let sub: Option<Subscription> =
                    txn.open_table(SUBSCRIPTIONS)?.get(user.as_u128())?.map(|v| decode(v.value())).transpose()?;
                let e = plans.effective(sub.as_ref(), now);
                let (Some(mut s), Some((start, _))) = (sub.clone(), e.period) else {
                    return Err(ApiError::msg(Code::CONFLICT, "you are on the default plan: there is no subscription to cancel"));
                };
                if s.cancel_at_period_end {
                    return Ok(());
                }
                // Pin the period in force now, so the plan ends with it and not with a later one.
                s.period_start = start;
                s.cancel_at_period_end = true;
                s.canceled_at = Some(now);
                s.updated_at = now;
                put_subscription(txn, user, Some(&s))
            })
            .await
    }

    fn plan_ids(&self) -> Vec<&str> {
        self.plans.plans.iter().map(|p| p.id.as_str()).collect()
    }
}

/// The one writer of the `subscriptions` row: `None` removes it (back to the default plan).
fn put_subscription(txn: &WriteTransaction, user: Uuid, sub: Option<&Subscription>) -> ApiResult<()> {
    let mut t = txn.open_table(SUBSCRIPTIONS)?;
    match sub {
        Some(s) => t.insert(user.as_u128(), encode(s)?.as_slice())?,
        None => t.remove(user.as_u128())?,
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(plan: &str, start: i64, cancel: bool) -> Subscription {
        Subscription {
            plan_id: plan.into(),
            started_at: start,
            period_start: start,
            cancel_at_period_end: cancel,
            canceled_at: None,
            updated_at: start,
        }
    }

    #[test]
    fn the_builtin_catalogue_is_valid() {
        let c = Catalogue::default();
        c.validate().unwrap();
        assert_eq!(c.default_plan().id, "free");
        assert_eq!(c.get("basic").and_then(|p| p.store_limit), Some(3));
    }

    #[test]
    fn periods_renew_until_cancelled() {
        let c = Catalogue::default();
        assert_eq!(c.effective(None, 0).plan.id, "free");
        let s = sub("basic", 1000, false);
        let e = c.effective(Some(&s), 1000 + PERIOD_MS - 1);
        assert_eq!((e.plan.id.as_str(), e.period), ("basic", Some((1000, 1000 + PERIOD_MS))));
        let e = c.effective(Some(&s), 1000 + 2 * PERIOD_MS + 5);
        assert_eq!(e.period, Some((1000 + 2 * PERIOD_MS, 1000 + 3 * PERIOD_MS)));
        let cancelled = sub("basic", 1000, true);
        assert_eq!(c.effective(Some(&cancelled), 1000 + PERIOD_MS - 1).plan.id, "basic");
        assert_eq!(c.effective(Some(&cancelled), 1000 + PERIOD_MS).plan.id, "free");
        assert_eq!(c.effective(Some(&sub("gone", 1000, false)), 2000).plan.id, "free");
    }

    #[test]
    fn bad_catalogues_are_refused() {
        let c = Catalogue { default_plan: "nope".into(), ..Catalogue::default() };
        assert!(c.validate().unwrap_err().contains("defaultPlan"));
        let mut c = Catalogue::default();
        c.plans[1].id = "free".into();
        assert!(c.validate().unwrap_err().contains("twice"));
        let mut c = Catalogue::default();
        c.plans[2].price.currency = "ZZZ".into();
        assert!(c.validate().is_err());
    }
}
