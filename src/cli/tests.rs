use super::*;
use std::time::Duration;

#[test]
fn answer_caches_are_on_unless_turned_off() {
    let serve = |args: &[&str]| match Cli::try_parse_from([&["shopcell", "serve"], args].concat()).unwrap().command {
        Command::Serve(a) => a.cell.caches.answer_cache,
        _ => unreachable!("a serve command"),
    };
    assert!(serve(&[]));
    assert!(!serve(&["--answer-cache", "false"]));
    assert!(Cli::try_parse_from(["shopcell", "serve", "--answer-cache", "maybe"]).is_err());
}

#[test]
fn every_flag_and_command_has_help() {
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for a in cmd.get_arguments().filter(|a| !matches!(a.get_id().as_str(), "help" | "version")) {
            if a.get_help().is_none() {
                missing.push(format!("{path} {}", a.get_id()));
            }
        }
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            if sub.get_about().is_none() {
                missing.push(format!("{path} {}", sub.get_name()));
            }
            walk(sub, &format!("{path} {}", sub.get_name()), missing);
        }
    }
    let mut missing = Vec::new();
    walk(&<Cli as clap::CommandFactory>::command(), "shopcell", &mut missing);
    assert!(missing.is_empty(), "without help: {missing:?}");
}

#[test]
fn every_role_reads_every_flag_from_the_environment() {
    let cli = <Cli as clap::CommandFactory>::command();
    let mut missing = Vec::new();
    for role in ["serve", "account", "cell", "router"] {
        let cmd = cli.find_subcommand(role).expect("a role");
        // `--demo` seeds once: a variable left set would refuse every later start.
        let skip = |id: &str| matches!(id, "help" | "demo" | "jobs_paused");
        for a in cmd.get_arguments().filter(|a| !skip(a.get_id().as_str()) && a.get_env().is_none()) {
            missing.push(format!("{role} --{}", a.get_long().unwrap_or_default()));
        }
    }
    assert!(missing.is_empty(), "without an environment variable: {missing:?}");
}

#[test]
fn listen_takes_an_address_or_a_host_name() {
    let listen = |l: &str| match Cli::try_parse_from(["shopcell", "serve", "--listen", l]).map(|c| c.command) {
        Ok(Command::Serve(a)) => Some(a.listen),
        _ => None,
    };
    assert_eq!(listen("127.0.0.1:9000"), Some("127.0.0.1:9000".parse().unwrap()));
    assert_eq!(listen("[::1]:9000"), Some("[::1]:9000".parse().unwrap()));
    assert_eq!(listen("localhost:9000").map(|a| a.port()), Some(9000));
    assert!(listen("localhost:9000").is_some_and(|a| a.ip().is_loopback()));
    assert_eq!(listen("localhost"), None, "a port is needed");
}

#[test]
fn a_public_url_is_http_or_https() {
    let url = |role: &str, url: &str| match Cli::try_parse_from(["shopcell", role, "--public-url", url]).map(|c| c.command) {
        Ok(Command::Serve(a)) => a.account.public_url,
        Ok(Command::Account(a)) => a.account.public_url,
        _ => None,
    };
    assert_eq!(url("serve", "https://shop.example/").as_deref(), Some("https://shop.example"));
    assert_eq!(url("account", "http://10.0.0.5:8081").as_deref(), Some("http://10.0.0.5:8081"));
    assert_eq!(url("serve", "ftp://shop.example"), None);
    assert_eq!(url("account", "shop.example"), None);
}

#[test]
fn the_refresh_grace_is_ten_seconds_unless_set_and_at_most_a_minute() {
    let grace = |args: &[&str]| match Cli::try_parse_from(args).map(|c| c.command) {
        Ok(Command::Serve(a)) => Ok(a.account.sessions.refresh_grace),
        Ok(Command::Account(a)) => Ok(a.account.sessions.refresh_grace),
        Ok(_) => unreachable!(),
        Err(e) => Err(e.to_string()),
    };
    assert_eq!(grace(&["shopcell", "serve"]), Ok(Duration::from_secs(10)));
    assert_eq!(grace(&["shopcell", "account", "--refresh-grace", "0s"]), Ok(Duration::ZERO));
    assert_eq!(grace(&["shopcell", "serve", "--refresh-grace", "1m"]), Ok(Duration::from_secs(60)));
    let long = grace(&["shopcell", "serve", "--refresh-grace", "61s"]).unwrap_err();
    assert!(long.contains("at most 60s"), "{long}");
}
