//! Where the stock is: locations, inventory levels and their history, in a cell. A merchant's
//! adjustments and counts are here; orders and fulfillments move stock through
//! [`levels::apply`] in their own writes.

pub mod history;
pub mod levels;
pub mod locations;
pub mod variant_page;

use uuid::Uuid;

use crate::cells::Cell;
use crate::domain::stock::{Actor, Adjust, Quantities, SetLevel, Why};
use crate::error::{ApiError, ApiResult, Code};
use levels::{Change, LevelView};

/// `POST S/inventory-levels/adjust`: available (and onHand) move by `delta`.
pub async fn adjust(cell: &Cell, store: Uuid, input: Adjust, actor: Actor) -> ApiResult<LevelView> {
    let (reason, note) = input.validate()?;
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let why = Why { reason, actor, reference: None };
            let change = Change::available(input.variant_id, input.location_id, input.delta);
            let levels = levels::apply(tx, store, &[change], &why, note.as_deref(), now)?;
            levels.first().map(|l| l.view()).ok_or_else(|| ApiError::internal("an adjustment changes one level"))
        })
        .await
}

/// `POST S/inventory-levels/set`: available becomes the number given (409 when
/// `compareQuantity` is given and available is no longer it).
pub async fn set(cell: &Cell, store: Uuid, input: SetLevel, actor: Actor) -> ApiResult<LevelView> {
    let (reason, note) = input.validate()?;
    let now = cell.clock.now_ms();
    cell.writer
        .write(Some(store), move |tx| {
            let current = levels::level(tx, store, input.variant_id, input.location_id)?;
            let was = current.as_ref().map_or(0, |l| l.quantities.available);
            if let Some(expected) = input.compare_quantity
                && expected != was
            {
                return Err(ApiError::msg(
                    Code::CONFLICT,
                    format!("available is {was}, not {expected}: it changed since it was read"),
                ));
            }
            if was == input.available {
                // Nothing moves: the level as it is (zeros for one never held), unchanged.
                return match current {
                    Some(l) => Ok(l.view()),
                    None => unchanged(tx, store, input.variant_id, input.location_id),
                };
            }
            let why = Why { reason, actor, reference: None };
            let delta = Quantities { available: input.available.saturating_sub(was), ..Default::default() };
            let change = Change { variant: input.variant_id, location: input.location_id, delta };
            let levels = levels::apply(tx, store, &[change], &why, note.as_deref(), now)?;
            levels.first().map(|l| l.view()).ok_or_else(|| ApiError::internal("a set changes one level"))
        })
        .await
}

/// The zero level of a variant at a location that never held it (both must exist).
fn unchanged(tx: &crate::storage::tx::Tx, store: Uuid, variant: Uuid, location: Uuid) -> ApiResult<LevelView> {
    let product = levels::product_of(tx, store, variant)?.ok_or_else(|| ApiError::field("variantId", "no such variant"))?;
    crate::storage::record::load::<crate::domain::stock::Location>(tx, store, location)?
        .ok_or_else(|| ApiError::field("locationId", "no such location"))?;
    Ok(LevelView::never_held(variant, product, location))
}
