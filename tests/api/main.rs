//! The one integration-test binary: every module starts real servers and talks HTTP to them.

mod accounts;
mod crash;
mod multiprocess;
mod products;
mod scenarios;
mod stores;
mod support;
mod system;
