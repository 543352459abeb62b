//! The arithmetic of pricing: percentages, tax extracted from inclusive prices, and the
//! largest-remainder split of a whole amount over parts.
#![allow(
    clippy::arithmetic_side_effects,
    reason = "amounts come from the calculation, bounded by MAX_AMOUNT (1e15); products are taken in i128, \
              and divisors are sums of positive weights, checked non-zero before dividing"
)]

use crate::domain::money::round_div;

/// Basis points in 100 %.
pub const BASIS: i64 = 10_000;

/// `amount × basis_points / 10 000`, rounded half away from zero (the one rounding rule).
pub fn percent_of(amount: i64, basis_points: i64) -> i64 {
    round_div(i128::from(amount) * i128::from(basis_points), i128::from(BASIS))
}

/// The tax contained in a tax-inclusive `gross` at a combined `basis_points`:
/// `gross − round(gross × 10 000 / (10 000 + basis_points))`, so net + tax = gross exactly.
pub fn included_tax(gross: i64, basis_points: i64) -> i64 {
    gross - round_div(i128::from(gross) * i128::from(BASIS), i128::from(BASIS + basis_points.max(0)))
}

/// Splits `total` over `weights` in proportion, by the largest-remainder method.
///
/// Each part starts as `floor(total × weight / Σweights)`; the units still missing go one each to
/// the parts with the largest fractional remainders, ties to the lower index. So the parts always
/// sum to `total` exactly, and with `0 ≤ total ≤ Σweights` each part lies between 0 and its weight
/// (a capped discount never pushes a part below zero). Negative weights count as zero. With nothing to
/// spread over (`total ≤ 0` or all weights zero) every part is zero: callers cap `total` at
/// `Σweights` first.
pub fn allocate(total: i64, weights: &[i64]) -> Vec<i64> {
    let w: Vec<i128> = weights.iter().map(|&x| i128::from(x.max(0))).collect();
    let sum: i128 = w.iter().sum();
    if sum == 0 || total <= 0 {
        return vec![0; weights.len()];
    }
    let t = i128::from(total);
    let mut parts: Vec<i128> = Vec::with_capacity(w.len());
    let mut remainders: Vec<(i128, usize)> = Vec::with_capacity(w.len());
    for (i, wi) in w.iter().enumerate() {
        let p = t * wi;
        parts.push(p / sum);
        remainders.push((p % sum, i));
    }
    // Fewer than `len` units are missing: the fractional parts sum to less than one per part.
    let missing = t - parts.iter().sum::<i128>();
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(_, i) in remainders.iter().take(usize::try_from(missing).unwrap_or(0)) {
        parts[i] += 1;
    }
    // Each part is at most `total`, which is an i64.
    parts.into_iter().map(|p| i64::try_from(p).unwrap_or(i64::MAX)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_round_half_away_from_zero() {
        assert_eq!(percent_of(1999, 1000), 200); // 199.9 → 200
        assert_eq!(percent_of(5, 1000), 1); // 0.5 → 1
        assert_eq!(percent_of(4, 1000), 0); // 0.4 → 0
        assert_eq!(percent_of(1234, BASIS), 1234);
    }

    #[test]
    fn included_tax_splits_gross_exactly() {
        // 1100 incl. 10 % → net 1000, tax 100.
        assert_eq!(included_tax(1100, 1000), 100);
        // 1000 incl. 20 % → net 833.33 → 833, tax 167.
        assert_eq!(included_tax(1000, 2000), 167);
        assert_eq!(included_tax(0, 2000), 0);
        assert_eq!(included_tax(999, 0), 0);
    }

    #[test]
    fn largest_remainder_sums_exactly() {
        // 100 over three equal weights: 33.33 each; the lowest index gets the extra unit.
        assert_eq!(allocate(100, &[1, 1, 1]), [34, 33, 33]);
        // 10 over 1:2:3 → 1.67, 3.33, 5 → 1, 3, 5 and the largest remainder (0.67) gets one.
        assert_eq!(allocate(10, &[1, 2, 3]), [2, 3, 5]);
        assert_eq!(allocate(0, &[5, 5]), [0, 0]);
        assert_eq!(allocate(7, &[0, 0]), [0, 0]);
        assert_eq!(allocate(5, &[]), Vec::<i64>::new());
        // The full amount over its own weights gives each weight back.
        assert_eq!(allocate(60, &[10, 20, 30]), [10, 20, 30]);
    }
}
