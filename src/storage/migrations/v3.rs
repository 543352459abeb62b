//! Format 3: records on the record layer count their filter values, and their order rows carry
//! the record layer's summary (`storage::record`): orders' list orders are rebuilt from the
//! orders, with a counter per status, financial status, fulfillment status and customer.

use redb::WriteTransaction;

use crate::domain::order::Order;
use crate::storage::record::rebuild;

pub(super) fn records_count_their_filters(txn: &WriteTransaction) -> Result<(), redb::Error> {
    rebuild::<Order>(txn)
}
