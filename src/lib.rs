//! shopcell: a multi-store commerce platform in one binary. See README.md for a tour.

pub mod account;
pub mod admin;
pub mod api;
pub mod backup;
pub mod cells;
pub mod cli;
pub mod clock;
pub mod demo;
pub mod domain;
pub mod error;
pub mod healthcheck;
pub mod http;
pub mod jobs;
pub mod logs;
pub mod mail;
pub mod memory;
pub mod metrics;
pub mod node;
pub mod outbound;
pub mod payments;
pub mod private_files;
pub mod run;
pub mod search;
pub mod server;
pub mod storage;
pub mod util;
