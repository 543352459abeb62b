//! `shopcell healthcheck`: asks a running service whether it is ready, for container health
//! checks (the slim image has no curl).

use std::time::Duration;

use hyper::Method;

use crate::cli::HealthcheckArgs;
use crate::error::BoxError;
use crate::http::upstream::{Body, Upstream};

/// Succeeds when `GET {url}/readyz` answers 2xx within the timeout; else says what failed.
pub async fn run(a: HealthcheckArgs) -> Result<(), BoxError> {
    let upstream = Upstream::new(&a.url, "");
    let ask = upstream.call_raw(Method::GET, "/readyz", Body::Empty);
    match tokio::time::timeout(Duration::from_secs(a.timeout), ask).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("{} is not ready: {}", a.url, e.message).into()),
        Err(_) => Err(format!("{} did not answer within {} s", a.url, a.timeout).into()),
    }
}
